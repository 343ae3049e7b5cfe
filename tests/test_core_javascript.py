"""JavaScript's string length and JSON.stringify, as pi's chars/4 estimate sees them.

Expected values were printed by Node 20 (``JSON.stringify(JSON.parse(text))``); the differential
fuzz (tests/test_pi_fuzz.py) checks many more against Node itself.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipython_compact.core.javascript import js_json, js_length, js_number, js_ordered_items, js_string
from ipython_compact.core.tokens import estimate_message_tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1e-05", "0.00001"),
        ("1e-06", "0.000001"),
        ("1e-07", "1e-7"),
        ("1.5e-07", "1.5e-7"),
        ("0.1", "0.1"),
        ("100.0", "100"),
        ("-0.0", "0"),
        ("1e16", "10000000000000000"),
        ("1e20", "100000000000000000000"),
        ("1e21", "1e+21"),
        ("1.2345e25", "1.2345e+25"),
        ("123456.789", "123456.789"),
        ("5e-324", "5e-324"),
        ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ("9007199254740993", "9007199254740992"),
        ("12345678901234567890", "12345678901234567000"),
        ("1" + "0" * 400, "null"),
        ("42", "42"),
        ("-7", "-7"),
    ],
)
def test_js_number_prints_like_node(text: str, expected: str) -> None:
    assert js_number(json.loads(text)) == expected
    assert js_json([json.loads(text)]) == f"[{expected}]"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "10": 2, "1": 3, "01": 4, "a": 5}, '{"1":3,"10":2,"b":1,"01":4,"a":5}'),
        ({"4294967295": 1, "4294967294": 2}, '{"4294967294":2,"4294967295":1}'),
        ({}, "{}"),
        ([], "[]"),
        ([{}, [[]], None, True, False], "[{},[[]],null,true,false]"),
        ({"s": 'q"\\\n\t\x01é😀'}, '{"s":"q\\"\\\\\\n\\t\\u0001é😀"}'),
        ("\ud800x", '"\\ud800x"'),
    ],
)
def test_js_json_matches_node(value: Any, expected: str) -> None:
    assert js_json(value) == expected


def test_js_json_handles_nesting_deeper_than_the_recursion_limit() -> None:
    value: Any = 1.0
    for _ in range(5000):
        value = {"a": [value]}
    text = js_json(value)
    assert text.startswith('{"a":[{"a":[') and text.endswith("]}" * 5000)
    assert "[1]" in text


@pytest.mark.parametrize(
    ("text", "length"),
    [("abc", 3), ("é", 1), ("😀", 2), ("\ud800", 1), ("a\udc00😀", 4), ("", 0)],
)
def test_js_length_counts_utf16_units_and_lone_surrogates(text: str, length: int) -> None:
    assert js_length(text) == length


def test_js_string_escapes_only_lone_surrogates() -> None:
    assert js_string("😀\ud83d") == '"😀\\ud83d"'
    assert js_length(js_string("\ud83d")) == 8


def test_ordered_items_keep_insertion_order_without_integer_keys() -> None:
    assert list(js_ordered_items({"z": 1, "a": 2})) == [("z", 1), ("a", 2)]


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        # 4 ("calc") + len('{"x":0.00001}') = 13 -> 17 chars -> 5 tokens (Python's "1e-05" would give 4)
        (
            {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": "c", "name": "calc", "arguments": {"x": 1e-05}}],
            },
            5,
        ),
        # pi iterates a string content as characters: nothing counts
        ({"role": "assistant", "content": "a" * 40}, 0),
        ({"role": "user", "content": "a\ud800bc"}, 1),
    ],
)
def test_chars4_uses_javascript_rules(message: dict[str, Any], tokens: int) -> None:
    assert estimate_message_tokens(message, "chars4") == tokens
