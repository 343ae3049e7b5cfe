"""Serialization for the summarizer: labels, numbering, truncation, and pi's byte-compatible mode."""

from __future__ import annotations

from typing import Any

import pytest
from builders import tool_call as call
from builders import tool_result_message
from builders import user_message as user

from ipython_compact.core.serialization import serialize_conversation, truncate_middle


def result(call_id: str, name: str, t: str, error: bool = False) -> dict[str, Any]:
    return tool_result_message(call_id, t, name=name, error=error)


CONVERSATION: list[dict[str, Any]] = [
    user("load the data"),
    {
        "role": "assistant",
        "stopReason": "toolUse",
        "content": [
            {"type": "thinking", "thinking": "need pandas"},
            {"type": "text", "text": "Loading."},
            call("c1", "python", code="df = pd.read_csv('x.csv')"),
            call("c2", "read", path="x.csv", limit=3),
        ],
    },
    result("c1", "python", "ok"),
    result("c2", "read", "boom", error=True),
    {"role": "bashExecution", "command": "ls", "output": "x.csv", "exitCode": 0},
    {"role": "custom", "customType": "ipython_state", "content": "names: df", "display": False},
    {"role": "compactionSummary", "summary": "earlier"},
    {"role": "system", "content": "be brief"},
]


def test_our_format() -> None:
    text = serialize_conversation(CONVERSATION)
    parts = text.split("\n\n")
    assert parts[0] == "[User]: load the data"
    assert parts[1] == "[Assistant thinking]: need pandas"
    assert parts[2] == "[Assistant]: Loading."
    assert parts[3] == (
        "[Assistant tool calls]: #1 python(code=\"df = pd.read_csv('x.csv')\"); #2 "
        'read(path="x.csv", limit=3)'
    )
    assert parts[4] == "[Tool result (python)] #1: ok"
    assert parts[5] == "[Tool result (read, error)] #2: boom"
    assert "[User]: Ran `ls`\n```\nx.csv\n```" in text
    assert "[User]: names: df" in text
    assert "<summary>\nearlier\n</summary>" in text
    assert text.endswith("[System]: be brief")


def test_pi_mode_matches_pis_layout() -> None:
    text = serialize_conversation(CONVERSATION, mode="pi")
    assert (
        '[Assistant tool calls]: python(code="df = pd.read_csv(\'x.csv\')"); read(path="x.csv", limit=3)'
    ) in text
    assert "[Tool result]: ok" in text
    assert "[Tool result]: boom" in text
    assert "The conversation history before this point was compacted into the following summary:" in text
    assert "[System]" not in text


@pytest.mark.parametrize(
    ("mode", "length", "marker"),
    [
        ("pi", 5000, "[... 3000 more characters truncated]"),
        ("ours", 5000, "[... 2500 characters truncated ...]"),
        ("ours", 2501, "[... 1 characters truncated ...]"),
    ],
)
def test_long_tool_results_are_truncated_with_a_marker(mode: str, length: int, marker: str) -> None:
    body = "h" * 2000 + "m" * (length - 2500) + "t" * 500
    text = serialize_conversation([result("c", "read", body)], mode=mode)  # type: ignore[arg-type]
    assert marker in text
    assert text.startswith(
        ("[Tool result (read)]: " if mode == "ours" else "[Tool result]: ") + "h" * 2000 + "\n\n[..."
    )
    if mode == "ours":
        assert text.endswith("...]\n\n" + "t" * 500)


@pytest.mark.parametrize("mode", ["pi", "ours"])
@pytest.mark.parametrize("length", [1500, 2000])
def test_short_tool_results_are_untouched(mode: str, length: int) -> None:
    text = serialize_conversation([result("c", "read", "x" * length)], mode=mode)  # type: ignore[arg-type]
    assert "truncated" not in text
    assert text.endswith("x" * length)


@pytest.mark.parametrize("mode", ["pi", "ours"])
def test_user_and_assistant_text_are_never_truncated(mode: str) -> None:
    long = "y" * 5000
    messages = [
        user(long),
        {"role": "assistant", "content": [{"type": "text", "text": long}], "stopReason": "stop"},
    ]
    text = serialize_conversation(messages, mode=mode)  # type: ignore[arg-type]
    assert text == f"[User]: {long}\n\n[Assistant]: {long}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("abc", "abc"),
        ("a" * 2500, "a" * 2500),
        ("a" * 2000 + "b" + "c" * 500, "a" * 2000 + "\n\n[... 1 characters truncated ...]\n\n" + "c" * 500),
    ],
)
def test_truncate_middle(text: str, expected: str) -> None:
    assert truncate_middle(text) == expected


def test_empty_and_unknown_inputs() -> None:
    assert serialize_conversation([]) == ""
    assert serialize_conversation([user(""), {"role": "mystery"}]) == ""
    with pytest.raises(ValueError, match="unknown serialization mode 'xml'"):
        serialize_conversation([], mode="xml")  # type: ignore[arg-type]


def test_pi_mode_counts_like_javascript() -> None:
    body = "😀" * 1500  # 3000 UTF-16 code units
    text = serialize_conversation([result("c", "read", body)], mode="pi")
    assert text == "[Tool result]: " + "😀" * 1000 + "\n\n[... 1000 more characters truncated]"
