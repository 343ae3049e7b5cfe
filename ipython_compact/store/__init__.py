"""The session log adapter: SQLite or PostgreSQL storage, JSONL/pi import and JSONL export,
copies between stores.

This package is the only place that imports ``sqlite3`` and ``psycopg`` (``store.postgres``,
loaded only for a ``postgresql://`` URL). Everything above it works with ``core.entries.Entry``
values and the ``SessionStore`` methods listed in docs/contracts.md, whatever the engine.
"""

from __future__ import annotations

from ipython_compact.store.errors import (
    CorruptDatabaseError,
    DatabaseLockedError,
    DatabaseReplacedError,
    DuplicateImportError,
    ImportFormatError,
    InvalidEntryError,
    LeafMovedError,
    PartialImportError,
    SessionExistsError,
    StoreError,
    UnknownEntryError,
    UnknownSessionError,
)
from ipython_compact.store.sqlite_store import (
    ANY_LEAF,
    LEAF,
    BranchPaths,
    ContextView,
    InboxItem,
    LiveCompaction,
    LiveStatus,
    SearchHit,
    SessionInfo,
    SessionStore,
    VerifyReport,
)

__all__ = [
    "ANY_LEAF",
    "LEAF",
    "BranchPaths",
    "ContextView",
    "CorruptDatabaseError",
    "DatabaseLockedError",
    "DatabaseReplacedError",
    "DuplicateImportError",
    "ImportFormatError",
    "InboxItem",
    "InvalidEntryError",
    "LeafMovedError",
    "LiveCompaction",
    "LiveStatus",
    "PartialImportError",
    "SearchHit",
    "SessionExistsError",
    "SessionInfo",
    "SessionStore",
    "StoreError",
    "UnknownEntryError",
    "UnknownSessionError",
    "VerifyReport",
]
