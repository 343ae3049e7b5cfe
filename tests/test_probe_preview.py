"""The namespace table's value preview: builtin scalars and short text only, never user code."""

from __future__ import annotations

from typing import Any

import pytest

from ipython_compact.namespace.probe import PREVIEW_CHARS, describe, value_preview


class Loud(int):
    def __repr__(self) -> str:  # a subclass's repr is user code: never called
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
        ([1, 2], None),
        ({"a": 1}, None),
        pytest.param(Loud(3), None, id="int-subclass"),
    ],
)
def test_value_preview(value: Any, preview: str | None) -> None:
    assert value_preview(value) == preview


def test_the_preview_is_part_of_the_names_payload() -> None:
    assert describe("x", 41).to_json()["preview"] == "41"
    assert "preview" not in describe("xs", [1, 2]).to_json()
