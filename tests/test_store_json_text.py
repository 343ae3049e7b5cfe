"""The fast stored text of entry data is byte for byte the stdlib's (``store.json_text``), and the
fast paths of an import (digit runs, token estimates of tool calls) agree with the slow ones."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from ipython_compact.core.entries import Entry
from ipython_compact.core.javascript import js_json, js_length
from ipython_compact.core.tokens import _arguments_length, estimate_entry_tokens, estimate_entry_tokens_both
from ipython_compact.store.errors import ImportFormatError
from ipython_compact.store.importers import load_transcript
from ipython_compact.store.json_text import data_text, stdlib_data_text
from ipython_compact.store.log import has_long_digit_run

FIXTURES = Path(__file__).parent / "fixtures"

# Strings that look like numbers, escapes and quotes in every position a float fix-up could trip on.
TRICKY_STRINGS = [
    "",
    "re-run the one-time pre-check",
    '":5e-6,"',
    ":5e-6,",
    "[0.00001]",
    "x\\",
    "\\\\",
    '\\"',
    'a\\"b:1e-7,',
    "\\u0000",
    "\x00\x01\x1f\x7f",
    "\u2028\u2029",
    "é \U0001f600 漢字",
    "0.0000",
    "1e-5",
]
FLOATS = [0.0, -0.0, 1.5, 5e-06, 5e-05, 0.0001, 1e-07, 1.5e-10, -2.5e-05, 1e16, 1e21, 1e-300, 5e-324]


@pytest.mark.parametrize(
    "value",
    [
        {"cost": {"input": 5e-06, "output": 0.00285, "total": 0.21308625}},
        {"a": 0.00005, "b": "0.00005", "c": ["x", 1e-05]},
        {"text": 'say ":5e-6," twice', "n": 5e-06},
        {"text": "C:\\path\\", "n": 1e-05, "m": '\\"', "k": 2e-07},
        {"text": "\\\\\\", "after": [0.00001, "e-5", 3e-05]},
        {"é": 1e-05, "a": {"z": 1, "b": [True, None, 2**63]}},
        {"big": 2**64 + 1, "small": 1e-05},
        {"surrogate": "\ud800", "n": 1e-05},
        {"plain": "no floats here", "list": [1, 2, 3]},
    ],
)
def test_data_text_is_the_stdlib_text(value: dict[str, Any]) -> None:
    assert data_text(value) == stdlib_data_text(value)


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.45:
        return rng.choice([*TRICKY_STRINGS, *FLOATS, 0, -7, 2**53 + 1, True, False, None])
    if roll < 0.75:
        return {
            rng.choice(TRICKY_STRINGS) + str(i): _random_value(rng, depth + 1)
            for i in range(rng.randint(0, 5))
        }
    return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]


def test_data_text_matches_the_stdlib_on_random_values() -> None:
    rng = random.Random(21)
    for _ in range(20_000):
        value = {"v": _random_value(rng), "w": rng.choice(FLOATS), "s": rng.choice(TRICKY_STRINGS)}
        assert data_text(value) == stdlib_data_text(value), value


def _fixture_objects() -> list[dict[str, Any]]:
    out = []
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            out.append(value)
    return [v for v in out if isinstance(v, dict)]


def test_data_text_matches_the_stdlib_on_every_fixture_line() -> None:
    objects = _fixture_objects()
    assert len(objects) > 100
    for value in objects:
        assert data_text(value) == stdlib_data_text(value), value


@pytest.mark.parametrize(
    ("raw", "long_run"),
    [
        (b"1234567890123456789", True),  # an integer past 64 bits: orjson would read a float
        (b"-12345678901234567890", True),
        (b"0.1234567890123456789", False),  # fraction digits: a float either way
        (b'{"a": 0.0035250000000000004}', False),
        (b"1.0e1234567890123456789", True),  # an exponent that long: the stdlib says what is wrong
        (b"12345678901234567890.5", True),
        (b"0.1234567890123456789, 1234567890123456789", True),
        (b"123456789012345678", False),
    ],
)
def test_long_digit_runs_that_orjson_reads_otherwise(raw: bytes, long_run: bool) -> None:
    assert has_long_digit_run(raw) is long_run


def test_tool_call_lengths_match_javascripts_printing() -> None:
    rng = random.Random(4)
    for _ in range(20_000):
        arguments = _random_value(rng)
        assert _arguments_length(arguments) == js_length(js_json(arguments)), arguments


def test_both_estimates_in_one_pass_equal_each_alone() -> None:
    rng = random.Random(5)
    entries = [e for p in sorted(FIXTURES.rglob("*.jsonl")) for e in _entries(p)]
    for _ in range(5_000):
        blocks = [
            {"type": "toolCall", "name": "f", "arguments": _random_value(rng)},
            {"type": "text", "text": rng.choice(TRICKY_STRINGS)},
        ]
        data = {"message": {"role": "assistant", "content": blocks}}
        entries.append(Entry("x", None, "message", "t", data))
    assert len(entries) > 5_100
    for entry in entries:
        expected = (estimate_entry_tokens(entry, "density"), estimate_entry_tokens(entry, "chars4"))
        assert estimate_entry_tokens_both(entry) == expected
        assert estimate_entry_tokens_both(entry, orjson.dumps) == expected  # the store's fast printer


def _entries(path: Path) -> list[Entry]:
    try:
        return load_transcript(path).entries
    except ImportFormatError:  # fixtures of malformed files: not what this test is about
        return []
