"""The session tree: leaves, root→leaf paths, spans, branch moves and the model's context view.

Everything here reads parent links; the only write is ``set_leaf`` (moving a session's leaf is
how branching works — entries themselves never change).

What must hold:
- Cost follows what is returned, not the history: every walk is a recursive query with one
  indexed lookup per step, stopped at the context head, a given ancestor or a row limit.
- ``context_view`` reads from the leaf back to the stored ``context_head`` only.
- A walk that ends neither at the root nor where it was told to stop is a broken parent link
  and raises ``StoreError`` (never a silently short path).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ipython_compact.core.entries import COMPACTION, MESSAGE, PIN, Entry
from ipython_compact.core.triage_facts import outline_of, skeleton_of
from ipython_compact.store.database import ENTRY_COLUMNS, Database, row_entry
from ipython_compact.store.dialect import Conn
from ipython_compact.store.entry_hashing import fast_json_loads
from ipython_compact.store.errors import StoreError, UnknownEntryError
from ipython_compact.store.json_text import sorted_json_bytes
from ipython_compact.store.migrations import MARK_KINDS
from ipython_compact.store.records import BranchPaths, ContextView, OutlineView


def _role(outline: dict[str, Any]) -> Any:
    message = outline.get("m")
    return message.get("role") if message.__class__ is dict else None  # type: ignore[union-attr]


@dataclass(frozen=True)
class ParentInfo:
    """What a child needs from its parent at insert time (all derived, all stored per entry)."""

    depth: int
    context_head: str | None
    hash: str
    mark: str | None = None
    compactions: int = 0


@dataclass
class Batch:
    """What one write transaction has inserted so far, so lookups skip the database."""

    info: dict[str, ParentInfo] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)
    last_seq: int = 0

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self.info


class Tree:
    """Path and branch queries over one database.

    The lowest part of ``SessionStore`` (its base class): the methods here are the store's own,
    defined once; ``self.db`` is the store's ``Database``, set by ``SessionStore.__init__``."""

    db: Database

    def leaf(self, session: str) -> str | None:
        with self.db.read() as conn:
            return self.db.session_row(conn, session).leaf

    def set_leaf(self, session: str, entry_id: str | None) -> None:
        """Move the session's leaf (branching). ``None`` moves it before the first entry."""
        with self.db.write() as conn:
            sid = self.db.sid(conn, session)
            if entry_id is not None and self.parent_info(conn, sid, entry_id, Batch()) is None:
                raise UnknownEntryError(
                    f"cannot move the leaf of {session!r}: no entry {entry_id!r} in it", path=self.db.path
                )
            conn.execute("UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (entry_id, sid))

    def parent_info(self, conn: Conn, sid: int, entry_id: str, cache: Batch) -> ParentInfo | None:
        info = cache.info.get(entry_id)
        if info is not None:
            return info
        row = conn.execute(
            "SELECT depth, context_head, hash, mark, compactions FROM entries WHERE session_id = ? AND id = "
            "?",
            (sid, entry_id),
        ).fetchone()
        return None if row is None else ParentInfo(int(row[0]), row[1], str(row[2]), row[3], int(row[4]))

    def is_ancestor_or_self(
        self, conn: Conn, sid: int, ancestor: str, start: str | None, cache: Batch
    ) -> bool:
        target = self.parent_info(conn, sid, ancestor, cache)
        if target is None:
            return False
        current = start
        while current is not None:
            if current == ancestor:
                return True
            info = self.parent_info(conn, sid, current, cache)
            if info is None or info.depth <= target.depth:
                return False
            current = self.parent_of(conn, sid, current, cache)
        return False

    def parent_of(self, conn: Conn, sid: int, entry_id: str, cache: Batch) -> str | None:
        if entry_id in cache.parents:
            return cache.parents[entry_id]
        row = conn.execute(
            "SELECT parent_id FROM entries WHERE session_id = ? AND id = ?", (sid, entry_id)
        ).fetchone()
        return None if row is None else row[0]

    def _walk_up(self, conn: Conn, sid: int, leaf: str, stop_at: str | None) -> list[tuple[Any, ...]]:
        """Rows from ``leaf`` up to ``stop_at`` inclusive (or the root), oldest first.

        A recursive query with one indexed lookup per step: cost follows the rows returned.
        """
        rows: list[tuple[Any, ...]] = conn.execute(
            f"""
            WITH RECURSIVE up(n, {ENTRY_COLUMNS}) AS (
                SELECT 0, {ENTRY_COLUMNS} FROM entries WHERE session_id = :sid AND id = :leaf
                UNION ALL
                SELECT up.n + 1, e.id, e.parent_id, e.kind, e.timestamp, e.data,
                       e.tokens_density, e.tokens_chars4
                FROM entries e JOIN up ON e.session_id = :sid AND e.id = up.parent_id
                WHERE up.id {self.db.dialect.is_distinct} :stop
            )
            SELECT {ENTRY_COLUMNS} FROM up ORDER BY n DESC
            """,
            {"sid": sid, "leaf": leaf, "stop": stop_at},
        ).fetchall()
        if not rows:
            raise UnknownEntryError(f"no entry {leaf!r} in the session", path=self.db.path)
        self._check_reached_top(rows[0], stop_at)
        return rows

    def _check_reached_top(self, top: Sequence[Any], stop_at: str | None) -> None:
        """Raise when a walk up (``top`` = its oldest row, ``(id, parent_id, ...)``) ended neither
        at the root nor at ``stop_at``: a parent link points at a missing entry."""
        if top[1] is not None and (stop_at is None or top[0] != stop_at):
            raise StoreError(
                f"{self.db.path}: broken parent link: {top[0]!r} names parent {top[1]!r}, which is missing "
                "(run `ipython-compact verify`)",
                path=self.db.path,
            )

    def walk_links(
        self, conn: Conn, sid: int, leaf: str, stop_at: str | None, limit: int = -1
    ) -> list[tuple[str, str | None, str]]:
        """``(id, parent_id, kind)`` from ``leaf`` up to ``stop_at`` inclusive (or the root, or
        ``limit`` rows), oldest first. Reads no entry bodies; one indexed lookup per row."""
        rows: list[tuple[str, str | None, str]] = conn.execute(
            f"""
            WITH RECURSIVE up(n, id, parent_id, kind) AS (
                SELECT 0, id, parent_id, kind FROM entries WHERE session_id = :sid AND id = :leaf
                UNION ALL
                SELECT up.n + 1, e.id, e.parent_id, e.kind
                FROM entries e JOIN up ON e.session_id = :sid AND e.id = up.parent_id
                WHERE up.id {self.db.dialect.is_distinct} :stop AND (:limit < 0 OR up.n + 1 < :limit)
            )
            SELECT id, parent_id, kind FROM up ORDER BY n DESC
            """,
            {"sid": sid, "leaf": leaf, "stop": stop_at, "limit": limit},
        ).fetchall()
        if not rows:
            raise UnknownEntryError(f"no entry {leaf!r} in the session", path=self.db.path)
        if not (limit >= 0 and len(rows) >= limit):  # a walk cut short by ``limit`` is complete by design
            self._check_reached_top(rows[0], stop_at)
        return rows

    def _marked(self, conn: Conn, sid: int, leaf: str, min_depth: int) -> list[tuple[str, str]]:
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

    def _start(self, conn: Conn, session: str, leaf: str | None) -> tuple[int, str | None]:
        row = self.db.session_row(conn, session)
        return row.sid, leaf or row.leaf

    def _depth(self, conn: Conn, sid: int, session: str, entry_id: str) -> int:
        row = conn.execute(
            "SELECT depth FROM entries WHERE session_id = ? AND id = ?", (sid, entry_id)
        ).fetchone()
        if row is None:
            raise UnknownEntryError(f"no entry {entry_id!r} in session {session!r}", path=self.db.path)
        return int(row[0])

    def _ids_of_kinds(
        self, conn: Conn, sid: int, session: str, leaf: str, kinds: Collection[str], from_id: str | None
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
        rows = self.walk_links(conn, sid, leaf, from_id)
        if from_id is not None and rows[0][0] != from_id:
            raise UnknownEntryError(
                f"entry {from_id!r} is not on the path to {leaf!r} in session {session!r}", path=self.db.path
            )
        return [r[0] for r in rows if r[2] in wanted]

    def _require_ancestor(self, conn: Conn, sid: int, session: str, ancestor: str, leaf: str) -> None:
        self._depth(conn, sid, session, ancestor)
        if not self.is_ancestor_or_self(conn, sid, ancestor, leaf, Batch()):
            raise UnknownEntryError(
                f"entry {ancestor!r} is not on the path to {leaf!r} in session {session!r}", path=self.db.path
            )

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
        with self.db.read() as conn:
            sid, start = self._start(conn, session, leaf)
            if start is None:
                return []
            if roles is not None:
                return self.db.cached_entries(conn, sid, self._ids_by_role(conn, sid, start, kinds, roles))
            if kinds is None:
                return [row_entry(r) for r in self._walk_up(conn, sid, start, None)]
            return self.db.cached_entries(
                conn, sid, self._ids_of_kinds(conn, sid, session, start, kinds, None)
            )

    def _ids_by_role(
        self, conn: Conn, sid: int, leaf: str, kinds: Collection[str] | None, roles: Collection[str]
    ) -> list[str]:
        rows = conn.execute(
            f"""
            WITH RECURSIVE up(n, id, parent_id, kind, data) AS (
                SELECT 0, id, parent_id, kind, data FROM entries WHERE session_id = :sid AND id = :leaf
                UNION ALL
                SELECT up.n + 1, e.id, e.parent_id, e.kind, e.data
                FROM entries e JOIN up ON e.session_id = :sid AND e.id = up.parent_id
            )
            SELECT id, parent_id, kind, CASE WHEN kind = 'message' THEN {self.db.dialect.message_role} END
            FROM up ORDER BY n DESC
            """,
            {"sid": sid, "leaf": leaf},
        ).fetchall()
        if not rows:
            raise UnknownEntryError(f"no entry {leaf!r} in the session", path=self.db.path)
        self._check_reached_top(rows[0], None)
        wanted_roles = set(roles)
        wanted_kinds = None if kinds is None else set(kinds)
        return [
            r[0]
            for r in rows
            if (wanted_kinds is None or r[2] in wanted_kinds)
            and (r[2] != MESSAGE or str(r[3]) in wanted_roles)
        ]

    def span(
        self, session: str, from_id: str, leaf: str | None = None, *, kinds: Collection[str] | None = None
    ) -> list[Entry]:
        """Path entries from ``from_id`` (inclusive) to ``leaf`` (default: the session's leaf),
        oldest first; with ``kinds`` only those. Equal to the slice of ``path(session, leaf)``
        starting at ``from_id``, read in time proportional to the span (not the history).

        Raises ``UnknownEntryError`` when ``from_id`` is not on the path to the leaf.
        """
        with self.db.read() as conn:
            sid, start = self._start(conn, session, leaf)
            if start is None:
                raise UnknownEntryError(
                    f"session {session!r} is empty: no path from {from_id!r}", path=self.db.path
                )
            if kinds is not None:
                return self.db.cached_entries(
                    conn, sid, self._ids_of_kinds(conn, sid, session, start, kinds, from_id)
                )
            rows = self.walk_links(conn, sid, start, from_id)
            if rows[0][0] != from_id:
                raise UnknownEntryError(
                    f"entry {from_id!r} is not on the path to {start!r} in session {session!r}",
                    path=self.db.path,
                )
            return self.db.cached_entries(conn, sid, [r[0] for r in rows])

    def count_on_path(
        self, session: str, kinds: Collection[str], *, leaf: str | None = None, from_id: str | None = None
    ) -> int:
        """How many path entries (from ``from_id`` inclusive, or the root, to the leaf) are of
        ``kinds``; nothing is parsed. Marked kinds cost one step per marked entry."""
        with self.db.read() as conn:
            sid, start = self._start(conn, session, leaf)
            if start is None:
                return 0
            if set(kinds) == {COMPACTION}:  # stored running count: one or two row reads
                total = self._compactions(conn, sid, session, start)
                if from_id is None:
                    return total
                self._require_ancestor(conn, sid, session, from_id, start)
                return (
                    total
                    - self._compactions(conn, sid, session, from_id)
                    + int(self._kind(conn, sid, from_id) == COMPACTION)
                )
            return len(self._ids_of_kinds(conn, sid, session, start, kinds, from_id))

    def _compactions(self, conn: Conn, sid: int, session: str, entry_id: str) -> int:
        row = conn.execute(
            "SELECT compactions FROM entries WHERE session_id = ? AND id = ?", (sid, entry_id)
        ).fetchone()
        if row is None:
            raise UnknownEntryError(f"no entry {entry_id!r} in session {session!r}", path=self.db.path)
        return int(row[0])

    def _kind(self, conn: Conn, sid: int, entry_id: str) -> str | None:
        row = conn.execute(
            "SELECT kind FROM entries WHERE session_id = ? AND id = ?", (sid, entry_id)
        ).fetchone()
        return None if row is None else str(row[0])

    def path_length(self, session: str, leaf: str | None = None) -> int:
        """Number of entries on the root→leaf path (0 for an empty session), from the stored depth."""
        with self.db.read() as conn:
            sid, start = self._start(conn, session, leaf)
            return 0 if start is None else self._depth(conn, sid, session, start) + 1

    def path_tail(self, session: str, limit: int, leaf: str | None = None) -> list[Entry]:
        """The newest ``limit`` entries of the root→leaf path, oldest first (``path(...)[-limit:]``
        for ``limit`` > 0; an empty list for 0). Reads only those entries."""
        if limit < 0:
            raise ValueError(f"limit must be 0 or more, got {limit}")
        with self.db.read() as conn:
            sid, start = self._start(conn, session, leaf)
            if start is None or limit == 0:
                return []
            return self.db.cached_entries(
                conn, sid, [r[0] for r in self.walk_links(conn, sid, start, None, limit)]
            )

    def branch_paths(self, session: str, target_id: str, leaf: str | None = None) -> BranchPaths:
        """The paths of ``leaf`` (default: the session's leaf) and ``target_id`` back to their
        deepest common ancestor, found by walking both up together (the deeper one first until
        the depths agree), so moving between nearby branches never reads the shared history."""
        with self.db.read() as conn:
            sid, start = self._start(conn, session, leaf)
            depth_b = self._depth(conn, sid, session, target_id)
            if start is None:
                whole = self.walk_links(conn, sid, target_id, None)
                return BranchPaths([], self.db.cached_entries(conn, sid, [r[0] for r in whole]), None)
            depth_a = self._depth(conn, sid, session, start)
            a: str | None = start
            b: str | None = target_id
            batch = Batch()
            while a is not None and b is not None and a != b:
                step_a, step_b = depth_a >= depth_b, depth_b >= depth_a
                if step_a:
                    a, depth_a = self.parent_of(conn, sid, a, batch), depth_a - 1
                if step_b:
                    b, depth_b = self.parent_of(conn, sid, b, batch), depth_b - 1
            ancestor = a if a is not None and a == b else None
            old = self.db.cached_entries(
                conn, sid, [r[0] for r in self.walk_links(conn, sid, start, ancestor)]
            )
            target = self.db.cached_entries(
                conn, sid, [r[0] for r in self.walk_links(conn, sid, target_id, ancestor)]
            )
        return BranchPaths(old, target, ancestor)

    def context_view(self, session: str, leaf: str | None = None) -> ContextView:
        """Entries from the newest compaction's head (its first kept entry) to the leaf, with
        their stored token estimates. Without a compaction on the path this is the whole path.

        The walk reads only ids and token counts; entry bodies come from a per-store cache of
        parsed entries (safe because stored entries never change), so a repeated threshold check
        or plan costs one indexed walk over the context, not a re-parse of it.
        """
        with self.db.read() as conn:
            srow = self.db.session_row(conn, session)
            sid, start = srow.sid, leaf or srow.leaf
            if start is None:
                return ContextView(session, None, None, [], [], [])
            row = conn.execute(
                "SELECT context_head, depth FROM entries WHERE session_id = ? AND id = ?", (sid, start)
            ).fetchone()
            if row is None:
                raise UnknownEntryError(f"no entry {start!r} in session {session!r}", path=self.db.path)
            head, leaf_depth = row[0], int(row[1])
            rows = conn.execute(
                f"""
                WITH RECURSIVE up(n, id, parent_id, tokens_density, tokens_chars4, seq) AS (
                    SELECT 0, id, parent_id, tokens_density, tokens_chars4, seq FROM entries
                    WHERE session_id = :sid AND id = :leaf
                    UNION ALL
                    SELECT up.n + 1, e.id, e.parent_id, e.tokens_density, e.tokens_chars4, e.seq
                    FROM entries e JOIN up ON e.session_id = :sid AND e.id = up.parent_id
                    WHERE up.id {self.db.dialect.is_distinct} :stop
                )
                SELECT id, parent_id, tokens_density, tokens_chars4, seq FROM up ORDER BY n DESC
                """,
                {"sid": sid, "leaf": start, "stop": head},
            ).fetchall()
            self._check_reached_top(rows[0], head)
            entries = self.db.cached_entries(conn, sid, [r[0] for r in rows], seqs=[r[4] for r in rows])
        return ContextView(
            session=session,
            leaf_id=start,
            head_id=head,
            entries=entries,
            tokens_density=[int(r[2]) for r in rows],
            tokens_chars4=[int(r[3]) for r in rows],
            offset=leaf_depth - (len(rows) - 1),
        )

    def context_outline(self, session: str, leaf: str | None = None) -> OutlineView:
        """``context_view`` without parsing most entries: each entry's stored outline
        (``core.triage_facts.outline_of``) and in place of the entry its skeleton
        (``skeleton_of``), which a preview decides from (issue 37). Read whole: compactions (their
        data heads the view), pins and user messages (the anchors are read from them), and an
        entry written before outlines were kept (outlined here)."""
        with self.db.read() as conn:
            srow = self.db.session_row(conn, session)
            sid, start = srow.sid, leaf or srow.leaf
            if start is None:
                return OutlineView(session, None, None, [], [], [], outlines=[])
            row = conn.execute(
                "SELECT context_head, depth, seq FROM entries WHERE session_id = ? AND id = ?", (sid, start)
            ).fetchone()
            if row is None:
                raise UnknownEntryError(f"no entry {start!r} in session {session!r}", path=self.db.path)
            head, leaf_depth = row[0], int(row[1])
            rows = (
                self._outline_run(conn, sid, start, head, leaf_depth, int(row[2]))
                or conn.execute(
                    f"""
                WITH RECURSIVE up(n, id, parent_id, kind, tokens_density, tokens_chars4, outline) AS (
                    SELECT 0, id, parent_id, kind, tokens_density, tokens_chars4, outline FROM entries
                    WHERE session_id = :sid AND id = :leaf
                    UNION ALL
                    SELECT up.n + 1, e.id, e.parent_id, e.kind, e.tokens_density, e.tokens_chars4, e.outline
                    FROM entries e JOIN up ON e.session_id = :sid AND e.id = up.parent_id
                    WHERE up.id {self.db.dialect.is_distinct} :stop
                )
                SELECT id, parent_id, kind, tokens_density, tokens_chars4, outline FROM up ORDER BY n DESC
                """,
                    {"sid": sid, "leaf": start, "stop": head},
                ).fetchall()
            )
            self._check_reached_top(rows[0], head)
            loads = fast_json_loads or json.loads
            outlines: list[Any] = [None if r[5] is None else loads(r[5]) for r in rows]
            whole_ids = [
                r[0]
                for r, outline in zip(rows, outlines, strict=True)
                if outline is None or r[2] in (COMPACTION, PIN) or _role(outline) == "user"
            ]
            whole = {e.id: e for e in self.db.cached_entries(conn, sid, whole_ids)} if whole_ids else {}
        entries: list[Entry] = []
        for k, (entry_id, parent_id, kind, *_rest) in enumerate(rows):
            found = whole.get(entry_id)
            if found is None:
                entries.append(skeleton_of(entry_id, parent_id, kind, outlines[k]))
                continue
            entries.append(found)
            if outlines[k] is None:
                outlines[k] = outline_of(found, sorted_json_bytes)
        return OutlineView(
            session=session,
            leaf_id=start,
            head_id=head,
            entries=entries,
            tokens_density=[int(r[3]) for r in rows],
            tokens_chars4=[int(r[4]) for r in rows],
            offset=leaf_depth - (len(rows) - 1),
            outlines=outlines,
        )

    def _outline_run(
        self, conn: Conn, sid: int, leaf: str, head: str | None, leaf_depth: int, leaf_seq: int
    ) -> list[Any] | None:
        """The view's rows for ``context_outline`` read as one run of row numbers, when the view's
        entries are exactly the rows from the head's to the leaf's (a session appended to without
        branching, as most are): one range read instead of one lookup per entry. The run is
        taken only when its rows chain parent to child from the head (the root when ``head`` is
        None) to the leaf, each of the session: then it is the path. Else None (walk the links)."""
        if head is None:
            head_depth = 0
        else:
            found = conn.execute(
                "SELECT depth FROM entries WHERE session_id = ? AND id = ?", (sid, head)
            ).fetchone()
            if found is None:
                return None
            head_depth = int(found[0])
        low = leaf_seq - (leaf_depth - head_depth)
        rows: list[Any] = conn.execute(
            "SELECT id, parent_id, kind, tokens_density, tokens_chars4, outline, session_id FROM entries "
            "WHERE seq >= ? AND seq <= ? ORDER BY seq",
            (low, leaf_seq),
        ).fetchall()
        if len(rows) != leaf_depth - head_depth + 1 or rows[-1][0] != leaf:
            return None
        if (rows[0][0] != head) if head is not None else (rows[0][1] is not None):
            return None
        previous = rows[0][0]
        for r in rows:
            if r[6] != sid:
                return None
            if r is not rows[0] and r[1] != previous:
                return None
            previous = r[0]
        return rows

    def context_path(self, session: str, leaf: str | None = None) -> list[Entry]:
        """The entries the model's view is built from (see ``context_view``)."""
        return self.context_view(session, leaf).entries
