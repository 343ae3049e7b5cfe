"""The precision benchmark's goals as a test (issue 18): after rolling compactions of a session whose
facts change, every summarizer arm but the naive one states every current fact and no superseded one
as current, shows every open or deferred request, and lists no plan already carried out as a next step.

It runs ``bench/bench_fidelity_precision.py``'s generator and scoring at a smaller size, with the
OpenAI-compatible summarizer through the real ``openai`` client against the scripted
``testing.ModelServer`` (the bench's good and drifting models). The full table is the bench's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import bench_fidelity_precision as precision
from bench_fidelity_probes import scripted

from ipython_compact.testing import ModelServer

DAYS = 24  # past the last revision of the threshold (day 22); every kind of change happens by then


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["offline", "openai_good", "openai_drifting"])
def test_every_current_fact_and_no_superseded_one_after_rolling_compactions(arm: str, tmp_path: Path) -> None:
    args = argparse.Namespace(days=DAYS, keep_recent_tokens=150)
    server = None
    if arm.startswith("openai_"):
        server = ModelServer(script=scripted(arm.removeprefix("openai_")), model="bench-model").start()
    try:
        found = precision.run(arm, args, tmp_path, server)
    finally:
        if server is not None:
            server.stop()
    current, total = map(int, found["current_facts_in_context"].split("/"))
    assert (found["missing_current_last"], current) == ([], total)
    assert found["superseded_as_current_last"] == []
    assert found["superseded_stated_as_current_all_steps"] == 0
    shown, pending = map(int, found["open_deferred_shown"].split("/"))
    assert (found["missing_pending_last"], shown) == ([], pending)
    assert pending >= 3
    # a plan the assistant carried out (day 12) is not a next step once that is summarized
    assert found["settled_plans_as_next_all_steps"] == 0
    # nothing the pipeline appends repeats the summary's (or the model's) text
    assert found["repeated_by_pipeline_lines_last"] == []
    assert found["repeated_by_pipeline_max"] == 0


def test_the_naive_rolling_summary_is_what_the_layers_fix(tmp_path: Path) -> None:
    """The comparison arm still fails the goals (else the test above would prove nothing)."""
    found = precision.run("naive", argparse.Namespace(days=DAYS, keep_recent_tokens=150), tmp_path, None)
    assert found["missing_current_last"] != [] and found["superseded_stated_as_current_all_steps"] > 0
