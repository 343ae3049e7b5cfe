"""The quick lane of an unchanged save (issue 21, item 2): small immutable values and small
containers of scalars are recognised as unchanged without the general fingerprint path.

What must hold: the quick key is exactly the general fingerprint for its types (or a stale
payload would be reused); a name bound to an equal new object, or to the same object, is
unchanged; a different value, an in-place edit of a list, or a payload file that vanished
is written again; a store that adopts a forked child's state rebuilds the lane from the
kernel's own objects. Real files, real SnapshotStore.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ipython_compact.namespace.snapshot import SnapshotStore, fingerprint
from ipython_compact.namespace.snapshot.decide import QUICK_TYPES, _flat, _quick_key

KEY = b"q" * 32


def _store(tmp_path: Path) -> SnapshotStore:
    return SnapshotStore(tmp_path / "snap", KEY, durable=False)


@pytest.mark.parametrize(
    "value",
    [
        0,
        -1,
        10**40,
        True,
        False,
        None,
        0.0,
        -0.0,
        1.5,
        float("inf"),
        float("nan"),
        "",
        "name 1",
        "é\u2603",
        "\ud800 lone surrogate",
        "x" * 100_000,
    ],
)
def test_the_quick_key_is_the_general_fingerprint(value: Any) -> None:
    assert type(value) in QUICK_TYPES
    assert _quick_key(value) == fingerprint(value)


@pytest.mark.parametrize(
    ("value", "flat"),
    [
        ([1, 2.0, "a", None, b"x"], True),
        ((1, 2), True),
        ({"a": 1, 2: "b"}, True),
        (set(), True),
        ([[1]], False),
        ({"a": [1]}, False),
        ({(1,): 1}, False),
        (list(range(65)), False),
        ([object()], False),
    ],
)
def test_only_small_containers_of_scalars_skip_the_timer(value: Any, flat: bool) -> None:
    assert _flat(value) is flat


def test_same_or_equal_objects_are_unchanged_and_changes_are_written(tmp_path: Path) -> None:
    ns: dict[str, Any] = {"i": 12345678901, "f": 0.25, "s": "some text", "lst": [1, 2, 3], "n": None}
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    again = store.save(ns.items(), automatic=True)  # the very objects: the identity lane
    assert sorted(again.unchanged) == sorted(ns) and again.written_bytes == 0
    ns["s"] = "".join(["some ", "text"])  # an equal new object: the key lane
    ns["i"] = int("12345678901")
    equal = store.save(ns.items(), automatic=True)
    assert sorted(equal.unchanged) == sorted(ns) and equal.written_bytes == 0
    ns["lst"].append(4)  # in place
    ns["f"] = -0.25
    changed = store.save(ns.items(), automatic=True)
    assert sorted(changed.unchanged) == ["i", "n", "s"]
    values, _ = _store(tmp_path).load()
    assert values == ns


def test_a_vanished_payload_file_is_written_again(tmp_path: Path) -> None:
    ns = {f"v{i}": f"value {i}" for i in range(50)}
    store = _store(tmp_path)
    store.save(ns.items(), automatic=True)
    for name in os.listdir(store.blobs):  # another process pruned the pack (or a user deleted it)
        os.unlink(store.blobs / name)
    report = store.save(ns.items(), automatic=True)
    assert report.unchanged == [] and report.written_bytes > 0
    values, _ = _store(tmp_path).load()
    assert values == ns


def test_a_store_that_adopts_a_childs_state_rebuilds_the_lane_from_its_own_objects(tmp_path: Path) -> None:
    ns: dict[str, Any] = {"a": "alpha", "b": 2.5, "c": [1, 2]}
    child = _store(tmp_path)
    child.save(ns.items(), automatic=True)
    kernel = _store(tmp_path)
    kernel._cache = child._cache  # what BackgroundSave._adopt copies from the child's STATE
    kernel.adopt_seen(ns, child.seen_names())
    assert sorted(kernel.seen_names()) == ["a", "b"]  # containers are mutable: never by identity
    ns["a"] = "changed"  # after the fork: the lane must not take the new object for the old one
    report = kernel.save(ns.items(), automatic=True)
    assert sorted(report.unchanged) == ["b", "c"]
    values, _ = _store(tmp_path).load()
    assert values == ns


def test_an_unchanged_save_repeats_no_generation_unless_another_writer_came_between(tmp_path: Path) -> None:
    ns = {f"v{i}": i for i in range(100)}
    mine = SnapshotStore(tmp_path / "snap", KEY, durable=False, process="kernel-a")
    other = SnapshotStore(tmp_path / "snap", KEY, durable=False, process="kernel-b")
    first = mine.save(ns.items(), automatic=True)
    assert mine.save(ns.items(), automatic=True).generation == first.generation  # nothing new written
    theirs = other.save({"w": 1}.items(), automatic=True)
    again = mine.save(ns.items(), automatic=True)  # the same objects, but the newest is not ours
    assert again.generation > theirs.generation > first.generation
    values, _ = SnapshotStore(tmp_path / "snap", KEY, durable=False).load()
    assert values == ns
