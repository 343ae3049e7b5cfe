"""The held-out set (issue 32) as a test: each frozen story (``tests/fidelity/heldout/``, written
blind) goes through 30 rolling compactions with the offline summarizer and with an ideal scripted
model (``bench/ideal_model.py`` through the real ``openai`` client against ``testing.ModelServer``);
the final context is scored by the set's own frozen ``score.py``.

Two tests: the figures reached so far may not regress (a floor, measured on this branch; see
``tests/fidelity/RESULTS.md``), and the issue's goals, marked xfail (strict) until they hold.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import bench_fidelity_heldout as heldout

ARGS = argparse.Namespace(compactions=30, keep_recent_tokens=400)


def _totals(arm: str, tmp_path: Path) -> dict[str, tuple[int, int]]:
    rows = [heldout.run_story(arm, story, ARGS, tmp_path) for story in heldout.stories()]
    out: dict[str, tuple[int, int]] = {}
    for label, value in heldout.totals(rows).items():
        if "/" in value:
            a, b = value.split("/")
            out[label] = (int(a), int(b))
    return out


@pytest.fixture(scope="module", params=["offline", "openai_ideal"])
def found(request: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, tuple[int, int]]]:
    return request.param, _totals(request.param, tmp_path_factory.mktemp(request.param))


# measured on this branch (offline, openai_ideal); the code before it: 18/59 current, 8/7
# superseded, 3/4 false, 10/9 open shown (RESULTS.md). Merged with the summary judge and the other
# round-5 branches, the ideal arm states 60 of 65 current facts (61 on the precision branch alone).
# Round 2 (precision2): a line naming a value only to drop it carries the replaced mark in every
# layer (stance.dropped_values): superseded stated as current 8 -> 4 (offline), 8 -> 3 (ideal).
FLOOR = {
    "offline": {"current": 26, "superseded": 4, "false": 2, "open": 12},
    "openai_ideal": {"current": 60, "superseded": 3, "false": 2, "open": 13},
}


@pytest.mark.slow
def test_held_out_figures_do_not_regress(found: tuple[str, dict[str, tuple[int, int]]]) -> None:
    arm, t = found
    floor = FLOOR[arm]
    assert t["current facts stated"][0] >= floor["current"]
    assert t["superseded stated as current"][0] <= floor["superseded"]
    assert t["false supersessions applied"][0] <= floor["false"]
    assert t["open/deferred requests shown open"][0] >= floor["open"]
    assert t["done requests shown open"][0] == 0
    assert t["identifiers kept"][0] >= 27


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="issue 32 goals not reached yet on the held-out set (RESULTS.md)")
def test_held_out_goals_of_issue_32(found: tuple[str, dict[str, tuple[int, int]]]) -> None:
    _arm, t = found
    assert t["current facts stated"][0] == t["current facts stated"][1]
    assert t["superseded stated as current"][0] == 0
    assert t["false supersessions applied"][0] == 0
    assert t["open/deferred requests shown open"][0] == t["open/deferred requests shown open"][1]
    assert t["cancelled requests shown open"][0] == 0
