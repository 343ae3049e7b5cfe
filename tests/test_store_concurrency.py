"""The session log under real processes: concurrent appenders, a killed writer, a locked or
corrupt database file. Tests taking ``location`` run on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ipython_compact.store import CorruptDatabaseError, DatabaseLockedError, SessionStore

APPENDER = textwrap.dedent(
    """
    import sys
    from ipython_compact.store import SessionStore
    path, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SessionStore(path, busy_timeout=30)
    store.ensure_session("shared")
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    for i in range(count):
        store.append("shared", "message", {"message": {"role": "user", "content": f"{tag} {i}"}})
    store.close()
    """
)

BATCH_WRITER = textwrap.dedent(
    """
    import sys
    from ipython_compact.store import SessionStore
    store = SessionStore(sys.argv[1], busy_timeout=30)
    store.ensure_session("batches")
    payload = "x" * 20000
    n = 0
    while True:
        items = [
            ("message", {"message": {"role": "user", "content": f"{n} {j} {payload}"}}) for j in range(50)
        ]
        store.append_many("batches", items)
        n += 1
        print(n, flush=True)
    """
)


def _spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_processes_appending_lose_nothing(location: str | Path) -> None:
    db = location
    SessionStore(db).close()
    procs = [_spawn(APPENDER, str(db), tag, "150") for tag in ("alpha", "beta")]
    for p in procs:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with SessionStore(db) as store:
        path = store.path("shared")
        texts = [e.data["message"]["content"] for e in path]
        assert len(path) == 300  # one linear chain: every append saw the other's leaf
        assert sorted(texts) == sorted([f"alpha {i}" for i in range(150)] + [f"beta {i}" for i in range(150)])
        assert [t for t in texts if t.startswith("alpha")] == [f"alpha {i}" for i in range(150)]
        assert store.verify().ok


def test_killed_writer_never_leaves_a_partial_batch(location: str | Path) -> None:
    db = location
    committed_seen = []
    for round_ in range(3):
        proc = _spawn(BATCH_WRITER, str(db))
        assert proc.stdout is not None
        # Let it commit a few batches, then kill it at an arbitrary point inside the next one.
        for _ in range(2 + round_):
            committed_seen.append(int(proc.stdout.readline()))
        time.sleep(0.013 * (round_ + 1))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            assert stream is not None
            stream.close()
        with SessionStore(db) as store:
            count = store.get_session("batches").entry_count
            assert len(store.entries("batches")) == count
            assert count % 50 == 0
            report = store.verify()
            assert report.ok, report.problems
    assert committed_seen


STALLING_WRITER = textwrap.dedent(
    """
    import itertools, sys, time
    from ipython_compact.store import SessionStore
    counter = itertools.count()

    def new_id():
        n = next(counter)
        if n == 75:  # 25 rows into the second batch, inside its open transaction
            print("mid-batch", flush=True)
            time.sleep(600)
        return f"id{n:05d}"

    store = SessionStore(sys.argv[1], new_id=new_id)
    store.ensure_session("s")
    for batch in range(3):
        batch_items = [
            ("message", {"message": {"role": "user", "content": f"{batch}-{j}"}}) for j in range(50)
        ]
        store.append_many("s", batch_items)
        print("committed", batch, flush=True)
    """
)


def test_writer_killed_inside_a_transaction_leaves_only_whole_batches(location: str | Path) -> None:
    db = location
    proc = _spawn(STALLING_WRITER, str(db))
    assert proc.stdout is not None
    assert proc.stdout.readline().split() == ["committed", "0"]
    assert proc.stdout.readline().strip() == "mid-batch"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    with SessionStore(db) as store:
        texts = [e.data["message"]["content"] for e in store.path("s")]
        assert texts == [f"0-{j}" for j in range(50)]
        assert store.get_session("s").entry_count == 50
        assert store.verify().ok
        store.append("s", "message", {"message": {"role": "user", "content": "life goes on"}})
        assert store.verify().ok


def test_threads_sharing_one_store_lose_nothing(location: str | Path) -> None:
    with SessionStore(location) as store:
        store.create_session("s")

        def work(tag: str) -> None:
            for i in range(60):
                store.append("s", "message", {"message": {"role": "user", "content": f"{tag} {i}"}})
                store.context_view("s")

        threads = [threading.Thread(target=work, args=(f"t{n}",)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        path = store.path("s")
        assert len(path) == 240
        assert sorted(e.data["message"]["content"] for e in path) == sorted(
            f"t{n} {i}" for n in range(4) for i in range(60)
        )
        assert store.verify().ok


def test_locked_database_gives_a_clear_error_naming_the_file(tmp_path: Path) -> None:
    db = tmp_path / "locked.db"
    store = SessionStore(db, busy_timeout=0.2)
    store.create_session("s")
    holder = _spawn(
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.readline()\n",
        str(db),
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(DatabaseLockedError, match=r"locked\.db.*locked"):
            store.append("s", "message", {"message": {"role": "user", "content": "x"}})
        # Readers are not blocked: a new store opens an up-to-date database and reads it.
        with SessionStore(db, busy_timeout=0.2) as reader:
            assert [s.name for s in reader.sessions()] == ["s"]
            assert reader.context_path("s") == []
    finally:
        holder.communicate("done\n", timeout=10)
    # Once the lock is gone the same store works and nothing half-written is there.
    store.append("s", "message", {"message": {"role": "user", "content": "after"}})
    assert len(store.entries("s")) == 1
    assert store.verify().ok
    store.close()


def test_file_that_is_not_a_database(tmp_path: Path) -> None:
    db = tmp_path / "notes.db"
    db.write_bytes(b"this is a text file, not SQLite\n" * 200)
    with pytest.raises(CorruptDatabaseError, match=r"notes\.db.*not a usable ipython-compact database"):
        SessionStore(db)
    assert db.read_bytes() == b"this is a text file, not SQLite\n" * 200  # untouched


def test_database_with_damaged_pages(tmp_path: Path) -> None:
    db = tmp_path / "damaged.db"
    with SessionStore(db) as store:
        store.create_session("s")
        store.append_many(
            "s", [("message", {"message": {"role": "user", "content": f"m{i} " * 300}}) for i in range(200)]
        )
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    raw = bytearray(db.read_bytes())
    for offset in range(4096, len(raw), 4096):  # scribble over the b-tree page headers
        raw[offset : offset + 64] = b"\xff" * 64
    db.write_bytes(bytes(raw))
    with pytest.raises(CorruptDatabaseError, match=r"damaged\.db"), SessionStore(db) as store:
        store.entries("s")
        store.verify()
