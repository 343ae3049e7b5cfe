"""Triage's facts (pure): an outline kept with an entry gives the decisions its entry gives (issue 37)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from builders import bash_message, calls_entry, entry, result_entry
from builders import user_entry as user

from ipython_compact.core.entries import Entry, canonical_json, entry_text
from ipython_compact.core.triage_facts import (
    _texts,
    args_digest,
    decide,
    facts_from_outline,
    facts_of,
    outline_of,
    output_text,
    skeleton_of,
)
from ipython_compact.store.json_text import sorted_json_bytes


def message(eid: str, **msg: Any) -> Entry:
    return Entry(eid, None, "message", "t", {"message": msg})


@pytest.mark.parametrize(
    "msg",
    [
        {"role": "user", "content": "plain"},
        {"role": "user", "content": ""},
        {"role": "user", "content": [{"type": "text", "text": "one block"}]},
        {"role": "user", "content": [{"type": "text", "text": 7}]},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "toolResult", "toolCallId": "c", "content": [{"type": "text", "text": "out\nput"}]},
        {"role": "toolResult", "toolCallId": "c", "content": [{"type": "image", "data": "x"}]},
        {"role": "toolResult", "toolCallId": "c", "content": "as a string"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "x"}], "summary": "and a summary"},
        {"role": "bashExecution", "command": "ls", "output": "a\nb"},
        {"role": "custom", "content": None},
    ],
)
def test_both_texts_at_once_are_the_texts_read_apart(msg: dict[str, Any]) -> None:
    e = message("e1", **msg)
    assert _texts(e, msg) == (entry_text(e), output_text(msg))


def call(eid: str, cid: str, code: str, name: str = "python") -> Entry:
    return calls_entry(eid, (cid, name, {"code": code}))


SPANS = {
    "duplicates": [user("u1", "go"), user("u2", "go"), user("u3", " "), user("u4", "go on")],
    "superseded": [
        call("a1", "c1", "fit()"),
        result_entry("r1", "c1", "Traceback\nKeyError: 'y'", error=True),
        call("a2", "c2", "fit()"),
        result_entry("r2", "c2", "ok"),
    ],
    "repeated runs": [
        call("a1", "c1", "ls()"),
        result_entry("r1", "c1", "same"),
        call("a2", "c2", "ls()"),
        result_entry("r2", "c2", "same"),
        call("a3", "c3", "ls()"),
        result_entry("r3", "c3", "other"),
    ],
    "externalized": [
        call("a1", "c1", "train()\nmore"),
        result_entry("r1", "c1", "\n".join(f"step {i}" for i in range(300))),
        entry("b1", bash_message("make all", "x" * 9000)),
        user("u1", "thanks"),
    ],
}


@pytest.mark.parametrize("dumps", [None, sorted_json_bytes], ids=["canonical_json", "orjson"])
@pytest.mark.parametrize("name", sorted(SPANS))
def test_decisions_from_outlines_are_the_decisions_from_entries(
    name: str, dumps: Callable[[Any], bytes | None] | None
) -> None:
    span = SPANS[name]
    ids = [e.id for e in span]
    from_entries = decide(ids, [facts_of(e) for e in span], 200, 8000)
    from_outlines = decide(ids, [facts_from_outline(outline_of(e, dumps)) for e in span], 200, 8000)
    assert from_outlines == from_entries
    assert from_entries.discard or from_entries.externalize


def test_a_skeleton_keeps_what_planning_reads_and_no_text() -> None:
    e = message(
        "a1",
        role="assistant",
        content=[{"type": "text", "text": "long answer"}],
        usage={"totalTokens": 900},
        stopReason="stop",
    )
    skeleton = skeleton_of(e.id, e.parent_id, e.kind, outline_of(e))
    assert skeleton.role == "assistant" and skeleton.message is not None
    assert skeleton.message["usage"] == {"totalTokens": 900} and "content" not in skeleton.message
    summary = Entry("b1", None, "branch_summary", "t", {"summary": "left behind"})
    assert skeleton_of("b1", None, "branch_summary", outline_of(summary)).data["summary"]
    empty = Entry("b2", None, "branch_summary", "t", {"summary": ""})
    assert "summary" not in skeleton_of("b2", None, "branch_summary", outline_of(empty)).data


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"code": "x", "n": 1}, {"n": 1, "code": "x"}),
        ({"n": 1}, {"n": 1.0}),
        ({"n": 1}, {"n": True}),
        ({"n": 10**30}, {"n": 10**30}),
        ({"n": 10**30}, {"n": 1e30}),
        ({"s": "ü\u2028"}, {"s": "ü\u2028"}),
        ({"l": [1, {"b": 2, "a": 1}]}, {"l": [1, {"a": 1, "b": 2}]}),
        (None, {}),
        ({"x": 5e-06}, {"x": 0.000005}),
    ],
)
@pytest.mark.parametrize("dumps", [None, sorted_json_bytes], ids=["canonical_json", "orjson"])
def test_arguments_digest_tells_apart_what_canonical_json_tells_apart(
    a: Any, b: Any, dumps: Callable[[Any], bytes | None] | None
) -> None:
    assert (args_digest(a, dumps) == args_digest(b, dumps)) == (canonical_json(a) == canonical_json(b))
