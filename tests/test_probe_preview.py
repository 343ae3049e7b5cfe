"""The namespace table's value preview (namespace/preview.py): short, bounded, never user code."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ipython_compact.namespace.preview import (
    PREVIEW_CHARS,
    TABLE_ROWS,
    NoTable,
    table_preview,
    value_preview,
)
from ipython_compact.namespace.probe import describe


class Loud(int):
    def __repr__(self) -> str:  # a subclass's repr is user code: never called
        raise AssertionError("user code ran")


class Point:
    def __repr__(self) -> str:
        raise AssertionError("user code ran")

    def __len__(self) -> int:
        raise AssertionError("user code ran")


class LoudList(list[int]):
    def __iter__(self) -> Any:
        raise AssertionError("user code ran")


class LoudFrame(pd.DataFrame):
    def __repr__(self) -> str:
        raise AssertionError("user code ran")


@pytest.mark.parametrize(
    ("value", "preview"),
    [
        (41, "41"),
        (2.5, "2.5"),
        (True, "True"),
        (None, "None"),
        ("kelvin", "'kelvin'"),
        (b"\x00a", "b'\\x00a'"),
        ("x" * 500, repr("x" * PREVIEW_CHARS) + "…"),
        (10**60, "1" + "0" * 60),
        (-1.5e300 * 10, repr(-1.5e301)),
        (2**1000, None),
        ([1, 2], "[1, 2]"),
        (list(range(100)), "[0, 1, 2, 3, 4, 5, …]"),
        ({"a": 1, "b": [1, 2, {"c": 3}]}, "{'a': 1, 'b': [1, 2, {…}]}"),
        ((1,), "(1,)"),
        (set(), "set()"),
        ([Point()], "[‹Point›]"),
        ({"p": Point()}, "{'p': ‹Point›}"),
        (np.arange(10.0), "[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, …]"),
        (np.zeros((2, 2), dtype=int), "[[0, 0], [0, 0]]"),
        (np.float64(2.5), "2.5"),
        (pd.DataFrame({"city": ["Oslo", "Rome"], "km": [1.5, 2.0]}), "2 × 2: city, km"),
        (pd.Series([1, 2, 3]), "[1, 2, 3]"),
        pytest.param(Loud(3), None, id="int-subclass"),
        pytest.param(Point(), None, id="object"),
        pytest.param(LoudList([1, 2]), None, id="list-subclass"),
        pytest.param(LoudFrame({"a": [1]}), None, id="frame-subclass"),
    ],
)
def test_value_preview(value: Any, preview: str | None) -> None:
    assert value_preview(value) == preview


def test_a_preview_is_one_bounded_line_whatever_the_value_holds() -> None:
    deep: list[Any] = []
    for _ in range(1000):
        deep = [deep, "y" * 10_000]
    wide = {str(i): "z" * 10_000 for i in range(10_000)}
    for value in (deep, wide, np.ones((10_000, 10_000), dtype=np.int8)):
        start = time.perf_counter()
        text = value_preview(value)
        assert (time.perf_counter() - start) < 0.05
        assert text is not None and len(text) <= PREVIEW_CHARS and "\n" not in text


def test_the_preview_is_part_of_the_names_payload() -> None:
    assert describe("x", 41).to_json()["preview"] == "41"
    assert describe("xs", [1, 2]).to_json()["preview"] == "[1, 2]"
    assert "preview" not in describe("p", Point()).to_json()


def test_a_frame_table_is_its_head_with_labels() -> None:
    frame = pd.DataFrame({"city": ["Oslo", "Rome", "Lima"] * 100, "km": [1.5, 2.0, 3.25] * 100})
    table = table_preview(frame, rows=3).to_json()
    assert table == {
        "kind": "frame",
        "columns": ["city", "km"],
        "index": ["0", "1", "2"],
        "rows": [["Oslo", "1.5"], ["Rome", "2.0"], ["Lima", "3.25"]],
        "shape": [300, 2],
        "truncated": False,
    }


def test_records_get_a_column_per_key_and_ragged_rows_empty_cells() -> None:
    table = table_preview([{"a": 1, "b": 2}, {"a": 3, "c": Point()}]).to_json()
    assert table["columns"] == ["a", "b", "c"]
    assert table["rows"] == [["1", "2", ""], ["3", "", "‹Point›"]]
    assert table_preview([[1, 2], [3]]).to_json()["rows"] == [["1", "2"], ["3", ""]]


def test_a_table_is_bounded() -> None:
    table = table_preview(list(range(10**6)))
    assert len(table.rows) == TABLE_ROWS and table.shape == (10**6, 1)
    grid = table_preview(np.zeros((1000, 1000)), rows=5, cols=4)
    assert grid.shape == (1000, 1000) and [len(r) for r in grid.rows] == [4] * 5


def test_other_values_have_no_table_and_their_code_never_runs() -> None:
    with pytest.raises(NoTable, match="a Point has no table view"):
        table_preview(Point())
    with pytest.raises(NoTable):
        table_preview(LoudList([1]))
