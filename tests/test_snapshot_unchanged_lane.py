"""The whole-namespace lane (issue 21, item 2): many small unchanged names proved unchanged in a
few batched passes (``namespace/snapshot/unchanged.py``).

What must hold: the lane takes a name only when the per-name path would reuse its entry. A value
equal but of another type (1 and True, 0.0 and -0.0), an in-place edit of a small list, a rename,
a container that now holds an object, or a vanished payload is seen, and what a restore brings
back is the namespace as it was saved. Real files, real SnapshotStore.
"""

from __future__ import annotations

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
    decided: list[str] = []
    real = SaveRun.decide

    def counting(self: SaveRun, name: Any, value: Any) -> Any:
        decided.append(name)
        return real(self, name, value)

    monkeypatch.setattr(SaveRun, "decide", counting)
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
    decided: list[str] = []
    real = SaveRun.decide

    def counting(self: SaveRun, name: Any, value: Any) -> Any:
        decided.append(name)
        return real(self, name, value)

    monkeypatch.setattr(SaveRun, "decide", counting)
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
