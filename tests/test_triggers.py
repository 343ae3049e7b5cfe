"""Pure trigger and guard decisions of the agent loop."""

from __future__ import annotations

from typing import Any

import pytest

from ipython_compact.core.triggers import (
    EMERGENCY_AFTER,
    PreRequest,
    decide,
    decide_turn_end,
    escalation,
    in_cooldown,
    usage_is_stale,
)

BASE: dict[str, Any] = {"enabled": True, "tokens": 100, "blocking_line": 1000, "background_line": 600}


@pytest.mark.parametrize(
    ("overrides", "action", "guard"),
    [
        ({}, "none", None),
        ({"tokens": 600}, "none", None),
        ({"tokens": 601}, "background", None),
        ({"tokens": 1000}, "background", None),
        ({"tokens": 1001}, "blocking", None),
        ({"tokens": 1001, "background_line": None}, "blocking", None),
        ({"tokens": 900, "background_line": None}, "none", None),
        ({"tokens": 900, "background_line": 0}, "none", None),
        ({"tokens": 900, "background_line": 1000}, "none", None),
        ({"tokens": 5000, "enabled": False}, "none", "disabled"),
        ({"tokens": None}, "none", "unknown_size"),
        ({"blocking_line": 0, "tokens": 5}, "none", "no_window"),
        ({"tokens": 5000, "usage_stale": True}, "none", "stale_usage"),
        ({"tokens": 700, "usage_stale": True}, "none", "stale_usage"),
        ({"tokens": 5000, "compacted_this_request": True}, "none", "once_per_request"),
        ({"tokens": 5000, "in_cooldown": True}, "none", "cooldown"),
        ({"tokens": 700, "in_cooldown": True}, "none", "cooldown"),
        ({"tokens": 700, "background_in_flight": True}, "none", "in_flight"),
        # A blocking need is not vetoed by a background compaction in flight.
        ({"tokens": 5000, "background_in_flight": True}, "blocking", None),
        # Stale usage below every line is simply "none" (no guard needed).
        ({"tokens": 10, "usage_stale": True}, "none", None),
    ],
)
def test_decide(overrides: dict[str, Any], action: str, guard: str | None) -> None:
    d = decide(PreRequest(**{**BASE, **overrides}))
    assert (d.action, d.guard) == (action, guard)
    assert d.why


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"tokens": 8539, "blocking_line": 9600, "background_line": 8400}, "8,539 > background line 8,400"),
        ({"tokens": 12001, "blocking_line": 9600, "background_line": 8400}, "12,001 > blocking line 9,600"),
    ],
)
def test_the_reason_writes_its_figures_as_every_other_surface_does(
    overrides: dict[str, Any], why: str
) -> None:
    """The transcript printed "8539 > background line 8400" beside status's "8,539"."""
    assert decide(PreRequest(**{**BASE, **overrides})).why == why


@pytest.mark.parametrize(
    ("last", "now", "cool", "expected"),
    [
        (None, 100.0, 30.0, False),
        (90.0, 100.0, 30.0, True),
        (70.0, 100.0, 30.0, False),
        (99.0, 100.0, 0.0, False),
    ],
)
def test_in_cooldown(last: float | None, now: float, cool: float, expected: bool) -> None:
    assert in_cooldown(last, now, cool) is expected


@pytest.mark.parametrize(
    ("anchor", "compaction", "expected"),
    [(None, None, False), (5, None, False), (None, 5, False), (4, 5, True), (5, 5, True), (6, 5, False)],
)
def test_usage_is_stale(anchor: int | None, compaction: int | None, expected: bool) -> None:
    assert usage_is_stale(anchor, compaction) is expected


@pytest.mark.parametrize(
    ("requested", "aborted", "expected"),
    [
        (False, False, "none"),
        (False, True, "none"),
        (True, False, "run_requested"),
        (True, True, "drop_requested"),
    ],
)
def test_decide_turn_end(requested: bool, aborted: bool, expected: str) -> None:
    assert decide_turn_end(requested=requested, aborted=aborted) == expected


@pytest.mark.parametrize(
    ("failures", "kept", "emergency"),
    [
        (0, 20000, False),
        (1, 10000, False),
        (2, 5000, False),
        (3, 2500, False),
        (EMERGENCY_AFTER, 0, True),
        (9, 0, True),
    ],
)
def test_escalation(failures: int, kept: int, emergency: bool) -> None:
    e = escalation(failures, 20000)
    assert (e.keep_recent_tokens, e.emergency) == (kept, emergency)


def test_escalation_rejects_negative() -> None:
    with pytest.raises(ValueError, match="failures must be >= 0"):
        escalation(-1, 100)
