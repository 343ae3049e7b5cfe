"""The constraint extractor: real constraints in, bug reports and pasted text out (pure), measured
on the hand-labelled user sentences of pi's session files and on generated sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from generated_sessions import SESSION_KINDS, make_session

from ipython_compact.core.entries import text_of_content
from ipython_compact.core.facts import SENTENCE_RE
from ipython_compact.core.pi_format import parse_pi_session
from ipython_compact.core.user_statements import constraint_spans

FIXTURES = Path(__file__).parent / "fixtures"


def found(text: str) -> list[str]:
    return [text[s:e] for s, e in constraint_spans(text)]


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("invalid themes must NEVER explode", ["invalid themes must NEVER explode"]),
        (
            "should be dimmer, don't modify the theme, look into the footer sources",
            ["should be dimmer, don't modify the theme, look into the footer sources"],
        ),
        ("i don't tink the component invalidate works correctly.", []),
        ("hm, i selected the theme while you were working and got a crash, that should never happen.", []),
        (
            "ok, i think the queued messages component doesn't adhere to the invariant that every line must "
            "not "
            "be wider than the width.",
            [],
        ),
        ("that is what happens if we don't stream, right?", []),
        ("no conosle logs!", ["no conosle logs!"]),
        ("no, that's horrible.", []),
        ("no need for linkGray", []),
        (
            "omfg use fucking rgb values in the themes, no rgb indices!",
            ["omfg use fucking rgb values in the themes, no rgb indices!"],
        ),
        (
            'Error: 400 {"type":"error","message":"each block must have a result"}\n block must have a '
            "corresponding result\n\nNever retry it.",
            ["Never retry it."],
        ),
        ("Train it.\nKeyError: 'x' must not happen", []),
        (
            "+ 13 - **A**: now works\n properly pad all lines to exactly match the width\n + 14 - **B**\n + "
            "15\n\nkeep the tests green at every step",
            ["keep the tests green at every step"],
        ),
        (
            "i would only want e2e tests for AgentSession, anything else is shitty.",
            ["i would only want e2e tests for AgentSession, anything else is shitty."],
        ),
    ],
)
def test_constraint_spans_take_rules_and_skip_reports_and_pastes(text: str, sentences: list[str]) -> None:
    assert found(text) == sentences


def _sentences(text: str) -> set[str]:
    return {
        m.group(0).rstrip()
        for line in text.split("\n")
        for m in SENTENCE_RE.finditer(line)
        if m.group(0).strip()
    }


def _fixture_user_texts(name: str) -> list[str]:
    path = FIXTURES / "pi" / name
    objects = [
        (n, json.loads(line)) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()
    ]
    return [
        text_of_content(e.message.get("content"))
        for e in parse_pi_session(objects).entries
        if e.message is not None and e.message.get("role") == "user"
    ]


def test_precision_and_recall_on_labelled_user_sentences() -> None:
    labels = [
        json.loads(line)
        for line in (FIXTURES / "anchor_labels.jsonl").read_text().splitlines()
        if line.strip()
    ]
    tp = fp = positives = 0
    for name in ("before-compaction.jsonl", "large-session.jsonl"):
        mine = [r for r in labels if r["source"] == f"pi:{name}"]
        yes = {r["text"] for r in mine if r["constraint"]}
        no = {r["text"] for r in mine if not r["constraint"]}
        got = {s for t in _fixture_user_texts(name) for s in found(t)}
        assert got <= yes | no, f"unlabelled sentences: {sorted(got - yes - no)}"
        tp, fp, positives = tp + len(got & yes), fp + len(got & no), positives + len(yes)
    for kind in SESSION_KINDS:
        session = make_session(kind, chunks=30)
        yes = set(session.constraints)
        got = {s for t in session.user_texts() for s in found(t)} - _sentences(session.goal)
        tp, fp, positives = tp + len(got & yes), fp + len(got - yes), positives + len(yes)
        assert yes <= got, f"{kind}: lost {sorted(yes - got)}"
    # measured before this change: precision 0.69, recall 0.76 (bench/bench_fidelity_anchors.py)
    assert fp == 0 and tp / positives >= 0.84


def test_the_hand_labels_name_real_sentences_of_the_fixtures() -> None:
    labels = [
        json.loads(line)
        for line in (FIXTURES / "anchor_labels.jsonl").read_text().splitlines()
        if line.strip()
    ]
    for name in ("before-compaction.jsonl", "large-session.jsonl"):
        every = {s for t in _fixture_user_texts(name) for s in _sentences(t)}
        mine = {r["text"] for r in labels if r["source"] == f"pi:{name}"}
        assert mine == every
    assert sum(r["constraint"] for r in labels) == 15
