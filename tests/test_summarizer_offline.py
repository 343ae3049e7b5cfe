"""The offline extractive summarizer: sections, determinism, rolling update, hard budget, speed."""

from __future__ import annotations

from typing import Any

import pytest

from ipython_compact.core.entries import Entry
from ipython_compact.core.offline_summary import missing_sections, offline_summary, parse_checkpoint
from ipython_compact.core.prompts import combine_split_turn
from ipython_compact.summarizers import OfflineSummarizer, Summarizer, SummaryInput
from ipython_compact.testing.transcripts import GOAL, TranscriptGenerator


def entries_of(rounds: int, seed: int = 3) -> list[Entry]:
    gen = TranscriptGenerator(seed)
    out: list[Entry] = []
    for msgs in gen.rounds(rounds):
        for message in msgs:
            out.append(Entry(f"e{len(out)}", None, "message", "t", {"message": message}))
    return out


def m(eid: str, role: str, text: str, **extra: Any) -> Entry:
    return Entry(eid, None, "message", "t", {"message": {"role": role, "content": [{"type": "text", "text": text}], **extra}})


@pytest.mark.parametrize("kind", ["history", "branch", "turn_prefix"])
def test_sections_present_for_each_kind(kind: str) -> None:
    text = offline_summary(entries_of(6), kind=kind)  # type: ignore[arg-type]
    assert missing_sections(text, kind) == []


@pytest.mark.parametrize(
    ("text", "kind", "missing"),
    [
        ("## Goal\nx", "history", ["Constraints & Preferences", "Progress", "Key Decisions", "Next Steps", "Critical Context"]),
        ("## Goal\n## Progress\n### Done\n## Next Steps", "branch", []),
        ("## Goal\n## Constraints & Preferences\n## Progress\n### Done\n## Key Decisions\n## Next Steps\n## Critical Context", "history", ["Progress/In Progress", "Progress/Blocked"]),
        ("## Original Request\n## Early Progress", "turn_prefix", ["Context for Suffix"]),
    ],
)
def test_missing_sections(text: str, kind: str, missing: list[str]) -> None:
    assert missing_sections(text, kind) == missing


def test_unknown_kind_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown summary kind 'poem'"):
        missing_sections("", "poem")


def test_deterministic_and_extracts_goal_constraints_progress() -> None:
    span = entries_of(12)
    a = offline_summary(span, focus="holdout")
    assert a == offline_summary(span, focus="holdout")
    sections = parse_checkpoint(a)
    assert sections["Goal"] == [GOAL]
    assert "Always use CUDA 12.4 for the GPU runs, not any newer toolkit." in sections["Constraints & Preferences"]
    assert any("Done with step" in d for d in sections["Done"])
    assert sections["Next Steps"]


def test_rolling_update_keeps_previous_items_and_moves_done() -> None:
    first = offline_summary([m("u1", "user", "Goal: build X. Never touch prod."), m("u2", "user", "Also add tests")])
    assert parse_checkpoint(first)["In Progress"] == ["Goal: build X. Never touch prod.", "Also add tests"]
    second = offline_summary([m("a1", "assistant", "I decided to use sqlite because it is local. All finished.", stopReason="stop")], previous_summary=first)
    sec = parse_checkpoint(second)
    assert sec["Goal"] == ["Goal: build X. Never touch prod."]
    assert sec["Constraints & Preferences"] == ["Never touch prod."]
    assert sec["In Progress"] == []
    assert sec["Done"] == ["Goal: build X. Never touch prod.", "Also add tests → All finished."]  # one line per request
    assert sec["Key Decisions"] == ["I decided to use sqlite because it is local."]


@pytest.mark.parametrize("budget", [300, 1000, 4000])
def test_hard_budget(budget: int) -> None:
    text = offline_summary(entries_of(80), max_chars=budget)
    assert len(text) <= budget


def test_thousand_entry_span_keeps_its_budget_and_sections() -> None:
    """Speed on this span is measured in bench/bench_fidelity.py (no timed unit tests)."""
    span = entries_of(230)[:1000]
    assert len(span) == 1000
    text = offline_summary(span, max_chars=8000)
    assert len(text) <= 8000
    assert missing_sections(text, "history") == []


def test_adapter_and_split_turn_merge() -> None:
    summarizer = OfflineSummarizer(max_chars=5000)
    assert isinstance(summarizer, Summarizer)
    span = entries_of(5)
    history = summarizer.summarize(SummaryInput(span[:20], "history", None, None, 4000))
    prefix = summarizer.summarize(SummaryInput(span[20:], "turn_prefix", None, None, 2000))
    merged = combine_split_turn(history.text, prefix.text)
    assert missing_sections(merged, "history") == []
    assert missing_sections(merged, "turn_prefix") == []
    assert history.summarizer == "offline" and history.finish_reason == "stop"
    assert len(summarizer.summarize(SummaryInput(span, "history", None, None, 10)).text) <= 40
    with pytest.raises(ValueError, match="max_chars must be positive"):
        OfflineSummarizer(max_chars=0)
