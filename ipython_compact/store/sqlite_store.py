"""The session log: an append-only tree of entries in one SQLite file.

Why SQLite: one file, safe concurrent appends from the kernel, the CLI and the agent loop (WAL,
``BEGIN IMMEDIATE``, a busy timeout), transactions that make a killed process harmless, and FTS5
for recall — all in the standard library.

What must hold:
- Entry rows are never updated or deleted (triggers enforce it). Sessions move a leaf pointer;
  branching is moving the leaf to an older entry and appending from there.
- Every write is one transaction: an append, a batch, an import either lands whole or not at all.
- Each entry stores both token estimates (``core.tokens.estimate_entry_tokens``) taken at append,
  so thresholds and cut points never re-scan history.
- Each entry stores ``context_head``: where the model's view starts for a leaf at this entry.
  ``context_path`` reads from the leaf back to that id only, so its cost follows the context,
  not the history.
- ``hash`` = sha256(parent hash + canonical JSON of the entry); ``chain`` = sha256(previous chain
  of the session + hash). ``verify`` recomputes both and so proves nothing was altered or lost.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import secrets
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ipython_compact.core.entries import COMPACTION, KINDS, MESSAGE, Entry, canonical_json, entry_text
from ipython_compact.core.settings import ESTIMATORS, Estimator
from ipython_compact.core.tokens import estimate_entry_tokens
from ipython_compact.store import migrations
from ipython_compact.store.errors import (
    CorruptDatabaseError,
    DatabaseLockedError,
    InvalidEntryError,
    SessionExistsError,
    StoreError,
    UnknownEntryError,
    UnknownSessionError,
)
from ipython_compact.store.migrations import MARK_KINDS


class _Default(enum.Enum):
    LEAF = "leaf"


LEAF = _Default.LEAF
"""Default ``parent_id``: append under the session's current leaf (read inside the transaction)."""


def utc_now() -> str:
    """ISO-8601 UTC time with milliseconds, the shape pi writes (``2025-12-08T22:41:05.306Z``)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def random_entry_id() -> str:
    """Eight hex characters, like pi's ids; collisions within a session are retried."""
    return secrets.token_hex(4)


def entry_hash(parent_hash: str, entry: Entry) -> str:
    """The tree hash: binds an entry's content to its parent's hash."""
    payload = parent_hash + "\n" + canonical_json(entry.to_json())
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def chain_hash(previous_chain: str, hash_: str) -> str:
    """The append-order hash: binds an entry to everything appended to its session before it."""
    return hashlib.sha256((previous_chain + "\n" + hash_).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SessionInfo:
    name: str
    created_at: str
    leaf_id: str | None
    entry_count: int
    last_timestamp: str | None = None


@dataclass(frozen=True)
class ContextView:
    """The entries the model's view is built from, with their stored token estimates."""

    session: str
    leaf_id: str | None
    head_id: str | None
    entries: list[Entry]
    tokens_density: list[int]
    tokens_chars4: list[int]
    offset: int = 0
    """Index of ``entries[0]`` on the root→leaf path (how many path entries the view skips)."""

    def tokens(self, estimator: Estimator = "density") -> list[int]:
        return list(self.tokens_density if estimator == "density" else self.tokens_chars4)


@dataclass(frozen=True)
class SearchHit:
    session: str
    entry: Entry
    rank: float


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    sessions: int
    entries: int
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class InboxItem:
    item_id: int
    session: str
    first_kept_entry_id: str | None
    payload: dict[str, Any]
    state: str
    created_at: str
    settled_at: str | None


@dataclass(frozen=True)
class LiveCompaction:
    task_id: str
    session: str
    reason: str
    blocking: bool
    started_at: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class LiveStatus:
    in_flight: list[LiveCompaction]
    last_failure: dict[str, Any] | None


@dataclass(frozen=True)
class BranchPaths:
    """The two ends of a branch move, each read only back to where they meet.

    ``old`` runs from the common ancestor to the old leaf, ``target`` from the common ancestor to
    the target entry (both oldest first, both starting with the ancestor). Without a common
    ancestor (separate roots) both are whole root→leaf paths and ``common_ancestor_id`` is None.
    """

    old: list[Entry]
    target: list[Entry]
    common_ancestor_id: str | None


@dataclass(frozen=True)
class _ParentInfo:
    depth: int
    context_head: str | None
    hash: str
    mark: str | None = None
    compactions: int = 0


@dataclass
class _Batch:
    """What one write transaction has inserted so far, so lookups skip the database."""

    info: dict[str, _ParentInfo] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)
    last_seq: int = 0

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self.info


_ENTRY_COLUMNS = "id, parent_id, kind, timestamp, data, tokens_density, tokens_chars4"


def _row_entry(row: Sequence[Any]) -> Entry:
    return Entry(id=row[0], parent_id=row[1], kind=row[2], timestamp=row[3], data=json.loads(row[4]))


class SessionStore:
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
            from ipython_compact.paths import database_path

            db_path = database_path()
        self.db_path = Path(db_path)
        self._clock = clock
        self._new_id = new_id
        self._lock = threading.RLock()
        self._cache_size = cache_entries
        self._entry_cache: OrderedDict[tuple[int, str], Entry] = OrderedDict()
        self._conn = self._open(busy_timeout)

    # ------------------------------------------------------------------ connection & errors

    def _open(self, busy_timeout: float) -> sqlite3.Connection:
        if self.db_path.is_dir():
            raise StoreError(f"{self.db_path}: is a directory, not a database file", path=self.db_path)
        if not self.db_path.parent.exists():
            raise StoreError(
                f"{self.db_path}: directory {self.db_path.parent} does not exist (create it, or pass another --db)",
                path=self.db_path,
            )
        if not self.db_path.exists():
            # Conversations are private: create the file owner-only before SQLite opens it.
            fd = os.open(self.db_path, os.O_CREAT | os.O_RDWR, 0o600)
            os.close(fd)
        try:
            conn = sqlite3.connect(
                self.db_path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            # Another program's SQLite file: refuse it before the WAL switch rewrites its header.
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            if tables and "migrations" not in tables:
                raise StoreError(
                    f"{self.db_path}: a SQLite database of another program (tables: {', '.join(tables[:5])}), "
                    "not an ipython-compact one; it was left untouched",
                    path=self.db_path,
                )
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.db_path}: could not switch the database to WAL mode (got {mode})", path=self.db_path)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            migrations.migrate(conn, self._clock())
        except sqlite3.Error as exc:
            conn.close()
            raise self._translate(exc) from exc
        except ValueError as exc:
            conn.close()
            raise StoreError(f"{self.db_path}: {exc}", path=self.db_path) from exc
        except StoreError:
            conn.close()
            raise
        return conn

    def _translate(self, exc: sqlite3.Error) -> StoreError:
        text = str(exc)
        lowered = text.lower()
        if "locked" in lowered or "busy" in lowered:
            return DatabaseLockedError(
                f"{self.db_path}: database is locked by another process ({text}); retry when it finishes",
                path=self.db_path,
            )
        if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
            return CorruptDatabaseError(
                f"{self.db_path}: not a usable ipython-compact database ({text}); "
                "the file is damaged or is not SQLite — move it aside and pass another --db",
                path=self.db_path,
            )
        if "append-only" in lowered:
            return InvalidEntryError(f"{self.db_path}: {text}", path=self.db_path)
        return StoreError(f"{self.db_path}: {text}", path=self.db_path)

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: all of the block or none of it."""
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._translate(exc) from exc
                raise

    def clear_cache(self) -> None:
        """Forget parsed entries (benchmarks use it to measure a cold read)."""
        with self._lock:
            self._entry_cache.clear()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sessions

    def _session_row(self, conn: sqlite3.Connection, name: str) -> tuple[int, str | None, int, str]:
        row = conn.execute(
            "SELECT session_id, leaf_id, entry_count, chain_tip FROM sessions WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            known = [r[0] for r in conn.execute("SELECT name FROM sessions ORDER BY name LIMIT 20")]
            hint = f" (known: {', '.join(known)})" if known else " (the database has no sessions yet)"
            raise UnknownSessionError(f"no session named {name!r} in {self.db_path}{hint}", path=self.db_path)
        return int(row[0]), row[1], int(row[2]), str(row[3])

    def create_session(self, name: str, *, meta: Mapping[str, Any] | None = None) -> SessionInfo:
        if not isinstance(name, str) or not name.strip():
            raise InvalidEntryError("session name must be a non-empty string", path=self.db_path)
        created = self._clock()
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE name = ?", (name,)).fetchone():
                raise SessionExistsError(f"session {name!r} already exists in {self.db_path}", path=self.db_path)
            conn.execute(
                "INSERT INTO sessions (name, created_at, meta) VALUES (?, ?, ?)",
                (name, created, canonical_json(dict(meta or {}))),
            )
        return SessionInfo(name=name, created_at=created, leaf_id=None, entry_count=0)

    def ensure_session(self, name: str) -> SessionInfo:
        """The session, created when missing (safe when two processes race to create it)."""
        try:
            return self.create_session(name)
        except SessionExistsError:
            return self.get_session(name)

    def get_session(self, name: str) -> SessionInfo:
        with self._read() as conn:
            row = conn.execute(
                "SELECT s.name, s.created_at, s.leaf_id, s.entry_count, e.timestamp FROM sessions s "
                "LEFT JOIN entries e ON e.seq = s.last_seq WHERE s.name = ?",
                (name,),
            ).fetchone()
            if row is None:
                self._session_row(conn, name)  # raises with the list of known names
            return SessionInfo(*row)

    def sessions(self) -> list[SessionInfo]:
        """All sessions, most recently appended-to last."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT s.name, s.created_at, s.leaf_id, s.entry_count, e.timestamp FROM sessions s "
                "LEFT JOIN entries e ON e.seq = s.last_seq ORDER BY s.last_seq, s.session_id"
            ).fetchall()
        return [SessionInfo(*row) for row in rows]

    def leaf(self, session: str) -> str | None:
        with self._read() as conn:
            return self._session_row(conn, session)[1]

    def set_leaf(self, session: str, entry_id: str | None) -> None:
        """Move the session's leaf (branching). ``None`` moves it before the first entry."""
        with self._write() as conn:
            sid = self._session_row(conn, session)[0]
            if entry_id is not None and self._parent_info(conn, sid, entry_id, _Batch()) is None:
                raise UnknownEntryError(
                    f"cannot move the leaf of {session!r}: no entry {entry_id!r} in it", path=self.db_path
                )
            conn.execute("UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (entry_id, sid))

    # ------------------------------------------------------------------ appending

    def append(
        self,
        session: str,
        kind: str,
        data: Mapping[str, Any],
        *,
        parent_id: str | _Default | None = LEAF,
        timestamp: str | None = None,
        entry_id: str | None = None,
        move_leaf: bool = True,
    ) -> Entry:
        """Append one entry (under the leaf by default) and, by default, make it the leaf."""
        return self.append_many(
            session, [(kind, data)], parent_id=parent_id, timestamp=timestamp, entry_ids=[entry_id], move_leaf=move_leaf
        )[0]

    def append_many(
        self,
        session: str,
        items: Iterable[tuple[str, Mapping[str, Any]]],
        *,
        parent_id: str | _Default | None = LEAF,
        timestamp: str | None = None,
        entry_ids: Sequence[str | None] | None = None,
        move_leaf: bool = True,
    ) -> list[Entry]:
        """Append ``(kind, data)`` items as a chain in one transaction: each is the child of the
        one before, the first hangs under ``parent_id`` (the leaf by default)."""
        items = list(items)
        with self._write() as conn:
            sid, leaf, count, tip = self._session_row(conn, session)
            parent = leaf if parent_id is LEAF else parent_id
            assert not isinstance(parent, _Default)
            entries: list[Entry] = []
            cache = _Batch()
            when = timestamp or self._clock()
            for i, (kind, data) in enumerate(items):
                wanted = entry_ids[i] if entry_ids is not None and i < len(entry_ids) else None
                new_id = wanted or self._fresh_id(conn, sid, cache)
                entry = Entry(id=new_id, parent_id=parent, kind=kind, timestamp=when, data=dict(data))
                stored, tip = self._insert(conn, sid, entry, tip, cache)
                entries.append(stored)
                parent = stored.id
            self._finish(conn, sid, count + len(entries), tip, entries[-1].id if entries and move_leaf else None, cache)
        return entries

    def import_entries(
        self,
        session: str,
        entries: Sequence[Entry],
        *,
        leaf_id: str | _Default | None = LEAF,
        create: bool = False,
    ) -> list[Entry]:
        """Append entries keeping their ids, timestamps and parent links (one transaction).

        Entries whose ``parent_id`` is None hang under the session's current leaf, so importing
        into a non-empty session appends after it. Parents must come before their children.
        ``leaf_id`` picks the new leaf among the imported entries (default: the last one; None:
        leave the leaf where it is). ``create`` makes the session in the same transaction, so a
        failed import leaves no empty session behind.
        """
        with self._write() as conn:
            if create:
                if conn.execute("SELECT 1 FROM sessions WHERE name = ?", (session,)).fetchone():
                    raise SessionExistsError(f"session {session!r} already exists in {self.db_path}", path=self.db_path)
                conn.execute(
                    "INSERT INTO sessions (name, created_at) VALUES (?, ?)", (session, self._clock())
                )
            sid, leaf, count, tip = self._session_row(conn, session)
            cache = _Batch()
            stored_entries: list[Entry] = []
            for entry in entries:
                if entry.parent_id is None and leaf is not None:
                    entry = Entry(entry.id, leaf, entry.kind, entry.timestamp, entry.data)
                stored, tip = self._insert(conn, sid, entry, tip, cache)
                stored_entries.append(stored)
            if leaf_id is LEAF:
                new_leaf = stored_entries[-1].id if stored_entries else None
            else:
                new_leaf = leaf_id if isinstance(leaf_id, str) else None
                if new_leaf is not None and new_leaf not in cache:
                    raise InvalidEntryError(f"import leaf {new_leaf!r} is not among the imported entries", path=self.db_path)
            self._finish(conn, sid, count + len(stored_entries), tip, new_leaf, cache)
        return stored_entries

    def _finish(self, conn: sqlite3.Connection, sid: int, count: int, tip: str, leaf: str | None, batch: _Batch) -> None:
        """Record the batch on the session row: count, chain tip, newest seq and (maybe) the leaf."""
        if not batch.last_seq:
            if leaf is not None:
                conn.execute("UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (leaf, sid))
            return
        conn.execute(
            "UPDATE sessions SET entry_count = ?, chain_tip = ?, last_seq = ?, leaf_id = COALESCE(?, leaf_id) "
            "WHERE session_id = ?",
            (count, tip, batch.last_seq, leaf, sid),
        )

    def _fresh_id(self, conn: sqlite3.Connection, sid: int, cache: _Batch) -> str:
        for _ in range(100):
            candidate = self._new_id()
            if candidate not in cache and not conn.execute(
                "SELECT 1 FROM entries WHERE session_id = ? AND id = ?", (sid, candidate)
            ).fetchone():
                return candidate
        raise StoreError(f"{self.db_path}: could not find a free entry id after 100 tries", path=self.db_path)

    def _parent_info(
        self, conn: sqlite3.Connection, sid: int, entry_id: str, cache: _Batch
    ) -> _ParentInfo | None:
        info = cache.info.get(entry_id)
        if info is not None:
            return info
        row = conn.execute(
            "SELECT depth, context_head, hash, mark, compactions FROM entries WHERE session_id = ? AND id = ?",
            (sid, entry_id),
        ).fetchone()
        return None if row is None else _ParentInfo(int(row[0]), row[1], str(row[2]), row[3], int(row[4]))

    def _is_ancestor_or_self(
        self, conn: sqlite3.Connection, sid: int, ancestor: str, start: str | None, cache: _Batch
    ) -> bool:
        target = self._parent_info(conn, sid, ancestor, cache)
        if target is None:
            return False
        current = start
        while current is not None:
            if current == ancestor:
                return True
            info = self._parent_info(conn, sid, current, cache)
            if info is None or info.depth <= target.depth:
                return False
            current = self._parent_of(conn, sid, current, cache)
        return False

    def _parent_of(self, conn: sqlite3.Connection, sid: int, entry_id: str, cache: _Batch) -> str | None:
        if entry_id in cache.parents:
            return cache.parents[entry_id]
        row = conn.execute("SELECT parent_id FROM entries WHERE session_id = ? AND id = ?", (sid, entry_id)).fetchone()
        return None if row is None else row[0]

    def _insert(
        self, conn: sqlite3.Connection, sid: int, entry: Entry, tip: str, cache: _Batch
    ) -> tuple[Entry, str]:
        where = f"entry {entry.id!r}"
        if not isinstance(entry.id, str) or not entry.id:
            raise InvalidEntryError(f"{where}: id must be a non-empty string", path=self.db_path)
        if entry.kind not in KINDS:
            raise InvalidEntryError(
                f"{where}: unknown kind {entry.kind!r} (expected one of {', '.join(sorted(KINDS))})", path=self.db_path
            )
        if not isinstance(entry.timestamp, str) or not entry.timestamp:
            raise InvalidEntryError(f"{where}: timestamp must be a non-empty string", path=self.db_path)
        try:
            data_text = json.dumps(dict(entry.data), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidEntryError(f"{where}: data is not JSON-serialisable ({exc})", path=self.db_path) from exc
        stored = Entry(entry.id, entry.parent_id, entry.kind, entry.timestamp, json.loads(data_text))
        if entry.id in cache or conn.execute(
            "SELECT 1 FROM entries WHERE session_id = ? AND id = ?", (sid, entry.id)
        ).fetchone():
            raise InvalidEntryError(f"{where}: an entry with this id already exists in the session", path=self.db_path)
        if entry.parent_id is None:
            depth, head, parent_hash, mark, compactions = 0, None, "", None, 0
        else:
            parent = self._parent_info(conn, sid, entry.parent_id, cache)
            if parent is None:
                raise InvalidEntryError(f"{where}: parent {entry.parent_id!r} does not exist in the session", path=self.db_path)
            depth, head, parent_hash, mark = parent.depth + 1, parent.context_head, parent.hash, parent.mark
            compactions = parent.compactions
        if entry.kind in MARK_KINDS:
            mark = stored.id
        if entry.kind == COMPACTION:
            compactions += 1
            first_kept = stored.data.get("first_kept_entry_id")
            if not isinstance(first_kept, str) or not first_kept:
                raise InvalidEntryError(f"{where}: a compaction needs data.first_kept_entry_id", path=self.db_path)
            if not self._is_ancestor_or_self(conn, sid, first_kept, entry.parent_id, cache):
                raise InvalidEntryError(
                    f"{where}: first_kept_entry_id {first_kept!r} is not on the path to this compaction", path=self.db_path
                )
            head = first_kept
        hash_ = entry_hash(parent_hash, stored)
        new_tip = chain_hash(tip, hash_)
        cur = conn.execute(
            "INSERT INTO entries (session_id, id, parent_id, kind, timestamp, data, tokens_density, tokens_chars4,"
            " depth, context_head, hash, chain, mark, compactions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                sid,
                stored.id,
                stored.parent_id,
                stored.kind,
                stored.timestamp,
                data_text,
                estimate_entry_tokens(stored, "density"),
                estimate_entry_tokens(stored, "chars4"),
                depth,
                head,
                hash_,
                new_tip,
                mark,
                compactions,
            ),
        )
        text = entry_text(stored)
        if text:
            conn.execute("INSERT INTO entries_fts (rowid, text) VALUES (?, ?)", (cur.lastrowid, text))
        cache.last_seq = int(cur.lastrowid or 0)
        cache.info[stored.id] = _ParentInfo(depth, head, hash_, mark, compactions)
        cache.parents[stored.id] = stored.parent_id
        return stored, new_tip

    # ------------------------------------------------------------------ reading

    def get(self, entry_id: str, session: str | None = None) -> Entry:
        """One entry by id. Ids are unique within a session; without ``session`` the id must be
        unique in the whole database."""
        with self._read() as conn:
            if session is not None:
                sid = self._session_row(conn, session)[0]
                rows = conn.execute(
                    f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND id = ?", (sid, entry_id)
                ).fetchall()
            else:
                rows = conn.execute(f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE id = ? LIMIT 2", (entry_id,)).fetchall()
        if not rows:
            where = f"session {session!r}" if session else str(self.db_path)
            raise UnknownEntryError(f"no entry {entry_id!r} in {where}", path=self.db_path)
        if len(rows) > 1:
            raise UnknownEntryError(f"entry id {entry_id!r} exists in several sessions: name the session", path=self.db_path)
        return _row_entry(rows[0])

    def entries(
        self, session: str, *, kinds: Iterable[str] | None = None, after_newest: str | None = None
    ) -> list[Entry]:
        """Entries of the session in append order (parents before children), branches included.

        ``kinds`` keeps only those kinds; ``after_newest=K`` keeps only entries appended after the
        newest entry of kind ``K`` (all when there is none). Both are index lookups (migration
        ``0004_kind_index``), so "what happened since the last compaction" costs what came after
        it, not the whole history.
        """
        with self._read() as conn:
            sid = self._session_row(conn, session)[0]
            where = "session_id = ?"
            params: list[Any] = [sid]
            if after_newest is not None:
                row = conn.execute(
                    "SELECT MAX(seq) FROM entries WHERE session_id = ? AND kind = ?", (sid, after_newest)
                ).fetchone()
                if row[0] is not None:
                    where += " AND seq > ?"
                    params.append(row[0])
            if kinds is not None:
                wanted = sorted(set(kinds))
                if not wanted:
                    return []
                where += f" AND kind IN ({', '.join('?' * len(wanted))})"
                params.extend(wanted)
            rows = conn.execute(f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE {where} ORDER BY seq", params)
            return [_row_entry(r) for r in rows]

    def entry_count(self, session: str) -> int:
        """How many entries the session holds (all branches); one row read."""
        with self._read() as conn:
            return int(self._session_row(conn, session)[2])

    def entry_ids(self, session: str) -> set[str]:
        """Every id used in the session (cheap: no entry bodies are read)."""
        with self._read() as conn:
            sid = self._session_row(conn, session)[0]
            return {row[0] for row in conn.execute("SELECT id FROM entries WHERE session_id = ?", (sid,))}

    def children(self, session: str, entry_id: str | None) -> list[Entry]:
        with self._read() as conn:
            sid = self._session_row(conn, session)[0]
            rows = conn.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND parent_id IS ? ORDER BY seq",
                (sid, entry_id),
            )
            return [_row_entry(r) for r in rows]

    def branch_tips(self, session: str) -> list[Entry]:
        """Entries with no children: the ends of every branch of the session tree."""
        with self._read() as conn:
            sid = self._session_row(conn, session)[0]
            rows = conn.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM entries e WHERE session_id = ? AND NOT EXISTS "
                "(SELECT 1 FROM entries c WHERE c.session_id = e.session_id AND c.parent_id = e.id) ORDER BY seq",
                (sid,),
            )
            return [_row_entry(r) for r in rows]

    def _walk_up(
        self, conn: sqlite3.Connection, sid: int, leaf: str, stop_at: str | None
    ) -> list[tuple[Any, ...]]:
        """Rows from ``leaf`` up to ``stop_at`` inclusive (or the root), oldest first.

        A recursive query with one indexed lookup per step: cost follows the rows returned.
        """
        rows = conn.execute(
            f"""
            WITH RECURSIVE up(n, {_ENTRY_COLUMNS}) AS (
                SELECT 0, {_ENTRY_COLUMNS} FROM entries WHERE session_id = :sid AND id = :leaf
                UNION ALL
                SELECT up.n + 1, e.id, e.parent_id, e.kind, e.timestamp, e.data, e.tokens_density, e.tokens_chars4
                FROM entries e JOIN up ON e.session_id = :sid AND e.id = up.parent_id
                WHERE up.id IS NOT :stop
            )
            SELECT {_ENTRY_COLUMNS} FROM up ORDER BY n DESC
            """,
            {"sid": sid, "leaf": leaf, "stop": stop_at},
        ).fetchall()
        if not rows:
            raise UnknownEntryError(f"no entry {leaf!r} in the session", path=self.db_path)
        self._check_reached_top(rows[0], stop_at)
        return rows

    def _check_reached_top(self, top: Sequence[Any], stop_at: str | None) -> None:
        """Raise when a walk up (``top`` = its oldest row, ``(id, parent_id, ...)``) ended neither
        at the root nor at ``stop_at``: a parent link points at a missing entry."""
        if top[1] is not None and (stop_at is None or top[0] != stop_at):
            raise StoreError(
                f"{self.db_path}: broken parent link: {top[0]!r} names parent {top[1]!r}, which is missing "
                "(run `ipython-compact verify`)",
                path=self.db_path,
            )

    def _walk_links(
        self, conn: sqlite3.Connection, sid: int, leaf: str, stop_at: str | None, limit: int = -1
    ) -> list[tuple[str, str | None, str]]:
        """``(id, parent_id, kind)`` from ``leaf`` up to ``stop_at`` inclusive (or the root, or
        ``limit`` rows), oldest first. Reads no entry bodies; one indexed lookup per row."""
        rows: list[tuple[str, str | None, str]] = conn.execute(
            """
            WITH RECURSIVE up(n, id, parent_id, kind) AS (
                SELECT 0, id, parent_id, kind FROM entries WHERE session_id = :sid AND id = :leaf
                UNION ALL
                SELECT up.n + 1, e.id, e.parent_id, e.kind
                FROM entries e JOIN up ON e.session_id = :sid AND e.id = up.parent_id
                WHERE up.id IS NOT :stop AND (:limit < 0 OR up.n + 1 < :limit)
            )
            SELECT id, parent_id, kind FROM up ORDER BY n DESC
            """,
            {"sid": sid, "leaf": leaf, "stop": stop_at, "limit": limit},
        ).fetchall()
        if not rows:
            raise UnknownEntryError(f"no entry {leaf!r} in the session", path=self.db_path)
        if not (limit >= 0 and len(rows) >= limit):  # a walk cut short by ``limit`` is complete by design
            self._check_reached_top(rows[0], stop_at)
        return rows

    def _marked(self, conn: sqlite3.Connection, sid: int, leaf: str, min_depth: int) -> list[tuple[str, str]]:
        """``(id, kind)`` of the marked entries (``MARK_KINDS``) on the path to ``leaf`` at depth
        ``min_depth`` or deeper, oldest first: a walk along the ``mark`` chain, one step per
        marked entry whatever the length of the history in between."""
        rows = conn.execute(
            """
            WITH RECURSIVE m(n, id, kind, depth, next) AS (
                SELECT 0, e.id, e.kind, e.depth, p.mark
                FROM entries s
                JOIN entries e ON e.session_id = :sid AND e.id = s.mark
                LEFT JOIN entries p ON p.session_id = :sid AND p.id = e.parent_id
                WHERE s.session_id = :sid AND s.id = :leaf
                UNION ALL
                SELECT m.n + 1, e.id, e.kind, e.depth, p.mark
                FROM m
                JOIN entries e ON e.session_id = :sid AND e.id = m.next
                LEFT JOIN entries p ON p.session_id = :sid AND p.id = e.parent_id
                WHERE m.depth > :min_depth
            )
            SELECT id, kind, depth FROM m ORDER BY n DESC
            """,
            {"sid": sid, "leaf": leaf, "min_depth": min_depth},
        ).fetchall()
        return [(r[0], r[1]) for r in rows if int(r[2]) >= min_depth]

    def _start(self, conn: sqlite3.Connection, session: str, leaf: str | None) -> tuple[int, str | None]:
        sid, current_leaf, _, _ = self._session_row(conn, session)
        return sid, leaf or current_leaf

    def _depth(self, conn: sqlite3.Connection, sid: int, session: str, entry_id: str) -> int:
        row = conn.execute("SELECT depth FROM entries WHERE session_id = ? AND id = ?", (sid, entry_id)).fetchone()
        if row is None:
            raise UnknownEntryError(f"no entry {entry_id!r} in session {session!r}", path=self.db_path)
        return int(row[0])

    def _ids_of_kinds(
        self, conn: sqlite3.Connection, sid: int, session: str, leaf: str, kinds: Collection[str], from_id: str | None
    ) -> list[str]:
        """Ids of the path entries of ``kinds`` from ``from_id`` (inclusive; None = the root) to
        ``leaf``, oldest first. Marked kinds follow the ``mark`` chain; others walk the span's
        links (ids and kinds only)."""
        wanted = set(kinds)
        if not wanted:
            self._depth(conn, sid, session, leaf)  # an unknown leaf is still an error
            if from_id is not None:
                self._require_ancestor(conn, sid, session, from_id, leaf)
            return []
        if wanted <= MARK_KINDS:
            min_depth = 0
            self._depth(conn, sid, session, leaf)
            if from_id is not None:
                self._require_ancestor(conn, sid, session, from_id, leaf)
                min_depth = self._depth(conn, sid, session, from_id)
            return [i for i, kind in self._marked(conn, sid, leaf, min_depth) if kind in wanted]
        rows = self._walk_links(conn, sid, leaf, from_id)
        if from_id is not None and rows[0][0] != from_id:
            raise UnknownEntryError(f"entry {from_id!r} is not on the path to {leaf!r} in session {session!r}", path=self.db_path)
        return [r[0] for r in rows if r[2] in wanted]

    def _require_ancestor(self, conn: sqlite3.Connection, sid: int, session: str, ancestor: str, leaf: str) -> None:
        self._depth(conn, sid, session, ancestor)
        if not self._is_ancestor_or_self(conn, sid, ancestor, leaf, _Batch()):
            raise UnknownEntryError(f"entry {ancestor!r} is not on the path to {leaf!r} in session {session!r}", path=self.db_path)

    def path(
        self,
        session: str,
        leaf: str | None = None,
        *,
        kinds: Collection[str] | None = None,
        roles: Collection[str] | None = None,
    ) -> list[Entry]:
        """Entries from the root to ``leaf`` (default: the session's leaf), oldest first.

        Without ``kinds`` this reads and parses the whole branch: use it for exports and
        displays of everything, never on a hot path. With ``kinds``, only the path's entries of
        those kinds are parsed; kinds in ``MARK_KINDS`` (compactions, pins, goals, system
        baselines...) are found by following the ``mark`` chain, at a cost that follows how many
        of them there are rather than the length of the history. ``roles`` keeps only ``message``
        entries whose message has one of those roles (other kinds still by ``kinds``; all kinds
        when ``kinds`` is None): the role is read inside SQLite, so only the chosen are parsed.
        """
        with self._read() as conn:
            sid, start = self._start(conn, session, leaf)
            if start is None:
                return []
            if roles is not None:
                return self._cached_entries(conn, sid, self._ids_by_role(conn, sid, start, kinds, roles))
            if kinds is None:
                return [_row_entry(r) for r in self._walk_up(conn, sid, start, None)]
            return self._cached_entries(conn, sid, self._ids_of_kinds(conn, sid, session, start, kinds, None))

    def _ids_by_role(
        self, conn: sqlite3.Connection, sid: int, leaf: str, kinds: Collection[str] | None, roles: Collection[str]
    ) -> list[str]:
        rows = conn.execute(
            """
            WITH RECURSIVE up(n, id, parent_id, kind, data) AS (
                SELECT 0, id, parent_id, kind, data FROM entries WHERE session_id = :sid AND id = :leaf
                UNION ALL
                SELECT up.n + 1, e.id, e.parent_id, e.kind, e.data
                FROM entries e JOIN up ON e.session_id = :sid AND e.id = up.parent_id
            )
            SELECT id, parent_id, kind, CASE WHEN kind = 'message' THEN json_extract(data, '$.message.role') END
            FROM up ORDER BY n DESC
            """,
            {"sid": sid, "leaf": leaf},
        ).fetchall()
        if not rows:
            raise UnknownEntryError(f"no entry {leaf!r} in the session", path=self.db_path)
        self._check_reached_top(rows[0], None)
        wanted_roles = set(roles)
        wanted_kinds = None if kinds is None else set(kinds)
        return [
            r[0]
            for r in rows
            if (wanted_kinds is None or r[2] in wanted_kinds) and (r[2] != MESSAGE or str(r[3]) in wanted_roles)
        ]

    def span(
        self, session: str, from_id: str, leaf: str | None = None, *, kinds: Collection[str] | None = None
    ) -> list[Entry]:
        """Path entries from ``from_id`` (inclusive) to ``leaf`` (default: the session's leaf),
        oldest first; with ``kinds`` only those. Equal to the slice of ``path(session, leaf)``
        starting at ``from_id``, read in time proportional to the span (not the history).

        Raises ``UnknownEntryError`` when ``from_id`` is not on the path to the leaf.
        """
        with self._read() as conn:
            sid, start = self._start(conn, session, leaf)
            if start is None:
                raise UnknownEntryError(f"session {session!r} is empty: no path from {from_id!r}", path=self.db_path)
            if kinds is not None:
                return self._cached_entries(conn, sid, self._ids_of_kinds(conn, sid, session, start, kinds, from_id))
            rows = self._walk_links(conn, sid, start, from_id)
            if rows[0][0] != from_id:
                raise UnknownEntryError(
                    f"entry {from_id!r} is not on the path to {start!r} in session {session!r}", path=self.db_path
                )
            return self._cached_entries(conn, sid, [r[0] for r in rows])

    def count_on_path(
        self, session: str, kinds: Collection[str], *, leaf: str | None = None, from_id: str | None = None
    ) -> int:
        """How many path entries (from ``from_id`` inclusive, or the root, to the leaf) are of
        ``kinds``; nothing is parsed. Marked kinds cost one step per marked entry."""
        with self._read() as conn:
            sid, start = self._start(conn, session, leaf)
            if start is None:
                return 0
            if set(kinds) == {COMPACTION}:  # stored running count: one or two row reads
                total = self._compactions(conn, sid, session, start)
                if from_id is None:
                    return total
                self._require_ancestor(conn, sid, session, from_id, start)
                return total - self._compactions(conn, sid, session, from_id) + int(
                    self._kind(conn, sid, from_id) == COMPACTION
                )
            return len(self._ids_of_kinds(conn, sid, session, start, kinds, from_id))

    def _compactions(self, conn: sqlite3.Connection, sid: int, session: str, entry_id: str) -> int:
        row = conn.execute("SELECT compactions FROM entries WHERE session_id = ? AND id = ?", (sid, entry_id)).fetchone()
        if row is None:
            raise UnknownEntryError(f"no entry {entry_id!r} in session {session!r}", path=self.db_path)
        return int(row[0])

    def _kind(self, conn: sqlite3.Connection, sid: int, entry_id: str) -> str | None:
        row = conn.execute("SELECT kind FROM entries WHERE session_id = ? AND id = ?", (sid, entry_id)).fetchone()
        return None if row is None else str(row[0])

    def path_length(self, session: str, leaf: str | None = None) -> int:
        """Number of entries on the root→leaf path (0 for an empty session), from the stored depth."""
        with self._read() as conn:
            sid, start = self._start(conn, session, leaf)
            return 0 if start is None else self._depth(conn, sid, session, start) + 1

    def path_tail(self, session: str, limit: int, leaf: str | None = None) -> list[Entry]:
        """The newest ``limit`` entries of the root→leaf path, oldest first (``path(...)[-limit:]``
        for ``limit`` > 0; an empty list for 0). Reads only those entries."""
        if limit < 0:
            raise ValueError(f"limit must be 0 or more, got {limit}")
        with self._read() as conn:
            sid, start = self._start(conn, session, leaf)
            if start is None or limit == 0:
                return []
            return self._cached_entries(conn, sid, [r[0] for r in self._walk_links(conn, sid, start, None, limit)])

    def branch_paths(self, session: str, target_id: str, leaf: str | None = None) -> BranchPaths:
        """The paths of ``leaf`` (default: the session's leaf) and ``target_id`` back to their
        deepest common ancestor, found by walking both up together (the deeper one first until
        the depths agree), so moving between nearby branches never reads the shared history."""
        with self._read() as conn:
            sid, start = self._start(conn, session, leaf)
            depth_b = self._depth(conn, sid, session, target_id)
            if start is None:
                whole = self._walk_links(conn, sid, target_id, None)
                return BranchPaths([], self._cached_entries(conn, sid, [r[0] for r in whole]), None)
            depth_a = self._depth(conn, sid, session, start)
            a: str | None = start
            b: str | None = target_id
            batch = _Batch()
            while a is not None and b is not None and a != b:
                step_a, step_b = depth_a >= depth_b, depth_b >= depth_a
                if step_a:
                    a, depth_a = self._parent_of(conn, sid, a, batch), depth_a - 1
                if step_b:
                    b, depth_b = self._parent_of(conn, sid, b, batch), depth_b - 1
            ancestor = a if a is not None and a == b else None
            old = self._cached_entries(conn, sid, [r[0] for r in self._walk_links(conn, sid, start, ancestor)])
            target = self._cached_entries(conn, sid, [r[0] for r in self._walk_links(conn, sid, target_id, ancestor)])
        return BranchPaths(old, target, ancestor)

    def context_view(self, session: str, leaf: str | None = None) -> ContextView:
        """Entries from the newest compaction's head (its first kept entry) to the leaf, with
        their stored token estimates. Without a compaction on the path this is the whole path.

        The walk reads only ids and token counts; entry bodies come from a per-store cache of
        parsed entries (safe because stored entries never change), so a repeated threshold check
        or plan costs one indexed walk over the context, not a re-parse of it.
        """
        with self._read() as conn:
            sid, current_leaf, _, _ = self._session_row(conn, session)
            start = leaf or current_leaf
            if start is None:
                return ContextView(session, None, None, [], [], [])
            row = conn.execute(
                "SELECT context_head, depth FROM entries WHERE session_id = ? AND id = ?", (sid, start)
            ).fetchone()
            if row is None:
                raise UnknownEntryError(f"no entry {start!r} in session {session!r}", path=self.db_path)
            head, leaf_depth = row[0], int(row[1])
            rows = conn.execute(
                """
                WITH RECURSIVE up(n, id, parent_id, tokens_density, tokens_chars4) AS (
                    SELECT 0, id, parent_id, tokens_density, tokens_chars4 FROM entries
                    WHERE session_id = :sid AND id = :leaf
                    UNION ALL
                    SELECT up.n + 1, e.id, e.parent_id, e.tokens_density, e.tokens_chars4
                    FROM entries e JOIN up ON e.session_id = :sid AND e.id = up.parent_id
                    WHERE up.id IS NOT :stop
                )
                SELECT id, parent_id, tokens_density, tokens_chars4 FROM up ORDER BY n DESC
                """,
                {"sid": sid, "leaf": start, "stop": head},
            ).fetchall()
            self._check_reached_top(rows[0], head)
            entries = self._cached_entries(conn, sid, [r[0] for r in rows])
        return ContextView(
            session=session,
            leaf_id=start,
            head_id=head,
            entries=entries,
            tokens_density=[int(r[2]) for r in rows],
            tokens_chars4=[int(r[3]) for r in rows],
            offset=leaf_depth - (len(rows) - 1),
        )

    def _cached_entries(self, conn: sqlite3.Connection, sid: int, ids: Sequence[str]) -> list[Entry]:
        cache = self._entry_cache
        missing = [i for i in ids if (sid, i) not in cache]
        for start in range(0, len(missing), 500):
            chunk = missing[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in conn.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND id IN ({marks})", (sid, *chunk)
            ):
                cache[(sid, row[0])] = _row_entry(row)
        out: list[Entry] = []
        for entry_id in ids:
            entry = cache[(sid, entry_id)]
            cache.move_to_end((sid, entry_id))
            out.append(entry)
        while len(cache) > max(self._cache_size, len(ids)):
            cache.popitem(last=False)
        return out

    def context_path(self, session: str, leaf: str | None = None) -> list[Entry]:
        """The entries the model's view is built from (see ``context_view``)."""
        return self.context_view(session, leaf).entries

    def token_counts(self, session: str, entries: Sequence[Entry], estimator: Estimator = "density") -> list[int]:
        """Stored estimates for ``entries`` of ``session``, in the same order."""
        if estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {estimator!r}; expected one of {', '.join(ESTIMATORS)}")
        column = "tokens_density" if estimator == "density" else "tokens_chars4"
        with self._read() as conn:
            sid = self._session_row(conn, session)[0]
            found: dict[str, int] = {}
            ids = [e.id for e in entries]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for entry_id, tokens in conn.execute(
                    f"SELECT id, {column} FROM entries WHERE session_id = ? AND id IN ({marks})", (sid, *chunk)
                ):
                    found[entry_id] = int(tokens)
        missing = [i for i in ids if i not in found]
        if missing:
            raise UnknownEntryError(f"no entries {missing[:5]} in session {session!r}", path=self.db_path)
        return [found[i] for i in ids]

    def search(self, text: str, *, session: str | None = None, limit: int = 20, raw: bool = False) -> list[SearchHit]:
        """Full-text search over entry text, best match first.

        By default every word of ``text`` must occur (words are quoted, so FTS syntax in user text
        is harmless); ``raw=True`` passes an FTS5 query through unchanged.
        """
        if raw:
            query = text
        else:
            words = [w.replace('"', '""') for w in text.split()]
            if not words:
                return []
            query = " ".join(f'"{w}"' for w in words)
        sql = (
            f"SELECT s.name, e.{_ENTRY_COLUMNS.replace(', ', ', e.')}, f.rank FROM entries_fts f "
            "JOIN entries e ON e.seq = f.rowid JOIN sessions s ON s.session_id = e.session_id "
            "WHERE entries_fts MATCH ?"
        )
        params: list[Any] = [query]
        with self._read() as conn:
            if session is not None:
                sql += " AND e.session_id = ?"
                params.append(self._session_row(conn, session)[0])
            sql += " ORDER BY f.rank LIMIT ?"
            params.append(limit)
            try:
                rows = conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if "fts5" in str(exc).lower() or "syntax" in str(exc).lower():
                    raise ValueError(f"bad search query {text!r}: {exc}") from exc
                raise
        return [SearchHit(session=r[0], entry=_row_entry(r[1:8]), rank=float(r[8])) for r in rows]

    # ------------------------------------------------------------------ integrity

    def verify(self, session: str | None = None) -> VerifyReport:
        """Recompute every hash and chain link; report what does not match.

        Proves: no entry was altered (tree hash), none was removed or inserted out of order
        (session chain, count and tip), every parent and the leaf exist, and each stored
        ``context_head`` matches the compactions on the path.
        """
        problems: list[str] = []
        total = 0
        with self._read() as conn:
            migrations_known = {m.name for m in migrations.MIGRATIONS}
            for (name,) in conn.execute("SELECT name FROM migrations"):
                if name not in migrations_known:
                    problems.append(f"unknown migration {name!r} recorded")
            if session is None:
                targets = conn.execute(
                    "SELECT session_id, name, leaf_id, entry_count, chain_tip FROM sessions ORDER BY session_id"
                ).fetchall()
            else:
                sid = self._session_row(conn, session)[0]
                targets = conn.execute(
                    "SELECT session_id, name, leaf_id, entry_count, chain_tip FROM sessions WHERE session_id = ?", (sid,)
                ).fetchall()
            for sid, name, leaf_id, count, tip in targets:
                total += self._verify_session(conn, sid, name, leaf_id, count, tip, problems)
        return VerifyReport(ok=not problems, sessions=len(targets), entries=total, problems=problems)

    def _verify_session(
        self, conn: sqlite3.Connection, sid: int, name: str, leaf_id: str | None, count: int, tip: str, problems: list[str]
    ) -> int:
        seen: dict[str, tuple[str, str | None, str | None, int]] = {}  # id -> (hash, context_head, mark, compactions)
        chain = ""
        n = 0
        rows = conn.execute(
            f"SELECT {_ENTRY_COLUMNS}, context_head, hash, chain, mark, compactions FROM entries WHERE session_id = ? "
            "ORDER BY seq",
            (sid,),
        )
        for row in rows:
            n += 1
            try:
                entry = _row_entry(row)
            except (ValueError, TypeError) as exc:
                problems.append(f"{name}: entry {row[0]!r} has unreadable data ({exc})")
                continue
            stored_head, stored_hash, stored_chain, stored_mark, stored_count = row[7], row[8], row[9], row[10], row[11]
            if entry.parent_id is None:
                parent_hash, head, mark, ncomp = "", None, None, 0
            elif entry.parent_id in seen:
                parent_hash, head, mark, ncomp = seen[entry.parent_id]
            else:
                problems.append(f"{name}: entry {entry.id!r} names parent {entry.parent_id!r}, which is missing")
                parent_hash, head, mark, ncomp = "?", None, None, 0
            if entry.kind == COMPACTION:
                head = entry.data.get("first_kept_entry_id")
            if entry.kind in MARK_KINDS:
                mark = entry.id
            if mark != stored_mark:
                problems.append(f"{name}: entry {entry.id!r} has mark {stored_mark!r}, expected {mark!r}")
            ncomp += entry.kind == COMPACTION
            if ncomp != stored_count:
                problems.append(f"{name}: entry {entry.id!r} counts {stored_count} compactions on its path, expected {ncomp}")
            if entry_hash(parent_hash, entry) != stored_hash:
                problems.append(f"{name}: entry {entry.id!r} does not match its hash (altered)")
            if head != stored_head:
                problems.append(f"{name}: entry {entry.id!r} has context head {stored_head!r}, expected {head!r}")
            chain = chain_hash(chain, stored_hash)
            if chain != stored_chain:
                problems.append(f"{name}: append chain breaks at entry {entry.id!r} (an earlier entry was removed or reordered)")
                chain = stored_chain
            seen[entry.id] = (stored_hash, stored_head, stored_mark, int(stored_count))
        if n != count:
            problems.append(f"{name}: {n} entries stored but the session recorded {count} (entries lost or added)")
        if chain != tip:
            problems.append(f"{name}: append chain ends at {chain[:12]!r} but the session recorded {tip[:12]!r}")
        if leaf_id is not None and leaf_id not in seen:
            problems.append(f"{name}: leaf {leaf_id!r} does not exist")
        return n

    # ------------------------------------------------------------------ inbox

    def inbox_put(
        self, session: str, payload: Mapping[str, Any], *, first_kept_entry_id: str | None = None
    ) -> InboxItem:
        """Queue a summary (or any payload) until the next turn boundary."""
        created = self._clock()
        text = canonical_json(dict(payload))
        with self._write() as conn:
            sid = self._session_row(conn, session)[0]
            cur = conn.execute(
                "INSERT INTO inbox (session_id, first_kept_entry_id, payload, created_at) VALUES (?, ?, ?, ?)",
                (sid, first_kept_entry_id, text, created),
            )
            item_id = int(cur.lastrowid or 0)
        return InboxItem(item_id, session, first_kept_entry_id, json.loads(text), "pending", created, None)

    def inbox_items(self, session: str, state: str | None = None) -> list[InboxItem]:
        with self._read() as conn:
            sid = self._session_row(conn, session)[0]
            return self._inbox_rows(conn, sid, session, state)

    def _inbox_rows(self, conn: sqlite3.Connection, sid: int, session: str, state: str | None) -> list[InboxItem]:
        rows = conn.execute(
            "SELECT item_id, first_kept_entry_id, payload, state, created_at, settled_at FROM inbox "
            "WHERE session_id = ? AND (? IS NULL OR state = ?) ORDER BY item_id",
            (sid, state, state),
        ).fetchall()
        return [InboxItem(r[0], session, r[1], json.loads(r[2]), r[3], r[4], r[5]) for r in rows]

    def _settle_stale(self, conn: sqlite3.Connection, sid: int, session: str, leaf: str | None) -> list[InboxItem]:
        pending = self._inbox_rows(conn, sid, session, "pending")
        if not pending:
            return []
        live_ids: set[str] = set()
        if leaf is not None:
            head = conn.execute(
                "SELECT context_head FROM entries WHERE session_id = ? AND id = ?", (sid, leaf)
            ).fetchone()[0]
            live_ids = {r[0] for r in self._walk_links(conn, sid, leaf, head)}  # ids only: no entry bodies
            live_ids.discard(head)
        now = self._clock()
        stale: list[InboxItem] = []
        for item in pending:
            if item.first_kept_entry_id is not None and item.first_kept_entry_id not in live_ids:
                conn.execute("UPDATE inbox SET state = 'stale', settled_at = ? WHERE item_id = ?", (now, item.item_id))
                stale.append(InboxItem(item.item_id, session, item.first_kept_entry_id, item.payload, "stale", item.created_at, now))
        return stale

    def inbox_settle_stale(self, session: str) -> list[InboxItem]:
        """Mark pending items stale whose cut lies at or before the start of the current context
        (a newer compaction already covers it), so the furthest cut stays in effect."""
        with self._write() as conn:
            sid, leaf, _, _ = self._session_row(conn, session)
            return self._settle_stale(conn, sid, session, leaf)

    def inbox_take(self, session: str) -> list[InboxItem]:
        """Settle stale items, then hand out (and mark taken) every pending one, oldest first.
        Two takers never receive the same item."""
        with self._write() as conn:
            sid, leaf, _, _ = self._session_row(conn, session)
            self._settle_stale(conn, sid, session, leaf)
            pending = self._inbox_rows(conn, sid, session, "pending")
            now = self._clock()
            for item in pending:
                conn.execute("UPDATE inbox SET state = 'taken', settled_at = ? WHERE item_id = ?", (now, item.item_id))
        return [InboxItem(i.item_id, session, i.first_kept_entry_id, i.payload, "taken", i.created_at, now) for i in pending]

    # ------------------------------------------------------------------ live status

    def status_set(self, session: str, key: str, value: Any) -> None:
        text = canonical_json(value)
        with self._write() as conn:
            sid = self._session_row(conn, session)[0]
            conn.execute(
                "INSERT INTO session_status (session_id, key, value, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                (sid, key, text, self._clock()),
            )

    def status_get(self, session: str, key: str, default: Any = None) -> Any:
        with self._read() as conn:
            sid = self._session_row(conn, session)[0]
            row = conn.execute("SELECT value FROM session_status WHERE session_id = ? AND key = ?", (sid, key)).fetchone()
        return default if row is None else json.loads(row[0])

    def live_begin(
        self, session: str, task_id: str, *, reason: str, blocking: bool, detail: Mapping[str, Any] | None = None
    ) -> LiveCompaction:
        """Record a compaction in flight (shown by status displays until ``live_end``)."""
        started = self._clock()
        with self._write() as conn:
            sid = self._session_row(conn, session)[0]
            conn.execute(
                "INSERT INTO live_compactions (task_id, session_id, reason, blocking, started_at, detail) VALUES (?, ?, ?, ?, ?, ?)",
                (task_id, sid, reason, int(blocking), started, canonical_json(dict(detail or {}))),
            )
        return LiveCompaction(task_id, session, reason, blocking, started, dict(detail or {}))

    def live_end(self, session: str, task_id: str, *, error: str | None = None) -> None:
        """Remove a compaction from the in-flight list; an ``error`` becomes the last failure."""
        now = self._clock()
        with self._write() as conn:
            sid = self._session_row(conn, session)[0]
            row = conn.execute(
                "SELECT reason FROM live_compactions WHERE task_id = ? AND session_id = ?", (task_id, sid)
            ).fetchone()
            conn.execute("DELETE FROM live_compactions WHERE task_id = ? AND session_id = ?", (task_id, sid))
            if error is not None:
                failure = {"task_id": task_id, "reason": None if row is None else row[0], "error": error, "at": now}
                conn.execute(
                    "INSERT INTO session_status (session_id, key, value, updated_at) VALUES (?, 'last_failure', ?, ?) "
                    "ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    (sid, canonical_json(failure), now),
                )

    def live_status(self, session: str) -> LiveStatus:
        with self._read() as conn:
            sid = self._session_row(conn, session)[0]
            rows = conn.execute(
                "SELECT task_id, reason, blocking, started_at, detail FROM live_compactions WHERE session_id = ? "
                "ORDER BY started_at, task_id",
                (sid,),
            ).fetchall()
            failure = conn.execute(
                "SELECT value FROM session_status WHERE session_id = ? AND key = 'last_failure'", (sid,)
            ).fetchone()
        return LiveStatus(
            in_flight=[LiveCompaction(r[0], session, r[1], bool(r[2]), r[3], json.loads(r[4])) for r in rows],
            last_failure=None if failure is None else json.loads(failure[0]),
        )
