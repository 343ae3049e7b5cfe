"""The seed's worked example, end to end: real kernel, real local model server, real SQLite log."""

from __future__ import annotations

import importlib.util
import statistics
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
    report = travel.run(tmp_path / "session.db", echo=False)  # type: ignore[attr-defined]
    rows = [(r.context_messages, r.log_entries) for r in report.rows]
    assert len(rows) == 7
    # The seed's shape: questions where context and log grow together, until the background
    # compaction (question 4 with these settings) shrinks the context while the log keeps growing.
    first = next(i for i, (ctx, log) in enumerate(rows) if ctx != log)
    assert first in (3, 4)
    assert all(ctx == log for ctx, log in rows[:first])
    assert [ctx for ctx, _ in rows[:first]] == sorted({ctx for ctx, _ in rows[:first]})
    assert rows[first][0] < rows[first - 1][0] and rows[first][1] > rows[first - 1][1] + 2
    logs = [log for _, log in rows]
    assert logs == sorted(logs) and len(set(logs)) == len(logs)
    assert all(ctx < log for ctx, log in rows[first:])
    # Bounded from then on: in tokens never above the peak before the first compaction, in
    # messages within a small band, while the log ends with several times as many entries.
    # in the server's own count: the agent's figure changes unit once it learns the tokenizer
    tokens = [r.server_tokens for r in report.rows]
    assert all(tokens) and max(tokens[first:]) <= tokens[first - 1]
    assert max(ctx for ctx, _ in rows[first:]) <= rows[first - 1][0] + 2
    assert rows[-1][1] >= 3 * rows[-1][0]
    assert max(r.context_tokens for r in report.rows) < 3000 - 1000  # never past the blocking line
    # After three requests (Q2 sends its second) the agent's figure is the server's count give or
    # take: the fixed part of a request (tool schemas, framing) is not read as a tokenizer ratio, and
    # a baseline superseded by a compaction's new one is not counted twice (it was +45% at Q4).
    errors = [abs(r.context_tokens / r.server_tokens - 1) for r in report.rows[1:]]
    assert statistics.median(errors) <= 0.10 and max(errors) <= 0.25, [
        (r.context_tokens, r.server_tokens) for r in report.rows
    ]
    # A background (threshold) first, one manual with its focus, one overflow (blocking) last.
    reasons = [(c["reason"], c["blocking"]) for c in report.compactions]
    assert reasons[0] == ("threshold", False) and reasons[-1] == ("overflow", True)
    assert [r for r in reasons if r[0] != "threshold"] == [("manual", False), ("overflow", True)]
    manual = next(c for c in report.compactions if c["reason"] == "manual")
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
