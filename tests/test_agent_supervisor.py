"""The kernel supervisor on its own: a fake kernel and a fake clock.

Restarts, the budget, snapshots and the notice follow from what the kernel reports; a kernel
whose questions raise never breaks the caller.
"""

from __future__ import annotations

from typing import Any

import pytest

from ipython_compact.agent.kernel_tool import ExecResult
from ipython_compact.agent.supervisor import KernelSupervisor


class FakeKernel:
    def __init__(self) -> None:
        self.alive = True
        self.calls: list[str] = []
        self.results: list[ExecResult] = []
        self.snapshots = 0
        self.restore_report: dict[str, Any] | None = {
            "restored": ["x"],
            "failed": [["conn", "not picklable"]],
        }
        self.restart_error: Exception | None = None
        self.names: list[str] | None = ["x", "df"]
        self.probe_error = False

    def execute(self, code: str, timeout: float | None = None) -> ExecResult:
        self.calls.append(f"execute:{code}:{timeout}")
        return self.results.pop(0) if self.results else ExecResult("ok", "", 0.0)

    def interrupt(self) -> None:
        self.calls.append("interrupt")

    def is_alive(self) -> bool:
        return self.alive

    def probe_names(self) -> list[str] | None:
        if self.probe_error:
            raise RuntimeError("probe broke")
        return self.names

    def begin_turn(self) -> None:
        self.calls.append("begin_turn")

    def end_turn(self) -> None:
        raise RuntimeError("kernel gone")

    def take_compaction_request(self) -> dict[str, Any] | None:
        raise RuntimeError("kernel gone")

    def restart(self) -> None:
        self.calls.append("restart")
        if self.restart_error is not None:
            raise self.restart_error
        self.alive = True

    def snapshot(self, directory: str) -> dict[str, Any] | None:
        self.snapshots += 1
        return {"ok": True, "saved": ["x"], "skipped": [["conn", "not picklable"]]}

    def restore(self, directory: str) -> dict[str, Any] | None:
        return self.restore_report


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _sup(kernel: FakeKernel, clock: Clock | None = None, **kw: Any) -> KernelSupervisor:
    return KernelSupervisor(kernel, clock=clock or Clock(), **kw)


@pytest.mark.parametrize(
    ("status", "snapshot_dir", "snapshots"), [("ok", "d", 1), ("error", "d", 0), ("ok", None, 0)]
)
def test_a_clean_cell_is_snapshotted_when_configured(
    status: str, snapshot_dir: str | None, snapshots: int
) -> None:
    k = FakeKernel()
    k.results = [ExecResult(status, "out", 0.1)]  # type: ignore[arg-type]
    sup = _sup(k, snapshot_dir=snapshot_dir, tool_timeout=7.0)
    assert sup.execute("x = 1").text == "out"
    assert k.calls == ["execute:x = 1:7.0"] and k.snapshots == snapshots
    outcome = sup.last_snapshot
    assert (outcome is not None and outcome.skipped == (("conn", "not picklable"),)) is (snapshots == 1)


def test_a_restart_restores_reopens_the_turn_runs_hooks_and_says_what_came_back() -> None:
    k = FakeKernel()
    sup = _sup(k, snapshot_dir="d")
    hooked: list[str] = []
    sup.after_restart.append(lambda: hooked.append("bridge"))
    sup.begin_turn()
    k.alive = False
    reset = sup.recover("the kernel died")
    assert not reset.stopped and reset.restored == ("x",)
    assert "Restored from the last snapshot: x." in reset.text and "conn (not picklable)" in reset.text
    assert k.calls == ["begin_turn", "restart", "begin_turn"] and hooked == ["bridge"] and sup.restarts == 1


def test_no_turn_open_means_no_turn_marker_after_a_restart() -> None:
    k = FakeKernel()
    sup = _sup(k)
    assert not sup.recover("died").stopped
    assert k.calls == ["restart"]
    assert "No snapshot is configured" in sup.recover("died again").text


def test_the_budget_counts_restarts_inside_the_window() -> None:
    k, clock = FakeKernel(), Clock()
    sup = _sup(k, clock, max_restarts=2, restart_window_seconds=100.0)
    assert [sup.recover("d").stopped for _ in range(3)] == [False, False, True]
    assert "restart budget (2 restarts per 100 s) is used up" in sup.recover("d").text
    clock.now = 150.0  # the old restarts left the window
    assert sup.recover("d").stopped is False and sup.restarts == 3


def test_a_failed_restart_stops_with_the_error() -> None:
    k = FakeKernel()
    k.restart_error = OSError("no ports")
    reset = _sup(k).recover("died")
    assert reset.stopped and "could not be restarted (OSError: no ports)" in reset.text


def test_the_notice_comes_from_a_live_probe_and_says_nothing_for_a_dead_kernel() -> None:
    k = FakeKernel()
    notice = _sup(k).notice()
    assert notice is not None and "These names are still defined: df, x." in notice
    k.alive = False
    assert _sup(k).notice() is None  # nothing true can be said about a dead kernel


def test_kernel_questions_that_raise_never_reach_the_caller() -> None:
    k = FakeKernel()
    k.probe_error = True
    sup = _sup(k)
    sup.end_turn()
    assert sup.take_request() is None
    notice = sup.notice()
    assert notice is not None and "could not be listed" in notice
