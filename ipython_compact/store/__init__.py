"""The session log adapter: SQLite or PostgreSQL storage, JSONL/pi import and JSONL export,
copies between stores.

This package is the only place that imports ``sqlite3`` and ``psycopg`` (``store.postgres``,
loaded only for a ``postgresql://`` URL). Everything above it works with ``core.entries.Entry``
values and the ``SessionStore`` methods listed in docs/contracts.md, whatever the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ipython_compact.store.errors import (
    CorruptDatabaseError,
    DatabaseLockedError,
    DatabaseReplacedError,
    DriverMissingError,
    DuplicateImportError,
    ImportFormatError,
    InvalidEntryError,
    JournalError,
    LeafMovedError,
    PartialImportError,
    SessionExistsError,
    StoreError,
    UnknownEntryError,
    UnknownSessionError,
)

if TYPE_CHECKING:
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

# Loaded on first use (PEP 562), not with the package: `%load_ext` and the CLI's help import
# `store.errors` or `store.pending`, which must not pay for the SQLite store and the log's modules.
_LAZY = frozenset(
    {
        "ANY_LEAF",
        "LEAF",
        "BranchPaths",
        "ContextView",
        "InboxItem",
        "LiveCompaction",
        "LiveStatus",
        "SearchHit",
        "SessionInfo",
        "SessionStore",
        "VerifyReport",
    }
)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ipython_compact.store import sqlite_store  # start-up: see _LAZY

    value = getattr(sqlite_store, name)
    globals()[name] = value
    return value


__all__ = [
    "ANY_LEAF",
    "LEAF",
    "BranchPaths",
    "ContextView",
    "CorruptDatabaseError",
    "DatabaseLockedError",
    "DatabaseReplacedError",
    "DriverMissingError",
    "DuplicateImportError",
    "ImportFormatError",
    "InboxItem",
    "InvalidEntryError",
    "JournalError",
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
