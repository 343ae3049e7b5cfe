"""Reading entries back: by id, kind, writer and session, as counts and token estimates.

A base of ``EntryLog`` (and so of ``SessionStore``): the methods are the store's own; ``self.db``
is the store's ``Database``. Reads never change the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ipython_compact.core.entries import Entry
from ipython_compact.core.settings import ESTIMATORS, Estimator
from ipython_compact.store.database import ENTRY_COLUMNS, row_entry
from ipython_compact.store.errors import (
    UnknownEntryError,
)
from ipython_compact.store.tree import Tree


class EntryReads(Tree):
    """Entry reads over one database (the tree answers ancestry questions)."""

    def writers(self, session: str, ids: Iterable[str] | None = None) -> dict[str, str | None]:
        """Who wrote each entry of ``session`` (or only ``ids``): ``id → writer`` (None: written
        before writers were recorded)."""
        wanted = None if ids is None else list(ids)
        out: dict[str, str | None] = {}
        with self.db.read() as conn:
            sid = self.db.session_row(conn, session).sid
            if wanted is None:
                rows = conn.execute("SELECT id, writer FROM entries WHERE session_id = ?", (sid,)).fetchall()
            else:
                rows = []
                for i in range(0, len(wanted), 500):
                    chunk = wanted[i : i + 500]
                    marks = ",".join("?" * len(chunk))
                    rows += conn.execute(
                        f"SELECT id, writer FROM entries WHERE session_id = ? AND id IN ({marks})",
                        (sid, *chunk),
                    ).fetchall()
        for entry_id, writer in rows:
            out[str(entry_id)] = writer
        return out

    def get(self, entry_id: str, session: str | None = None) -> Entry:
        """One entry by id. Ids are unique within a session; without ``session`` the id must be
        unique in the whole database."""
        with self.db.read() as conn:
            if session is not None:
                sid = self.db.sid(conn, session)
                rows = conn.execute(
                    f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND id = ?", (sid, entry_id)
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ? LIMIT 2", (entry_id,)
                ).fetchall()
        if not rows:
            where = f"session {session!r}" if session else str(self.db.path)
            raise UnknownEntryError(f"no entry {entry_id!r} in {where}", path=self.db.path)
        if len(rows) > 1:
            raise UnknownEntryError(
                f"entry id {entry_id!r} exists in several sessions: name the session", path=self.db.path
            )
        return row_entry(rows[0])

    def entries(
        self, session: str, *, kinds: Iterable[str] | None = None, after_newest: str | None = None
    ) -> list[Entry]:
        """Entries of the session in append order (parents before children), branches included.

        ``kinds`` keeps only those kinds; ``after_newest=K`` keeps only entries appended after the
        newest entry of kind ``K`` (all when there is none). Both are index lookups (migration
        ``0004_kind_index``), so "what happened since the last compaction" costs what came after
        it, not the whole history.
        """
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
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
            rows = conn.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE {where} ORDER BY seq", params)
            return [row_entry(r) for r in rows]

    def iter_entries(self, session: str, *, batch: int = 1000) -> Iterator[Entry]:
        """Every entry of the session in append order, read ``batch`` rows at a time (keyset on
        ``seq``), so an export or a copy between stores holds one batch in memory, not the log.
        Entries appended while iterating are included; none is skipped or repeated."""
        after = 0
        while True:
            with self.db.read() as conn:
                sid = self.db.sid(conn, session)
                rows = conn.execute(
                    f"SELECT seq, {ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq "
                    f"LIMIT ?",
                    (sid, after, batch),
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield row_entry(row[1:])
            after = int(rows[-1][0])

    def chain_tip(self, session: str) -> str:
        """The session's append-chain hash: equal tips mean the same entries in the same order
        (a copy between stores that kept ids and order has the source's tip)."""
        with self.db.read() as conn:
            return self.db.session_row(conn, session).tip

    def entry_count(self, session: str) -> int:
        """How many entries the session holds (all branches); one row read."""
        with self.db.read() as conn:
            return self.db.session_row(conn, session).count

    def entry_ids(self, session: str) -> set[str]:
        """Every id used in the session (cheap: no entry bodies are read)."""
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            return {row[0] for row in conn.execute("SELECT id FROM entries WHERE session_id = ?", (sid,))}

    def children(self, session: str, entry_id: str | None) -> list[Entry]:
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            rows = conn.execute(
                f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND parent_id "
                f"{self.db.dialect.is_same} ? "
                "ORDER BY seq",
                (sid, entry_id),
            )
            return [row_entry(r) for r in rows]

    def branch_tips(self, session: str) -> list[Entry]:
        """Entries with no children: the ends of every branch of the session tree."""
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            rows = conn.execute(
                f"SELECT {ENTRY_COLUMNS} FROM entries e WHERE session_id = ? AND NOT EXISTS "
                "(SELECT 1 FROM entries c WHERE c.session_id = e.session_id AND c.parent_id = e.id) ORDER BY "
                "seq",
                (sid,),
            )
            return [row_entry(r) for r in rows]

    def token_counts(
        self, session: str, entries: Sequence[Entry], estimator: Estimator = "density"
    ) -> list[int]:
        """Stored estimates for ``entries`` of ``session``, in the same order."""
        if estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {estimator!r}; expected one of {', '.join(ESTIMATORS)}")
        column = "tokens_density" if estimator == "density" else "tokens_chars4"
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            found: dict[str, int] = {}
            ids = [e.id for e in entries]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for entry_id, tokens in conn.execute(
                    f"SELECT id, {column} FROM entries WHERE session_id = ? AND id IN ({marks})",
                    (sid, *chunk),
                ):
                    found[entry_id] = int(tokens)
        missing = [i for i in ids if i not in found]
        if missing:
            raise UnknownEntryError(f"no entries {missing[:5]} in session {session!r}", path=self.db.path)
        return [found[i] for i in ids]
