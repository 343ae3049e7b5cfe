"""Work left behind by a killed process is settled, never shown as running forever nor lost.

A compaction in flight records its owner (host, pid, process start time, migration
``0005_work_owners``); the next process that reads live status or begins a compaction removes the
row of an owner that has ended and appends one ``compaction_outcome`` entry saying so. A summary
queued in the inbox, or taken at a turn boundary by a process that died before placing it, is
placed (or settled stale) at the next turn boundary of any process.

Real SQLite files, real subprocesses killed with SIGKILL, the real scheduler and Compactor.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ipython_compact.agent.scheduler import CompactionScheduler
from ipython_compact.agent.session_log import SessionLog
from ipython_compact.cli.demo_transcript import TranscriptGenerator
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.entries import COMPACTION, COMPACTION_OUTCOME, MESSAGE
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore
from ipython_compact.store.process import Owner, current, start_time

SETTINGS = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=400, background_tokens=500)


def run_until_ready(code: str, *args: str) -> subprocess.Popen[str]:
    """Start ``code`` in a real Python process; return once it printed ``ready``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", line
    return proc


def kill(proc: subprocess.Popen[str]) -> int:
    pid = proc.pid
    os.kill(pid, signal.SIGKILL)
    proc.wait(10)
    return pid


COMPACTING = """
import sys, time
from ipython_compact.store import SessionStore
store = SessionStore(sys.argv[1])
store.live_begin("s", "threshold-bg-1", reason="threshold", blocking=False)
print("ready", flush=True)
time.sleep(120)
"""


def test_a_compaction_whose_process_was_killed_is_settled_by_the_next_reader(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SessionStore(db) as store:
        store.create_session("s")
        store.append("s", MESSAGE, {"message": {"role": "user", "content": "hello"}})
    proc = run_until_ready(COMPACTING, str(db))
    with SessionStore(db) as store:
        assert [c.task_id for c in store.live_status("s").in_flight] == ["threshold-bg-1"]  # alive: shown
        pid = kill(proc)
        status = store.live_status("s")
        expected = f"abandoned: process {pid} on {socket.gethostname()} ended while compacting"
        assert status.in_flight == []
        assert status.last_failure is not None and status.last_failure["error"] == expected
        last = store.path("s")[-1]
        assert (last.kind, last.data["outcome"], last.data["error"], last.data["reason"]) == (
            COMPACTION_OUTCOME,
            "failed",
            expected,
            "threshold",
        )
        assert store.leaf("s") == last.id
        count = store.entry_count("s")
        store.live_status("s")  # settled once: no second outcome entry
        assert store.entry_count("s") == count
        assert store.verify().ok


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(10)
    return proc.pid


@pytest.mark.parametrize(
    ("who", "settled"),
    [
        ("this process", False),
        ("ended pid, this host", True),
        ("pid reused: running, other start time", True),
        ("ended pid, other host", False),
        ("running, start time unknown", False),
    ],
)
def test_which_owners_count_as_ended(tmp_path: Path, who: str, settled: bool) -> None:
    me = current()
    owner = {
        "this process": me,
        "ended pid, this host": Owner(me.host, _dead_pid(), "1"),
        "pid reused: running, other start time": Owner(me.host, me.pid, f"{me.started}0"),
        "ended pid, other host": Owner(me.host + "-elsewhere", _dead_pid(), "1"),
        "running, start time unknown": Owner(me.host, me.pid, None),
    }[who]
    with SessionStore(tmp_path / "s.db") as store:
        store.create_session("s")
        store.live_begin("s", "t1", reason="manual", blocking=True, owner=owner)
        in_flight = store.live_status("s").in_flight
        assert (in_flight == []) is settled
        kinds = [e.kind for e in store.path("s")]
        assert kinds == ([COMPACTION_OUTCOME] if settled else [])


def test_beginning_a_compaction_settles_an_abandoned_one_first(tmp_path: Path) -> None:
    me = current()
    with SessionStore(tmp_path / "s.db") as store:
        store.create_session("s")
        store.live_begin(
            "s", "old", reason="threshold", blocking=False, owner=Owner(me.host, _dead_pid(), "1")
        )
        store.live_begin("s", "new", reason="manual", blocking=True)
        assert [c.task_id for c in store.live_status("s").in_flight] == ["new"]
        assert store.live_status("s").in_flight[0].owner == me
        assert [e.data["task_id"] for e in store.entries("s", kinds=(COMPACTION_OUTCOME,))] == ["old"]


def test_start_time_reads_this_process() -> None:
    assert start_time(os.getpid()) is not None
    assert start_time(_dead_pid()) is None


QUEUEING = """
import sys, time
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore
store = SessionStore(sys.argv[1])
settings = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=400, background_tokens=500)
payload = Compactor(store, settings=settings).prepare("s", reason="threshold")
store.inbox_put("s", payload, first_kept_entry_id=payload["first_kept_entry_id"])
if sys.argv[2] == "taken":  # a turn boundary began in this process: it took the summary ...
    assert len(store.inbox_take("s")) == 1
print("ready", flush=True)  # ... and is killed before it places it
time.sleep(120)
"""


@pytest.mark.parametrize("state", ["pending", "taken"])
def test_a_queued_summary_of_a_killed_process_is_placed_at_the_next_turn_boundary(
    tmp_path: Path, state: str
) -> None:
    db = tmp_path / "s.db"
    with SessionStore(db) as store:
        store.create_session("s")
        gen = TranscriptGenerator(seed=3, big_output_lines=40)
        store.append_many("s", [(MESSAGE, {"message": m}) for r in gen.rounds(8) for m in r])
    proc = run_until_ready(QUEUEING, str(db), state)
    kill(proc)
    with SessionStore(db) as store:
        assert [i.state for i in store.inbox_items("s")] == [state]
        queued = store.inbox_items("s")[0].payload
        log = SessionLog(store, "s")
        sched = CompactionScheduler(
            log,
            Compactor(store, settings=SETTINGS),
            settings=lambda: SETTINGS,
            window=lambda: 100_000,
            tokens=lambda: 0,
            model_label=lambda: "p/m",
            after_place=lambda: None,
        )
        assert sched.start_turn() == 1
        compactions = store.entries("s", kinds=(COMPACTION,))
        assert [(c.data["summary"], c.data["first_kept_entry_id"]) for c in compactions] == [
            (queued["summary"], queued["first_kept_entry_id"])
        ]
        assert [i.state for i in store.inbox_items("s")] == ["taken"]
        sched.finish_turn(requested=None, aborted=False)
        assert len(store.entries("s", kinds=(COMPACTION,))) == 1  # placed once
        assert store.verify().ok


def test_an_owner_in_another_pid_namespace_of_the_same_host_name_is_never_judged_ended() -> None:
    """Red team 3, minor: a live compaction was settled as abandoned from another PID namespace
    (a container) with the same host name, because its pid was not running here."""
    from ipython_compact.store import process

    me = process.current()
    assert me.host.startswith(socket.gethostname())
    other_namespace = Owner(f"{socket.gethostname()}/pid:[1]", _dead_pid(), "1")
    assert not process.ended(other_namespace)
    assert process.ended(Owner(me.host, _dead_pid(), "1"))
    assert other_namespace.describe() == f"process {other_namespace.pid} on {socket.gethostname()}"
