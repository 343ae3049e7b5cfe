"""Cut points: valid positions, the walk back to keep_recent_tokens, split turns, turn alignment."""

from __future__ import annotations

from typing import Any

import pytest
from core_paths import path_of

from ipython_compact.core.cutpoints import CutPoint, default_fallback, find_cut_point, is_cut_point
from ipython_compact.core.preparation import prepare_compaction
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.tokens import estimate_entry_tokens

# u0 a1 t2 a3 u4 a5 t6 a7 t8 a9   (tokens in the second field)
TURNS: list[tuple[Any, ...]] = [
    ("u", 10),
    ("ac", 10, "read", "x"),
    ("t", 100),
    ("a", 10),
    ("u", 10),
    ("ac", 10, "read", "y"),
    ("t", 50),
    ("ac", 10, "read", "z"),
    ("t", 50),
    ("a", 10),
]


@pytest.mark.parametrize(
    ("specs", "keep", "expected"),
    [
        # under budget: keep everything from the first cut point
        (TURNS, 10_000, CutPoint(0, -1, False)),
        # budget crossed at the last assistant: cut there, mid-turn (turn starts at u4)
        (TURNS, 10, CutPoint(9, 4, True)),
        # crossed at a tool result: move forward to the next assistant, never cut at a tool result
        (TURNS, 60, CutPoint(9, 4, True)),
        (TURNS, 70, CutPoint(7, 4, True)),
        # crossed exactly at the user message: clean cut, no split
        (TURNS, 140, CutPoint(4, -1, False)),
        (TURNS, 145, CutPoint(4, -1, False)),
        # no cut points at all: the cut is the start
        ([("t", 5), ("t", 5)], 1, CutPoint(0, -1, False)),
        # extend back over setting changes (pi reports the cut as a split of the previous turn)
        ([("u", 10), ("a", 10), ("mc",), ("tl",), ("u", 10), ("a", 10)], 20, CutPoint(2, 0, True)),
        # pi's rule: a cut at a bashExecution reports itself as turn start of a split
        ([("u", 10), ("a", 10), ("b", 10), ("a", 10)], 20, CutPoint(2, 2, True)),
        # our user-side kinds are cut points and turn starts; pi's walk does not price them
        ([("u", 10), ("a", 10), ("ks", 10), ("a", 10)], 20, CutPoint(1, 0, True)),
        ([("u", 10), ("a", 10), ("cm", 10), ("a", 10), ("a", 10)], 10, CutPoint(4, 2, True)),
        ([("u", 10), ("a", 10), ("cm", 10), ("a", 10)], 20, CutPoint(1, 0, True)),
        # compaction entries stop the backward extension and are not counted
        ([("u", 10), ("c", 0, "s" * 4000), ("mc",), ("u", 10)], 10, CutPoint(2, 0, True)),
        ([("u", 10), ("c", 0, "s" * 4000), ("u", 10)], 10, CutPoint(2, -1, False)),
    ],
)
def test_find_cut_point(specs: list[tuple[Any, ...]], keep: int, expected: CutPoint) -> None:
    path = path_of(*specs)
    assert find_cut_point(path, 0, len(path), keep, estimator="chars4") == expected


@pytest.mark.parametrize(
    ("specs", "keep", "expected"),
    [
        # the density walk prices every context entry: notices and custom messages take room
        ([("u", 10), ("a", 10), ("ks", 10), ("a", 10)], 20, CutPoint(2, 2, True)),
        ([("u", 10), ("a", 10), ("cm", 10), ("a", 10)], 20, CutPoint(2, 2, True)),
        ([("u", 10), ("a", 10), ("bs", 10), ("a", 10)], 20, CutPoint(2, 2, True)),
    ],
)
def test_density_walk_counts_every_context_entry(
    specs: list[tuple[Any, ...]], keep: int, expected: CutPoint
) -> None:
    path = path_of(*specs)
    assert find_cut_point(path, 0, len(path), keep, estimator="density") == expected


@pytest.mark.parametrize("keep", [1, 5, 10, 30, 60, 100, 150, 200, 260, 400])
def test_cut_never_lands_on_a_tool_result(keep: int) -> None:
    path = path_of(*TURNS)
    cut = find_cut_point(path, 0, len(path), keep, estimator="chars4")
    assert path[cut.first_kept_index].role in ("user", "assistant")
    assert is_cut_point(path[cut.first_kept_index])


@pytest.mark.parametrize("keep", [1, 10, 60, 70, 140, 10_000])
def test_stored_token_counts_give_the_same_cut(keep: int) -> None:
    path = path_of(*TURNS)
    stored = [estimate_entry_tokens(e, "chars4") for e in path]
    assert find_cut_point(path, 0, len(path), keep, tokens=stored) == find_cut_point(
        path, 0, len(path), keep, estimator="chars4"
    )


@pytest.mark.parametrize(
    ("keep", "expected"),
    [
        # cut at a7; prefix u4..t6 costs 10+14+50 <= 74: align to the turn start
        (74, CutPoint(4, -1, False)),
        (60, CutPoint(9, 4, True)),  # cut at a9; prefix u4..t8 costs 138 > 60: stay split
    ],
)
def test_turn_alignment(keep: int, expected: CutPoint) -> None:
    path = path_of(*TURNS)
    assert find_cut_point(path, 0, len(path), keep, estimator="chars4", align_turns=True) == expected


def test_range_is_respected() -> None:
    path = path_of(*TURNS)
    # only u4.. may be cut: budget never reached inside the range keeps from its first cut point
    assert find_cut_point(path, 4, len(path), 10_000, estimator="chars4") == CutPoint(4, -1, False)
    assert find_cut_point(path, 5, 9, 10_000, estimator="chars4") == CutPoint(5, -1, False)


@pytest.mark.parametrize(
    ("start", "end", "keep", "tokens", "message"),
    [
        (3, 2, 10, None, "bad range"),
        (0, 99, 10, None, "bad range"),
        (0, 10, -1, None, "keep_recent_tokens"),
        (0, 10, 10, [1, 2, 3], "tokens has 3 counts"),
    ],
)
def test_bad_arguments(start: int, end: int, keep: int, tokens: list[int] | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        find_cut_point(path_of(*TURNS), start, end, keep, tokens=tokens)


# One huge trailing tool result: the newest entries alone exceed the budget, no cut point after.
HUGE_TAIL: list[tuple[Any, ...]] = [("u", 10), ("a", 10), ("u", 10), ("ac", 10, "read", "x"), ("t", 5000)]


@pytest.mark.parametrize(
    ("specs", "start", "keep", "align", "keep_all", "last_cut"),
    [
        # pi keeps everything (nothing to summarize: the stuck session); Prime cuts at the last cut point
        (HUGE_TAIL, 0, 100, False, CutPoint(0, -1, False), CutPoint(3, 2, True)),
        (
            [("u", 10), ("ac", 10, "read", "x"), ("t", 5000)],
            0,
            100,
            False,
            CutPoint(0, -1, False),
            CutPoint(1, 0, True),
        ),
        # the last cut point before the crossing may be a user message: a clean cut
        (
            [("u", 10), ("a", 10), ("u", 10), ("t", 5000)],
            0,
            100,
            False,
            CutPoint(0, -1, False),
            CutPoint(2, -1, False),
        ),
        # within a range, Prime's fallback never reaches before the start
        (HUGE_TAIL, 2, 100, False, CutPoint(2, -1, False), CutPoint(3, 2, True)),
        # with turn alignment the split cut moves back to its (cheap) turn start
        (HUGE_TAIL, 0, 100, True, CutPoint(0, -1, False), CutPoint(2, -1, False)),
        # the rules agree whenever a cut point follows the crossing, the budget is never reached,
        # or there is no cut point at all
        (TURNS, 0, 60, False, CutPoint(9, 4, True), CutPoint(9, 4, True)),
        (TURNS, 0, 10_000, False, CutPoint(0, -1, False), CutPoint(0, -1, False)),
        ([("u", 10), ("a", 10), ("u", 5000)], 0, 100, False, CutPoint(2, -1, False), CutPoint(2, -1, False)),
        ([("t", 5), ("t", 5000)], 0, 1, False, CutPoint(0, -1, False), CutPoint(0, -1, False)),
        # setting changes before the fallback cut are kept with it (backward extension)
        (
            [("u", 10), ("a", 10), ("mc",), ("u", 10), ("t", 5000)],
            0,
            100,
            False,
            CutPoint(0, -1, False),
            CutPoint(2, 0, True),
        ),
    ],
)
def test_fallback_rules(
    specs: list[tuple[Any, ...]], start: int, keep: int, align: bool, keep_all: CutPoint, last_cut: CutPoint
) -> None:
    path = path_of(*specs)
    for rule, expected in (("keep_all", keep_all), ("last_cut", last_cut)):
        got = find_cut_point(
            path, start, len(path), keep, estimator="chars4", align_turns=align, fallback=rule
        )  # type: ignore[arg-type]
        assert got == expected, rule


@pytest.mark.parametrize(
    ("estimator", "rule", "expected"),
    [
        ("chars4", "keep_all", CutPoint(0, -1, False)),  # the pi-compatible path keeps pi's rule
        ("density", "last_cut", CutPoint(3, 2, True)),  # the product's default takes Prime's
    ],
)
def test_default_fallback_follows_the_estimator(estimator: str, rule: str, expected: CutPoint) -> None:
    path = path_of(*HUGE_TAIL)
    assert default_fallback(estimator) == rule
    assert find_cut_point(path, 0, len(path), 100, estimator=estimator) == expected


@pytest.mark.parametrize(
    ("estimator", "compacts", "first_kept"),
    [("chars4", False, None), ("density", True, "e3")],
)
def test_a_huge_trailing_tool_result_no_longer_leaves_nothing_to_compact(
    estimator: str, compacts: bool, first_kept: str | None
) -> None:
    prep = prepare_compaction(
        path_of(*HUGE_TAIL), CompactionSettings(keep_recent_tokens=100, estimator=estimator)
    )  # type: ignore[arg-type]
    assert (prep is not None) == compacts
    assert (None if prep is None else prep.first_kept_entry_id) == first_kept


def test_unknown_fallback_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown cut fallback 'sometimes'"):
        find_cut_point(path_of(*TURNS), 0, 10, 10, fallback="sometimes")  # type: ignore[arg-type]
