"""The tree hash an insert computes from the stored data text equals ``entry_hash`` (issue 21,
item 4: an import no longer serializes every entry's data twice). Table-driven, pure."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipython_compact.core.entries import Entry
from ipython_compact.store.log import entry_hash, read_back, stored_data_text, stored_entry_hash

DATA: list[dict[str, Any]] = [
    {},
    {"message": {"role": "user", "content": "hello"}},
    {"message": {"role": "assistant", "content": [{"type": "text", "text": '日本語 é \u2028 "q" \\ \n'}]}},
    {"z": 1, "a": [1.5, -0.0, 1e16, 2**70, None, True], "m": {"b": {}, "a": []}},
    {"emoji": "😀", "control": "\x00\x1f", "line": "\u2028\u2029"},
    {"summary": "x" * 10_000, "first_kept_entry_id": "abc"},
]
IDS = [("e1", None), ("é-2", "e1"), ('quote"id', "par\\ent"), ("😀", "\u2603")]


@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize(("entry_id", "parent"), IDS)
def test_the_hash_from_the_stored_text_is_the_entry_hash(
    data: dict[str, Any], entry_id: str, parent: str | None
) -> None:
    text = stored_data_text(data)
    stored = Entry(entry_id, parent, "message", "2025-01-02T03:04:05.678Z", json.loads(text))
    for parent_hash in ("", "ab" * 32):
        assert stored_entry_hash(parent_hash, stored, text) == entry_hash(parent_hash, stored)


def test_another_data_text_gives_another_hash() -> None:
    stored = Entry("e1", None, "message", "t", {"a": 1})
    assert stored_entry_hash("", stored, stored_data_text({"a": 2})) != entry_hash("", stored)


@pytest.mark.parametrize(
    "data",
    [
        *DATA,
        {"big": 2**70, "neg": -(2**63) - 1, "edge": 2**64 - 1, "float": 0.1 + 0.2, "tiny": 5e-324},
        {"lone": "\ud800 surrogate"},
        {"deep": json.loads("[" * 900 + "]" * 900)},
    ],
)
def test_reading_back_a_stored_text_is_exactly_the_stdlib_reading(data: dict[str, Any]) -> None:
    text = stored_data_text(data)
    back = read_back(text)
    assert back == json.loads(text)
    assert stored_data_text(back) == text  # types too: an int stays an int, -0.0 keeps its sign
