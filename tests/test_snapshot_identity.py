"""Whether two lists hold the very same objects (``namespace/snapshot/identity.py``), the first
check of the whole-namespace lane.

What must hold: ``same_objects`` is ``len(a) == len(b) and all(x is y ...)``, whether it reads the
lists' item arrays or maps ``operator.is_``: an equal but different object (``1`` and ``True``,
``0.0`` and ``-0.0``, an equal new string or list) is never the same. Pure code, table-driven.
"""

from __future__ import annotations

import platform
import sysconfig
from typing import Any

import pytest

from ipython_compact.namespace.snapshot import identity
from ipython_compact.namespace.snapshot.identity import item_addresses, same_objects

ONE, ZERO, TEXT, ITEMS = 1001, 0.0, "".join(["na", "me"]), [1, 2]
BEFORE: list[Any] = [ONE, ZERO, TEXT, ITEMS, None, True]


def _case(index: int, value: Any) -> list[Any]:
    out = list(BEFORE)
    out[index] = value
    return out


CASES: list[tuple[str, list[Any], bool]] = [
    ("the very objects", list(BEFORE), True),
    ("True rebound to 1", _case(5, 1), False),
    ("None rebound to None", _case(4, None), True),
    ("an int rebound to an equal new int", _case(0, int("1001")), False),
    ("an int rebound to an equal float", _case(0, 1001.0), False),
    ("0.0 rebound to -0.0", _case(1, -0.0), False),
    ("0.0 rebound to an equal new 0.0", _case(1, float("0")), False),
    ("a string rebound to an equal new string", _case(2, "".join(["nam", "e"])), False),
    ("a list rebound to an equal new list", _case(3, [1, 2]), False),
    ("one object fewer", list(BEFORE)[:-1], False),
    ("one object more", [*BEFORE, None], False),
    ("two objects swapped", [ZERO, ONE, *BEFORE[2:]], False),
]


@pytest.fixture(params=["addresses", "operator.is_"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "operator.is_":
        monkeypatch.setattr(identity, "_readers", lambda: None)
    return str(request.param)


@pytest.mark.parametrize(("label", "now", "same"), CASES, ids=[c[0] for c in CASES])
def test_same_objects_is_identity_position_by_position(
    reader: str, label: str, now: list[Any], same: bool
) -> None:
    before = list(BEFORE)
    addresses = item_addresses(before)
    assert (addresses is None) == (reader == "operator.is_")
    assert same_objects(now, before, addresses) is same
    assert same_objects(now, before, None) is same  # without the earlier copy, the same answer


def test_empty_lists_are_the_same_and_a_non_list_is_not_read() -> None:
    assert same_objects([], [], item_addresses([])) is True
    assert item_addresses((1, 2)) is None  # type: ignore[arg-type]


@pytest.mark.skipif(
    platform.python_implementation() != "CPython" or bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    reason="the item array is read only on CPython with the GIL",
)
def test_cpython_lists_are_read_as_addresses() -> None:
    """On the interpreter the project ships for, the fast path is taken (else the lane is slow)."""
    values = [object() for _ in range(1000)]
    addresses = item_addresses(values)
    assert addresses is not None and len(addresses) == 1000 * identity_word()
    assert addresses == item_addresses(list(values))
    assert addresses != item_addresses([*values[:-1], object()])


def identity_word() -> int:
    import ctypes

    return ctypes.sizeof(ctypes.c_void_p)
