"""The seed's worked example, end to end: real kernel, real local model server, real SQLite log."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "travel.py"


def _load() -> object:
    spec = importlib.util.spec_from_file_location("travel_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["travel_example"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_travel_example_reproduces_the_seed_shape(tmp_path: Path) -> None:
    travel = _load()
    report = travel.run(tmp_path / "session.db", busy_delay=1.0, echo=False)  # type: ignore[attr-defined]
    rows = [(r.context_messages, r.log_entries) for r in report.rows]
    assert len(rows) == 7
    # The seed's shape: three questions where context and log grow together, then the background
    # compaction of question 4 shrinks the context while the log keeps growing.
    assert all(ctx == log for ctx, log in rows[:3])
    assert rows[0][0] < rows[1][0] < rows[2][0]
    assert rows[3][0] < rows[2][0] and rows[3][1] > rows[2][1] + 2
    logs = [log for _, log in rows]
    assert logs == sorted(logs) and len(set(logs)) == len(logs)
    assert all(ctx < log for ctx, log in rows[3:])
    assert max(ctx for ctx, _ in rows[3:]) <= rows[2][0]  # bounded from then on
    assert max(r.context_tokens for r in report.rows) < 3000 - 1000  # never past the blocking line
    # One background (threshold), one manual with its focus, one overflow (blocking), in that order.
    reasons = [(c["reason"], c["blocking"]) for c in report.compactions]
    assert reasons == [("threshold", False), ("manual", False), ("overflow", True)]
    manual = report.compactions[1]
    assert manual["focus"] == "Keep the hotel shortlist"
    # The manual summary was queued in the inbox while the model was busy.
    assert any(i["reason"] == "manual" and i["state"] == "pending" for i in report.inbox_while_busy)
    assert any("manual compaction finished; its summary is queued" in e for e in report.events)
    # Every answer arrived, including the one retried after the overflow.
    assert report.answers[-1].startswith("Here is what I suggest for a day-by-day week")
    # The focus reached the summarizer's prompt, and the live probe named the kernel's variables.
    assert report.focus_reached_summarizer is True
    assert "Memmo Alfama" in manual["summary"]
    assert report.kernel_notice is not None and "hotels" in report.kernel_notice
