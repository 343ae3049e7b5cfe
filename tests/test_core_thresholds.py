"""Threshold lines and the none/background/blocking decision (pi's shouldCompact cases included)."""

from __future__ import annotations

import pytest

from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.thresholds import Lines, decide, threshold_lines


@pytest.mark.parametrize(
    ("tokens", "window", "settings", "expected"),
    [
        # pi's shouldCompact table (no background line)
        (95000, 100000, CompactionSettings(reserve_tokens=10000, background_tokens=0), "blocking"),
        (89000, 100000, CompactionSettings(reserve_tokens=10000, background_tokens=0), "none"),
        (95000, 100000, CompactionSettings(reserve_tokens=10000, enabled=False), "none"),
        # strict comparison at the line
        (90000, 100000, CompactionSettings(reserve_tokens=10000, background_tokens=0), "none"),
        (90001, 100000, CompactionSettings(reserve_tokens=10000, background_tokens=0), "blocking"),
        # background line below the blocking line
        (89000, 100000, CompactionSettings(reserve_tokens=10000), "background"),
        (57232, 100000, CompactionSettings(reserve_tokens=10000), "none"),
        (57233, 100000, CompactionSettings(reserve_tokens=10000), "background"),
        # Prime's ratio
        (80001, 100000, CompactionSettings(trigger_ratio=0.8, background_tokens=0), "blocking"),
        (80000, 100000, CompactionSettings(trigger_ratio=0.8, background_tokens=0), "none"),
    ],
)
def test_decide(tokens: int, window: int, settings: CompactionSettings, expected: str) -> None:
    assert decide(tokens, window, settings) == expected


@pytest.mark.parametrize(
    ("window", "settings", "expected"),
    [
        (200000, CompactionSettings(), Lines(183616, 150848)),
        (200000, CompactionSettings(background_tokens=0), Lines(183616, None)),
        (40000, CompactionSettings(), Lines(23616, None)),  # background line would be below zero
        (100000, CompactionSettings(trigger_ratio=0.8), Lines(80000, 47232)),
        (100000, CompactionSettings(trigger_ratio=0.95), Lines(83616, 50848)),  # window - reserve is lower
        (1000003, CompactionSettings(trigger_ratio=0.5, background_tokens=0), Lines(500001, None)),  # floor
    ],
)
def test_threshold_lines(window: int, settings: CompactionSettings, expected: Lines) -> None:
    assert threshold_lines(window, settings) == expected


@pytest.mark.parametrize(
    ("window", "message"),
    [(16384, "not larger than reserve_tokens"), (0, "positive integer"), (-5, "positive")],
)
def test_impossible_windows_are_errors(window: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        threshold_lines(window, CompactionSettings())
