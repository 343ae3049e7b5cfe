"""Compaction preparation: the summarized span, split-turn prefix, kept tail and file lists."""

from __future__ import annotations

from typing import Any

import pytest
from core_paths import path_of

from ipython_compact.core.entries import COMPACTION
from ipython_compact.core.file_lists import format_file_lists
from ipython_compact.core.messages import entry_message
from ipython_compact.core.preparation import prepare_compaction
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.tokens import estimate_context, estimate_entry_tokens


def settings(keep: int, **kw: Any) -> CompactionSettings:
    return CompactionSettings(keep_recent_tokens=keep, **{"estimator": "chars4", **kw})


def ids(entries: Any) -> list[str]:
    return [e.id for e in entries]


@pytest.mark.parametrize(
    "specs",
    [
        [],
        [("u", 10), ("a", 10), ("c", 0, "summary")],  # already compacted
        [("u", 10), ("a", 10)],  # everything fits: nothing to summarize
    ],
)
def test_nothing_to_do(specs: list[tuple[Any, ...]]) -> None:
    assert prepare_compaction(path_of(*specs), settings(1000)) is None


def test_first_compaction_summarizes_the_head_and_keeps_the_tail() -> None:
    path = path_of(("u", 100), ("a", 100), ("u", 10), ("a", 10))
    prep = prepare_compaction(path, settings(20))
    assert prep is not None
    assert (prep.first_kept_entry_id, prep.first_kept_index, prep.boundary_start) == ("e2", 2, 0)
    assert ids(prep.messages_to_summarize) == ["e0", "e1"]
    assert ids(prep.kept) == ["e2", "e3"]
    assert (prep.is_split_turn, prep.turn_start_index, prep.turn_prefix) == (False, -1, ())
    assert prep.previous_summary is None
    assert prep.tokens_before == 220


def test_second_compaction_summarizes_what_the_first_one_kept() -> None:
    # pi (March 2026) started after the previous compaction entry and dropped e2, e3 forever.
    path = path_of(
        ("u", 100),
        ("a", 100),
        ("u", 10),
        ("a", 10),
        ("c", 2, "first summary"),
        ("u", 100),
        ("a", 100),
        ("u", 10),
        ("a", 10),
    )
    prep = prepare_compaction(path, settings(20))
    assert prep is not None
    assert prep.boundary_start == 2
    assert ids(prep.messages_to_summarize) == ["e2", "e3", "e5", "e6"]
    assert all(e.kind != COMPACTION for e in prep.messages_to_summarize)
    assert ids(prep.kept) == ["e7", "e8"]
    assert prep.previous_summary == "first summary"
    assert prep.previous_compaction_index == 4


def test_previous_first_kept_missing_falls_back_to_after_the_compaction() -> None:
    path = path_of(("u", 100), ("c", 0, "s"), ("u", 100), ("a", 100), ("u", 10))
    path[1] = path[1].__class__(
        path[1].id,
        path[1].parent_id,
        "compaction",
        path[1].timestamp,
        {"summary": "s", "first_kept_entry_id": "gone", "tokens_before": 1},
    )
    prep = prepare_compaction(path, settings(10))
    assert prep is not None
    assert prep.boundary_start == 2
    assert ids(prep.messages_to_summarize) == ["e2", "e3"]


def test_split_turn_has_a_prefix() -> None:
    path = path_of(("u", 50), ("a", 50), ("u", 10), ("ac", 10, "read", "a.py"), ("t", 100), ("a", 10))
    prep = prepare_compaction(path, settings(10))
    assert prep is not None
    assert (prep.is_split_turn, prep.turn_start_index, prep.first_kept_index) == (True, 2, 5)
    assert ids(prep.messages_to_summarize) == ["e0", "e1"]
    assert ids(prep.turn_prefix) == ["e2", "e3", "e4"]
    assert ids(prep.kept) == ["e5"]
    assert prep.read_files == ("a.py",)


@pytest.mark.parametrize(
    ("specs", "keep", "first_kept", "summarized"),
    [
        # pi: cut at a bashExecution is a "split" with an empty prefix; here it is a clean cut
        ([("u", 10), ("a", 10), ("b", 10), ("a", 10)], 20, 2, ["e0", "e1"]),
        # pi: a cut extended over a setting change before a user message "splits" the previous turn
        ([("u", 10), ("a", 10), ("mc",), ("tl",), ("u", 10), ("a", 10)], 20, 2, ["e0", "e1"]),
        # issue 36's shapes: after a compaction, the cut lands on a bash command, a custom message
        # or a branch summary (moved back to it over a setting change): each opens its own turn
        ([("u", 10), ("a", 10), ("c", 0, "s"), ("b", 10), ("a", 10)], 20, 3, ["e0", "e1"]),
        ([("u", 10), ("a", 10), ("c", 0, "s"), ("cm", 10), ("mc",), ("u", 10)], 20, 3, ["e0", "e1"]),
        ([("u", 10), ("a", 10), ("c", 0, "s"), ("bs", 10), ("u", 10), ("a", 10)], 20, 3, ["e0", "e1"]),
    ],
)
def test_pi_split_turn_quirks_are_corrected(
    specs: list[tuple[Any, ...]], keep: int, first_kept: int, summarized: list[str]
) -> None:
    prep = prepare_compaction(path_of(*specs), settings(keep, estimator="density"))
    assert prep is not None
    assert (prep.first_kept_index, prep.is_split_turn, prep.turn_start_index, prep.turn_prefix) == (
        first_kept,
        False,
        -1,
        (),
    )
    assert ids(prep.messages_to_summarize) == summarized


@pytest.mark.parametrize(
    ("specs", "keep", "first_kept", "turn_start", "summarized", "prefix"),
    [
        # a cut at a bashExecution: pi's "split" with an empty prefix
        ([("u", 10), ("a", 10), ("b", 10), ("a", 10)], 20, 2, 2, ["e0", "e1"], []),
        # a cut extended over a setting change before a user message: the previous turn is the prefix
        ([("u", 10), ("a", 10), ("mc",), ("tl",), ("u", 10), ("a", 10)], 20, 2, 0, [], ["e0", "e1"]),
        # issue 36's shapes (pi 0.73.1 plans them so): a split turn that starts at the cut itself
        ([("u", 10), ("a", 10), ("c", 0, "s"), ("b", 10), ("a", 10)], 20, 3, 3, ["e0", "e1"], []),
        ([("u", 10), ("a", 10), ("c", 0, "s"), ("cm", 10), ("mc",), ("u", 10)], 10, 3, 3, ["e0", "e1"], []),
        ([("u", 10), ("a", 10), ("c", 0, "s"), ("bs", 10), ("u", 10), ("a", 10)], 20, 3, 3, ["e0", "e1"], []),
    ],
)
def test_chars4_keeps_pi_split_turn_quirks(
    specs: list[tuple[Any, ...]],
    keep: int,
    first_kept: int,
    turn_start: int,
    summarized: list[str],
    prefix: list[str],
) -> None:
    prep = prepare_compaction(path_of(*specs), settings(keep))
    assert prep is not None
    assert (prep.first_kept_index, prep.is_split_turn, prep.turn_start_index) == (
        first_kept,
        True,
        turn_start,
    )
    assert (ids(prep.messages_to_summarize), ids(prep.turn_prefix)) == (summarized, prefix)


@pytest.mark.parametrize("keep", [1, 10, 25, 60, 120, 135])
def test_every_context_entry_is_summarized_prefixed_or_kept_exactly_once(keep: int) -> None:
    path = path_of(
        ("u", 30),
        ("a", 10),
        ("c", 0, "s"),
        ("mc",),
        ("u", 20),
        ("ac", 5, "edit", "b.py"),
        ("t", 40),
        ("ks", 5),
        ("a", 10),
        ("cm", 5),
        ("u", 10),
        ("a", 30),
    )
    prep = prepare_compaction(path, settings(keep, estimator="density"))
    assert prep is not None
    expected = [
        e.id for e in path[prep.boundary_start :] if e.kind != COMPACTION and entry_message(e) is not None
    ]
    assert ids(prep.messages_to_summarize) + ids(prep.turn_prefix) + ids(prep.kept) == expected


def test_file_lists_follow_pi_and_merge_the_previous_compaction() -> None:
    details = {"read_files": ["old-read.py", "both.py"], "modified_files": ["old-mod.py"]}
    path = path_of(
        ("u", 5),
        ("c", 0, "s", details),
        ("ac", 5, "read", "r.py"),
        ("t", 5),
        ("ac", 5, "read", "both.py"),
        ("t", 5),
        ("ac", 5, "write", "w.py"),
        ("t", 5),
        ("ac", 5, "edit", "r2.py"),
        ("t", 5),
        ("ac", 5, "read", "r2.py"),
        ("t", 5),
        ("ac", 5, "bash", "ignored.py"),
        ("t", 5),
        ("u", 100),
    )
    prep = prepare_compaction(path, settings(50))
    assert prep is not None
    assert prep.read_files == ("both.py", "old-read.py", "r.py")
    assert prep.modified_files == ("old-mod.py", "r2.py", "w.py")


def test_hook_made_compaction_details_are_not_merged() -> None:
    details = {"readFiles": ["hook.py"], "modifiedFiles": []}
    path = path_of(("u", 5), ("c", 0, "s", details), ("u", 50), ("a", 50), ("u", 10))
    comp = path[1]
    path[1] = comp.__class__(
        comp.id, comp.parent_id, comp.kind, comp.timestamp, {**comp.data, "from_hook": True}
    )
    prep = prepare_compaction(path, settings(10))
    assert prep is not None
    assert prep.read_files == ()
    path[1] = comp
    merged = prepare_compaction(path, settings(10))
    assert merged is not None
    assert merged.read_files == ("hook.py",)


@pytest.mark.parametrize(("keep", "first_kept"), [(1, 7), (10, 7), (60, 6), (10_000, None)])
def test_stored_counts_and_tokens_before(keep: int, first_kept: int | None) -> None:
    path = path_of(
        ("u", 30),
        ("a", 10),
        ("c", 0, "s" * 40),
        ("u", 20),
        ("ac", 5, "edit", "b.py"),
        ("t", 40),
        ("a", 10),
        ("u", 10),
    )
    stored = [estimate_entry_tokens(e, "chars4") for e in path]
    assert prepare_compaction(path, settings(keep), tokens=stored) == prepare_compaction(path, settings(keep))
    prep = prepare_compaction(path, settings(keep))
    if first_kept is None:  # everything fits in the budget: nothing to compact
        assert prep is None
        return
    assert prep is not None
    assert prep.first_kept_index == first_kept
    assert prep.tokens_before == estimate_context(path, "chars4").tokens == 140


def test_turn_alignment_setting_is_used() -> None:
    path = path_of(("u", 50), ("a", 50), ("u", 10), ("a", 10), ("t", 10), ("a", 10))
    split = prepare_compaction(path, settings(30))
    aligned = prepare_compaction(path, settings(30, turn_alignment=True))
    assert split is not None and aligned is not None
    assert (split.is_split_turn, split.first_kept_index) == (True, 3)
    assert (aligned.is_split_turn, aligned.first_kept_index) == (False, 2)


@pytest.mark.parametrize(
    ("read", "modified", "expected"),
    [
        ((), (), ""),
        (("a",), (), "\n\n<read-files>\na\n</read-files>"),
        (
            ("a", "b"),
            ("c",),
            "\n\n<read-files>\na\nb\n</read-files>\n\n<modified-files>\nc\n</modified-files>",
        ),
    ],
)
def test_format_file_lists(read: tuple[str, ...], modified: tuple[str, ...], expected: str) -> None:
    assert format_file_lists(read, modified) == expected
