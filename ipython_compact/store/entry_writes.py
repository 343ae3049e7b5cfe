"""Appending entries: one transaction per call; each row carries its token estimates, tree columns,
hash and chain, checked before it is written.

What must hold: entry rows are never updated or deleted (triggers enforce it); every append and
batch lands whole or not at all. A base of ``EntryLog``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, cast

from ipython_compact.core.entries import COMPACTION, KINDS, Entry, entry_text
from ipython_compact.core.tokens import estimate_entry_tokens_both
from ipython_compact.core.triage_facts import outline_of
from ipython_compact.store.database import SessionRow
from ipython_compact.store.dialect import Conn
from ipython_compact.store.entry_hashing import (
    chain_hash,
    fast_json_dumps,
    read_back,
    stored_data_text,
    stored_entry_hash,
)
from ipython_compact.store.entry_reads import EntryReads
from ipython_compact.store.errors import (
    InvalidEntryError,
    LeafMovedError,
    StoreError,
)
from ipython_compact.store.json_text import data_text_utf8, sorted_json_bytes, storable_text
from ipython_compact.store.migrations import MARK_KINDS
from ipython_compact.store.records import ANY_LEAF, LEAF, _Default
from ipython_compact.store.tree import Batch, ParentInfo

_INSERT_ENTRY = (
    "INSERT INTO entries (session_id, id, parent_id, kind, timestamp, data, tokens_density, tokens_chars4,"
    " depth, context_head, hash, chain, mark, compactions, writer, outline)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

_ENTRY_FIELDS = _INSERT_ENTRY.count("?")


@lru_cache(maxsize=8)
def _insert_entries(count: int) -> str:
    """``_INSERT_ENTRY`` for ``count`` rows in one statement (the same few sizes recur, so the
    text and the connection's prepared statement are made once)."""
    head, _, values = _INSERT_ENTRY.partition(" VALUES ")
    return f"{head} VALUES {','.join([values] * count)}"


PreparedRow = list[Any]
"""An entry row in ``_INSERT_ENTRY``'s column order; session id and chain are set at write time."""


FTS_PENDING = "fts_pending"
"""``session_status`` key of a session whose imported entries are not in the full-text index yet:
{"ranges": [[first_seq, last_seq], ...]}. Written in the transaction that inserts the rows;
``index_pending`` (run by every search first) indexes them and removes the key."""


def outline_text(entry: Entry) -> str:
    """The stored ``outline`` of ``entry`` (compact JSON; its values are JSON's own)."""
    outline = outline_of(entry, sorted_json_bytes)
    if fast_json_dumps is not None:
        try:
            return fast_json_dumps(outline).decode("utf-8")
        except (TypeError, ValueError):  # an integer past 64 bits in a usage, a lone surrogate
            pass
    return json.dumps(outline, separators=(",", ":"), ensure_ascii=False)


class EntryWrites(EntryReads):
    """Appends over one database; the row preparation the import shares."""

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
        """Append one entry (under the leaf by default) and, by default, make it the leaf."""
        return self.append_many(
            session,
            [(kind, data)],
            parent_id=parent_id,
            timestamp=timestamp,
            entry_ids=[entry_id],
            move_leaf=move_leaf,
            expect_leaf=expect_leaf,
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
        expect_leaf: str | _Default | None = ANY_LEAF,
    ) -> list[Entry]:
        """Append ``(kind, data)`` items as a chain in one transaction: each is the child of the
        one before, the first hangs under ``parent_id`` (the leaf by default).

        ``expect_leaf`` makes the append a compare and swap: it happens only if the session's leaf
        is still that id (None: still empty/unset), checked inside the write transaction, so of
        two writers that planned against the same leaf only the first lands; the other gets
        ``LeafMovedError`` and nothing is written."""
        items = list(items)
        with self.db.write() as conn:
            row = self.db.session_row(conn, session)
            if expect_leaf is not ANY_LEAF and expect_leaf != row.leaf:
                raise LeafMovedError(
                    f"session {session!r} moved: its leaf is {row.leaf!r}, not {expect_leaf!r} as planned; "
                    f"nothing was written",
                    path=self.db.path,
                    expected=None if isinstance(expect_leaf, _Default) else expect_leaf,
                    actual=row.leaf,
                )
            return self.append_in(
                conn,
                row,
                items,
                parent_id=parent_id,
                timestamp=timestamp,
                entry_ids=entry_ids,
                move_leaf=move_leaf,
            )

    def append_in(
        self,
        conn: Conn,
        row: SessionRow,
        items: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        parent_id: str | _Default | None = LEAF,
        timestamp: str | None = None,
        entry_ids: Sequence[str | None] | None = None,
        move_leaf: bool = True,
    ) -> list[Entry]:
        """``append_many`` inside a write transaction the caller holds (``row`` read in it), so
        another write (settling an abandoned compaction) and its log entry land together."""
        sid, leaf, count, tip = row.sid, row.leaf, row.count, row.tip
        parent = leaf if parent_id is LEAF else parent_id
        assert not isinstance(parent, _Default)
        entries: list[Entry] = []
        cache = Batch()
        when = timestamp or self.db.clock()
        for i, (kind, data) in enumerate(items):
            wanted = entry_ids[i] if entry_ids is not None and i < len(entry_ids) else None
            entry = Entry(
                id=wanted or self.db.new_id(), parent_id=parent, kind=kind, timestamp=when, data=dict(data)
            )
            stored, tip = self._insert(conn, sid, entry, tip, cache, fresh_id=not wanted)
            entries.append(stored)
            parent = stored.id
        self._finish(
            conn, sid, count + len(entries), tip, entries[-1].id if entries and move_leaf else None, cache
        )
        return entries

    def _finish(self, conn: Conn, sid: int, count: int, tip: str, leaf: str | None, batch: Batch) -> None:
        """Record the batch on the session row: count, chain tip, newest seq and (maybe) the leaf."""
        if not batch.last_seq:
            if leaf is not None:
                conn.execute("UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (leaf, sid))
            return
        conn.execute(
            "UPDATE sessions SET entry_count = ?, chain_tip = ?, last_seq = ?, leaf_id = COALESCE(?, "
            "leaf_id) "
            "WHERE session_id = ?",
            (count, tip, batch.last_seq, leaf, sid),
        )

    def _checked(self, entry: Entry, *, json_values: bool = False) -> tuple[Entry, str, bytes | None]:
        """The entry as it will be stored (its data read back from its stored text), that text and
        (when at hand) its UTF-8 bytes; ``InvalidEntryError`` naming the entry for a bad id, kind,
        timestamp or data.

        ``json_values``: the data holds only what JSON reading makes (an import's), so its stored
        text is written by ``json_text.data_text`` and reading it back would give the same values."""
        if not isinstance(entry.id, str) or not entry.id:
            raise InvalidEntryError(f"entry {entry.id!r}: id must be a non-empty string", path=self.db.path)
        if entry.kind not in KINDS:
            raise InvalidEntryError(
                f"entry {entry.id!r}: unknown kind {entry.kind!r} "
                f"(expected one of {', '.join(sorted(KINDS))})",
                path=self.db.path,
            )
        if not isinstance(entry.timestamp, str) or not entry.timestamp:
            raise InvalidEntryError(
                f"entry {entry.id!r}: timestamp must be a non-empty string", path=self.db.path
            )
        if json_values:
            return (entry, *data_text_utf8(entry.data))
        try:
            text = storable_text(stored_data_text(entry.data), f"entry {entry.id!r}")
        except (TypeError, ValueError) as exc:
            raise InvalidEntryError(
                f"entry {entry.id!r}: data is not JSON-serialisable ({exc})", path=self.db.path
            ) from exc
        return Entry(entry.id, entry.parent_id, entry.kind, entry.timestamp, read_back(text)), text, None

    def _derived(self, conn: Conn, sid: int, stored: Entry, cache: Batch) -> ParentInfo:
        """The derived columns of ``stored`` (depth, context head, parent hash, mark before this
        entry, compactions), after checking its parent and, for a compaction, its first kept entry."""
        where = f"entry {stored.id!r}"
        if stored.parent_id is None:
            depth, head, parent_hash, mark, compactions = 0, None, "", None, 0
        else:
            parent = self.parent_info(conn, sid, stored.parent_id, cache)
            if parent is None:
                raise InvalidEntryError(
                    f"{where}: parent {stored.parent_id!r} does not exist in the session", path=self.db.path
                )
            depth, head, parent_hash, mark = parent.depth + 1, parent.context_head, parent.hash, parent.mark
            compactions = parent.compactions
        if stored.kind == COMPACTION:
            compactions += 1
            first_kept = stored.data.get("first_kept_entry_id")
            if not isinstance(first_kept, str) or not first_kept:
                raise InvalidEntryError(
                    f"{where}: a compaction needs data.first_kept_entry_id", path=self.db.path
                )
            if not self.is_ancestor_or_self(conn, sid, first_kept, stored.parent_id, cache):
                raise InvalidEntryError(
                    f"{where}: first_kept_entry_id {first_kept!r} is not on the path to this compaction",
                    path=self.db.path,
                )
            head = first_kept
        return ParentInfo(depth, head, parent_hash, mark, compactions)

    def _insert(
        self, conn: Conn, sid: int, entry: Entry, tip: str, cache: Batch, *, fresh_id: bool = False
    ) -> tuple[Entry, str]:
        """Insert one entry inside the caller's transaction.

        A taken id is found by the insert itself (``ON CONFLICT DO NOTHING`` on the unique
        ``(session_id, id)``, no lookup first: one round trip per entry less on a server). A
        taken id the caller chose is refused; a ``fresh_id`` (made by ``new_id``) is replaced by
        another, up to 100 times, and the entry's hash follows its id."""
        stored, data_text_, _ = self._checked(entry)
        taken = f"entry {entry.id!r}: an entry with this id already exists in the session"
        if not fresh_id and entry.id in cache:
            raise InvalidEntryError(taken, path=self.db.path)
        derived = self._derived(conn, sid, stored, cache)
        estimates = estimate_entry_tokens_both(stored, fast_json_dumps)
        for _ in range(100):
            row, info = self._entry_row(sid, stored, data_text_, None, derived, estimates)
            new_tip = row[11] = chain_hash(tip, info.hash)
            seq = self._insert_row(conn, tuple(row))
            if seq is not None:
                break
            if not fresh_id:
                raise InvalidEntryError(taken, path=self.db.path)
            stored = Entry(self.db.new_id(), stored.parent_id, stored.kind, stored.timestamp, stored.data)
        else:
            raise StoreError(
                f"{self.db.path}: could not find a free entry id after 100 tries", path=self.db.path
            )
        text = entry_text(stored)
        if text:
            conn.execute(self.db.dialect.fts_insert, (seq, self.db.dialect.fts_text(text)))
        cache.last_seq = int(seq)
        cache.info[stored.id] = info
        cache.parents[stored.id] = stored.parent_id
        return stored, new_tip

    def _entry_row(
        self,
        sid: int,
        stored: Entry,
        text: str,
        utf8: bytes | None,
        derived: ParentInfo,
        estimates: tuple[int, int],
    ) -> tuple[PreparedRow, ParentInfo]:
        """``stored``'s row in ``_INSERT_ENTRY``'s column order, its chain not set yet, and what
        its children need of it (``ParentInfo``: its own hash and mark). ``derived`` is what
        ``_derived`` found from its parent; ``estimates`` its two token estimates."""
        mark = stored.id if stored.kind in MARK_KINDS else derived.mark
        hash_ = stored_entry_hash(derived.hash, stored, text, utf8)
        row: PreparedRow = [
            sid,
            stored.id,
            stored.parent_id,
            stored.kind,
            stored.timestamp,
            text,
            *estimates,
            derived.depth,
            derived.context_head,
            hash_,
            "",  # the chain: set by whoever inserts, from the tip as it is then
            mark,
            derived.compactions,
            self.db.writer,
            outline_text(stored),
        ]
        return row, ParentInfo(derived.depth, derived.context_head, hash_, mark, derived.compactions)

    def _prepare_rows(
        self, conn: Conn, sid: int, entries: Sequence[Entry], cache: Batch, *, json_values: bool
    ) -> list[PreparedRow]:
        """An import's batch as rows, with the same checks, derived columns, hashes and estimates
        as ``_insert`` entry by entry, but no chain yet (``_write_rows`` sets it). Parents outside
        ``cache`` are read through ``conn``. Ids are the caller's: a taken one is refused."""
        rows: list[PreparedRow] = []
        for entry in entries:
            stored, text, utf8 = self._checked(entry, json_values=json_values)
            if entry.id in cache:
                raise InvalidEntryError(
                    f"entry {entry.id!r}: an entry with this id already exists in the session",
                    path=self.db.path,
                )
            derived = self._derived(conn, sid, stored, cache)
            estimates = estimate_entry_tokens_both(stored, fast_json_dumps)
            row, cache.info[stored.id] = self._entry_row(sid, stored, text, utf8, derived, estimates)
            cache.parents[stored.id] = stored.parent_id
            rows.append(row)
        return rows

    def _write_rows(
        self, conn: Conn, row: SessionRow, rows: Sequence[PreparedRow], leaf: str | None, cache: Batch
    ) -> None:
        """Insert prepared rows inside the caller's write transaction (``row`` read in it): the
        chain from the session's tip as it is now, one ``executemany``, the full-text indexing
        left to ``index_pending`` (``FTS_PENDING`` records the rows in this same transaction: an
        import killed later leaves nothing unrecorded), then the session row."""
        # A server is asked first; SQLite finds a taken id in the insert itself (the unique key
        # refuses the statement, which changes nothing) and is asked which one only then: the
        # question cost a tenth of an import's writing.
        if self.db.dialect.insert_finds_clash:
            self._refuse_taken(conn, row.sid, rows)
        tip = row.tip
        for r in rows:
            r[0] = row.sid
            tip = r[11] = chain_hash(tip, r[10])
        if rows:
            try:
                first, last = self._insert_rows(conn, rows)
            except sqlite3.IntegrityError:
                self._refuse_taken(conn, row.sid, rows)
                raise
            cache.last_seq = last
            self._defer_indexing(conn, row.sid, first, last)
        self._finish(conn, row.sid, row.count + len(rows), tip, leaf, cache)

    def _refuse_taken(self, conn: Conn, sid: int, rows: Sequence[PreparedRow]) -> None:
        """``InvalidEntryError`` naming the first of ``rows`` whose id the session holds."""
        taken_ids = self._ids_in_session(conn, sid, [r[1] for r in rows])
        for r in rows:
            if r[1] in taken_ids:
                raise InvalidEntryError(
                    f"entry {r[1]!r}: an entry with this id already exists in the session", path=self.db.path
                )

    def _ids_in_session(self, conn: Conn, sid: int, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the session already holds (500 per query)."""
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(
                str(r[0])
                for r in conn.execute(
                    f"SELECT id FROM entries WHERE session_id = ? AND id IN ({marks})", (sid, *chunk)
                )
            )
        return found

    def _insert_rows(self, conn: Conn, rows: Sequence[Sequence[Any]]) -> tuple[int, int]:
        """Insert entry rows whose ids are known to be free; the first and last ``seq`` given.
        SQLite: one ``executemany`` (inside one write transaction the ``seq`` values it gives are
        consecutive); a server: row by row, as ``_insert_row`` does."""
        if self.db.dialect.insert_finds_clash:
            seqs = [self._insert_row(conn, tuple(row)) for row in rows]
            if any(s is None for s in seqs):
                raise InvalidEntryError("an entry id was taken while importing", path=self.db.path)
            return min(int(s) for s in seqs if s is not None), max(int(s) for s in seqs if s is not None)
        # Many rows per statement, not ``executemany``: that steps row by row and takes the GIL
        # back after each, so while the next batch is prepared on another thread every row
        # waited out the interpreter's switch interval (a 100,000-entry import's writes took
        # 5.8 s instead of 1.4). One statement runs its rows with the GIL let go throughout.
        sqlite = cast(sqlite3.Connection, conn)
        limit = sqlite.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) if hasattr(sqlite, "getlimit") else 999
        per = max(1, limit // _ENTRY_FIELDS)
        for start in range(0, len(rows), per):
            part = rows[start : start + per]
            sqlite.execute(_insert_entries(len(part)), [value for row in part for value in row])
        last = int(conn.execute("SELECT last_insert_rowid()").fetchone()[0])
        return last - len(rows) + 1, last

    def _defer_indexing(self, conn: Conn, sid: int, first: int, last: int) -> None:
        """Record rows ``first..last`` of the session as not yet in the full-text index."""
        found = conn.execute(
            "SELECT value FROM session_status WHERE session_id = ? AND key = ?", (sid, FTS_PENDING)
        ).fetchone()
        ranges: list[list[int]] = [] if found is None else json.loads(found[0])["ranges"]
        if ranges and ranges[-1][1] + 1 == first:
            ranges[-1][1] = last
        else:
            ranges.append([first, last])
        self.db.set_status(conn, sid, FTS_PENDING, {"ranges": ranges})

    def _insert_row(self, conn: Conn, row: tuple[Any, ...]) -> int | None:
        """Insert an entry row (``row`` in the column order below); its ``seq``, or None when the
        session already holds an entry with that id (``row[1]``). A server finds the clash in the
        insert itself (``ON CONFLICT DO NOTHING``: one round trip); SQLite, in-process, looks
        first, since its RETURNING and ON CONFLICT paths measured twice as slow for a 2,000-entry
        import as a lookup and a plain insert."""
        sql = _INSERT_ENTRY
        if self.db.dialect.insert_finds_clash:
            found = conn.execute(
                sql + " ON CONFLICT (session_id, id) DO NOTHING RETURNING seq", row
            ).fetchone()
            return None if found is None else int(found[0])
        if conn.execute("SELECT 1 FROM entries WHERE session_id = ? AND id = ?", (row[0], row[1])).fetchone():
            return None
        return int(conn.execute(sql, row).lastrowid)
