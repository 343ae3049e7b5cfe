"""The namespace probe: %who's rule, cheap facts, and hostile objects that must not slow or break it."""

from __future__ import annotations

import json
import time
import types
from typing import Any

import numpy as np
import pytest

from ipython_compact.namespace.probe import (
    DTYPE_TEXT_MAX,
    describe,
    probe_namespace,
    readable_dtype,
    user_names,
)


class SlowRepr:
    def __repr__(self) -> str:
        time.sleep(5)
        return "slow"

    __str__ = __repr__


class RaisingGetattr:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")

    def __getattribute__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")


class HangingProperty:
    @property
    def __class__(self) -> Any:  # type: ignore[override]
        time.sleep(5)
        return int

    @property
    def shape(self) -> Any:
        time.sleep(5)
        return (1,)

    def __len__(self) -> int:
        time.sleep(5)
        return 1


class EvilMeta(type):
    def __getattribute__(cls, name: str) -> Any:
        if name in ("__qualname__", "__module__", "__name__", "__class__"):
            time.sleep(5)
        return super().__getattribute__(name)


class EvilClassInstance(metaclass=EvilMeta):
    pass


class ListSub(list[int]):
    def __len__(self) -> int:
        time.sleep(5)
        return 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, {"type": "int", "kind": "data"}),
        ("hello", {"type": "str", "kind": "data", "length": 5, "bytes": str.__sizeof__("hello")}),
        (b"abc", {"type": "bytes", "kind": "data", "length": 3, "bytes": 3}),
        ([1, 2, 3], {"type": "list", "kind": "data", "length": 3}),
        ({"a": 1}, {"type": "dict", "kind": "data", "length": 1}),
        (
            np.zeros((3, 4), dtype=np.float32),
            {
                "type": "ndarray",
                "module": "numpy",
                "kind": "data",
                "shape": [3, 4],
                "dtype": "float32",
                "length": 3,
                "bytes": 48,
            },
        ),
        (json, {"type": "module", "kind": "module"}),
        (len, {"type": "builtin_function_or_method", "kind": "function"}),
        (lambda: 0, {"type": "function", "kind": "function"}),
        (SlowRepr, {"type": "type", "kind": "class"}),
        (SlowRepr(), {"type": "SlowRepr", "kind": "object"}),
        (RaisingGetattr(), {"type": "RaisingGetattr", "kind": "object"}),
        (HangingProperty(), {"type": "HangingProperty", "kind": "object"}),
        (EvilClassInstance(), {"type": "EvilClassInstance", "kind": "object"}),
        (ListSub([1, 2]), {"type": "ListSub", "kind": "data", "length": 2}),
    ],
    ids=[
        "int",
        "str",
        "bytes",
        "list",
        "dict",
        "ndarray",
        "module",
        "builtin",
        "lambda",
        "class",
        "slow_repr",
        "raising_getattr",
        "hanging_property",
        "evil_metaclass",
        "list_subclass_slow_len",
    ],
)
def test_describe_reports_type_and_cheap_facts_without_user_code(
    value: Any, expected: dict[str, Any]
) -> None:
    info = describe("x", value).to_json()  # hostile values would hang or raise here if user code ran
    for key, want in expected.items():
        assert info[key] == want, (key, info)


def test_who_rule_hidden_identity_underscore_nonstring_and_excluded() -> None:
    hidden_obj = object()
    ours = object()
    ns: dict[Any, Any] = {
        "a": 1,
        "_private": 2,
        "In": [],
        "Out": {},
        "exit": hidden_obj,
        "mine": ours,
        1: "non-string key",
        "b": SlowRepr(),
    }
    hidden = {"In": [], "exit": hidden_obj, "Out": ns["Out"]}
    names = [n for n, _ in user_names(ns, hidden, exclude_ids=[id(ours)])]
    # In was rebound (a different list than the hidden one), so %who lists it; Out/exit were not.
    assert names == ["In", "a", "b"]


def test_probe_limit_truncates_and_counts_total() -> None:
    ns = {f"v{i}": i for i in range(10)}
    result = probe_namespace(ns, {}, limit=3)
    assert result.name_list == ["v0", "v1", "v2"]
    assert result.truncated is True
    assert result.total == 10


@pytest.mark.parametrize("limit", [-1, "3", 2.5])
def test_probe_rejects_bad_limit(limit: Any) -> None:
    with pytest.raises(ValueError, match="limit"):
        probe_namespace({}, {}, limit=limit)


def test_probe_of_ten_thousand_names_with_hostile_objects_lists_them_all() -> None:
    hostile = [SlowRepr(), RaisingGetattr(), HangingProperty(), EvilClassInstance(), ListSub()]
    ns: dict[Any, Any] = {}
    for i in range(10_000):
        ns[f"name_{i:05d}"] = hostile[i % 5] if i % 7 == 0 else (np.zeros(4) if i % 3 == 0 else [i] * 3)
    ns[(1, 2)] = "tuple key"
    result = probe_namespace(ns, {}, deadline_s=10)  # its speed is measured in bench/bench_probe.py
    assert result.total == 10_000 and not result.truncated
    json.dumps(result.to_json())  # the result is JSON-ready


def test_probe_deadline_marks_truncated() -> None:
    ns = {f"v{i}": types.SimpleNamespace() for i in range(5000)}
    result = probe_namespace(ns, {}, deadline_s=0.0)
    assert result.truncated is True
    assert len(result.names) < 5000


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.float64, "float64"),
        (np.int32, "int32"),
        (np.bool_, "bool"),
        (np.complex128, "complex128"),
        ("M8[ns]", "datetime64[ns]"),
        ("m8[s]", "timedelta64[s]"),
        ("O", "object"),
        ("U5", "str[5]"),
        ("S3", "bytes[3]"),
        ("V8", "void[8]"),
        (np.dtype((np.float32, (2, 3))), "float32[2,3]"),
        ([("x", "<f8"), ("y", "<i4")], "{x: float64, y: int32}"),
        (
            [("a", "f8"), ("b", "i4"), ("c", "U3"), ("d", "M8[ns]"), ("e", "f4")],
            "{a: float64, b: int32, c: str[3], +2}",
        ),
        ([("z", [("p", [("q", [("r", "f4")])])])], "{z: {p: {q: …}}}"),
        (">f8" if np.little_endian else "<f8", "float64 (>)" if np.little_endian else "float64 (<)"),
    ],
    ids=[
        "float64",
        "int32",
        "bool",
        "complex128",
        "datetime64",
        "timedelta64",
        "object",
        "str",
        "bytes",
        "void",
        "subarray",
        "structured",
        "structured_shortened",
        "structured_nested_depth",
        "foreign_byte_order",
    ],
)
def test_readable_dtype_names(dtype: Any, expected: str) -> None:
    assert readable_dtype(np.dtype(dtype), np) == expected


def test_structured_dtype_with_long_field_names_is_cut_to_the_limit() -> None:
    dt = np.dtype([("a_very_long_field_name_" + "x" * 40, "f8"), ("b", "i4")])
    text = readable_dtype(dt, np)
    assert text is not None
    assert len(text) == DTYPE_TEXT_MAX and text.endswith("…}")


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (np.zeros(3), "float64"),
        (np.zeros(2, dtype=np.int32), "int32"),
        (np.array(["2026-01-01"], dtype="datetime64[ns]"), "datetime64[ns]"),
        (np.zeros(2, dtype=[("x", "f8"), ("y", "i4")]), "{x: float64, y: int32}"),
    ],
    ids=["float64", "int32", "datetime64", "structured"],
)
def test_probe_sends_readable_dtype_for_arrays(value: Any, dtype: str) -> None:
    assert describe("a", value).to_json()["dtype"] == dtype


class NotNumpyDtype:
    """Looks nothing like a numpy dtype; readable_dtype must refuse it without touching it."""

    def __getattribute__(self, name: str) -> Any:
        raise AssertionError(f"user code ran: {name}")


def test_readable_dtype_refuses_objects_that_are_not_numpy_dtypes() -> None:
    assert readable_dtype(NotNumpyDtype(), np) is None


class HostileList(list[int]):
    def __iter__(self) -> Any:
        time.sleep(5)
        return iter([])

    def __sizeof__(self) -> int:
        time.sleep(5)
        return 0


def _nested_size(value: Any) -> int:
    """Exact bytes of a container of builtin atoms and containers (what the probe adds up)."""
    base = next(b for b in (list, tuple, dict, set, frozenset) if isinstance(value, b))
    items = [p for kv in dict.items(value) for p in kv] if base is dict else list(base.__iter__(value))
    return int(base.__sizeof__(value)) + sum(
        _nested_size(v) if type(v) in (list, tuple, dict, set, frozenset) else type(v).__sizeof__(v)
        for v in items
    )


@pytest.mark.parametrize(
    "value",
    [[1, 2, 3], {"a": 1}, (), [[1.5]], {1, 2}, HostileList([1, 2])],
    ids=["list", "dict", "empty_tuple", "nested", "set", "hostile_subclass"],
)
def test_small_containers_report_their_exact_memory_without_user_code(value: Any) -> None:
    info = describe("x", value)  # HostileList's __iter__/__sizeof__ would sleep here if they ran
    assert (info.bytes, info.bytes_approx, "bytes_approx" in info.to_json()) == (
        _nested_size(value),
        False,
        False,
    )


@pytest.mark.parametrize("value", [[object()], list(range(10_000))], ids=["objects", "large"])
def test_sampled_or_opaque_containers_are_marked_approximate(value: Any) -> None:
    info = describe("x", value)  # other types count as a pointer; large ones are sampled
    assert info.bytes is not None and info.bytes >= list.__sizeof__(value)
    assert info.bytes_approx is True and info.to_json()["bytes_approx"] is True


def test_a_large_list_estimate_is_close_and_cheap() -> None:
    value = [float(i) for i in range(200_000)]
    info = describe("x", value)
    exact = list.__sizeof__(value) + sum(float.__sizeof__(v) for v in value)
    assert info.bytes is not None and abs(info.bytes - exact) / exact < 0.05


def test_dataframes_report_memory_and_a_dtypes_summary() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1, 2], "b": [3, 4], "c": [0.5, 1.5]})
    info = describe("df", frame).to_json()
    assert info["shape"] == [2, 3] and info["dtypes"] == "int64 ×2, float64"
    assert (
        info["bytes"] == int(frame.memory_usage(index=True, deep=False).sum()) and "bytes_approx" not in info
    )
    with_objects = describe("df", pd.DataFrame({"a": [object()]})).to_json()
    assert with_objects["bytes_approx"] is True and with_objects["dtypes"] == "object"


def _restart_cases() -> list[tuple[str, Any, str | None]]:
    import socket
    import sqlite3
    import threading

    gen = (i for i in range(2))
    return [
        ("file", open(__file__, encoding="utf-8"), "open file handles are not persisted"),
        ("generator", gen, "a running generator's position cannot be saved"),
        ("lock", threading.Lock(), "locks cannot be saved"),
        ("thread", threading.Thread(target=print), "a running thread cannot be saved"),
        ("socket", socket.socket(), "an open network connection cannot be saved"),
        ("sqlite", sqlite3.connect(":memory:"), "an open database connection cannot be saved"),
        ("int", 3, None),
        ("slow_repr", SlowRepr(), None),
    ]


@pytest.mark.parametrize(("label", "value", "reason"), _restart_cases(), ids=[c[0] for c in _restart_cases()])
def test_names_that_cannot_survive_a_restart_say_why(label: str, value: Any, reason: str | None) -> None:
    info = describe(label, value)
    assert info.restart == reason
    assert info.to_json().get("restart") == reason
    if hasattr(value, "close"):
        value.close()
