"""Named, ordered schema migrations for the session database.

Each migration runs once, inside the transaction that records its name in the ``migrations``
table (all pending ones share one transaction), so a database is either fully migrated or not
touched at all. Migrations
are only ever appended to ``MIGRATIONS``; an applied one is never edited (a database that
records a name this code does not know was written by a newer version and is refused).

What the schema guarantees:
- ``entries`` rows are append-only: triggers abort any UPDATE or DELETE.
- ``(session_id, id)`` is unique; ``parent_id`` names an entry of the same session.
- ``context_head`` is the id where the model's view starts for a leaf at this entry (the
  ``first_kept_entry_id`` of the newest compaction on its path, NULL = the root), so the view is
  read from the leaf back to that id only.
- ``hash`` chains an entry to its parent (tree integrity); ``chain`` chains entries of a session
  in append order (nothing appended can vanish without ``verify`` noticing).
- ``mark`` (migration 0002) is the id of the nearest entry at or above this one whose kind is in
  ``MARK_KINDS`` (NULL = none). Marked kinds are the rare ones the product looks up by kind
  (compactions, pins, goals, system baselines...); following ``mark`` from a leaf visits exactly
  the marked entries of its root→leaf path, so "the compactions / pins on this branch" costs one
  step per such entry, not one per entry of the history. Like ``context_head`` it is derived
  from the tree (not hashed) and ``verify`` recomputes it.
- ``compactions`` (migration 0003) counts the compaction entries on the root→entry path, this
  entry included, so "how many compactions on this branch" (the status every panel poll shows)
  is one row read. Derived and verified like ``mark``.
- ``live_compactions.owner_*`` and ``inbox.taken_*`` (migration 0005) name the process (host,
  pid, start time) that owns the row, so rows left by a killed process are settled, not kept.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

SCHEMA_V1 = """
CREATE TABLE sessions (
    session_id   INTEGER PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    created_at   TEXT NOT NULL,
    leaf_id      TEXT,
    entry_count  INTEGER NOT NULL DEFAULT 0,
    chain_tip    TEXT NOT NULL DEFAULT '',
    last_seq     INTEGER NOT NULL DEFAULT 0,
    meta         TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE entries (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id      INTEGER NOT NULL REFERENCES sessions(session_id),
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
    UNIQUE (session_id, id)
);
CREATE INDEX entries_parent ON entries(session_id, parent_id);

CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
BEGIN
    SELECT RAISE(ABORT, 'entries are append-only: UPDATE is not allowed');
END;
CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
BEGIN
    SELECT RAISE(ABORT, 'entries are append-only: DELETE is not allowed');
END;

CREATE VIRTUAL TABLE entries_fts USING fts5(text, content='', tokenize='unicode61');

CREATE TABLE inbox (
    item_id             INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id          INTEGER NOT NULL REFERENCES sessions(session_id),
    first_kept_entry_id TEXT,
    payload             TEXT NOT NULL,
    state               TEXT NOT NULL DEFAULT 'pending'
                        CHECK (state IN ('pending', 'taken', 'stale')),
    created_at          TEXT NOT NULL,
    settled_at          TEXT
);
CREATE INDEX inbox_pending ON inbox(session_id, state);

CREATE TABLE live_compactions (
    task_id     TEXT PRIMARY KEY,
    session_id  INTEGER NOT NULL REFERENCES sessions(session_id),
    reason      TEXT NOT NULL,
    blocking    INTEGER NOT NULL,
    started_at  TEXT NOT NULL,
    detail      TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE session_status (
    session_id  INTEGER NOT NULL REFERENCES sessions(session_id),
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
);
"""


@dataclass(frozen=True)
class Migration:
    name: str
    apply: Callable[[sqlite3.Connection], None]


def _initial_schema(conn: sqlite3.Connection) -> None:
    for statement in _split_statements(SCHEMA_V1):
        conn.execute(statement)


def _split_statements(script: str) -> list[str]:
    """Split a schema script into statements, keeping trigger bodies whole.

    ``executescript`` would commit the surrounding transaction, which would break the
    all-or-nothing promise above, so statements run one by one instead.
    """
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete SQL statement in schema: {buffer.strip()[:80]!r}")
    return statements


MARK_KINDS: frozenset[str] = frozenset(
    {
        "compaction",
        "branch_summary",
        "compaction_outcome",
        "pin",
        "goal",
        "system",
        "model_change",
        "thinking_level_change",
        "session_info",
    }
)
"""Kinds linked by the ``mark`` chain. Frozen with migration 0002: changing the set needs a new
migration that recomputes ``mark`` (stored values would otherwise disagree with ``verify``)."""

_NO_UPDATE_TRIGGER = """
CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
BEGIN
    SELECT RAISE(ABORT, 'entries are append-only: UPDATE is not allowed');
END
"""


def _mark_chain(conn: sqlite3.Connection) -> None:
    """Add ``entries.mark`` and fill it for entries written before this migration.

    The backfill is the only write to existing entry rows the project ever makes: the append-only
    trigger is lifted for it and restored in the same transaction, and only the new derived
    column is set (content, links and hashes are untouched). Parents precede children in ``seq``
    order (``_insert`` refuses a missing parent), so one pass in that order suffices.
    """
    conn.execute("ALTER TABLE entries ADD COLUMN mark TEXT")
    conn.execute("DROP TRIGGER entries_no_update")
    marks: dict[tuple[int, str], str | None] = {}
    updates: list[tuple[str, int]] = []
    for seq, sid, entry_id, parent_id, kind in conn.execute(
        "SELECT seq, session_id, id, parent_id, kind FROM entries ORDER BY seq"
    ).fetchall():
        mark = (
            entry_id if kind in MARK_KINDS else marks.get((sid, parent_id)) if parent_id is not None else None
        )
        marks[(sid, entry_id)] = mark
        if mark is not None:
            updates.append((mark, seq))
    conn.executemany("UPDATE entries SET mark = ? WHERE seq = ?", updates)
    conn.execute(_NO_UPDATE_TRIGGER.strip())


def _compaction_counts(conn: sqlite3.Connection) -> None:
    """Add ``entries.compactions`` and fill it for older entries (same one-pass back-fill, with
    the append-only trigger lifted only inside this transaction, as in ``_mark_chain``)."""
    conn.execute("ALTER TABLE entries ADD COLUMN compactions INTEGER NOT NULL DEFAULT 0")
    conn.execute("DROP TRIGGER entries_no_update")
    counts: dict[tuple[int, str], int] = {}
    updates: list[tuple[int, int]] = []
    for seq, sid, entry_id, parent_id, kind in conn.execute(
        "SELECT seq, session_id, id, parent_id, kind FROM entries ORDER BY seq"
    ).fetchall():
        count = (counts.get((sid, parent_id), 0) if parent_id is not None else 0) + (kind == "compaction")
        counts[(sid, entry_id)] = count
        if count:
            updates.append((count, seq))
    conn.executemany("UPDATE entries SET compactions = ? WHERE seq = ?", updates)
    conn.execute(_NO_UPDATE_TRIGGER.strip())


def _kind_index(conn: sqlite3.Connection) -> None:
    """Index entries by kind in append order, so "the newest compaction of the session" and "every
    entry of kind K" are index lookups, not scans of the whole history (the agent asks before
    every turn)."""
    conn.execute("CREATE INDEX entries_kind ON entries(session_id, kind, seq)")


def _work_owners(conn: sqlite3.Connection) -> None:
    """Record which process owns work in progress: a live compaction (``owner_*``) and an inbox
    item handed out at a turn boundary (``taken_*``): host, pid and the process start time (see
    ``store.process``). A later process that finds the owner gone settles the row instead of
    showing it as running forever (or losing a summary that was taken but never placed). Only
    columns are added to these two status tables; entries and their triggers are untouched, and
    rows written before this migration have no owner (never judged abandoned)."""
    for table, prefix in (("live_compactions", "owner"), ("inbox", "taken")):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {prefix}_host TEXT")
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {prefix}_pid INTEGER")
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {prefix}_started TEXT")


def _entry_writers(conn: sqlite3.Connection) -> None:
    """Record which process wrote each entry (``writer``: role, pid, host; NULL before this
    migration). Not part of the entry's hash: it says who, not what, and the append-only
    triggers still forbid changing it."""
    conn.execute("ALTER TABLE entries ADD COLUMN writer TEXT")


def _entry_outlines(conn: sqlite3.Connection) -> None:
    """Keep each entry's outline (``core.triage_facts.outline_of``: role, stop reason, usage, tool
    calls, text digests, output size; a few hundred bytes) with it, so a preview decides from the
    outlines instead of parsing every entry of a long context (issue 37). Derived from the entry,
    not hashed and not checked by ``verify``: a hand-edited outline can mislead a preview, never
    a compaction (which reads the entries). Entries written before this migration have none
    (NULL) and are read whole."""
    conn.execute("ALTER TABLE entries ADD COLUMN outline TEXT")


MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_initial_schema", _initial_schema),
    Migration("0002_mark_chain", _mark_chain),
    Migration("0003_compaction_counts", _compaction_counts),
    Migration("0004_kind_index", _kind_index),
    Migration("0005_work_owners", _work_owners),
    Migration("0006_entry_writers", _entry_writers),
    Migration("0007_entry_outlines", _entry_outlines),
)


def applied(conn: sqlite3.Connection) -> list[str]:
    """Names of the migrations this database records, in the order they were applied."""
    if not conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'"
    ).fetchone():
        conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    return [row[0] for row in conn.execute("SELECT name FROM migrations ORDER BY rowid")]


def pending(conn: sqlite3.Connection) -> list[Migration]:
    """Migrations not yet applied. Raises ValueError when the database knows a name we do not."""
    done = applied(conn)
    known = {m.name for m in MIGRATIONS}
    unknown = [name for name in done if name not in known]
    if unknown:
        raise ValueError(
            f"database records migrations this version does not know ({', '.join(unknown)}); "
            "it was written by a newer ipython-compact"
        )
    return [m for m in MIGRATIONS if m.name not in done]


def migrate(conn: sqlite3.Connection, now: str) -> list[str]:
    """Apply every pending migration in one transaction; return the names applied.

    The caller's connection must be in autocommit mode (``isolation_level=None``). An up-to-date
    database is only read, so opening one never waits for another process's write lock.
    """
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'"
    ).fetchone()
    if has_table and not pending(conn):
        return []
    conn.execute("BEGIN IMMEDIATE")
    try:
        todo = pending(conn)
        for migration in todo:
            migration.apply(conn)
            conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (migration.name, now))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return [m.name for m in todo]
