"""The session log on a PostgreSQL server: the same store, shared by processes on many hosts.

Why: kernels on JupyterHub or Enterprise Gateway pods and agent fleets on several machines need one
log to write, recall from and compare; a file on one disk cannot be that. The log, the tree, the
inbox and ``verify`` are the same code as on SQLite (``SessionStore``'s parts); this module only
provides what an engine must: connections (psycopg 3 and its pool), transactions, the schema and
its migrations, error translation, and telling whether a process on another host has ended.

What must hold (the same guarantees as SQLite, kept by the server instead of a file lock):
- Every write is one transaction. Its first read of the session row takes ``FOR UPDATE``
  (``Dialect.row_lock``), so writers of one session take turns: the compare and swap
  (``expect_leaf``) lets exactly one of two compactions planned on the same leaf land, and the
  append chain, entry count and tip stay exact. Writers of different sessions do not wait.
- Waiting for that lock is bounded by the store's ``busy_timeout`` (``lock_timeout``); running
  out is ``DatabaseLockedError``, as on SQLite.
- Entries are append-only: triggers refuse UPDATE, DELETE and TRUNCATE of ``entries``.
- A killed process leaves nothing half-written: the server rolls back a transaction whose
  connection drops.
- Orphans across hosts: each store holds, on a connection of its own, a session-level advisory
  lock (shared) keyed by its process (host, pid, start time). An owner on another host has ended when the
  server lets us take its lock (its connection is gone); the server, not a pid, is the witness.
  On this host the pid check of ``store.process`` is used, as on SQLite.
- Migrations run once, under an advisory lock, in one transaction; a database recording a
  migration this code does not know (a newer version) or holding other programs' tables is
  refused untouched.
- Nothing is stored on local disk; a password never appears in a message (``location.redact``).
- A forked child (the kernel's background snapshot) never uses, holds or ends the parent's
  connections: ``fork_safety`` drops their sockets in the child without a byte sent, and this
  store refuses to be used there (``forked``): the child opens its own if it needs one.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool

from ipython_compact.store import fork_safety, process
from ipython_compact.store.database import Database
from ipython_compact.store.dialect import POSTGRESQL
from ipython_compact.store.errors import (
    DatabaseLockedError,
    InvalidEntryError,
    StoreError,
)
from ipython_compact.store.location import redact
from ipython_compact.store.process import Owner

SCHEMA = """
CREATE TABLE sessions (
    session_id   BIGSERIAL PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    created_at   TEXT NOT NULL,
    leaf_id      TEXT,
    entry_count  BIGINT NOT NULL DEFAULT 0,
    chain_tip    TEXT NOT NULL DEFAULT '',
    last_seq     BIGINT NOT NULL DEFAULT 0,
    meta         TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE entries (
    seq             BIGSERIAL PRIMARY KEY,
    session_id      BIGINT NOT NULL REFERENCES sessions(session_id),
    id              TEXT NOT NULL,
    parent_id       TEXT,
    kind            TEXT NOT NULL,
    timestamp       TEXT NOT NULL,
    data            TEXT NOT NULL,
    tokens_density  INTEGER NOT NULL,
    tokens_chars4   INTEGER NOT NULL,
    depth           INTEGER NOT NULL,
    context_head    TEXT,
    hash            TEXT NOT NULL,
    chain           TEXT NOT NULL,
    mark            TEXT,
    compactions     INTEGER NOT NULL DEFAULT 0,
    writer          TEXT,
    UNIQUE (session_id, id)
);
CREATE INDEX entries_parent ON entries(session_id, parent_id);
CREATE INDEX entries_kind ON entries(session_id, kind, seq);
CREATE FUNCTION ipython_compact_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'entries are append-only: % is not allowed', TG_OP;
END
$$;
CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
    FOR EACH ROW EXECUTE FUNCTION ipython_compact_append_only();
CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
    FOR EACH ROW EXECUTE FUNCTION ipython_compact_append_only();
CREATE TRIGGER entries_no_truncate BEFORE TRUNCATE ON entries
    FOR EACH STATEMENT EXECUTE FUNCTION ipython_compact_append_only();
CREATE TABLE entries_fts (
    seq  BIGINT PRIMARY KEY,
    tsv  TSVECTOR NOT NULL
);
CREATE INDEX entries_fts_tsv ON entries_fts USING GIN (tsv);
CREATE TABLE inbox (
    item_id             BIGSERIAL PRIMARY KEY,
    session_id          BIGINT NOT NULL REFERENCES sessions(session_id),
    first_kept_entry_id TEXT,
    payload             TEXT NOT NULL,
    state               TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'taken', 'stale')),
    created_at          TEXT NOT NULL,
    settled_at          TEXT,
    taken_host          TEXT,
    taken_pid           INTEGER,
    taken_started       TEXT
);
CREATE INDEX inbox_pending ON inbox(session_id, state);
CREATE TABLE live_compactions (
    task_id       TEXT PRIMARY KEY,
    session_id    BIGINT NOT NULL REFERENCES sessions(session_id),
    reason        TEXT NOT NULL,
    blocking      INTEGER NOT NULL,
    started_at    TEXT NOT NULL,
    detail        TEXT NOT NULL DEFAULT '{}',
    owner_host    TEXT,
    owner_pid     INTEGER,
    owner_started TEXT
);
CREATE TABLE session_status (
    session_id  BIGINT NOT NULL REFERENCES sessions(session_id),
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
)
"""


@dataclass(frozen=True)
class Migration:
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    # The SQLite schema after its migration 0006, in one step (PostgreSQL support began there).
    Migration(
        "0001_postgres_schema", tuple(s.strip() for s in re.split(r";\s*\n(?=CREATE)", SCHEMA) if s.strip())
    ),
    # as SQLite's 0007_entry_outlines
    Migration("0002_entry_outlines", ("ALTER TABLE entries ADD COLUMN outline TEXT",)),
)
"""Appended to only; an applied migration is never edited (as ``store.migrations``)."""

MIGRATION_LOCK = 0x1C0_3AC7
"""Advisory lock key held while migrating, so two processes opening a new database do not both
create the schema."""

_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@lru_cache(maxsize=1024)
def to_pyformat(sql: str, named: bool) -> str:
    """Our ``?`` / ``:name`` SQL in psycopg's ``%s`` / ``%(name)s`` style (literal ``%`` doubled).
    Store statements hold no ``?`` or ``:word`` inside string literals (``::type`` casts are kept)."""
    sql = sql.replace("%", "%%")
    return _NAMED.sub(r"%(\1)s", sql) if named else sql.replace("?", "%s")


class PgConn:
    """A psycopg connection speaking the store's placeholder style (``dialect.Conn``)."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = (), /) -> psycopg.Cursor[Any]:
        if not parameters:
            return self.raw.execute(sql)
        return self.raw.execute(to_pyformat(sql, isinstance(parameters, Mapping)), parameters)  # type: ignore[arg-type]


def owner_key(owner: Owner) -> int:
    """The advisory lock key standing for a process (signed 64 bits, as PostgreSQL takes it)."""
    digest = hashlib.blake2b(
        f"ipython-compact\n{owner.host}\n{owner.pid}\n{owner.started}".encode(), digest_size=8
    )
    return int.from_bytes(digest.digest(), "big", signed=True)


class PostgresDatabase(Database):
    """A PostgreSQL database reached through a pool; thread-safe (each transaction has its own
    connection; reads inside a write of the same thread use the write's connection)."""

    def __init__(
        self,
        url: str,
        *,
        busy_timeout: float,
        clock: Callable[[], str],
        new_id: Callable[[], str],
        cache_entries: int,
        pool_size: int = 4,
    ) -> None:
        super().__init__(clock=clock, new_id=new_id, cache_entries=cache_entries)
        self.dialect = POSTGRESQL
        self.url = url
        self.path = redact(url)
        self._lock_ms = max(1, int(busy_timeout * 1000))
        self._here = process.current()
        self._closed = threading.Event()
        self._pid = os.getpid()  # the process whose connections these are (``forked``)
        try:
            # Held for this store's life: other hosts see this process alive while it is.
            self._liveness = psycopg.connect(
                url, autocommit=True, connect_timeout=max(2, int(busy_timeout) + 1)
            )
        except psycopg.Error as exc:
            raise StoreError(
                f"{self.path}: cannot connect to the PostgreSQL server ({exc})".strip(), path=self.path
            ) from None
        fork_safety.track(self._liveness)
        fork_safety.track_owner(self)
        try:
            self._liveness.execute("SELECT pg_advisory_lock_shared(%s)", (owner_key(self._here),))
            self._migrate(self._liveness)
        except psycopg.Error as exc:
            self._liveness.close()
            raise self.translate(exc) from exc
        except StoreError:
            self._liveness.close()
            raise
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            open=True,
            name=f"ipython-compact {self.path}",
        )

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        fork_safety.track(conn)
        conn.execute(f"SET lock_timeout = {self._lock_ms}")

    # ------------------------------------------------------------------ schema

    def _migrate(self, conn: psycopg.Connection[Any]) -> list[str]:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                    "ORDER BY 1"
                )
            ]
            if tables and "migrations" not in tables:
                raise StoreError(
                    f"{self.path}: the database (schema) holds tables of another program "
                    f"({', '.join(tables[:5])}); "
                    "it was left untouched. Give ipython-compact a database of its own, or a schema: "
                    "add ?options=-csearch_path%3Dipython_compact to the URL after CREATE SCHEMA "
                    "ipython_compact",
                    path=self.path,
                )
            if not tables:
                conn.execute(
                    "CREATE TABLE migrations (n BIGSERIAL, name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
                )
            done = [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY n")]
            known = {m.name for m in MIGRATIONS}
            unknown = [n for n in done if n not in known]
            if unknown:
                raise StoreError(
                    f"{self.path}: the database records migrations this version does not know "
                    f"({', '.join(unknown)}); "
                    "it was written by a newer ipython-compact",
                    path=self.path,
                )
            todo = [m for m in MIGRATIONS if m.name not in done]
            for migration in todo:
                for statement in migration.statements:
                    conn.execute(statement.encode("utf-8"))  # bytes: no placeholder processing
                conn.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (%s, %s)",
                    (migration.name, self.clock()),
                )
        return [m.name for m in todo]

    def schema_objects(self, conn: Any) -> set[tuple[str, str]]:
        found = {
            ("table", str(r[0]))
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            )
        }
        found |= {
            ("trigger", str(r[0]))
            for r in conn.execute(
                "SELECT DISTINCT trigger_name FROM information_schema.triggers WHERE trigger_schema = "
                "current_schema()"
            )
        }
        return found

    def applied_migrations(self, conn: Any) -> list[str]:
        return [str(r[0]) for r in conn.execute("SELECT name FROM migrations ORDER BY n")]

    def known_migrations(self) -> set[str]:
        return {m.name for m in MIGRATIONS}

    # ------------------------------------------------------------------ transactions

    def translate(self, exc: Exception) -> StoreError:
        text = str(exc).strip()
        if isinstance(
            exc, pg_errors.LockNotAvailable | pg_errors.SerializationFailure | pg_errors.DeadlockDetected
        ):
            return DatabaseLockedError(
                f"{self.path}: the session is locked by another writer ({text}); retry when it finishes",
                path=self.path,
            )
        if "append-only" in text:
            return InvalidEntryError(f"{self.path}: {text}", path=self.path)
        if isinstance(exc, pg_errors.DataError | pg_errors.IntegrityError):
            return InvalidEntryError(f"{self.path}: {text}", path=self.path)
        if isinstance(exc, psycopg.OperationalError):
            return StoreError(f"{self.path}: the PostgreSQL server cannot be used ({text})", path=self.path)
        return StoreError(f"{self.path}: {text}", path=self.path)

    @property
    def forked(self) -> bool:
        """True in a forked child: these connections are the parent's (module doc)."""
        return os.getpid() != self._pid

    def _not_forked(self) -> None:
        if self.forked:
            raise StoreError(
                f"{self.path}: this store was opened by process {self._pid}, the parent of this forked "
                "process; its connections are the parent's. Open a new store here",
                path=self.path,
            )

    @contextmanager
    def read(self) -> Iterator[PgConn]:
        self._not_forked()
        current: PgConn | None = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        try:
            with self.pool.connection() as raw:
                yield PgConn(raw)
        except psycopg.Error as exc:
            raise self.translate(exc) from exc

    @contextmanager
    def write(self) -> Iterator[PgConn]:
        self._not_forked()
        if getattr(self._local, "conn", None) is not None:
            raise StoreError(f"{self.path}: a write inside a write of the same thread", path=self.path)
        try:
            with self.pool.connection() as raw, raw.transaction():
                conn = PgConn(raw)
                self._local.conn, self._local.writing = conn, True
                try:
                    yield conn
                finally:
                    self._local.conn, self._local.writing = None, False
        except psycopg.Error as exc:
            raise self.translate(exc) from exc

    def is_query_syntax_error(self, exc: Exception) -> bool:
        return isinstance(exc, pg_errors.SyntaxError)

    def owner_ended(self, conn: Any, owner: Owner) -> bool:
        if owner.host == self._here.host:
            return process.ended(owner)
        key = owner_key(owner)
        # Stores hold their key shared (one process may open several); an exclusive try succeeds
        # only when no connection of that process is left.
        if not conn.execute("SELECT pg_try_advisory_lock(?)", (key,)).fetchone()[0]:
            return False
        conn.execute("SELECT pg_advisory_unlock(?)", (key,))
        return True

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        if self.forked:  # the parent's connections: dropped at the fork, never ended from here
            return
        self.pool.close()
        self._liveness.close()


__all__ = ["MIGRATIONS", "PgConn", "PostgresDatabase", "owner_key", "to_pyformat"]
