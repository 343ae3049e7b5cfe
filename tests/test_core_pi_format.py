"""pi session files: v1–v3 migration, conversion to entries, errors with line numbers, the inverse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ipython_compact.core.entries import Entry
from ipython_compact.core.pi_format import PiFormatError, entry_to_pi, parse_pi_session

FIXTURES = Path(__file__).parent / "fixtures" / "pi"
TS = "2026-01-01T00:00:00.000Z"


def lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as fh:
        return [(n, json.loads(raw)) for n, raw in enumerate(fh, start=1) if raw.strip()]


def numbered(*objects: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return list(enumerate(objects, start=1))


HEADER_V3 = {"type": "session", "version": 3, "id": "sess", "timestamp": TS, "cwd": "/w"}
USER = {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}


def test_v1_fixture_gets_deterministic_chained_ids_and_compaction_heads() -> None:
    objects = lines(FIXTURES / "before-compaction.jsonl")
    first = parse_pi_session(objects)
    again = parse_pi_session(objects)
    assert [e.id for e in first.entries] == [e.id for e in again.entries]
    assert first.version == 1
    assert len(first.entries) == len(objects) - 1
    assert len({e.id for e in first.entries}) == len(first.entries)
    assert all(e.parent_id == (first.entries[i - 1].id if i else None) for i, e in enumerate(first.entries))
    compactions = [(i, e) for i, e in enumerate(first.entries) if e.kind == "compaction"]
    assert [i for i, _ in compactions] == [358, 627]
    # firstKeptEntryIndex counts the header as object 0: 293 → entries[292]
    assert compactions[0][1].data["first_kept_entry_id"] == first.entries[292].id
    assert compactions[1][1].data["first_kept_entry_id"] == first.entries[550].id
    assert compactions[0][1].data["tokens_before"] == 175004
    assert "firstKeptEntryIndex" not in json.dumps(compactions[0][1].data)
    changes = [e for e in first.entries if e.kind == "model_change"]
    assert changes[-1].data == {"provider": "anthropic", "model_id": "claude-opus-4-5"}
    assert first.leaf_id == first.entries[-1].id


@pytest.mark.parametrize(("version", "role"), [(1, "custom"), (2, "custom"), (3, "hookMessage")])
def test_hook_message_role_becomes_custom_before_v3(version: int, role: str) -> None:
    header = {**HEADER_V3, "version": version}
    message = {"role": "hookMessage", "customType": "x", "content": "c", "display": True, "timestamp": 1}
    entry = {"type": "message", "timestamp": TS, "message": message}
    if version >= 2:
        entry |= {"id": "a1", "parentId": None}
    if version == 3:
        with pytest.raises(PiFormatError, match="unknown role 'hookMessage'"):
            parse_pi_session(numbered(header, entry))
        return
    session = parse_pi_session(numbered(header, entry))
    assert session.entries[0].data["message"]["role"] == role


def test_v3_ids_parents_and_fields_are_kept() -> None:
    objects = numbered(
        HEADER_V3,
        {"type": "message", "id": "m1", "parentId": None, "timestamp": TS, "message": USER},
        {
            "type": "thinking_level_change",
            "id": "t1",
            "parentId": "m1",
            "timestamp": TS,
            "thinkingLevel": "high",
        },
        {
            "type": "compaction",
            "id": "c1",
            "parentId": "t1",
            "timestamp": TS,
            "summary": "S",
            "firstKeptEntryId": "m1",
            "tokensBefore": 10,
            "details": {"readFiles": ["a"], "modifiedFiles": ["b"]},
        },
        {
            "type": "branch_summary",
            "id": "b1",
            "parentId": "m1",
            "timestamp": TS,
            "summary": "B",
            "fromId": "c1",
        },
        {
            "type": "custom_message",
            "id": "x1",
            "parentId": "b1",
            "timestamp": TS,
            "customType": "n",
            "content": "hello",
            "display": False,
            "details": {"k": 1},
        },
        {
            "type": "custom",
            "id": "x2",
            "parentId": "x1",
            "timestamp": TS,
            "customType": "state",
            "data": {"a": 1},
        },
        {"type": "label", "id": "l1", "parentId": "x2", "timestamp": TS, "targetId": "m1", "label": "start"},
        {
            "type": "session_info",
            "id": "s1",
            "parentId": "l1",
            "timestamp": TS,
            "name": "demo",
            "futureField": [1],
        },
    )
    session = parse_pi_session(objects)
    by_id = {e.id: e for e in session.entries}
    assert [e.id for e in session.entries] == ["m1", "t1", "c1", "b1", "x1", "x2", "l1", "s1"]
    assert by_id["b1"].parent_id == "m1"
    assert by_id["c1"].data == {
        "summary": "S",
        "first_kept_entry_id": "m1",
        "tokens_before": 10,
        "details": {"read_files": ["a"], "modified_files": ["b"]},
    }
    assert by_id["t1"].data == {"thinking_level": "high"}
    assert by_id["b1"].data == {"summary": "B", "from_id": "c1"}
    assert by_id["x1"].data == {"custom_type": "n", "content": "hello", "display": False, "details": {"k": 1}}
    assert by_id["l1"].data == {"target_id": "m1", "label": "start"}
    assert by_id["s1"].data == {"name": "demo", "pi_extra": {"futureField": [1]}}
    # the inverse restores every original object
    assert [entry_to_pi(e) for e in session.entries] == [obj for _, obj in objects[1:]]


def test_entry_to_pi_refuses_our_own_kinds() -> None:
    with pytest.raises(ValueError, match="kind 'kernel_state'"):
        entry_to_pi(Entry("k", None, "kernel_state", TS, {"content": "x"}))


V2 = {**HEADER_V3, "version": 2}


@pytest.mark.parametrize(
    ("objects", "line", "message"),
    [
        ([], 1, "empty file"),
        ([{"type": "message", "timestamp": TS, "message": USER}], 1, "session header"),
        ([{**HEADER_V3, "version": 9}], 1, "unsupported pi session version 9"),
        ([HEADER_V3, [1, 2]], 2, "expected a JSON object"),
        ([HEADER_V3, HEADER_V3], 2, "second session header"),
        (
            [HEADER_V3, {"type": "message", "parentId": None, "timestamp": TS, "message": USER}],
            2,
            "'id' must be",
        ),
        (
            [
                V2,
                {"type": "message", "id": "a", "parentId": "b", "timestamp": TS, "message": USER},
                {"type": "message", "id": "b", "parentId": None, "timestamp": TS, "message": USER},
            ],
            2,
            "parentId 'b'",
        ),
        (
            [V2, {"type": "message", "id": "a", "parentId": "a", "timestamp": TS, "message": USER}],
            2,
            "parentId 'a'",
        ),
        (
            [
                V2,
                {"type": "message", "id": "a", "parentId": None, "timestamp": TS, "message": USER},
                {"type": "message", "id": "a", "parentId": "a", "timestamp": TS, "message": USER},
            ],
            3,
            "duplicate entry id 'a'",
        ),
        (
            [V2, {"type": "message", "id": "a", "parentId": 5, "timestamp": TS, "message": USER}],
            2,
            "'parentId' must be",
        ),
        (
            [V2, {"type": "wormhole", "id": "a", "parentId": None, "timestamp": TS}],
            2,
            "unknown entry type 'wormhole'",
        ),
        ([V2, {"type": "message", "id": "a", "parentId": None, "message": USER}], 2, "'timestamp'"),
        ([V2, {"type": "message", "id": "a", "parentId": None, "timestamp": TS}], 2, "no 'message' object"),
        (
            [
                V2,
                {
                    "type": "message",
                    "id": "a",
                    "parentId": None,
                    "timestamp": TS,
                    "message": {"role": "robot"},
                },
            ],
            2,
            "unknown role",
        ),
        (
            [
                V2,
                {
                    "type": "message",
                    "id": "a",
                    "parentId": None,
                    "timestamp": TS,
                    "message": {"role": "user"},
                },
            ],
            2,
            "'content'",
        ),
        (
            [V2, {"type": "compaction", "id": "a", "parentId": None, "timestamp": TS, "summary": "s"}],
            2,
            "no firstKeptEntryId",
        ),
        (
            [
                V2,
                {"type": "compaction", "id": "a", "parentId": None, "timestamp": TS, "firstKeptEntryId": "a"},
            ],
            2,
            "'summary'",
        ),
        (
            [V2, {"type": "model_change", "id": "a", "parentId": None, "timestamp": TS, "provider": "p"}],
            2,
            "'modelId'",
        ),
        (
            [
                {"type": "session", "id": "s", "timestamp": TS},
                {"type": "compaction", "timestamp": TS, "summary": "s", "firstKeptEntryIndex": 7},
            ],
            2,
            "points outside the file",
        ),
    ],
)
def test_malformed_input_names_the_line(objects: list[Any], line: int, message: str) -> None:
    with pytest.raises(PiFormatError) as info:
        parse_pi_session(numbered(*objects))
    assert info.value.line_number == line
    assert message in str(info.value)
    assert str(info.value).startswith(f"line {line}: ")


def _fork_file() -> list[dict[str, Any]]:
    # what pi's createBranchedSession writes: the path without its label "l1" (parent of "c"),
    # then the label re-created at the end
    return [
        HEADER_V3,
        {"type": "message", "id": "a", "parentId": None, "timestamp": TS, "message": USER},
        {"type": "message", "id": "b", "parentId": "a", "timestamp": TS, "message": {**USER, "role": "user"}},
        {"type": "message", "id": "c", "parentId": "l1", "timestamp": TS, "message": USER},
        {"type": "message", "id": "d", "parentId": "c", "timestamp": TS, "message": USER},
        {"type": "label", "id": "l2", "parentId": "d", "timestamp": TS, "targetId": "a", "label": "start"},
    ]


def test_fork_file_children_of_a_dropped_label_are_relinked_to_the_entry_before() -> None:
    session = parse_pi_session(numbered(*_fork_file()))
    by_id = {e.id: e for e in session.entries}
    assert [(e.id, e.parent_id) for e in session.entries] == [
        ("a", None),
        ("b", "a"),
        ("c", "b"),
        ("d", "c"),
        ("l2", "d"),
    ]
    assert by_id["c"].data["pi_extra"] == {"danglingParentId": "l1"}
    assert "pi_extra" not in by_id["d"].data
    # the export keeps the re-linked parent and names the original one
    assert entry_to_pi(by_id["c"])["parentId"] == "b"
    assert entry_to_pi(by_id["c"])["danglingParentId"] == "l1"


def test_fork_file_whose_first_entry_had_a_label_parent_becomes_a_root() -> None:
    objects = [
        HEADER_V3,
        {"type": "message", "id": "a", "parentId": "gone", "timestamp": TS, "message": USER},
    ]
    assert [(e.id, e.parent_id) for e in parse_pi_session(numbered(*objects)).entries] == [("a", None)]
