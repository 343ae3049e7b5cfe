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
import time
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
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLD), str(db), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KernelService:
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    svc = KernelService(SimpleNamespace(user_ns={}, user_ns_hidden={}, kernel=None), CompactConfig(session="k"))
    db = svc.store.db_path
    svc.store.close()
    svc._store = SessionStore(db, busy_timeout=0.2)  # each try gives up after 0.2 s
    return svc


def _file_ops(service: KernelService) -> list[dict[str, object]]:
    return [e.data for e in service.store.entries("k", kinds=(CUSTOM,)) if e.data.get("custom_type") == FILE_OPS_TYPE]


@pytest.mark.parametrize(
    ("held", "budget", "lands"),
    [
        (1.0, 8.0, True),  # the lock goes away within the budget: the entries are written, in order
        (2.0, 0.6, False),  # it outlasts the budget: reported, never silent
    ],
)
def test_a_locked_database_queues_bookkeeping_appends_or_reports_them(
    service: KernelService, caplog: pytest.LogCaptureFixture, held: float, budget: float, lands: bool
) -> None:
    service.bookkeeping.retry_seconds = budget
    first = {"read": ["/data/in.csv"], "modified": [], "by": "user"}
    second = {"read": [], "modified": ["/data/out.csv"], "by": "user"}
    proc = hold_lock(service.store.db_path, held)
    try:
        with caplog.at_level(logging.WARNING, logger="ipython_compact"):
            started = time.monotonic()
            assert service.append_or_report(CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": first}) is None
            assert service.append_or_report(CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": second}) is None
            returned_after = time.monotonic() - started
            assert service.bookkeeping.pending == 2  # queued, not dropped
            assert service.bookkeeping.wait(30)
    finally:
        proc.wait(30)
    assert returned_after < held  # the cell was not held up until the lock went away
    written = [{"custom_type": FILE_OPS_TYPE, "data": d} for d in (first, second)]
    assert _file_ops(service) == (written if lands else [])
    problem = service.status()["problem"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if lands:
        assert problem is None and warnings == []
    else:
        expected = "2 log entries could not be written to session 'k' (last: a custom entry: "
        assert problem is not None and problem.startswith(expected) and "database is locked" in problem
        assert len(warnings) == 1 and expected in warnings[0]
