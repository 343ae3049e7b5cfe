"""The model's context view and branch-summary collection."""

from __future__ import annotations

from typing import Any

import pytest
from core_paths import path_of

from ipython_compact.core.context import (
    SUMMARY_PREFIX,
    build_agent_messages,
    build_context,
    collect_branch_entries,
    context_start_index,
    prepare_branch_entries,
    view_indices,
)
from ipython_compact.core.entries import Entry
from ipython_compact.core.messages import SUMMARY_SUFFIX


def first_text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else content[0]["text"]


@pytest.mark.parametrize(
    ("specs", "view", "start"),
    [
        # no compaction: every context entry
        ([("u", 1), ("mc",), ("a", 1), ("t", 1)], [0, 2, 3], 0),
        # one compaction: summary, kept entries from first_kept up to it, then everything after
        ([("u", 1), ("a", 1), ("u", 1), ("a", 1), ("c", 2, "S1"), ("u", 1), ("a", 1)], [4, 2, 3, 5, 6], 2),
        # two compactions: only the newest matters
        ([("u", 1), ("a", 1), ("c", 1, "S1"), ("u", 1), ("a", 1), ("c", 3, "S2"), ("u", 1)], [5, 3, 4, 6], 3),
        # first kept = first entry: whole history stays, behind the summary
        ([("u", 1), ("a", 1), ("c", 0, "S1"), ("u", 1)], [2, 0, 1, 3], 0),
        # an older compaction inside the kept range is not repeated
        ([("u", 1), ("c", 0, "S1"), ("a", 1), ("c", 0, "S2"), ("u", 1)], [3, 0, 2, 4], 0),
        # first kept not on the path: summary and what follows only
        ([("u", 1), ("a", 1), ("c", 99, "S1"), ("u", 1)], [2, 3], 2),
        # entries that carry no context are never in the view
        (
            [("sys", 1), ("u", 1), ("mc",), ("tl",), ("ks", 1), ("cm", 1), ("bs", 1), ("a", 1)],
            [0, 1, 4, 5, 6, 7],
            0,
        ),
    ],
)
def test_view_and_start(specs: list[tuple[Any, ...]], view: list[int], start: int) -> None:
    path = path_of(*specs)
    assert view_indices(path) == view
    assert context_start_index(path) == start
    # a store that reads only path[start:] builds the identical view
    assert build_context(path[start:]) == build_context(path)
    assert build_agent_messages(path[start:]) == build_agent_messages(path)


def test_summary_heads_the_view_as_a_wrapped_user_message() -> None:
    path = path_of(("u", 1), ("a", 1), ("c", 1, "THE SUMMARY"), ("u", 1))
    context = build_context(path)
    assert [m["role"] for m in context] == ["user", "assistant", "user"]
    assert first_text(context[0]) == SUMMARY_PREFIX + "THE SUMMARY" + SUMMARY_SUFFIX
    agent = build_agent_messages(path)
    assert agent[0] == {"role": "compactionSummary", "summary": "THE SUMMARY", "tokensBefore": 0}


def test_provider_view_has_only_provider_roles() -> None:
    path = path_of(("sys", 1), ("u", 1), ("b", 1), ("ks", 1), ("cm", 1), ("bs", 1), ("a", 1), ("t", 1))
    context = build_context(path)
    assert [m["role"] for m in context] == [
        "system",
        "user",
        "user",
        "user",
        "user",
        "user",
        "assistant",
        "toolResult",
    ]
    assert first_text(context[2]).startswith("Ran ``\n```\nbbbb")
    assert first_text(context[3]) == "kkkk"
    assert "<summary>\nrrrr\n</summary>" in first_text(context[5])


def tree() -> dict[str, list[Entry]]:
    # root u0 a1, then branch A: u2 a3 t4 ; branch B (from a1): u5 a6
    main = path_of(("u", 1), ("a", 1), ("u", 10), ("ac", 10, "edit", "a.py"), ("t", 500), ("a", 10))
    b = path_of(("u", 1), ("a", 1), ("u", 3), ("a", 3))
    branch_b = [
        b[0],
        b[1],
        Entry("x2", "e1", b[2].kind, b[2].timestamp, b[2].data),
        Entry("x3", "x2", b[3].kind, b[3].timestamp, b[3].data),
    ]
    return {"a": main, "b": branch_b}


def test_collect_branch_entries_finds_the_deepest_common_ancestor() -> None:
    paths = tree()
    got = collect_branch_entries(paths["a"], paths["b"])
    assert got.common_ancestor_id == "e1"
    assert [e.id for e in got.entries] == ["e2", "e3", "e4", "e5"]
    # moving to an ancestor of the old leaf collects what lies beyond it
    up = collect_branch_entries(paths["a"], paths["a"][:2])
    assert [e.id for e in up.entries] == ["e2", "e3", "e4", "e5"]
    # disjoint trees: everything on the old path
    alone = collect_branch_entries(paths["a"], path_of(("u", 1))[:0])
    assert alone.common_ancestor_id is None
    assert len(alone.entries) == 6


@pytest.mark.parametrize(
    ("budget", "chosen"),
    [
        (0, ["e2", "e3", "e5"]),  # unlimited; the tool result is skipped
        (1000, ["e2", "e3", "e5"]),
        (25, ["e3", "e5"]),  # newest first until the next message would not fit
        (5, []),
    ],
)
def test_prepare_branch_entries(budget: int, chosen: list[str]) -> None:
    entries = list(collect_branch_entries(tree()["a"], tree()["b"]).entries)
    prep = prepare_branch_entries(entries, budget, "chars4")
    assert [e.id for e in prep.entries] == chosen
    assert all(m["role"] != "toolResult" for m in prep.messages)
    assert prep.total_tokens <= (budget or 10**9)


def test_branch_files_merge_summaries_and_tool_calls_and_summaries_squeeze_in() -> None:
    specs: list[tuple[Any, ...]] = [("bs", 30), ("ac", 2, "read", "new.py"), ("t", 2), ("a", 2)]
    entries = path_of(*specs)
    first = entries[0]
    entries[0] = Entry(
        first.id,
        None,
        first.kind,
        first.timestamp,
        {**first.data, "details": {"read_files": ["old.py"], "modified_files": ["mod.py"]}},
    )
    prep = prepare_branch_entries(entries, 20, "chars4")
    # the branch summary (30 tokens) does not fit in 20 but is taken: fewer than 90% of the budget were used
    assert [e.id for e in prep.entries] == ["e0", "e1", "e3"]
    assert prep.read_files == ("new.py", "old.py")
    assert prep.modified_files == ("mod.py",)


@pytest.mark.parametrize(
    "spec",
    [
        ("u", 1),
        ("a", 1),
        ("t", 1),
        ("b", 1),
        ("cm", 1),
        ("ks", 1),
        ("sys", 1),
        ("bs", 1),
        ("bs", 0),
        ("mc",),
        ("tl",),
        ("c", 0, "S"),
    ],
)
def test_in_context_matches_entry_message(spec: tuple[Any, ...]) -> None:
    from ipython_compact.core.messages import entry_message, in_context

    entry = path_of(spec)[0]
    assert in_context(entry) == (entry_message(entry) is not None)
