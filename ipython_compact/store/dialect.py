"""Where the two engines' SQL differs: the few phrases each spells its own way.

Why a table of phrases and not two stores: the log, the tree, the inbox and ``verify`` are one
code path for SQLite and PostgreSQL (same statements, same transactions, same checks), so a
guarantee proved for one engine is proved for the other. Only what the engines spell differently
lives here: NULL-safe comparison, reading a JSON field, full-text search, the row lock a writer
takes. Statements are written with ``?`` (or ``:name``) placeholders; the PostgreSQL connection
translates them (``store.postgres``).

What must hold:
- A phrase means the same thing in both engines (a search finds the same entries for plain
  words; ranks differ in scale but order best first as a smaller number).
- Nothing here touches a connection except through ``Conn``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """The part of a DB-API connection the store uses: ``execute`` with ``?``/``:name`` SQL."""

    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = ..., /) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    name: str
    is_distinct: str
    """NULL-safe "differs from" (SQLite ``IS NOT``, PostgreSQL ``IS DISTINCT FROM``)."""
    is_same: str
    """NULL-safe "equals"."""
    message_role: str
    """SQL expression: the role of a message entry, from its ``data`` column (JSON text)."""
    row_lock: str
    """Appended to the session row read inside a write: SQLite's write lock is already the whole
    database (``BEGIN IMMEDIATE``); PostgreSQL locks the session's row, so writers of one session
    take turns (the compare and swap, the chain tip and the entry count stay exact) while other
    sessions' writers go on."""
    fts_insert: str
    """Statement adding ``(seq, text)`` to the full-text index."""
    search_any: str
    """The ``FROM … WHERE`` of a full-text search with one query parameter; selects
    ``rank`` (smaller is better) as ``f.rank``."""
    insert_finds_clash: bool = False
    """An entry insert detects a taken id itself (``ON CONFLICT DO NOTHING RETURNING``) instead
    of a lookup first: saves a round trip on a server, costs time in SQLite."""

    def search_from(self, raw: bool) -> str:
        """``search_any`` for a plain (every word) or ``raw`` (the engine's own syntax) query."""
        if self.name != "postgresql":
            return self.search_any
        parse = "websearch_to_tsquery" if raw else "plainto_tsquery"
        return self.search_any.format(query=f"{parse}('simple', ?)")

    def fts_text(self, text: str) -> str:
        """The text as the index can take it (PostgreSQL text holds no NUL)."""
        return text.replace("\x00", " ") if self.name == "postgresql" else text

    def search_query(self, text: str, raw: bool) -> str | None:
        """The query parameter for ``text`` (None: nothing to search). Without ``raw`` every word
        must occur and query syntax in the user's text is only words."""
        if raw:
            return text
        words = text.split()
        if not words:
            return None
        if self.name == "postgresql":
            return " ".join(words)  # plainto_tsquery: every word, no syntax
        return " ".join('"' + w.replace('"', '""') + '"' for w in words)


SQLITE = Dialect(
    name="sqlite",
    is_distinct="IS NOT",
    is_same="IS",
    message_role="json_extract(data, '$.message.role')",
    row_lock="",
    fts_insert="INSERT INTO entries_fts (rowid, text) VALUES (?, ?)",
    search_any="FROM entries_fts f JOIN entries e ON e.seq = f.rowid JOIN sessions s ON s.session_id = "
    "e.session_id "
    "WHERE entries_fts MATCH ?",
)

POSTGRESQL = Dialect(
    name="postgresql",
    is_distinct="IS DISTINCT FROM",
    is_same="IS NOT DISTINCT FROM",
    message_role="(data::json #>> '{message,role}')",
    row_lock=" FOR UPDATE",
    insert_finds_clash=True,
    fts_insert="INSERT INTO entries_fts (seq, tsv) VALUES (?, to_tsvector('simple', ?))",
    search_any="FROM (SELECT seq, -ts_rank(tsv, q) AS rank FROM entries_fts, {query} AS q WHERE tsv @@ q) f "
    "JOIN entries e ON e.seq = f.seq JOIN sessions s ON s.session_id = e.session_id WHERE TRUE",
)


__all__ = ["POSTGRESQL", "SQLITE", "Conn", "Cursor", "Dialect"]
