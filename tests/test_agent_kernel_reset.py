"""The kernel-restart budget and the notice the model reads after a restart (pure, table-driven)."""

from __future__ import annotations

import pytest

from ipython_compact.agent.events import AgentEvent, summarize_event
from ipython_compact.agent.kernel_reset import budget_exhausted, reset_notice, restart_budget, restart_failed


@pytest.mark.parametrize(
    ("times", "now", "allowed", "recent"),
    [
        ([], 100.0, True, []),
        ([10.0, 20.0], 100.0, True, [10.0, 20.0]),
        ([10.0, 20.0, 30.0], 100.0, False, [10.0, 20.0, 30.0]),
        ([10.0, 20.0, 30.0], 3615.0, True, [20.0, 30.0]),  # the oldest left the one-hour window
        ([0.0, 1.0, 2.0], 5000.0, True, []),
    ],
)
def test_restart_budget(times: list[float], now: float, allowed: bool, recent: list[float]) -> None:
    assert restart_budget(times, now, 3, 3600.0) == (allowed, recent)


@pytest.mark.parametrize(
    ("snapshots", "restored", "failed", "present", "absent"),
    [
        (
            True,
            ["x", "df"],
            [],
            ["Restored from the last snapshot: df, x."],
            ["Could not be restored", "No snapshot"],
        ),
        (True, [], [], ["Nothing was restored from a snapshot"], ["Restored from"]),
        (
            True,
            ["x"],
            [("model", "TypeError: cannot pickle")],
            ["Could not be restored: model (TypeError: cannot pickle)."],
            [],
        ),
        (False, [], [], ["No snapshot is configured"], ["Restored from"]),
    ],
)
def test_reset_notice(
    snapshots: bool, restored: list[str], failed: list[tuple[str, str]], present: list[str], absent: list[str]
) -> None:
    text = reset_notice(
        "the kernel died",
        number=2,
        max_restarts=3,
        window_seconds=3600,
        snapshots=snapshots,
        restored=restored,
        failed=failed,
    )
    assert text.startswith(
        "<ipython_kernel_reset>\nThe Python kernel stopped (the kernel died) and was "
        "restarted (restart 2 of 3"
    )
    assert text.endswith("must be recreated.\n</ipython_kernel_reset>")
    assert all(p in text for p in present) and not any(a in text for a in absent)


def test_stop_messages_say_why() -> None:
    assert "restart budget (3 restarts per 3600 s) is used up" in budget_exhausted("it died", 3, 3600)
    assert restart_failed("it died", "OSError: no such kernel") == (
        "The Python kernel stopped (it died) and could not be restarted (OSError: no such kernel); stopping."
    )


@pytest.mark.parametrize(
    ("event", "line"),
    [
        (AgentEvent("turn_end"), "[turn_end]"),
        (AgentEvent("user", "hi"), "[user] hi"),
        (AgentEvent("tool_result", "x" * 400), "[tool_result] " + "x" * 297 + "..."),
    ],
)
def test_summarize_event(event: AgentEvent, line: str) -> None:
    assert summarize_event(event) == line
