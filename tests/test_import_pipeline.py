"""An import prepares its next batch while a writer thread stores the last one
(``EntryLog.import_batched``): a batch whose write fails still leaves an exact account of what
was committed and nothing after it, reads of entries stored before the import go through the
lock while the writer holds it, and rows go in as many per statement as the connection allows
with the same stored bytes whatever that number is."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from ipython_compact.core.entries import Entry
from ipython_compact.store import PartialImportError, SessionStore
from ipython_compact.store.log import IMPORT_MARKER, IMPORT_WRITER, ImportPlan


def _message(text: str) -> dict[str, Any]:
    return {"message": {"role": "user", "content": text}}


def _chain(n: int, parent: str | None = None, prefix: str = "e") -> list[Entry]:
    entries: list[Entry] = []
    for i in range(n):
        up = entries[-1].id if entries else parent
        stamp = f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}.000Z"
        entries.append(Entry(f"{prefix}{i:03d}", up, "message", stamp, _message(f"m{i} é")))
    return entries


def _rows(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT id, parent_id, kind, timestamp, data, tokens_density, tokens_chars4, depth, "
            "context_head, "
            "hash, chain, mark, compactions FROM entries ORDER BY seq"
        ).fetchall()


def test_a_later_batch_failing_to_write_says_exactly_what_was_written(tmp_path: Path) -> None:
    """The third batch's write fails on the writer thread (a trigger refuses one of its rows)
    while the fourth is being prepared: two batches are committed and reported, the fourth is
    never written, the leaf stays and the log verifies."""
    entries = _chain(50)
    with SessionStore(tmp_path / "s.db") as store:
        store.create_session("s")
        store.append("s", "message", _message("before"))
        leaf = store.leaf("s")
        with sqlite3.connect(store.db_path) as conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON entries WHEN NEW.id = 'e025' "
                "BEGIN SELECT RAISE(ABORT, 'injected refusal'); END"
            )
        with pytest.raises(PartialImportError) as info:
            store.import_batched("s", lambda existing: ImportPlan(entries, "e049"), batch_size=10)
        err = info.value
        assert (err.written, err.total, err.last_id, err.leaf) == (20, 50, "e019", leaf)
        assert "(2 transaction(s) committed" in str(err) and "injected refusal" in str(err)
        assert store.entry_count("s") == 21 and store.leaf("s") == leaf and store.verify().ok
        assert [r[0] for r in _rows(store.db_path)][1:] == [e.id for e in entries[:20]]


def test_a_later_compaction_keeping_an_entry_stored_before_the_import(location: str | Path) -> None:
    """A compaction in a later batch keeps an entry the session held before the import: checking
    that it lies on the compaction's path reads stored entries while the writer thread holds the
    connection for the previous batch (SQLite: one connection under a lock; PostgreSQL: the
    writer thread's own connection)."""
    with SessionStore(location) as store:
        store.create_session("s")
        kept = store.append("s", "message", _message("kept from before")).id
        store.append("s", "message", _message("after it"))
        entries = _chain(35)  # its root hangs under the session's leaf
        compaction = Entry(
            "c000",
            entries[-1].id,
            "compaction",
            "2026-01-02T00:00:00.000Z",
            {"summary": "so far", "first_kept_entry_id": kept, "tokens_before": 1000},
        )
        written = store.import_batched(
            "s", lambda existing: ImportPlan([*entries, compaction], "c000"), batch_size=10
        )
        assert written.batches == 4 and store.leaf("s") == "c000" and store.verify().ok
        head = next(e for e in store.path("s") if e.id == "c000")
        assert head.data["first_kept_entry_id"] == kept
        view = store.context_view("s")
        assert view.head_id == kept and kept in [e.id for e in view.entries]

        wrong = Entry(
            "c001",
            "e034",
            "compaction",
            "2026-01-03T00:00:00.000Z",
            {"summary": "s", "first_kept_entry_id": "nowhere", "tokens_before": 1},
        )
        more = _chain(15, parent=None, prefix="f")
        with pytest.raises(PartialImportError) as info:
            store.import_batched("s", lambda existing: ImportPlan([*more, wrong], "c001"), batch_size=10)
        assert info.value.written == 10 and "is not on the path" in str(info.value)


@pytest.mark.parametrize("limit", [510, 1000, None])
def test_rows_per_statement_follow_the_connections_limit_and_store_the_same_bytes(
    tmp_path: Path, limit: int | None
) -> None:
    """510 variables: 34 rows per statement (the id check asks 500 at a time, so no lower limit
    works); 1000: 66 rows and a remainder; None: the build's own limit (a whole batch). Each
    stores exactly the rows one batch of everything stores: the same columns, hashes and chain,
    consecutive seqs, a log that verifies."""
    entries = _chain(150)
    reference = tmp_path / "reference.db"
    with SessionStore(reference) as store:
        store.import_batched("s", lambda existing: ImportPlan(entries, "e149"), batch_size=150)
    db = tmp_path / f"limit-{limit}.db"
    with SessionStore(db) as store:
        if limit is not None:
            store.db.conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)  # type: ignore[attr-defined]
        written = store.import_batched("s", lambda existing: ImportPlan(entries, "e149"), batch_size=100)
        assert written.batches == 2 and store.verify().ok
    assert _rows(db) == _rows(reference)
    with sqlite3.connect(db) as conn:
        seqs = [r[0] for r in conn.execute("SELECT seq FROM entries ORDER BY seq")]
    assert seqs == list(range(seqs[0], seqs[0] + 150))


def test_an_id_the_session_already_holds_is_named_when_its_batch_comes(location: str | Path) -> None:
    """The second batch holds an id the session has (the plan did not look): SQLite's unique key
    refuses the statement (PostgreSQL is asked first) and the error names the id; the first batch
    stays, nothing else."""
    with SessionStore(location) as store:
        store.import_batched("s", lambda existing: ImportPlan([_chain(1, prefix="x")[0]], "x000"))
        clash = Entry("e015", None, "message", "2026-01-05T00:00:00.000Z", _message("already here"))
        store.import_batched("s", lambda existing: ImportPlan([clash], "e015"))
        leaf = store.leaf("s")
        with pytest.raises(PartialImportError) as info:
            store.import_batched("s", lambda existing: ImportPlan(_chain(30), "e029"), batch_size=10)
        assert info.value.written == 10
        assert "entry 'e015': an entry with this id already exists in the session" in str(info.value)
        assert store.entry_count("s") == 12 and store.leaf("s") == leaf and store.verify().ok


def test_an_interrupt_while_preparing_leaves_no_write_running(
    location: str | Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C lands while the third batch is prepared and the second is being stored: the call
    waits for that write, then lets the interrupt through; no writer thread outlives it, and
    the import's marker goes with it (the process lives on, so another import would wait)."""
    from ipython_compact.store.log import EntryLog

    prepare = EntryLog._prepare_rows
    calls = []
    writers: list[threading.Thread] = []  # the writer threads there when the interrupt came

    def interrupted(self: EntryLog, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            writers.extend(t for t in threading.enumerate() if t.name.startswith(IMPORT_WRITER))
            raise KeyboardInterrupt
        return prepare(self, *args, **kwargs)

    monkeypatch.setattr(EntryLog, "_prepare_rows", interrupted)
    with SessionStore(location) as store:
        with pytest.raises(KeyboardInterrupt):
            store.import_batched("s", lambda existing: ImportPlan(_chain(50), "e049"), batch_size=10)
        assert writers and not any(t.is_alive() for t in writers)
        assert store.entry_count("s") == 20 and store.verify().ok
        with store.db.read() as conn:  # and nobody is kept waiting for this import
            found = conn.execute("SELECT count(*) FROM session_status WHERE key = ?", (IMPORT_MARKER,))
            assert tuple(found.fetchone()) == (0,)
