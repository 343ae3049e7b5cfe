"""The one connection behind a session store: opening, transactions, error translation, the
session row and the cache of parsed entries.

The log, tree and inbox modules all work through a ``Database``; none of them opens SQLite or
decides on locking itself.

What must hold:
- A file is opened only if it is ours (or new): another program's SQLite file is refused before
  the WAL switch could rewrite its header. New files are created owner-only (0600).
- ``write()`` is one transaction (SQLite: ``BEGIN IMMEDIATE``): all of the block or none of it.
- Every ``sqlite3.Error`` leaves as a ``StoreError`` naming the file.
- Cached entries are shared values: stored entries never change, so the cache is never stale.
"""

from __future__ import annotations

import gc
import os
import secrets
import sqlite3
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ipython_compact.core.entries import Entry, canonical_json
from ipython_compact.files.safety import UnsafePathError, check_regular
from ipython_compact.store import migrations, process
from ipython_compact.store.dialect import SQLITE, Conn, Dialect
from ipython_compact.store.entry_hashing import read_back
from ipython_compact.store.errors import (
    CorruptDatabaseError,
    DatabaseLockedError,
    DatabaseReplacedError,
    InvalidEntryError,
    StoreError,
    UnknownSessionError,
)
from ipython_compact.store.process import Owner, writer_label

ENTRY_COLUMNS = "id, parent_id, kind, timestamp, data, tokens_density, tokens_chars4"
_SHM_DMS = 128
#: Seconds opening a database waits for another writer while it makes or upgrades the schema: as
#: long as an import waits for another import (``EntryLog.import_batched``'s ``wait``).
SCHEMA_WAIT = 60.0
"""SQLite's unix VFS: the byte of ``<db>-shm`` every connection holds a read lock on while open
(``UNIX_SHM_DMS`` = (22 + 8) * 4 + 8 in os_unix.c)."""


def utc_now() -> str:
    """ISO-8601 UTC time with milliseconds, the shape pi writes (``2025-12-08T22:41:05.306Z``)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def random_entry_id() -> str:
    """Eight hex characters, like pi's ids; collisions within a session are retried."""
    return secrets.token_hex(4)


def check_session_name(name: object, where: Path | str) -> None:
    """Session names are what users type: non-blank text without control characters."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidEntryError(f"session name must be a non-empty string, got {name!r}", path=where)
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidEntryError(f"session name {name!r} contains control characters", path=where)


def row_entry(row: Sequence[Any]) -> Entry:
    """An entry from a row that starts with ``ENTRY_COLUMNS``. Its data text is read by orjson
    where that reads what the stdlib would (``read_back``): a first plan of a long session parses
    every entry of its context (issue 37)."""
    return Entry(id=row[0], parent_id=row[1], kind=row[2], timestamp=row[3], data=read_back(row[4]))


@dataclass(frozen=True)
class SessionRow:
    """A session's row as a write transaction sees it."""

    sid: int
    leaf: str | None
    count: int
    tip: str


class Database:
    """What the store's parts share, whatever the engine: clock and ids, the session row, status
    values, the cache of parsed entries. ``SqliteDatabase`` (here) and ``PostgresDatabase``
    (``store.postgres``) provide the connection, transactions, error translation and schema."""

    dialect: Dialect
    path: Path | str
    """Where the log lives, as error messages name it (a file, or a URL without its password)."""

    def __init__(self, *, clock: Callable[[], str], new_id: Callable[[], str], cache_entries: int) -> None:
        self.clock = clock
        self.new_id = new_id
        self.lock = threading.RLock()
        self._local = threading.local()
        self.cache_size = cache_entries
        self.entry_cache: OrderedDict[tuple[int, str], Entry] = OrderedDict()
        self.writer = writer_label()

    def session_row(self, conn: Conn, name: str) -> SessionRow:
        """The session's row; ``UnknownSessionError`` (listing known names) when there is none."""
        lock = self.dialect.row_lock if getattr(self._local, "writing", False) else ""
        row = conn.execute(
            "SELECT session_id, leaf_id, entry_count, chain_tip FROM sessions WHERE name = ?" + lock, (name,)
        ).fetchone()
        if row is None:
            known = [r[0] for r in conn.execute("SELECT name FROM sessions ORDER BY name LIMIT 20")]
            hint = f" (known: {', '.join(known)})" if known else " (the database has no sessions yet)"
            raise UnknownSessionError(f"no session named {name!r} in {self.path}{hint}", path=self.path)
        return SessionRow(int(row[0]), row[1], int(row[2]), str(row[3]))

    def set_status(self, conn: Conn, sid: int, key: str, value: Any) -> None:
        """Set ``key`` of the session's ``session_status`` (JSON), inside the caller's write."""
        conn.execute(
            "INSERT INTO session_status (session_id, key, value, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = "
            "excluded.updated_at",
            (sid, key, canonical_json(value), self.clock()),
        )

    def sid(self, conn: Conn, name: str) -> int:
        return self.session_row(conn, name).sid

    def cached_entries(
        self, conn: Conn, sid: int, ids: Sequence[str], seqs: Sequence[int] = ()
    ) -> list[Entry]:
        """The entries with ``ids`` (in that order), parsed once and kept in a bounded LRU cache.
        With their ``seqs`` (row numbers), the missing ones are read in row order: a lookup by a
        random id touches a random page, and on a 200k-entry path those reads grew faster than it."""
        with self.lock:
            return self._cached_entries(conn, sid, ids, seqs)

    def _cached_entries(
        self, conn: Conn, sid: int, ids: Sequence[str], seqs: Sequence[int] = ()
    ) -> list[Entry]:
        cache = self.entry_cache
        missing = [i for i in ids if (sid, i) not in cache]
        by_row = len(seqs) == len(ids) and len(missing) > 500
        keys: Sequence[Any] = (
            sorted(s for i, s in zip(ids, seqs, strict=True) if (sid, i) not in cache) if by_row else missing
        )
        # Parsing creates only acyclic values (JSON), so the cyclic collector has nothing to find;
        # left on, its full passes over an ever larger heap make a 200k-entry read super-linear.
        collecting = gc.isenabled() and len(missing) > 10_000
        if collecting:
            gc.disable()
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                # seq: the table's own key, so the rows come in the order they sit on disk
                where = f"seq IN ({marks})" if by_row else f"session_id = ? AND id IN ({marks})"
                params = tuple(chunk) if by_row else (sid, *chunk)
                for row in conn.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE {where}", params):
                    cache[(sid, row[0])] = row_entry(row)
        finally:
            if collecting:
                gc.enable()
        out: list[Entry] = []
        for entry_id in ids:
            entry = cache[(sid, entry_id)]
            cache.move_to_end((sid, entry_id))
            out.append(entry)
        while len(cache) > max(self.cache_size, len(ids)):
            cache.popitem(last=False)
        return out

    def clear_cache(self) -> None:
        with self.lock:
            self.entry_cache.clear()

    def is_query_syntax_error(self, exc: Exception) -> bool:
        """Whether ``exc`` says a raw full-text query was malformed (the user's mistake)."""
        return False

    def others_may_write(self) -> bool:
        """Whether another connection may be waiting to write now (a long import leaves it gaps).
        True unless the engine can tell for certain that nobody else has the log open."""
        return True

    def owner_ended(self, conn: Conn, owner: Owner) -> bool:
        """Whether the process ``owner`` has certainly ended (``store.process.ended``: known only
        on its own host). The PostgreSQL store also asks the server about owners on other hosts."""
        return process.ended(owner)

    # ------------------------------------------------------------------ what each engine provides

    def read(self) -> AbstractContextManager[Conn]:
        """A connection for reads (autocommit; inside a ``write`` of this thread, that one)."""
        raise NotImplementedError

    def write(self) -> AbstractContextManager[Conn]:
        """One transaction: all of the block or none of it; writers of one session take turns."""
        raise NotImplementedError

    def check_not_replaced(self) -> None:
        """Raise when what this store has open is no longer what its location names."""

    def schema_objects(self, conn: Conn) -> set[tuple[str, str]]:
        """``(type, name)`` of the tables and triggers the database holds (``verify`` checks them)."""
        raise NotImplementedError

    def applied_migrations(self, conn: Conn) -> list[str]:
        raise NotImplementedError

    def known_migrations(self) -> set[str]:
        """Names of the migrations this version can apply (a database recording others is newer)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


_OPEN: weakref.WeakSet[SqliteDatabase] = weakref.WeakSet()
"""Every SQLite database this process has open (``others_may_write`` counts them)."""
_OPEN_LOCK = threading.Lock()


class SqliteDatabase(Database):
    """One SQLite file, opened once per store; thread-safe through one re-entrant lock."""

    def __init__(
        self,
        db_path: Path,
        *,
        busy_timeout: float,
        clock: Callable[[], str],
        new_id: Callable[[], str],
        cache_entries: int,
    ) -> None:
        super().__init__(clock=clock, new_id=new_id, cache_entries=cache_entries)
        self.dialect = SQLITE
        self.path: Path = db_path
        self.conn = self._open(busy_timeout)
        self.identity = self._identity()
        with _OPEN_LOCK:
            _OPEN.add(self)

    def _open(self, busy_timeout: float) -> sqlite3.Connection:
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a directory, not a database file", path=self.path)
        if not self.path.parent.exists():
            raise StoreError(
                f"{self.path}: directory {self.path.parent} does not exist (create it, or pass another --db)",
                path=self.path,
            )
        try:
            # A FIFO would block SQLite's open forever, /dev/null would get a `/dev/null-journal`
            # beside it, and a dangling symlink would create the database wherever it points.
            exists = check_regular(self.path, "the session database")
        except UnsafePathError as exc:
            raise StoreError(str(exc), path=self.path) from None
        if not exists:
            # Conversations are private: create the file owner-only before SQLite opens it.
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
            os.close(fd)
        try:
            conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self.translate(exc) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            # Another program's SQLite file: refuse it before the WAL switch rewrites its header.
            tables = [
                r[0]
                for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            ]
            if tables and "migrations" not in tables:
                raise StoreError(
                    f"{self.path}: a SQLite database of another program (tables: {', '.join(tables[:5])}), "
                    "not an ipython-compact one; it was left untouched",
                    path=self.path,
                )
            # Making (or upgrading) the schema waits for another writer as long as an import would:
            # two processes creating one file at once, the first goes on from its schema straight
            # to its first write, which on a loaded machine outlasts the busy timeout. An
            # up-to-date database is only read here, so the longer wait costs it nothing.
            conn.execute(f"PRAGMA busy_timeout = {int(max(busy_timeout, SCHEMA_WAIT) * 1000)}")
            mode = _switch_to_wal(conn, time.monotonic() + max(busy_timeout, SCHEMA_WAIT))
            if mode.lower() != "wal":
                raise StoreError(
                    f"{self.path}: could not switch the database to WAL mode (got {mode})", path=self.path
                )
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            migrations.migrate(conn, self.clock())
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        except sqlite3.Error as exc:
            conn.close()
            raise self.translate(exc) from exc
        except ValueError as exc:
            conn.close()
            raise StoreError(f"{self.path}: {exc}", path=self.path) from exc
        except StoreError:
            conn.close()
            raise
        return conn

    def _identity(self) -> tuple[int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return info.st_dev, info.st_ino

    def check_not_replaced(self) -> None:
        """``DatabaseReplacedError`` when the file this connection has open is no longer the one at
        its path (deleted, or replaced by another file): entries written now would go to a file
        nobody can open again (the red team unlinked ``sessions.db`` under a running agent, and
        ``verify`` then said "ok: 0 entries" of the new, empty file)."""
        if self.identity is None:
            return
        now = self._identity()
        if now != self.identity:
            what = "deleted" if now is None else "replaced by another file"
            raise DatabaseReplacedError(
                f"{self.path}: the database file was {what} while this process had it open; nothing more "
                "is written to the old file, so that nothing is silently lost. Restore the file, or start a "
                "new process to use the new one",
                path=self.path,
            )

    def translate(self, exc: sqlite3.Error) -> StoreError:
        """The ``StoreError`` subclass for an SQLite error, naming the file and what to do."""
        text = str(exc)
        lowered = text.lower()
        if "locked" in lowered or "busy" in lowered:
            return DatabaseLockedError(
                f"{self.path}: database is locked by another process ({text}); retry when it finishes",
                path=self.path,
            )
        if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
            return CorruptDatabaseError(
                f"{self.path}: not a usable ipython-compact database ({text}); "
                "the file is damaged or is not SQLite — move it aside and pass another --db",
                path=self.path,
            )
        if "append-only" in lowered:
            return InvalidEntryError(f"{self.path}: {text}", path=self.path)
        return StoreError(f"{self.path}: {text}", path=self.path)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            try:
                yield self.conn
            except sqlite3.Error as exc:
                raise self.translate(exc) from exc

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: all of the block or none of it."""
        with self.lock:
            self.check_not_replaced()
            conn = self.conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self.translate(exc) from exc
            self._local.writing = True
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self.translate(exc) from exc
                raise
            finally:
                self._local.writing = False

    def others_may_write(self) -> bool:
        """False only when no other connection has this file open: none of this process (the
        ``_OPEN`` registry) and none of another (no other process holds a lock on the WAL index's
        "deadman switch" byte, which SQLite's unix VFS read-locks for every connection that has
        the file open, as long as it is open). Anything unexpected answers True.

        The locks are read from ``/proc/locks``, never by opening ``<db>-shm``: closing any
        descriptor of a file drops every POSIX lock this process holds on it, SQLite's own
        included (a probe that did so let a second process's open run recovery and fail with
        "database is locked" one race in twelve)."""
        with _OPEN_LOCK:
            if sum(1 for db in _OPEN if db.identity == self.identity) > 1:
                return True
        try:
            info = os.stat(f"{self.path}-shm")
            with open("/proc/locks", encoding="ascii") as locks:
                table = locks.read()
        except OSError:
            return True
        inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
        me = str(os.getpid())
        for line in table.splitlines():
            fields = line.split()
            if inode not in fields:
                continue
            at = fields.index(inode)  # "N: POSIX ADVISORY READ pid inode start end" (blocked ones: "->")
            if len(fields) < at + 3 or fields[at - 1] == me:
                continue
            if int(fields[at + 1]) <= _SHM_DMS and (
                fields[at + 2] == "EOF" or int(fields[at + 2]) >= _SHM_DMS
            ):
                return True
        return False

    def is_query_syntax_error(self, exc: Exception) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and (
            "fts5" in str(exc).lower() or "syntax" in str(exc).lower()
        )

    def schema_objects(self, conn: Conn) -> set[tuple[str, str]]:
        return {(str(t), str(n)) for t, n in conn.execute("SELECT type, name FROM sqlite_master")}

    def applied_migrations(self, conn: Conn) -> list[str]:
        return [str(r[0]) for r in conn.execute("SELECT name FROM migrations ORDER BY rowid")]

    def known_migrations(self) -> set[str]:
        return {m.name for m in migrations.MIGRATIONS}

    def close(self) -> None:
        with self.lock:
            self.conn.close()
        with _OPEN_LOCK:
            _OPEN.discard(self)


def _switch_to_wal(conn: sqlite3.Connection, deadline: float) -> str:
    """The journal mode after asking for WAL, waiting for another process that is switching the
    same new file at the same moment. SQLite answers that race "database is locked" at once, without
    its busy handler (the switch must upgrade a shared lock, and waiting could deadlock), so two
    commands creating one database failed one time in three; the wait is ours."""
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc).lower() or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
