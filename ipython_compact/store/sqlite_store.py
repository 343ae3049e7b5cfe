"""The session log: an append-only tree of entries in one SQLite file.

Why SQLite: one file, safe concurrent appends from the kernel, the CLI and the agent loop (WAL,
``BEGIN IMMEDIATE``, a busy timeout), transactions that make a killed process harmless, and FTS5
for recall — all in the standard library.

``SessionStore`` is the one public face; the work is split along the seams of the data:
``database`` (connection, transactions, errors, entry cache), ``log`` (append and read entries,
hashes), ``tree`` (leaf, paths, branches, context view), ``integrity`` (``verify``) and
``status`` (inbox and live status — the only rows ever updated). This class owns sessions and
forwards everything else, so callers depend on one type.

What must hold:
- Entry rows are never updated or deleted (triggers enforce it). Sessions move a leaf pointer;
  branching is moving the leaf to an older entry and appending from there.
- Every write is one transaction: an append, a batch, an import either lands whole or not at all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ipython_compact.core.entries import Entry, canonical_json
from ipython_compact.core.settings import Estimator
from ipython_compact.store.database import Database, check_session_name, random_entry_id, utc_now
from ipython_compact.store.errors import SessionExistsError
from ipython_compact.store.integrity import Integrity
from ipython_compact.store.log import (
    IMPORT_BATCH,
    EntryLog,
    Existing,
    ImportPlan,
    ImportWritten,
    chain_hash,
    entry_hash,
)
from ipython_compact.store.process import Owner
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
    _Default,
)
from ipython_compact.store.status import Status
from ipython_compact.store.tree import Tree

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
            from ipython_compact.files.paths import database_path  # resolved only when no path is given

            db_path = database_path()
        self.db_path = Path(db_path)
        self._db = Database(self.db_path, busy_timeout=busy_timeout, clock=clock, new_id=new_id, cache_entries=cache_entries)
        self._tree = Tree(self._db)
        self._log = EntryLog(self._db, self._tree)
        self._integrity = Integrity(self._db)
        self._status = Status(self._db, self._tree, self._log)

    @property
    def _conn(self) -> sqlite3.Connection:
        """The raw connection (tests that damage a database on purpose use it)."""
        return self._db.conn

    def clear_cache(self) -> None:
        """Forget parsed entries (benchmarks use it to measure a cold read)."""
        self._db.clear_cache()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sessions

    def create_session(self, name: str, *, meta: Mapping[str, Any] | None = None) -> SessionInfo:
        check_session_name(name, self.db_path)
        created = self._db.clock()
        with self._db.write() as conn:
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
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT s.name, s.created_at, s.leaf_id, s.entry_count, e.timestamp FROM sessions s "
                "LEFT JOIN entries e ON e.seq = s.last_seq WHERE s.name = ?",
                (name,),
            ).fetchone()
            if row is None:
                self._db.session_row(conn, name)  # raises with the list of known names
            return SessionInfo(*row)

    def sessions(self) -> list[SessionInfo]:
        """All sessions, most recently appended-to last."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT s.name, s.created_at, s.leaf_id, s.entry_count, e.timestamp FROM sessions s "
                "LEFT JOIN entries e ON e.seq = s.last_seq ORDER BY s.last_seq, s.session_id"
            ).fetchall()
        return [SessionInfo(*row) for row in rows]


    # ------------------------------------------------------------------ the log (store/log.py)

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
        expect_leaf: str | _Default | None = ANY_LEAF,
    ) -> Entry:
        """Append one entry (under the leaf by default) and, by default, make it the leaf.
        ``expect_leaf``: only if the leaf is still that (compare and swap; else ``LeafMovedError``)."""
        return self._log.append(
            session, kind, data, parent_id=parent_id, timestamp=timestamp, entry_id=entry_id, move_leaf=move_leaf,
            expect_leaf=expect_leaf,
        )

    def append_many(
        self,
        session: str,
        items: Iterable[tuple[str, Mapping[str, Any]]],
        *,
        parent_id: str | _Default | None = LEAF,
        timestamp: str | None = None,
        entry_ids: Sequence[str | None] | None = None,
        move_leaf: bool = True,
        expect_leaf: str | _Default | None = ANY_LEAF,
    ) -> list[Entry]:
        """Append ``(kind, data)`` items as a chain in one transaction (see ``EntryLog.append_many``)."""
        return self._log.append_many(
            session, items, parent_id=parent_id, timestamp=timestamp, entry_ids=entry_ids, move_leaf=move_leaf,
            expect_leaf=expect_leaf,
        )

    def import_entries(
        self,
        session: str,
        entries: Sequence[Entry],
        *,
        leaf_id: str | _Default | None = LEAF,
        create: bool = False,
    ) -> list[Entry]:
        """Append entries keeping their ids, timestamps and parent links (see ``EntryLog.import_entries``)."""
        return self._log.import_entries(session, entries, leaf_id=leaf_id, create=create)

    def import_batched(
        self,
        session: str,
        plan: Callable[[Existing], ImportPlan],
        *,
        batch_size: int = IMPORT_BATCH,
        wait: float = 60.0,
    ) -> ImportWritten:
        """Create the session if missing, write what ``plan`` decides from what it holds, in
        ``batch_size``-entry transactions (see ``EntryLog.import_batched``)."""
        return self._log.import_batched(session, plan, batch_size=batch_size, wait=wait)

    def writers(self, session: str, ids: Iterable[str] | None = None) -> dict[str, str | None]:
        """Who wrote each entry: ``id → "ROLE pid N on HOST"`` (see ``EntryLog.writers``)."""
        return self._log.writers(session, ids)

    @property
    def writer(self) -> str:
        """How this store's own appends are recorded (``store.process.writer_label``)."""
        return self._db.writer

    def get(self, entry_id: str, session: str | None = None) -> Entry:
        """One entry by id (ids are unique within a session)."""
        return self._log.get(entry_id, session)

    def entries(
        self, session: str, *, kinds: Iterable[str] | None = None, after_newest: str | None = None
    ) -> list[Entry]:
        """Entries of the session in append order, branches included (see ``EntryLog.entries``)."""
        return self._log.entries(session, kinds=kinds, after_newest=after_newest)

    def entry_count(self, session: str) -> int:
        """How many entries the session holds (all branches); one row read."""
        return self._log.entry_count(session)

    def entry_ids(self, session: str) -> set[str]:
        """Every id used in the session (no entry bodies are read)."""
        return self._log.entry_ids(session)

    def children(self, session: str, entry_id: str | None) -> list[Entry]:
        return self._log.children(session, entry_id)

    def branch_tips(self, session: str) -> list[Entry]:
        """Entries with no children: the ends of every branch of the session tree."""
        return self._log.branch_tips(session)

    def token_counts(self, session: str, entries: Sequence[Entry], estimator: Estimator = "density") -> list[int]:
        """Stored estimates for ``entries`` of ``session``, in the same order."""
        return self._log.token_counts(session, entries, estimator)

    def search(self, text: str, *, session: str | None = None, limit: int = 20, raw: bool = False) -> list[SearchHit]:
        """Full-text search over entry text, best match first (see ``EntryLog.search``)."""
        return self._log.search(text, session=session, limit=limit, raw=raw)

    # ------------------------------------------------------------------ the tree (store/tree.py)

    def leaf(self, session: str) -> str | None:
        return self._tree.leaf(session)

    def set_leaf(self, session: str, entry_id: str | None) -> None:
        """Move the session's leaf (branching). ``None`` moves it before the first entry."""
        self._tree.set_leaf(session, entry_id)

    def path(
        self,
        session: str,
        leaf: str | None = None,
        *,
        kinds: Collection[str] | None = None,
        roles: Collection[str] | None = None,
    ) -> list[Entry]:
        """Entries from the root to ``leaf``, oldest first (see ``Tree.path`` for the costs)."""
        return self._tree.path(session, leaf, kinds=kinds, roles=roles)

    def span(
        self, session: str, from_id: str, leaf: str | None = None, *, kinds: Collection[str] | None = None
    ) -> list[Entry]:
        """Path entries from ``from_id`` (inclusive) to ``leaf``, read in time proportional to the span."""
        return self._tree.span(session, from_id, leaf, kinds=kinds)

    def count_on_path(
        self, session: str, kinds: Collection[str], *, leaf: str | None = None, from_id: str | None = None
    ) -> int:
        """How many path entries are of ``kinds``; nothing is parsed."""
        return self._tree.count_on_path(session, kinds, leaf=leaf, from_id=from_id)

    def path_length(self, session: str, leaf: str | None = None) -> int:
        """Number of entries on the root→leaf path (0 for an empty session)."""
        return self._tree.path_length(session, leaf)

    def path_tail(self, session: str, limit: int, leaf: str | None = None) -> list[Entry]:
        """The newest ``limit`` entries of the root→leaf path, oldest first."""
        return self._tree.path_tail(session, limit, leaf)

    def branch_paths(self, session: str, target_id: str, leaf: str | None = None) -> BranchPaths:
        """The paths of ``leaf`` and ``target_id`` back to their deepest common ancestor."""
        return self._tree.branch_paths(session, target_id, leaf)

    def context_view(self, session: str, leaf: str | None = None) -> ContextView:
        """Entries from the newest compaction's first kept entry to the leaf, with token estimates."""
        return self._tree.context_view(session, leaf)

    def context_path(self, session: str, leaf: str | None = None) -> list[Entry]:
        """The entries the model's view is built from (see ``context_view``)."""
        return self._tree.context_path(session, leaf)

    # ------------------------------------------------------------------ integrity (store/integrity.py)

    def verify(self, session: str | None = None) -> VerifyReport:
        """Recompute every hash and chain link; report what does not match (see ``store.integrity``)."""
        return self._integrity.verify(session)

    # ------------------------------------------------------------------ inbox and live status (store/status.py)

    def inbox_put(
        self, session: str, payload: Mapping[str, Any], *, first_kept_entry_id: str | None = None
    ) -> InboxItem:
        """Queue a summary (or any payload) until the next turn boundary."""
        return self._status.inbox_put(session, payload, first_kept_entry_id=first_kept_entry_id)

    def inbox_items(self, session: str, state: str | None = None) -> list[InboxItem]:
        return self._status.inbox_items(session, state)

    def inbox_settle_stale(self, session: str) -> list[InboxItem]:
        """Mark pending items stale whose cut no longer lies inside the current context."""
        return self._status.inbox_settle_stale(session)

    def inbox_take(self, session: str, *, owner: Owner | None = None) -> list[InboxItem]:
        """Settle stale items, then hand out (and mark taken) every pending one, oldest first;
        items taken by an ended process and never placed are handed out again."""
        return self._status.inbox_take(session, owner=owner)

    def status_set(self, session: str, key: str, value: Any) -> None:
        self._status.status_set(session, key, value)

    def status_get(self, session: str, key: str, default: Any = None) -> Any:
        return self._status.status_get(session, key, default)

    def live_begin(
        self,
        session: str,
        task_id: str,
        *,
        reason: str,
        blocking: bool,
        detail: Mapping[str, Any] | None = None,
        owner: Owner | None = None,
    ) -> LiveCompaction:
        """Record a compaction in flight (shown by status displays until ``live_end``), owned by
        ``owner`` (default: this process); rows of ended processes are settled first."""
        return self._status.live_begin(session, task_id, reason=reason, blocking=blocking, detail=detail, owner=owner)

    def live_end(self, session: str, task_id: str, *, error: str | None = None) -> None:
        """Remove a compaction from the in-flight list; an ``error`` becomes the last failure."""
        self._status.live_end(session, task_id, error=error)

    def live_status(self, session: str) -> LiveStatus:
        """Compactions in flight and the last failure; rows whose owner process has ended are
        settled first (removed, with a ``compaction_outcome`` entry saying it was abandoned)."""
        return self._status.live_status(session)
