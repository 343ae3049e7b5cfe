"""The kernel's bookkeeping appends (snapshot records, a cell's file operations) never vanish
silently and never hold up the next cell: while another process holds the database's write lock
they are queued and retried with backoff on a thread, in order; when the lock outlasts the retry
budget they log a warning and put a problem line in ``status``.

A real ``KernelService`` on a real SQLite file; the lock is held by a real second process.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from ipython_compact.core.entries import CUSTOM
from ipython_compact.kernel.config import CompactConfig
from ipython_compact.kernel.service import FILE_OPS_TYPE, KernelService
from ipython_compact.store import SessionStore

HOLD = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("ready", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def hold_lock(db: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLD), str(db), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KernelService:
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    svc = KernelService(
        SimpleNamespace(user_ns={}, user_ns_hidden={}, kernel=None), CompactConfig(session="k")
    )
    db = svc.store.db_path
    svc.store.close()
    svc._store = SessionStore(db, busy_timeout=0.2)  # each try gives up after 0.2 s
    return svc


def _file_ops(service: KernelService) -> list[dict[str, object]]:
    return [
        e.data
        for e in service.store.entries("k", kinds=(CUSTOM,))
        if e.data.get("custom_type") == FILE_OPS_TYPE
    ]


def test_a_locked_database_queues_bookkeeping_appends_and_they_land_in_order(
    service: KernelService, caplog: pytest.LogCaptureFixture
) -> None:
    service.bookkeeping.retry_seconds = 60.0
    first = {"read": ["/data/in.csv"], "modified": [], "by": "user"}
    second = {"read": [], "modified": ["/data/out.csv"], "by": "user"}
    proc = hold_lock(service.store.db_path, 1.0)
    try:
        with caplog.at_level(logging.WARNING, logger="ipython_compact"):
            assert service.append_or_report(CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": first}) is None
            assert service.append_or_report(CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": second}) is None
            assert service.bookkeeping.pending == 2  # journaled, not dropped
            assert service.bookkeeping.wait(60)
    finally:
        proc.wait(30)
    written = [{"custom_type": FILE_OPS_TYPE, "data": d} for d in (first, second)]
    assert _file_ops(service) == written
    assert service.status()["problem"] is None and service.status()["bookkeeping_pending"] == 0
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == []


RELEASE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("ready", flush=True)
sys.stdin.readline()  # held until the test says so: no clock
conn.execute("COMMIT")
"""


def hold_until_released(db: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(RELEASE), str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.wait(30) == 0


def test_appends_that_outlast_the_retry_budget_wait_on_disk_and_the_next_write_lands_them_first(
    service: KernelService, caplog: pytest.LogCaptureFixture
) -> None:
    """Red team 3, item 4: after the retry budget 5 of 8 were dropped while locked. Now nothing is
    dropped: status says they wait, and the next write lands them first, in order."""
    service.bookkeeping.retry_seconds = 0.3
    proc = hold_until_released(service.store.db_path)
    try:
        with caplog.at_level(logging.WARNING, logger="ipython_compact"):
            for i in range(8):
                service.append_or_report(CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": {"n": i}})
            assert not service.bookkeeping.wait(60)  # the budget ran out while locked
        status = service.status()
        assert status["bookkeeping_pending"] == 8
        assert "8 log entries wait in" in status["problem"] and "nothing is lost" in status["problem"]
        assert any("8 log entries wait" in r.getMessage() for r in caplog.records)
    finally:
        release(proc)
    service.append_or_report(CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": {"n": 8}})
    assert service.bookkeeping.wait(60)
    assert [d["data"] for d in _file_ops(service)] == [{"n": i} for i in range(9)]
    assert service.status()["bookkeeping_pending"] == 0 and service.status()["problem"] is None


def test_appends_journaled_by_a_kernel_that_ended_are_written_by_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team 3, item 4: queued appends died with the kernel (0 of 4 written at shutdown). The
    journal outlives the process; the next kernel on the database replays it."""
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    first = KernelService(
        SimpleNamespace(user_ns={}, user_ns_hidden={}, kernel=None), CompactConfig(session="k")
    )
    db = first.store.db_path
    first.store.close()
    first._store = SessionStore(db, busy_timeout=0.1)
    first.bookkeeping.retry_seconds = 0.0
    proc = hold_until_released(db)
    try:
        for i in range(4):
            first.append_or_report(CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": {"n": i}})
        first.bookkeeping.wait(60)
        assert first.bookkeeping.pending == 4
    finally:
        release(proc)
    first.store.close()  # the kernel ends here, its thread and memory with it
    second = KernelService(
        SimpleNamespace(user_ns={}, user_ns_hidden={}, kernel=None), CompactConfig(session="k")
    )
    assert second.store.db_path == db  # opening the store starts the replay
    assert second.bookkeeping.wait(60)
    assert [d["data"] for d in _file_ops(second)] == [{"n": i} for i in range(4)]
    assert not (db.parent / (db.name + ".pending")).exists()


def test_a_replay_that_runs_twice_appends_nothing_twice(service: KernelService) -> None:
    """Each journaled append carries its entry id: a replayer killed after landing a record but
    before removing it from the journal does no harm when the record is replayed again."""
    from ipython_compact.store.pending import PendingJournal

    record = {
        "op": "append",
        "session": "k",
        "kind": CUSTOM,
        "timestamp": "2026-01-01T00:00:00Z",
        "entry_id": "feedf00d",
        "data": {"custom_type": FILE_OPS_TYPE, "data": {"n": 1}},
    }
    service._apply_record(record)
    PendingJournal(service.store.db_path).add(record)
    service.bookkeeping.start()
    assert service.bookkeeping.wait(60)
    assert [d["data"] for d in _file_ops(service)] == [{"n": 1}]


def test_a_snapshot_digest_recorded_while_locked_still_guards_against_rollback(
    service: KernelService,
) -> None:
    """Red team 3, item 4: two generations' digests were lost while the database was locked. A
    journaled digest counts as recorded at once, and lands later."""
    from ipython_compact.kernel.service import LogLedger

    ledger = LogLedger(service)
    service.bookkeeping.retry_seconds = 0.0
    proc = hold_until_released(service.store.db_path)
    try:
        ledger.record(7, "ab" * 32)
        service.bookkeeping.wait(60)
        assert ledger.recorded() == {7: "ab" * 32}
    finally:
        release(proc)
    service.bookkeeping.start()
    assert service.bookkeeping.wait(60)
    assert service.store.status_get("k", LogLedger.KEY, {}) == {"7": "ab" * 32}
