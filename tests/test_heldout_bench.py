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


def _totals(arm: str, folder: str, tmp_path: Path) -> dict[str, tuple[int, int]]:
    args = argparse.Namespace(**vars(ARGS), set=folder)
    stories = heldout.stories(heldout.HELDOUT.parent / folder)
    rows = [heldout.run_story(arm, story, args, tmp_path) for story in stories]
    out: dict[str, tuple[int, int]] = {}
    for label, value in heldout.totals(rows).items():
        if "/" in value:
            a, b = value.split("/")
            out[label] = (int(a), int(b))
    return out


@pytest.fixture(
    scope="module",
    params=[(f, a) for f in ("heldout", "heldout_b", "heldout_c") for a in ("offline", "openai_ideal")],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
def found(
    request: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, str, dict[str, tuple[int, int]]]:
    folder, arm = request.param
    return folder, arm, _totals(arm, folder, tmp_path_factory.mktemp(f"{folder}-{arm}"))


# Set A ("heldout") is a development set from stop 40 on: its offending lines were read to find
# what wrote them (RESULTS.md, round 3). Sets B and C stay held out: these floors are what the
# merged code measured on them once, so a change may not make them worse, and no change was made
# after that run. Before round 3, set A measured offline 26 current / 4 superseded / 2 false / 12
# open, ideal 60 / 3 / 2 / 13.
FLOOR = {
    ("heldout", "offline"): {"current": 41, "superseded": 2, "false": 2, "open": 12, "ids": 27},
    ("heldout", "openai_ideal"): {"current": 62, "superseded": 1, "false": 2, "open": 14, "ids": 27},
    ("heldout_b", "offline"): {"current": 18, "superseded": 2, "false": 1, "open": 4, "ids": 18},
    ("heldout_b", "openai_ideal"): {"current": 44, "superseded": 2, "false": 0, "open": 9, "ids": 18},
    ("heldout_c", "offline"): {"current": 26, "superseded": 4, "false": 1, "open": 5, "ids": 21},
    ("heldout_c", "openai_ideal"): {"current": 49, "superseded": 3, "false": 0, "open": 10, "ids": 21},
}


@pytest.mark.slow
def test_held_out_figures_do_not_regress(found: tuple[str, str, dict[str, tuple[int, int]]]) -> None:
    folder, arm, t = found
    floor = FLOOR[(folder, arm)]
    assert t["current facts stated"][0] >= floor["current"]
    assert t["superseded stated as current"][0] <= floor["superseded"]
    assert t["false supersessions applied"][0] <= floor["false"]
    assert t["open/deferred requests shown open"][0] >= floor["open"]
    assert t["identifiers kept"][0] >= floor["ids"]


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="issue 32 goals not reached yet on the held-out set (RESULTS.md)")
def test_held_out_goals_of_issue_32(found: tuple[str, str, dict[str, tuple[int, int]]]) -> None:
    _folder, _arm, t = found
    assert t["current facts stated"][0] == t["current facts stated"][1]
    assert t["superseded stated as current"][0] == 0
    assert t["false supersessions applied"][0] == 0
    assert t["open/deferred requests shown open"][0] == t["open/deferred requests shown open"][1]
    assert t["cancelled requests shown open"][0] == 0
