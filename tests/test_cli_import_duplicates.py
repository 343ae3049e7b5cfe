"""``import`` never silently stores a session twice, two imports of one new session never fail
with "already exists", and a large import lets other writers in between its batches.

Real ``ipython-compact`` subprocesses on real SQLite files; the race starts two at once.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ipython_compact.cli.demo_transcript import TranscriptGenerator
from ipython_compact.core.entries import Entry
from ipython_compact.store import PartialImportError, SessionStore
from ipython_compact.store.exporters import export_text
from ipython_compact.store.log import Existing, ImportPlan

FIXTURES = Path(__file__).parent / "fixtures" / "pi"
BEFORE = FIXTURES / "before-compaction.jsonl"
LARGE = FIXTURES / "large-session.jsonl"
SCRIPT = Path(sys.executable).parent / "ipython-compact"


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), "--db", str(db), *args], capture_output=True, text=True, timeout=300)


def digest(db: Path) -> str:
    with SessionStore(db) as store:
        rows = [(s.name, s.entry_count, s.leaf_id) for s in store.sessions()]
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def export_of(db: Path, session: str, out: Path) -> Path:
    with SessionStore(db) as store:
        out.write_text(export_text(store, session), encoding="utf-8")
    return out


def generated_export(tmp_path: Path, name: str, entries: int, seed: int) -> Path:
    """Our JSONL export of a generated linear session of ``entries`` messages."""
    gen = TranscriptGenerator(seed=seed, big_output_lines=20)
    messages = []
    while len(messages) < entries:
        messages.extend(gen.next_round())
    with SessionStore(tmp_path / f"{name}.src.db") as store:
        store.create_session(name)
        store.append_many(name, [("message", {"message": m}) for m in messages[:entries]])
        out = tmp_path / f"{name}.jsonl"
        out.write_text(export_text(store, name), encoding="utf-8")
    return out


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "same pi file twice",
            "1,002 of 1,002 entries are already in session 'a' (1,002 under the same id, 0 with",
        ),
        (
            "export back into its own session",
            "1,002 of 1,002 entries are already in session 'a' (1,002 under the same id",
        ),
        (
            "the same entries under other ids",
            "1,000 of 1,002 entries are already in session 'a' (0 under the same id, 1,000 with the same "
            "content under",
        ),
    ],
)
def test_entries_already_in_the_session_are_refused_and_nothing_is_written(
    tmp_path: Path, case: str, expected: str
) -> None:
    db = tmp_path / "s.db"
    assert cli(db, "import", str(BEFORE), "-s", "a").returncode == 0
    source = BEFORE
    if case == "export back into its own session":
        source = export_of(db, "a", tmp_path / "a.jsonl")
    elif case == "the same entries under other ids":
        other = tmp_path / "other.db"
        assert cli(other, "import", str(BEFORE), "-s", "b", "--new-ids").returncode == 0
        source = export_of(other, "b", tmp_path / "b.jsonl")
    before = digest(db)
    done = cli(db, "import", str(source), "-s", "a")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("ipython-compact: error: ") and expected in lines[0], lines[0]
    assert lines[0].endswith("importing would store them twice, so nothing was written")
    assert lines[1] == (
        f"  try: to store them again as copies under fresh ids: ipython-compact import "
        f"{source} -s a --new-ids"
        "   (or import into another session: -s a-2)"
    )
    assert done.stdout == ""
    assert digest(db) == before


def test_new_ids_stores_a_relinked_copy_after_the_leaf(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    assert cli(db, "import", str(BEFORE), "-s", "a").returncode == 0
    with SessionStore(db) as store:
        first = store.path("a")
    done = cli(db, "import", str(BEFORE), "-s", "a", "--new-ids")
    assert done.returncode == 0, done.stderr
    with SessionStore(db) as store:
        path = store.path("a")
        assert store.verify().ok
    copy = path[len(first) :]
    assert len(copy) == len(first) and copy[0].parent_id == first[-1].id
    assert not {e.id for e in copy} & {e.id for e in first}
    assert [(e.kind, e.timestamp, e.data.get("message")) for e in copy] == [
        (e.kind, e.timestamp, e.data.get("message")) for e in first
    ]
    fresh = {old.id: new.id for old, new in zip(first, copy, strict=True)}
    compaction = next(e for e in copy if e.kind == "compaction")
    original = next(e for e in first if e.kind == "compaction")
    assert compaction.data["first_kept_entry_id"] == fresh[original.data["first_kept_entry_id"]]


def _race(db: Path, first: Path, second: Path) -> list[subprocess.CompletedProcess[str]]:
    procs = [
        subprocess.Popen(
            [str(SCRIPT), "--db", str(db), "import", str(f), "-s", "new", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for f in (first, second)
    ]
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        out.append(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
    return out


def test_two_imports_creating_one_session_at_once_identical_content(tmp_path: Path) -> None:
    for round_ in range(3):  # the race is real: repeat it so the overlap happens
        db = tmp_path / f"r{round_}.db"
        done = _race(db, LARGE, LARGE)
        assert sorted(d.returncode for d in done) == [0, 2], [d.stderr for d in done]
        refused = next(d for d in done if d.returncode == 2)
        assert "already exists" not in refused.stderr
        assert "1,018 of 1,018 entries are already in session 'new'" in refused.stderr
        with SessionStore(db) as store:
            assert store.entry_count("new") == 1018 and store.verify().ok


@pytest.mark.slow
def test_two_imports_creating_one_session_at_once_different_content(tmp_path: Path) -> None:
    """Files over one batch (2,000 entries): the second waits for the whole first import, then
    appends after its leaf."""
    one = generated_export(tmp_path, "one", 3000, seed=1)
    two = generated_export(tmp_path, "two", 2500, seed=2)
    for round_ in range(2):
        db = tmp_path / f"r{round_}.db"
        done = _race(db, one, two)
        assert [d.returncode for d in done] == [0, 0], [d.stderr for d in done]
        import json

        results = [json.loads(d.stdout) for d in done]
        assert sorted(r["created"] for r in results) == [False, True]
        with SessionStore(db) as store:
            entries = store.entries("new")
            assert len(entries) == 5500 and store.verify().ok
            roots = [e for e in entries if e.parent_id is None]
            assert len(roots) == 1  # the later import hangs under the earlier one's leaf
            later = next(r for r in results if not r["created"])
            assert store.leaf("new") == later["leaf_id"]
            assert len(store.path("new")) == 5500


@pytest.mark.slow
def test_a_large_import_lets_other_writers_in_between_its_batches(tmp_path: Path) -> None:
    source = generated_export(tmp_path, "big", 16000, seed=5)
    db = tmp_path / "s.db"
    with SessionStore(db) as store:
        store.create_session("other")
    proc = subprocess.Popen(
        [str(SCRIPT), "--db", str(db), "import", str(source), "-s", "big", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    appended = 0
    # The writer waits as long as it must (a batch can outlast a second on a loaded machine); that it
    # got in between the batches is read from the log's order below, not from its patience.
    with SessionStore(db, busy_timeout=60.0) as writer:
        while proc.poll() is None:
            writer.append("other", "custom", {"custom_type": "tick", "data": {"n": appended}})
            appended += 1
            time.sleep(0.02)
        stdout, stderr = proc.communicate()
        assert proc.returncode == 0, stderr
        assert '"batches": 8' in stdout
        conn = writer._conn
        seqs = [
            r[0]
            for r in conn.execute(
                "SELECT e.seq FROM entries e JOIN sessions s USING (session_id) WHERE s.name = 'other' ORDER "
                "BY "
                "e.seq"
            )
        ]
        first, last = conn.execute(
            "SELECT MIN(seq), MAX(seq) FROM entries e JOIN sessions s USING (session_id) WHERE s.name = 'big'"
        ).fetchone()
        assert any(first < seq < last for seq in seqs), "no append got in while the import ran"
        assert writer.verify().ok


def _entries(n: int) -> list[Entry]:
    out = []
    for i in range(n):
        out.append(
            Entry(
                f"e{i}",
                f"e{i - 1}" if i else None,
                "message",
                f"2026-01-01T00:00:{i:06d}Z",
                {"message": {"role": "user", "content": f"m{i}"}},
            )
        )
    return out


def test_an_import_failing_midway_says_exactly_what_was_written(tmp_path: Path) -> None:
    entries = _entries(50)
    e25 = entries[25]
    broken = [*entries[:25], Entry("e25", "missing", e25.kind, e25.timestamp, e25.data), *entries[26:]]
    with SessionStore(tmp_path / "s.db") as store:
        store.create_session("s")
        store.append("s", "message", {"message": {"role": "user", "content": "before"}})
        leaf = store.leaf("s")

        def plan(existing: Existing) -> ImportPlan:
            return ImportPlan(broken, broken[-1].id)

        with pytest.raises(PartialImportError) as info:
            store.import_batched("s", plan, batch_size=10)
        err = info.value
        assert (err.written, err.total, err.last_id, err.leaf) == (20, 50, "e19", leaf)
        assert str(err).startswith(
            f"{store.db_path}: the import into session 's' stopped after 20 of 50 "
            f"entries "
            f"(2 transaction(s) committed, the last written entry is 'e19'); the "
            f"session's leaf "
            f"is still {leaf!r}"
        )
        assert "parent 'missing' does not exist" in str(err)
        assert store.entry_count("s") == 21 and store.leaf("s") == leaf and store.verify().ok
        # the marker went with the failure: the next import is not kept waiting (wait=0: a marker
        # left behind would refuse it at once, so no seconds are measured)
        one = Entry("x", None, e25.kind, "2026-02-02T00:00:00Z", e25.data)
        store.import_batched("s", lambda existing: ImportPlan([one], "x"), batch_size=10, wait=0)


def test_duplicates_are_refused_for_the_kernel_import_too(tmp_path: Path) -> None:
    from ipython_compact.store import DuplicateImportError
    from ipython_compact.store.importers import import_file

    with SessionStore(tmp_path / "s.db") as store:
        import_file(store, BEFORE, session="a")
        with pytest.raises(DuplicateImportError) as info:
            import_file(store, BEFORE, session="a")
        assert (info.value.duplicates, info.value.same_id, info.value.total) == (1002, 1002, 1002)


if os.environ.get("IPYTHON_COMPACT_NO_SUBPROCESS"):  # pragma: no cover
    pytest.skip("subprocesses disabled", allow_module_level=True)


def test_an_import_waits_for_a_write_lock_held_longer_than_its_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI failure (loaded machine): the other import's first transaction held the write lock past
    the busy timeout, and the second import failed with "database is locked" instead of waiting."""
    import sqlite3
    import threading

    from ipython_compact.store import log as log_module

    db = tmp_path / "s.db"
    with SessionStore(db) as store:
        store.create_session("other")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    retried = threading.Event()
    real_sleep = time.sleep
    outcome: list[object] = []
    entries = [
        Entry(
            f"e{i}",
            f"e{i - 1}" if i else None,
            "message",
            "2026-01-01T00:00:00.000Z",
            {"message": {"role": "user", "content": f"m{i}"}},
        )
        for i in range(3)
    ]

    def sleep(seconds: float) -> None:
        retried.set()
        real_sleep(seconds)

    def run() -> None:
        try:
            with SessionStore(db, busy_timeout=0.05) as store:
                outcome.append(
                    store.import_batched("new", lambda existing: ImportPlan(entries, "e2"), wait=60)
                )
        except Exception as exc:  # the thread reports what happened; the test asserts on it
            outcome.append(exc)

    monkeypatch.setattr(log_module.time, "sleep", sleep)
    worker = threading.Thread(target=run)
    worker.start()
    while not retried.wait(0.05) and worker.is_alive():  # the import retries, or it already gave up
        pass
    holder.execute("ROLLBACK")
    holder.close()
    worker.join()
    assert retried.is_set(), outcome
    assert len(outcome) == 1 and not isinstance(outcome[0], Exception), outcome
    with SessionStore(db) as store:
        assert store.entry_count("new") == 3
