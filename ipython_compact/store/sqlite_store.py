"""The session log: an append-only tree of entries in one SQLite file or a PostgreSQL database.

Why SQLite: one file, safe concurrent appends from the kernel, the CLI and the agent loop (WAL,
``BEGIN IMMEDIATE``, a busy timeout), transactions that make a killed process harmless, and FTS5
for recall — all in the standard library.

``SessionStore`` is the one public face; the work is split along the seams of the data:
``database`` (connection, transactions, errors, entry cache), ``log`` (append and read entries,
hashes), ``tree`` (leaf, paths, branches, context view), ``integrity`` (``verify``) and
``status`` (inbox and live status — the only rows ever updated). Those parts are this class's
bases (``Tree`` ← ``EntryLog`` ← ``Status``, and ``Integrity``), so each method is defined once,
where its work is done, and callers depend on one type: ``SessionStore`` is what to annotate a
store with (kernel, agent, compactor, CLI).

What must hold:
- Entry rows are never updated or deleted (triggers enforce it). Sessions move a leaf pointer;
  branching is moving the leaf to an older entry and appending from there.
- Every write is one transaction: an append, a batch, an import either lands whole or not at all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ipython_compact.core.entries import canonical_json
from ipython_compact.store.database import (
    Database,
    SqliteDatabase,
    check_session_name,
    random_entry_id,
    utc_now,
)
from ipython_compact.store.errors import DriverMissingError, SessionExistsError, StoreError
from ipython_compact.store.integrity import Integrity
from ipython_compact.store.location import LocationError, is_postgres, redact, sidecar_name, sqlite_path
from ipython_compact.store.log import (
    chain_hash,
    entry_hash,
)
from ipython_compact.store.records import (
    ANY_LEAF,
    LEAF,
    BranchPaths,
    ContextView,
    InboxItem,
    LiveCompaction,
    LiveStatus,
    SearchHit,
    SessionInfo,
    VerifyReport,
)
from ipython_compact.store.status import Status

__all__ = [
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
    "chain_hash",
    "entry_hash",
    "random_entry_id",
    "utc_now",
]


class SessionStore(Status, Integrity):
    """One database file, many sessions. Safe to share across threads of one process and across
    processes (each process opens its own store).

    ``clock`` and ``new_id`` are injectable so tests and importers control times and ids.
    ``cache_entries`` bounds the cache of parsed entries behind ``context_view``; returned
    entries are shared, so callers must treat them as the immutable values they are.
    """

    def __init__(
        self,
        db_path: Path | str | None = None,
        *,
        busy_timeout: float = 5.0,
        clock: Callable[[], str] = utc_now,
        new_id: Callable[[], str] = random_entry_id,
        cache_entries: int = 4096,
    ) -> None:
        if db_path is None:
            from ipython_compact.files.paths import database_location  # start-up: only when no path is given

            db_path = database_location()
        self.url = str(db_path)
        """The location as given: a file path or a URL (with its password: pass it on, never show it)."""
        self.db: Database
        if is_postgres(db_path):
            # optional: psycopg is the `postgres` extra, imported only for a postgresql:// URL
            from ipython_compact.files.paths import data_dir  # optional: postgres only

            try:
                from ipython_compact.store.postgres import PostgresDatabase  # optional: the postgres extra
            except ImportError as exc:
                raise DriverMissingError(
                    f"{redact(self.url)} needs the PostgreSQL driver, which cannot be imported ({exc}): "
                    "pip install 'ipython-compact[postgres]'",
                    path=redact(self.url),
                ) from None

            self.db = PostgresDatabase(
                self.url, busy_timeout=busy_timeout, clock=clock, new_id=new_id, cache_entries=cache_entries
            )
            # Files this host keeps for the server's log (the kernel's pending-writes journal).
            self.db_path = data_dir() / sidecar_name(self.url)
        else:
            try:
                self.db_path = sqlite_path(db_path)
            except LocationError as exc:
                raise StoreError(str(exc), path=redact(self.url)) from None
            self.db = SqliteDatabase(
                self.db_path,
                busy_timeout=busy_timeout,
                clock=clock,
                new_id=new_id,
                cache_entries=cache_entries,
            )

    @property
    def engine(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.db.dialect.name

    @property
    def _conn(self) -> sqlite3.Connection:
        """The raw SQLite connection (tests that damage a database on purpose use it)."""
        if not isinstance(self.db, SqliteDatabase):
            raise TypeError(f"{self.db.path}: not a SQLite store")
        return self.db.conn

    def clear_cache(self) -> None:
        """Forget parsed entries (benchmarks use it to measure a cold read)."""
        self.db.clear_cache()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sessions

    def create_session(self, name: str, *, meta: Mapping[str, Any] | None = None) -> SessionInfo:
        check_session_name(name, self.db.path)
        created = self.db.clock()
        with self.db.write() as conn:
            made = conn.execute(
                "INSERT INTO sessions (name, created_at, meta) VALUES (?, ?, ?) ON CONFLICT (name) DO "
                "NOTHING "
                "RETURNING session_id",
                (name, created, canonical_json(dict(meta or {}))),
            ).fetchone()
            if made is None:
                raise SessionExistsError(
                    f"session {name!r} already exists in {self.db.path}", path=self.db.path
                )
        return SessionInfo(name=name, created_at=created, leaf_id=None, entry_count=0)

    def ensure_session(self, name: str) -> SessionInfo:
        """The session, created when missing (safe when two processes race to create it)."""
        try:
            return self.create_session(name)
        except SessionExistsError:
            return self.get_session(name)

    @property
    def writer(self) -> str:
        """How this store's own appends are recorded (``store.process.writer_label``)."""
        return self.db.writer

    def get_session(self, name: str) -> SessionInfo:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT s.name, s.created_at, s.leaf_id, s.entry_count, e.timestamp FROM sessions s "
                "LEFT JOIN entries e ON e.seq = s.last_seq WHERE s.name = ?",
                (name,),
            ).fetchone()
            if row is None:
                self.db.session_row(conn, name)  # raises with the list of known names
            return SessionInfo(*row)

    def sessions(self) -> list[SessionInfo]:
        """All sessions, most recently appended-to last."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT s.name, s.created_at, s.leaf_id, s.entry_count, e.timestamp FROM sessions s "
                "LEFT JOIN entries e ON e.seq = s.last_seq ORDER BY s.last_seq, s.session_id"
            ).fetchall()
        return [SessionInfo(*row) for row in rows]
