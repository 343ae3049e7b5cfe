"""The whole-namespace lane (issue 21, item 2): many small unchanged names proved unchanged in a
few batched passes (``namespace/snapshot/unchanged.py``).

What must hold: the lane takes a name only when the per-name path would reuse its entry. A value
equal but of another type (1 and True, 0.0 and -0.0), an in-place edit of a small list, a rename,
a container that now holds an object, or a vanished payload is seen, and what a restore brings
back is the namespace as it was saved. Real files, real SnapshotStore.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ipython_compact.namespace.snapshot import SnapshotStore
from ipython_compact.namespace.snapshot.decide import SaveRun

KEY = b"u" * 32


class Point:  # a __main__-less class pickled by reference: the container is no longer flat
    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and other.x == self.x

    __hash__ = None  # type: ignore[assignment]


def _store(tmp_path: Path) -> SnapshotStore:
    return SnapshotStore(tmp_path / "snap", KEY, durable=False)


def _namespace() -> dict[str, Any]:
    ns: dict[str, Any] = {}
    for i in range(400):
        ns[f"v{i:03d}"] = (i * 1001, i * 0.5, f"name {i}", [i, i + 1], {"k": i})[i % 5]
    ns["one"], ns["zero"] = 1001, 0.0
    return ns


def _restored(tmp_path: Path) -> dict[str, Any]:
    values, report = _store(tmp_path).load()
    assert report.failed == []
    return values


def _types(ns: dict[str, Any]) -> dict[str, type]:
    return {name: type(value) for name, value in ns.items()}


@pytest.mark.parametrize(
    ("name", "new"),
    [
        ("v000", 0.0),  # int 0 -> float 0.0: equal, another type
        ("v000", False),  # int 0 -> False: equal, another type
        ("one", 1001.0),  # int -> an equal float
        ("zero", -0.0),  # float 0.0 -> -0.0: equal, another sign
        ("zero", 0),  # float 0.0 -> int 0: equal, another type
        ("v002", "name 2 "),  # another string
        ("v003", [0, 1]),  # an equal new list: unchanged
        ("v003", (0, 1)),  # a tuple of the same items
        ("v004", {"k": 4.0}),  # a dict with an equal value of another type
    ],
)
def test_a_changed_value_is_written_and_restored_exactly(tmp_path: Path, name: str, new: Any) -> None:
    ns = _namespace()
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    store.save(ns.items(), automatic=True, verify="sampled")  # the lane is built
    ns[name] = new
    store.save(ns.items(), automatic=True, verify="sampled")
    values = _restored(tmp_path)
    assert values == ns
    assert _types(values) == _types(ns)
    assert repr(values[name]) == repr(new)


def test_an_in_place_edit_of_a_small_container_is_written(tmp_path: Path) -> None:
    ns = _namespace()
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    assert sorted(store.save(ns.items(), automatic=True).unchanged) == sorted(ns)
    ns["v003"].append(99)
    ns["v004"]["k"] = -1
    report = store.save(ns.items(), automatic=True)
    assert sorted(set(ns) - set(report.unchanged)) == ["v003", "v004"]
    assert _restored(tmp_path) == ns


def test_a_rename_of_the_same_object_is_seen(tmp_path: Path) -> None:
    ns = _namespace()
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    store.save(ns.items(), automatic=True)
    renamed = {("w000" if name == "v000" else name): value for name, value in ns.items()}
    report = store.save(renamed.items(), automatic=True)
    assert "w000" in report.saved and "v000" not in report.saved
    assert _restored(tmp_path) == renamed


def test_a_container_that_now_holds_an_object_takes_the_per_name_path(tmp_path: Path) -> None:
    ns = _namespace()
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    store.save(ns.items(), automatic=True)
    ns["v003"].append(Point(7))
    report = store.save(ns.items(), automatic=True)
    assert "v003" not in report.unchanged and report.skipped == []
    assert _restored(tmp_path) == ns


def test_a_vanished_payload_turns_the_lane_off_for_one_save(tmp_path: Path) -> None:
    ns = _namespace()
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    store.save(ns.items(), automatic=True)
    for name in os.listdir(store.blobs):
        os.unlink(store.blobs / name)
    report = store.save(ns.items(), automatic=True)
    assert report.unchanged == [] and report.written_bytes > 0
    assert _restored(tmp_path) == ns


def test_only_the_other_names_are_decided_one_by_one_and_the_report_keeps_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = _namespace()
    arr = np.arange(300_000, dtype=np.float64)  # a large array: always the per-name path
    ns = {**dict(list(ns.items())[:200]), "arr": arr, **dict(list(ns.items())[200:])}
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    decided = _deciding(monkeypatch)
    same = store.save(ns.items(), automatic=True, verify="full")
    assert decided == ["arr"]
    assert same.saved == list(ns) and same.unchanged == list(ns)
    arr[123_457] = -1.0  # in place, likely between the samples: the full verification sees it
    edited = store.save(ns.items(), automatic=True, verify="full")
    assert decided == ["arr", "arr"]
    assert edited.saved == list(ns) and edited.unchanged == [n for n in ns if n != "arr"]
    values = _restored(tmp_path)
    assert values.keys() == ns.keys() and values["arr"][123_457] == -1.0


def test_a_full_save_decides_every_name_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = _namespace()
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    store.save(ns.items(), automatic=True)
    decided = _deciding(monkeypatch)
    store.save(ns.items(), full=True)
    assert decided == list(ns)
    assert _restored(tmp_path) == ns


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_childs_lane_reaches_the_kernel_and_the_next_child_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Automatic snapshots are written by a forked child: the lane it builds must reach the kernel
    (rebuilt there from the kernel's own objects at the fork), so the next child starts with it."""
    from ipython_compact.namespace.snapshot.background import BackgroundSave

    ns = _namespace()
    decided = tmp_path / "decided.txt"  # written by the children: the parent reads what they decided
    real = SaveRun.decide

    def counting(self: SaveRun, name: Any, value: Any) -> Any:
        with decided.open("a") as out:
            out.write(f"{name}\n")
        return real(self, name, value)

    monkeypatch.setattr(SaveRun, "decide", counting)
    store = _store(tmp_path)

    def background() -> Any:
        job = BackgroundSave(
            store, lambda: list(ns.items()), verify="sampled", timestamp="t", objects=lambda: ns
        )
        assert job.wait(120) and job.error is None and job.report is not None
        return job.report

    background()
    lane = store.portable_lane()
    assert lane is not None and lane.names == list(ns) and lane.other_at == ()
    decided.write_text("")
    again = background()
    assert decided.read_text() == "" and sorted(again.unchanged) == sorted(ns)
    ns["v003"].append(99)  # in place, in the kernel, after the fork
    ns["v000"] = False
    edited = background()
    assert sorted(set(ns) - set(edited.unchanged)) == ["v000", "v003"]
    values = _restored(tmp_path)
    assert values == ns and _types(values) == _types(ns)


def test_an_odd_name_is_skipped_as_before_and_turns_no_save_into_an_error(tmp_path: Path) -> None:
    items: list[tuple[Any, Any]] = [("a", 1), (["not", "hashable"], 2), (3, "three"), ("b", [1, 2])]
    store = _store(tmp_path)
    for _ in range(3):  # the first builds no lane; the others go the per-name way again
        report = store.save(items, automatic=True)
        assert report.saved == ["a", "b"]
        assert sorted(s.reason for s in report.skipped) == ["not a string name", "not a string name"]
    assert _restored(tmp_path) == {"a": 1, "b": [1, 2]}


# ---------------------------------------------------------------- the batched checks, table-driven
# Each case: a value bound to "c" beside the usual small names, an edit after the lane is built,
# and whether the per-name path would keep its entry (the lane must agree, never say unchanged
# where that path would write). Run with the lists' item arrays read as addresses and without.

SHARED = "".join(["sha", "red"])


def _set(seq: Any, index: Any, value: Any) -> None:
    seq[index] = value


IN_PLACE: list[tuple[str, Any, Any, bool]] = [
    # lists and dicts of ints, floats, bools and None: checked by marshal
    ("int -> equal True", [1, 2], lambda c: _set(c, 0, True), False),
    ("int -> equal float", [1, 2], lambda c: _set(c, 0, 1.0), False),
    ("0.0 -> -0.0", [0.0, 1.5], lambda c: _set(c, 0, -0.0), False),
    ("None -> 0", [None, 1], lambda c: _set(c, 0, 0), False),
    ("appended", [1, 2], lambda c: c.append(3), False),
    ("now holds a string", [1, 2], lambda c: _set(c, 1, "2"), False),
    ("now holds a tuple", [1, 2], lambda c: _set(c, 1, (2,)), False),
    ("an equal new int, same type", [100_001, 2], lambda c: _set(c, 0, int("100001")), True),
    ("dict value -> equal float", {1: 2, 3: None}, lambda c: _set(c, 1, 2.0), False),
    ("dict key re-inserted last", {1: 2, 3: 4}, lambda c: c.update({1: c.pop(1)}), False),
    ("dict grew", {1: 2}, lambda c: _set(c, True + 1, 3), False),
    # lists, dicts and sets holding strings or bytes: checked by one pickle, memo and all
    ("string -> another", ["a", "b"], lambda c: _set(c, 0, "c"), False),
    ("str-keyed dict value -> equal float", {"k": 4}, lambda c: _set(c, "k", 4.0), False),
    ("str-keyed dict value -> equal True", {"k": 1}, lambda c: _set(c, "k", True), False),
    ("bytes -> equal str", [b"x", 1], lambda c: _set(c, 0, "x"), False),
    ("set grew", {1, "a"}, lambda c: c.add(2), False),
    ("set lost one", {1, "a"}, lambda c: c.discard(1), False),
    ("a shared string unshared", [SHARED, SHARED], lambda c: _set(c, 1, "".join(["sha", "red"])), False),
    (
        "an equal new string, same sharing",
        ["x" + SHARED, 1],
        lambda c: _set(c, 0, "".join(["x", SHARED])),
        True,
    ),
]


@pytest.fixture(params=["addresses", "operator.is_"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "operator.is_":
        from ipython_compact.namespace.snapshot import identity

        monkeypatch.setattr(identity, "_readers", lambda: None)
    return str(request.param)


def _deciding(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    decided: list[str] = []
    real = SaveRun.decide

    def counting(self: SaveRun, name: Any, value: Any) -> Any:
        decided.append(name)
        return real(self, name, value)

    monkeypatch.setattr(SaveRun, "decide", counting)
    return decided


@pytest.mark.parametrize(("label", "value", "edit", "kept"), IN_PLACE, ids=[c[0] for c in IN_PLACE])
def test_an_in_place_edit_is_seen_exactly_as_the_per_name_path_sees_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reader: str,
    label: str,
    value: Any,
    edit: Any,
    kept: bool,
) -> None:
    ns = {**_namespace(), "c": copy.deepcopy(value)}  # params are shared between runs
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    store.save(ns.items(), automatic=True)  # the lane is built
    decided = _deciding(monkeypatch)
    assert sorted(store.save(ns.items(), automatic=True).unchanged) == sorted(ns)
    assert decided == []  # all of it proved by the lane
    edit(ns["c"])
    report = store.save(ns.items(), automatic=True)
    assert ("c" in report.unchanged) is kept
    assert sorted(report.unchanged) == sorted(n for n in ns if n != "c" or kept)
    if kept:
        assert decided == []  # the lane proved it, and agrees with the per-name path
    values = _restored(tmp_path)
    assert values == ns and repr(values["c"]) == repr(ns["c"]) and _types(values) == _types(ns)
    if label == "a shared string unshared":
        assert values["c"][0] is not values["c"][1]


REBOUND: list[tuple[str, Any, Any, bool]] = [
    ("a list -> an equal new list", [1, 2], lambda: [1, 2], True),
    ("a tuple -> an equal new tuple", (1, "a"), lambda: (1, "a"), True),
    ("a tuple -> an equal tuple of a bool", (1, 2), lambda: (True, 2), False),
    ("a frozenset -> an equal one of a float", frozenset({1, 2}), lambda: frozenset({1.0, 2}), False),
    ("an int -> an equal new int", 100_001, lambda: int("100001"), True),
    ("True -> 1", True, lambda: 1, False),
    ("a string -> an equal new string", "abc", lambda: "".join(["ab", "c"]), True),
    ("a list -> an equal tuple", [1, 2], lambda: (1, 2), False),
]


@pytest.mark.parametrize(("label", "value", "new", "kept"), REBOUND, ids=[c[0] for c in REBOUND])
def test_a_name_rebound_to_an_equal_object_is_decided_by_the_per_name_path(
    tmp_path: Path, reader: str, label: str, value: Any, new: Any, kept: bool
) -> None:
    ns = {**_namespace(), "c": copy.deepcopy(value)}  # params are shared between runs
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    store.save(ns.items(), automatic=True)
    ns["c"] = new()
    report = store.save(ns.items(), automatic=True)
    assert ("c" in report.unchanged) is kept
    values = _restored(tmp_path)
    assert values == ns and repr(values["c"]) == repr(ns["c"]) and _types(values) == _types(ns)


NESTED: list[tuple[str, Any, Any]] = [
    ("a dict inside a tuple", ({"a": 1},), lambda c: _set(c[0], "a", 2)),
    ("a list inside a list", [[1], 2], lambda c: c[0].append(3)),
    ("a list inside a dict", {"k": [1]}, lambda c: _set(c["k"], 0, True)),
    ("a set inside a tuple", (1, {2}), lambda c: c[1].add(3)),
]


@pytest.mark.parametrize(("label", "value", "edit"), NESTED, ids=[c[0] for c in NESTED])
def test_a_nested_container_edited_in_place_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str, label: str, value: Any, edit: Any
) -> None:
    """Not flat: the name always goes the per-name way, the others stay in the lane."""
    ns = {**_namespace(), "c": copy.deepcopy(value)}  # params are shared between runs
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    store.save(ns.items(), automatic=True)
    decided = _deciding(monkeypatch)
    edit(ns["c"])
    report = store.save(ns.items(), automatic=True)
    assert decided == ["c"]
    assert "c" not in report.unchanged and sorted(report.unchanged) == sorted(n for n in ns if n != "c")
    values = _restored(tmp_path)
    assert values == ns and repr(values["c"]) == repr(ns["c"])


def test_a_rebound_array_leaves_the_small_names_in_the_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    """A value of another kind rebound fails the all-values check; the lane's own values are then
    compared one by one, and only the array is decided again."""
    ns = {**_namespace(), "arr": np.arange(300_000, dtype=np.float64)}
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    store.save(ns.items(), automatic=True)
    decided = _deciding(monkeypatch)
    ns["arr"] = ns["arr"] + 1.0
    report = store.save(ns.items(), automatic=True)
    assert decided == ["arr"]
    assert report.saved == list(ns) and report.unchanged == [n for n in ns if n != "arr"]
    ns["v003"] = [3, 5]  # and a small name rebound too, beside it: no lane
    ns["arr"] = ns["arr"] + 1.0
    report = store.save(ns.items(), automatic=True)
    assert {"arr", "v003", "v004"} <= set(decided[1:])  # v004, a small dict, no longer in a lane
    assert report.unchanged == [n for n in ns if n not in ("arr", "v003")]
    values = _restored(tmp_path)
    assert values.keys() == ns.keys() and values["arr"][0] == 2.0 and values["v003"] == [3, 5]
