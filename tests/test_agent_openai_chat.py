"""Conversion between pi-shaped messages and the OpenAI chat format; the model-request registry;
output capping of the kernel tool."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ipython_compact.agent import requests
from ipython_compact.agent.kernel_tool import cap_text
from ipython_compact.agent.openai_chat import (
    StreamAccumulator,
    error_message,
    from_openai_completion,
    to_openai_messages,
    usage_from_openai,
)

CALL = {"type": "toolCall", "id": "c1", "name": "python", "arguments": {"code": "1+1"}}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([{"role": "user", "content": "hi"}], [{"role": "user", "content": "hi"}]),
        (
            [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
            [{"role": "user", "content": "a\nb"}],
        ),
        ([{"role": "system", "content": "be brief"}], [{"role": "system", "content": "be brief"}]),
        (
            [{"role": "assistant", "content": [{"type": "text", "text": "ok"}], "stopReason": "stop"}],
            [{"role": "assistant", "content": "ok"}],
        ),
        # Errored and aborted answers stay in the log but are never sent.
        ([{"role": "assistant", "content": [], "stopReason": "error", "errorMessage": "x"}], []),
        ([{"role": "assistant", "content": [{"type": "text", "text": "par"}], "stopReason": "aborted"}], []),
        # A call and its result travel together.
        (
            [
                {"role": "assistant", "content": [CALL], "stopReason": "toolUse"},
                {
                    "role": "toolResult",
                    "toolCallId": "c1",
                    "toolName": "python",
                    "content": [{"type": "text", "text": "2"}],
                },
            ],
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "python", "arguments": '{"code": "1+1"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "2"},
            ],
        ),
        # A dangling call gets a synthetic result; an orphan result is dropped.
        (
            [
                {"role": "assistant", "content": [CALL], "stopReason": "toolUse"},
                {"role": "user", "content": "next"},
            ],
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "python", "arguments": '{"code": "1+1"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "(no result: the turn was interrupted)"},
                {"role": "user", "content": "next"},
            ],
        ),
        ([{"role": "toolResult", "toolCallId": "zz", "content": "lost"}], []),
        (
            [
                {
                    "role": "custom",
                    "customType": "ipython_state",
                    "content": "<ipython_state>x</ipython_state>",
                }
            ],
            [{"role": "user", "content": "<ipython_state>x</ipython_state>"}],
        ),
        ([{"role": "compactionSummary", "summary": "S"}], [{"role": "user", "content": "S"}]),
        (
            [{"role": "bashExecution", "command": "ls", "output": "a"}],
            [{"role": "user", "content": "Ran `ls`\na"}],
        ),
    ],
)
def test_to_openai_messages(messages: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert to_openai_messages(messages) == expected


def test_unknown_role_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="role 'wizard'"):
        to_openai_messages([{"role": "wizard", "content": "?"}])


def _completion(message: dict[str, Any], finish: str, usage: dict[str, Any] | None) -> dict[str, Any]:
    return {"choices": [{"message": message, "finish_reason": finish}], "usage": usage}


@pytest.mark.parametrize(
    ("completion", "content", "stop"),
    [
        (_completion({"content": "hello"}, "stop", None), [{"type": "text", "text": "hello"}], "stop"),
        (_completion({"content": "cut"}, "length", None), [{"type": "text", "text": "cut"}], "length"),
        (
            _completion(
                {
                    "content": None,
                    "tool_calls": [{"id": "c", "function": {"name": "python", "arguments": '{"code": "x"}'}}],
                },
                "tool_calls",
                None,
            ),
            [{"type": "toolCall", "id": "c", "name": "python", "arguments": {"code": "x"}}],
            "toolUse",
        ),
        (
            _completion(
                {
                    "content": None,
                    "tool_calls": [{"id": "c", "function": {"name": "python", "arguments": "oops"}}],
                },
                "tool_calls",
                None,
            ),
            [{"type": "toolCall", "id": "c", "name": "python", "arguments": {"_raw": "oops"}}],
            "toolUse",
        ),
        (
            _completion(
                {
                    "content": None,
                    "tool_calls": [{"id": "c", "function": {"name": "python", "arguments": "[1]"}}],
                },
                "stop",
                None,
            ),
            [{"type": "toolCall", "id": "c", "name": "python", "arguments": {"_raw": "[1]"}}],
            "toolUse",
        ),
        (_completion({"content": "x"}, "content_filter", None), [{"type": "text", "text": "x"}], "error"),
    ],
)
def test_from_openai_completion(completion: dict[str, Any], content: list[dict[str, Any]], stop: str) -> None:
    msg = from_openai_completion(completion, provider="p", model="m", timestamp="t")
    assert (msg["content"], msg["stopReason"], msg["provider"], msg["model"]) == (content, stop, "p", "m")


def test_completion_without_choices_is_an_error() -> None:
    with pytest.raises(ValueError, match="no choices"):
        from_openai_completion({"choices": []}, provider="p", model="m", timestamp="t")


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (None, {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}),
        (
            {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120},
        ),
        (
            {"prompt_tokens": 100, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 60}},
            {"input": 40, "output": 20, "cacheRead": 60, "cacheWrite": 0, "totalTokens": 120},
        ),
    ],
)
def test_usage_from_openai(usage: dict[str, Any] | None, expected: dict[str, int]) -> None:
    assert usage_from_openai(usage) == expected


def test_error_message_keeps_code_and_status() -> None:
    msg = error_message(
        provider="p", model="m", timestamp="t", text="too long", code="context_length_exceeded", status=400
    )
    assert (msg["stopReason"], msg["errorMessage"], msg["errorCode"], msg["errorStatus"]) == (
        "error",
        "too long",
        "context_length_exceeded",
        400,
    )


@pytest.fixture()
def registry() -> Iterator[None]:
    requests.reset()
    yield
    requests.reset()


@pytest.mark.parametrize(
    ("active", "calls", "scheduled", "pending"),
    [
        (False, [None], [False], None),
        (True, [None], [True], {"instructions": None}),
        (True, ["keep hotels"], [True], {"instructions": "keep hotels"}),
        (True, ["a", "b", "a"], [True, True, True], {"instructions": "a\nb"}),
        (True, [None, "b"], [True, True], {"instructions": "b"}),
        (True, [42], [False], None),
    ],
)
def test_model_request_registry(
    registry: None, active: bool, calls: list[Any], scheduled: list[bool], pending: Any
) -> None:
    if active:
        requests.begin_turn()
    answers = [requests.request(c) for c in calls]
    assert [a["scheduled"] for a in answers] == scheduled
    assert all(("note" in a) if a["scheduled"] else ("reason" in a) for a in answers)
    requests.end_turn()
    assert requests.take() == pending
    assert requests.take() is None  # handed over exactly once


@pytest.mark.parametrize(
    ("text", "limit", "expected", "truncated"),
    [
        ("short", 100, "short", False),
        ("x" * 100, 100, "x" * 100, False),
        ("x" * 1000, 90, "x" * 60 + "\n... [910 characters of output omitted] ...\n" + "x" * 30, True),
        (
            "ab" * 50 + "tail",
            30,
            "ab" * 10 + "\n... [74 characters of output omitted] ...\n" + "abababtail",
            True,
        ),
        ("abc", 0, "abc", False),
    ],
)
def test_cap_text(text: str, limit: int, expected: str, truncated: bool) -> None:
    assert cap_text(text, limit) == (expected, truncated)  # head 2/3, tail 1/3 of the limit, the cut counted


def _chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"choices": choices, "usage": usage}


@pytest.mark.parametrize(
    ("chunks", "deltas", "message"),
    [
        (
            [
                _chunk({"role": "assistant", "content": ""}),
                _chunk({"content": "Hel"}),
                _chunk({"content": "lo"}),
                _chunk({}, "stop"),
                _chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 2}),
            ],
            ["", "Hel", "lo", "", ""],
            {
                "content": [{"type": "text", "text": "Hello"}],
                "stopReason": "stop",
                "usage": {"input": 5, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 7},
            },
        ),
        (
            [
                _chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c9",
                                "type": "function",
                                "function": {"name": "python", "arguments": ""},
                            }
                        ]
                    }
                ),
                _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"code": '}}]}),
                _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"1"}'}}]}),
                _chunk({}, "tool_calls"),
            ],
            ["", "", "", ""],
            {
                "content": [{"type": "toolCall", "id": "c9", "name": "python", "arguments": {"code": "1"}}],
                "stopReason": "toolUse",
            },
        ),
        # Cut short: what arrived, no usage (so no zero-usage anchor).
        (
            [_chunk({"content": "par"})],
            ["par"],
            {"content": [{"type": "text", "text": "par"}], "stopReason": "stop"},
        ),
    ],
)
def test_stream_accumulator(chunks: list[dict[str, Any]], deltas: list[str], message: dict[str, Any]) -> None:
    acc = StreamAccumulator()
    assert [acc.add(c) for c in chunks] == deltas
    msg = from_openai_completion(acc.completion(), provider="p", model="m", timestamp="t")
    assert {k: msg.get(k) for k in message} == message
    assert ("usage" in msg) is ("usage" in message)
