"""Token estimation: usage anchors, pi's chars/4 rules, the density estimator, and path views."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from builders import assistant_message, tool_result_message
from builders import text_block as text
from builders import user_message as user

from ipython_compact.core.entries import Entry
from ipython_compact.core.tokens import (
    ContextEstimate,
    calculate_context_tokens,
    estimate_context,
    estimate_entry_tokens,
    estimate_message_tokens,
    js_json,
    js_length,
    usage_of,
)

IMAGE = {"type": "image", "data": "AAAA", "mimeType": "image/png"}


def assistant(
    t: str = "", usage: dict[str, int] | None = None, stop: str = "stop", blocks: list[Any] | None = None
) -> dict[str, Any]:
    return assistant_message(t, blocks=blocks, usage=usage, stop=stop)


def tool_result(t: str, *extra: dict[str, Any]) -> dict[str, Any]:
    return tool_result_message("c1", t, name="read", blocks=extra)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"input": 1000, "output": 500, "cacheRead": 200, "cacheWrite": 100}, 1800),
        ({"input": 1000, "output": 500, "cacheRead": 200, "cacheWrite": 100, "totalTokens": 5000}, 5000),
        ({"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}, 15),
        ({"input": 7}, 7),
        ({}, 0),
    ],
)
def test_calculate_context_tokens(usage: dict[str, int], expected: int) -> None:
    assert calculate_context_tokens(usage) == expected


@pytest.mark.parametrize(
    ("message", "anchors"),
    [
        (assistant("x", {"input": 1}), True),
        (assistant("x", {"input": 1}, stop="toolUse"), True),
        (assistant("x", {"input": 1}, stop="aborted"), False),
        (assistant("x", {"input": 1}, stop="error"), False),
        (assistant("x"), False),
        (user("x"), False),
    ],
)
def test_usage_anchor_rules(message: dict[str, Any], anchors: bool) -> None:
    assert (usage_of(message) is not None) == anchors


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (user("a" * 400), 100),
        (user("a" * 401), 101),
        (user("abcd", IMAGE), 1),  # pi 0.73.1 does not count images in user messages
        ({"role": "user", "content": "abcdefgh"}, 2),
        (assistant(blocks=[text("a" * 8), {"type": "thinking", "thinking": "b" * 8}]), 4),
        (
            assistant(
                blocks=[{"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "a.py"}}]
            ),
            5,
        ),  # 4 + 15 chars
        (tool_result("abcd", IMAGE), 1201),
        ({"role": "custom", "customType": "x", "content": "abcd", "display": True}, 1),
        ({"role": "bashExecution", "command": "ls", "output": "a.py\nb.py", "exitCode": 0}, 3),
        ({"role": "compactionSummary", "summary": "s" * 40}, 10),
        ({"role": "branchSummary", "summary": "s" * 41, "fromId": "x"}, 11),
        ({"role": "system", "content": "s" * 12}, 3),
        (user("😀" * 4), 2),  # UTF-16 code units, as JavaScript counts
        ({"role": "mystery"}, 0),
    ],
)
def test_chars4_follows_pi(message: dict[str, Any], expected: int) -> None:
    assert estimate_message_tokens(message, "chars4") == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (user("a" * 400), 100),  # ASCII prose: 4 chars/token
        (user("```\n" + "x" * 292 + "\n```"), 100),  # fenced code: 3 chars/token (fences included)
        (user("中" * 30), 20),  # CJK: 1.5 chars/token
        (user("é" * 10), 5),  # other non-ASCII: 2 chars/token
        (user("", IMAGE), 1200),  # images count in user messages too
        (tool_result("", IMAGE, IMAGE), 2400),
        # code rate
        (assistant(blocks=[{"type": "toolCall", "id": "c", "name": "abc", "arguments": {"k": "v" * 4}}]), 5),
        ({"role": "bashExecution", "command": "ls", "output": "x" * 10}, 4),
        ({"role": "compactionSummary", "summary": "s" * 40}, 10),
        ({"role": "mystery"}, 0),
    ],
)
def test_density_prices_content_by_kind(message: dict[str, Any], expected: int) -> None:
    assert estimate_message_tokens(message, "density") == expected


def _density_by_character(text: str) -> int:
    """The density rule for prose written out character by character (the reference)."""
    cjk = re.compile(
        "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
        "\U00020000-\U0002fa1f]"
    )
    units = 0.0
    for ch in text:
        units += 1 / 4 if ord(ch) < 128 else 1 / 1.5 if cjk.fullmatch(ch) else 1 / 2
    return math.ceil(units - 1e-9)


@pytest.mark.parametrize(
    "text",
    [
        "café " * 20,  # two-byte characters only: no CJK search at all
        "a — b … c " * 20,  # three-byte but not CJK
        "naïve 中文 text " * 10,
        "ひらがな カタカナ 한국어 " * 5,  # the pattern's other ranges
        "\U00020000\U0002a6d6 astral CJK 😀",  # four-byte: CJK and not
        "\u07ff\u0800\u303f\u3040",  # around the edges
        "lone \ud800 surrogate \udfff",
    ],
)
def test_density_of_non_ascii_prose_matches_counting_each_character(text: str) -> None:
    assert estimate_message_tokens(user(text), "density") == _density_by_character(text)


def test_unknown_estimator_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown estimator 'words'"):
        estimate_message_tokens(user("x"), "words")


@pytest.mark.parametrize(("value", "length"), [("abc", 3), ("é", 1), ("😀", 2), ("a😀b", 4)])
def test_js_length_counts_utf16_units(value: str, length: int) -> None:
    assert js_length(value) == length


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([], ContextEstimate(0, 0, 0, None)),
        ([user("a" * 40), assistant("b" * 40)], ContextEstimate(20, 0, 20, None)),
        (
            [user("a" * 40), assistant("x", {"totalTokens": 500}), user("a" * 40)],
            ContextEstimate(510, 500, 10, 1),
        ),
        (
            [
                assistant("x", {"totalTokens": 500}),
                assistant("x", {"totalTokens": 900}, stop="aborted"),
                user("a" * 4),
            ],
            ContextEstimate(502, 500, 2, 0),
        ),  # aborted usage skipped; the aborted message is estimated
        (
            [assistant("x", {"totalTokens": 500}), assistant("y", {"totalTokens": 700})],
            ContextEstimate(700, 700, 0, 1),
        ),
    ],
)
def test_estimate_context_of_messages(messages: list[dict[str, Any]], expected: ContextEstimate) -> None:
    assert estimate_context(messages, "chars4") == expected


def chain(*specs: tuple[str, dict[str, Any]]) -> list[Entry]:
    out: list[Entry] = []
    for i, (kind, data) in enumerate(specs):
        out.append(Entry(f"e{i}", out[-1].id if out else None, kind, f"2026-01-01T00:00:{i:02d}Z", data))
    return out


def test_path_estimate_ignores_usage_from_before_the_newest_compaction() -> None:
    # The only usage is on a message the compaction kept: it measured the pre-compaction context.
    path = chain(
        ("message", {"message": user("a" * 400)}),
        ("message", {"message": assistant("b" * 40, {"totalTokens": 90000})}),
        ("compaction", {"summary": "s" * 40, "first_kept_entry_id": "e1", "tokens_before": 90000}),
        ("message", {"message": user("c" * 40)}),
    )
    estimate = estimate_context(path, "density")
    assert estimate == ContextEstimate(10 + 10 + 10, 0, 30, None)  # summary + kept assistant + new user
    # pi (chars4) anchors on it anyway: 90000 + the new user message after it in the view
    assert estimate_context(path, "chars4") == ContextEstimate(90010, 90000, 10, 1)


def test_path_estimate_uses_usage_after_the_compaction_and_stored_counts() -> None:
    path = chain(
        ("message", {"message": user("a" * 400)}),
        ("compaction", {"summary": "s" * 40, "first_kept_entry_id": "e0", "tokens_before": 1}),
        ("message", {"message": assistant("b", {"totalTokens": 1234})}),
        ("model_change", {"provider": "p", "model_id": "m"}),
        ("message", {"message": user("c" * 40)}),
    )
    stored = [estimate_entry_tokens(e, "chars4") for e in path]
    assert stored[3] == 0
    assert estimate_context(path, "chars4") == ContextEstimate(1244, 1234, 10, 2)
    assert estimate_context(path, "chars4", tokens=stored) == estimate_context(path, "chars4")
    with pytest.raises(ValueError, match="tokens has 2 counts for a path of 5 entries"):
        estimate_context(path, "chars4", tokens=[1, 2])


@pytest.mark.parametrize(
    ("kind", "data", "tokens"),
    [
        ("model_change", {"provider": "p", "model_id": "m"}, 0),
        ("label", {"target_id": "x", "label": "l"}, 0),
        ("custom", {"custom_type": "t", "data": {"a": "b" * 100}}, 0),
        ("pin", {"action": "pin", "text": "x" * 100, "pin_id": "p"}, 0),
        ("kernel_state", {"content": "k" * 40}, 10),
        ("system", {"content": "k" * 40}, 10),
        ("custom_message", {"custom_type": "t", "content": "k" * 40, "display": True}, 10),
        ("branch_summary", {"summary": "k" * 40, "from_id": "x"}, 10),
        ("compaction", {"summary": "k" * 40, "first_kept_entry_id": "x", "tokens_before": 5}, 10),
    ],
)
def test_entry_tokens_zero_for_non_context_entries(kind: str, data: dict[str, Any], tokens: int) -> None:
    assert estimate_entry_tokens(Entry("x", None, kind, "t", data), "chars4") == tokens


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": 1.0, "b": [2.5, 3.0], "c": "é"}, '{"a":1,"b":[2.5,3],"c":"é"}'),
        ({"n": 1e16}, '{"n":10000000000000000}'),
        (None, "null"),
    ],
)
def test_js_json_prints_like_json_stringify(value: Any, expected: str) -> None:
    assert js_json(value) == expected
