"""The log: appending entries (one transaction per call) and reading them back by id, kind or text.

``EntryLog`` is built from parts by role: ``entry_reads`` (reads by id, kind, session),
``entry_writes`` (appends and the rows they write), ``entry_import`` (batched imports) and
``entry_hashing`` (hashes, chain and stored text); the full-text index (``index_pending``,
``search``) is here. Their names are re-exported from this module, as before the split.

What must hold:
- Entry rows are never updated or deleted (triggers enforce it); every append, batch and import
  lands whole or not at all.
- Each entry stores both token estimates (``core.tokens.estimate_entry_tokens_both``) taken at append,
  so thresholds and cut points never re-scan history, and the derived tree columns
  (depth, ``context_head``, ``mark``, ``compactions``) that ``integrity.verify`` recomputes.
- ``hash`` = sha256(parent hash + canonical JSON of the entry); ``chain`` = sha256(previous chain
  of the session + hash).
"""

from __future__ import annotations

import json
import time  # noqa: F401  (kept for callers that reach ``log.time``, as before the split)
from typing import Any

from ipython_compact.core.entries import Entry, entry_text
from ipython_compact.store.database import ENTRY_COLUMNS, row_entry
from ipython_compact.store.entry_hashing import (
    chain_hash,
    content_key,
    entry_hash,
    fast_json_loads,
    has_long_digit_run,
    read_back,
    stored_data_text,
    stored_entry_hash,
)
from ipython_compact.store.entry_import import (
    IMPORT_BATCH,
    IMPORT_MARKER,
    IMPORT_OTHERS_EVERY,
    IMPORT_PAUSE,
    IMPORT_WRITER,
    EntryImports,
    Existing,
    ImportPlan,
    ImportWritten,
)
from ipython_compact.store.entry_reads import EntryReads
from ipython_compact.store.entry_writes import FTS_PENDING, EntryWrites
from ipython_compact.store.errors import (
    InvalidEntryError,
)
from ipython_compact.store.records import SearchHit

__all__ = [
    "FTS_CHUNK",
    "FTS_PENDING",
    "IMPORT_BATCH",
    "IMPORT_MARKER",
    "IMPORT_OTHERS_EVERY",
    "IMPORT_PAUSE",
    "IMPORT_WRITER",
    "EntryImports",
    "EntryLog",
    "EntryReads",
    "EntryWrites",
    "Existing",
    "ImportPlan",
    "ImportWritten",
    "chain_hash",
    "content_key",
    "entry_hash",
    "fast_json_loads",
    "has_long_digit_run",
    "read_back",
    "stored_data_text",
    "stored_entry_hash",
]


FTS_CHUNK = 5000
"""Entries ``index_pending`` indexes per transaction."""


class EntryLog(EntryImports):
    """Appends and entry reads over one database (the tree answers ancestry questions).

    A part of ``SessionStore`` (its base class): the methods here are the store's own, defined
    once; ``self.db`` is the store's ``Database``."""

    def index_pending(self) -> int:
        """Add the entries imports left out to the full-text index (``FTS_PENDING``); how many.

        Each transaction indexes up to ``FTS_CHUNK`` entries and shrinks the recorded ranges with
        them, so a process killed part-way leaves the rest recorded, never an entry indexed twice
        or forgotten. Two processes doing it at once take turns; the second finds less to do."""
        with self.db.read() as conn:
            sids = [
                int(r[0])
                for r in conn.execute("SELECT session_id FROM session_status WHERE key = ?", (FTS_PENDING,))
            ]
        done = 0
        for sid in sids:
            while True:
                with self.db.write() as conn:
                    found = conn.execute(
                        "SELECT value FROM session_status WHERE session_id = ? AND key = ?",
                        (sid, FTS_PENDING),
                    ).fetchone()
                    if found is None:
                        break
                    ranges: list[list[int]] = json.loads(found[0])["ranges"]
                    first, last = ranges[0]
                    upto = min(last, first + FTS_CHUNK - 1)
                    rows = conn.execute(
                        f"SELECT seq, {ENTRY_COLUMNS} FROM entries "
                        "WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
                        (sid, first, upto),
                    ).fetchall()
                    for seq, entry_id, parent_id, kind, timestamp, data, *_ in rows:
                        text = entry_text(Entry(entry_id, parent_id, kind, timestamp, read_back(data)))
                        if text:
                            conn.execute(self.db.dialect.fts_insert, (seq, self.db.dialect.fts_text(text)))
                    done += len(rows)
                    rest = ([[upto + 1, last]] if upto < last else []) + ranges[1:]
                    if rest:
                        self.db.set_status(conn, sid, FTS_PENDING, {"ranges": rest})
                    else:
                        conn.execute(
                            "DELETE FROM session_status WHERE session_id = ? AND key = ?", (sid, FTS_PENDING)
                        )
        return done

    def search(
        self, text: str, *, session: str | None = None, limit: int = 20, raw: bool = False
    ) -> list[SearchHit]:
        """Full-text search over entry text, best match first.

        By default every word of ``text`` must occur (words are quoted, so FTS syntax in user text
        is harmless); ``raw=True`` passes a query in the engine's own syntax through unchanged
        (SQLite: FTS5; PostgreSQL: ``websearch_to_tsquery``).
        """
        if "\x00" in text:
            if raw:
                raise InvalidEntryError(
                    "the search query holds a NUL character, which full-text search cannot take; remove it",
                    path=self.db.path,
                )
            text = text.replace("\x00", " ")  # SQLite ends the string at NUL ("unterminated string")
        query = self.db.dialect.search_query(text, raw)
        if query is None:
            return []
        self.index_pending()  # what imports left out of the index goes in before anyone searches
        sql = (
            f"SELECT s.name, e.{ENTRY_COLUMNS.replace(', ', ', e.')}, f.rank, e.seq "
            f"{self.db.dialect.search_from(raw)}"
        )
        params: list[Any] = [query]
        with self.db.read() as conn:
            if session is not None:
                sql += " AND e.session_id = ?"
                params.append(self.db.sid(conn, session))
            sql += " ORDER BY f.rank LIMIT ?"
            params.append(limit)
            try:
                rows = conn.execute(sql, params).fetchall()
            except Exception as exc:
                if self.db.is_query_syntax_error(exc):
                    raise ValueError(f"bad search query {text!r}: {exc}") from exc
                raise
        return [
            SearchHit(session=r[0], entry=row_entry(r[1:8]), rank=float(r[8]), seq=int(r[9])) for r in rows
        ]
