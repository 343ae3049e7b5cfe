"""An import leaves full-text indexing to the first search (``EntryLog.index_pending``): recall of
imported and compacted text still finds it, a kill -9 in the middle of an import or of the
indexing leaves a consistent log with every landed entry indexed exactly once, and an import
with nobody else on the database leaves no pauses between its batches."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ipython_compact.cli.demo_transcript import TranscriptGenerator
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.entries import Entry
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore
from ipython_compact.store.exporters import export_jsonl
from ipython_compact.store.importers import import_transcript, load_transcript
from ipython_compact.store.log import FTS_PENDING, ImportPlan

FIXTURES = Path(__file__).parent / "fixtures" / "pi"


def _message(text: str) -> dict[str, Any]:
    return {"message": {"role": "user", "content": text}}


def _chain(n: int, word: str = "w") -> list[Entry]:
    """``n`` linked user messages; entry i says ``{word}{i}`` and ``common``."""
    entries: list[Entry] = []
    for i in range(n):
        parent = entries[-1].id if entries else None
        entries.append(
            Entry(f"e{i:04d}", parent, "message", "2026-01-01T00:00:00.000Z", _message(f"{word}{i} common"))
        )
    return entries


def test_recall_of_compacted_text_after_an_import(tmp_path: Path) -> None:
    source = SessionStore(tmp_path / "source.db")
    source.create_session("s")
    for msgs in TranscriptGenerator(11).rounds(20):
        source.append_many("s", [("message", {"message": m}) for m in msgs])
    Compactor(source, settings=CompactionSettings(keep_recent_tokens=1500)).compact("s")
    export = tmp_path / "s.jsonl"
    with export.open("w") as out:
        export_jsonl(source, "s", out)
    before = [(h.id, h.text) for h in Compactor(source).recall("s", query="tenure_bucket_5")]
    assert before

    target = SessionStore(tmp_path / "target.db")
    import_transcript(target, load_transcript(export), "s")
    assert target.status_get("s", FTS_PENDING) is not None  # not indexed yet: the import left it
    compacted = {e.id for e in target.path("s")} - {e.id for e in target.context_path("s")}
    after = [(h.id, h.text) for h in Compactor(target).recall("s", query="tenure_bucket_5")]
    assert after == before
    assert after[0][0] in compacted
    assert target.status_get("s", FTS_PENDING) is None
    assert target.verify().ok
    source.close()
    target.close()


def test_every_imported_entry_is_found_once_on_each_engine(location: str | Path) -> None:
    with SessionStore(location) as store:
        store.create_session("other")
        store.append("other", "message", _message("common before"))
        written = store.import_batched("s", lambda existing: ImportPlan(_chain(25), "e0024"), batch_size=10)
        assert written.batches == 3
        store.append("other", "message", _message("common after"))  # indexed at once, as always
        hits = store.search("common", session="s", limit=100)
        assert sorted(h.entry.id for h in hits) == [f"e{i:04d}" for i in range(25)]
        assert [h.entry.id for h in store.search("w17", limit=10)] == ["e0017"]
        assert len(store.search("common", limit=100)) == 27
        assert store.index_pending() == 0  # nothing left, nothing indexed twice
        assert store.status_get("s", FTS_PENDING) is None


IMPORTER = textwrap.dedent(
    """
    import sys, time
    from ipython_compact.core.entries import Entry
    from ipython_compact.store import SessionStore
    from ipython_compact.store.log import ImportPlan

    class Stalling(SessionStore):
        batches = 0

        def _insert_rows(self, conn, rows):
            Stalling.batches += 1
            if Stalling.batches == 3:  # inside the third batch's open transaction
                print("mid-batch", flush=True)
                time.sleep(600)
            return super()._insert_rows(conn, rows)

    entries = []
    for i in range(50):
        parent = entries[-1].id if entries else None
        data = {"message": {"role": "user", "content": f"w{i} common"}}
        entries.append(Entry(f"e{i:04d}", parent, "message", "2026-01-01T00:00:00.000Z", data))
    store = Stalling(sys.argv[1])
    store.import_batched("s", lambda existing: ImportPlan(entries, "e0049", json_values=True), batch_size=10)
    """
)

INDEXER = textwrap.dedent(
    """
    import sys, time
    from ipython_compact.store import SessionStore
    from ipython_compact.store import log

    log.FTS_CHUNK = 10
    calls = 0
    real = log.entry_text

    def stalling(entry):
        global calls
        calls += 1
        if calls == 15:  # inside the second chunk's open transaction
            print("mid-index", flush=True)
            time.sleep(600)
        return real(entry)

    log.entry_text = stalling
    SessionStore(sys.argv[1]).search("common")
    """
)


def _run_until(script: str, db: Path, line: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == line, proc.stderr.read() if proc.stderr else ""
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)


def test_kill_9_mid_import_then_mid_indexing_leaves_a_consistent_log(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    _run_until(IMPORTER, db, "mid-batch")
    with SessionStore(db) as store:
        assert store.verify().ok
        assert store.get_session("s").entry_count == 20  # the two whole batches, nothing of the third
        assert store.status_get("s", FTS_PENDING) == {"ranges": [[1, 20]]}
        assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)

    _run_until(INDEXER, db, "mid-index")
    with SessionStore(db) as store:
        assert store.verify().ok
        assert store.status_get("s", FTS_PENDING) == {"ranges": [[11, 20]]}  # the first chunk landed
        hits = store.search("common", limit=100)
        assert sorted(h.entry.id for h in hits) == [f"e{i:04d}" for i in range(20)]  # each once
        assert store.status_get("s", FTS_PENDING) is None
        assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_no_pauses_when_alone_pauses_when_another_connection_is_open(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with SessionStore(db) as store:
        alone = store.import_batched("a", lambda existing: ImportPlan(_chain(30, "a"), None), batch_size=10)
        assert (alone.batches, alone.pauses) == (3, 0)
        with SessionStore(db):  # another connection of this process
            shared = store.import_batched(
                "b", lambda existing: ImportPlan(_chain(30, "b"), None), batch_size=10
            )
        assert (shared.batches, shared.pauses) == (3, 2)
        holder = subprocess.Popen(  # another process with the file open
            [
                sys.executable,
                "-c",
                f"import sqlite3, sys; c = sqlite3.connect({str(db)!r}); "
                "c.execute('SELECT 1 FROM sessions').fetchall(); print('open', flush=True); sys.stdin.read()",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "open"
        other = store.import_batched("c", lambda existing: ImportPlan(_chain(30, "c"), None), batch_size=10)
        holder.stdin.close()
        holder.wait(timeout=30)
        assert (other.batches, other.pauses) == (3, 2)
        assert store.verify().ok


def _shm_locks_of_this_process(db: Path) -> list[str]:
    st = os.stat(f"{db}-shm")
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with open("/proc/locks", encoding="ascii") as locks:
        # Without /proc/locks' first field, the line's ordinal: it moves when other processes take or
        # drop locks (a loaded machine, the suite's other tests), while this process's locks stay.
        return [
            ln.split(None, 1)[1] for ln in locks if inode in ln.split() and str(os.getpid()) in ln.split()
        ]


def test_asking_whether_others_write_keeps_sqlites_own_locks(tmp_path: Path) -> None:
    """The question must not be asked by opening ``<db>-shm``: closing that descriptor dropped
    every lock this process's SQLite held on it, and a second process's open then ran recovery
    under a live writer and failed ("database is locked", one import race in twelve)."""
    db = tmp_path / "log.db"
    with SessionStore(db) as store:
        store.ensure_session("s")
        held = _shm_locks_of_this_process(db)
        assert held  # SQLite's read lock on the deadman-switch byte, at least
        assert store.db.others_may_write() is False
        assert _shm_locks_of_this_process(db) == held


def test_export_reimport_keeps_every_column(tmp_path: Path) -> None:
    """The fast import path stores what the entry-by-entry append path stores: same data text,
    hashes, chain, estimates and derived columns."""
    transcript = load_transcript(FIXTURES / "large-session.jsonl")
    with SessionStore(tmp_path / "fast.db") as fast, SessionStore(tmp_path / "slow.db") as slow:
        import_transcript(fast, transcript, "s")
        slow.create_session("s")
        for entry in transcript.entries:  # the entry-by-entry path, one transaction each
            slow.import_entries("s", [entry], leaf_id=None)
        slow.set_leaf("s", transcript.leaf_id)
        columns = (
            "id, parent_id, kind, timestamp, data, tokens_density, tokens_chars4, depth, context_head, "
            "hash, chain, mark, compactions"
        )
        rows = [
            sqlite3.connect(p).execute(f"SELECT {columns} FROM entries ORDER BY seq").fetchall()
            for p in (tmp_path / "fast.db", tmp_path / "slow.db")
        ]
        assert len(rows[0]) == len(transcript.entries) > 100
        assert rows[0] == rows[1]
        assert fast.chain_tip("s") == slow.chain_tip("s")
        assert fast.leaf("s") == slow.leaf("s") == transcript.leaf_id
