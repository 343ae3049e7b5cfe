"""A restore never overwrites a name the user defined since, unless asked.

Found by trying it as a new user: in a new ``ipython``, ``df = 'my new value'``, ``%load_ext``,
``%compact restore`` put the old value back and the report said "warnings none". Now such a name
is kept, listed, and the report says what to type to take the snapshot's value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ipython_compact.namespace.snapshot import SnapshotStore, load_or_create_key
from ipython_compact.namespace.snapshot.codec import serialize
from ipython_compact.namespace.snapshot.fingerprints import PLAIN, plain_pickle
from ipython_compact.namespace.snapshot.restore import same_as_payload


def _run(ip: Any, line: str) -> Any:
    return ip.run_line_magic("compact", line)


def _plain(shown: Any) -> str:
    return str(shown._repr_mimebundle_()[0]["text/plain"])


def test_a_name_defined_since_is_kept_and_the_report_says_how_to_take_it(ip: Any) -> None:
    ip.run_cell("df = [1, 2, 3]\nsame = {'a': 1}\ngone = 7")
    _run(ip, "snapshot")
    ip.run_cell("df = 'my new value'\ndel gone")
    shown = _run(ip, "restore")
    assert ip.user_ns["df"] == "my new value" and ip.user_ns["gone"] == 7
    assert shown.data["kept"] == ["df"] and sorted(shown.data["restored"]) == ["gone", "same"]
    plain = " ".join(_plain(shown).split())
    assert "1 name you defined since kept as it is" in plain
    assert "`%compact restore --overwrite`" in plain and "`%compact restore --names df`" in plain


def test_naming_a_name_or_overwrite_takes_the_snapshot_value(ip: Any) -> None:
    ip.run_cell("df = [1, 2, 3]\nother = 1.5")
    _run(ip, "snapshot")
    ip.run_cell("df = 'mine'\nother = 'mine too'")
    named = _run(ip, "restore --names df")
    assert ip.user_ns["df"] == [1, 2, 3] and ip.user_ns["other"] == "mine too"
    assert named.data["restored"] == ["df"] and named.data["kept"] == []
    everything = _run(ip, "restore --overwrite")
    assert ip.user_ns["other"] == 1.5 and everything.data["kept"] == []


def test_nothing_restored_because_everything_was_kept_is_a_warning_naming_them(ip: Any) -> None:
    ip.run_cell("only = 1")
    _run(ip, "snapshot")
    ip.run_cell("only = 2")
    shown = _run(ip, "restore")
    assert ip.user_ns["only"] == 2
    assert _plain(shown).startswith("Warning: nothing was restored from generation")
    assert shown.data["kept"] == ["only"] and shown.data["warnings"] == []


def test_the_report_uses_no_internal_words(ip: Any) -> None:
    ip.run_cell("a = 1")
    _run(ip, "snapshot")
    plain = _plain(_run(ip, "restore --overwrite"))
    for word in ("quarantined", "process", "refused", "none\n"):
        assert word not in plain, plain
    assert "Written by  this kernel" in plain


@pytest.mark.parametrize(
    ("stored", "current", "same"),
    [
        ([1, 2, 3], [1, 2, 3], True),
        ([1, 2, 3], [1, 2, 4], False),
        ("text", "text", True),
        ("text", "a much longer text than the stored one", False),  # larger than the payload: different
        ({"k": 1}, {"k": 1.0}, False),
        (b"\x00\x01", b"\x00\x01", True),
    ],
)
def test_same_as_payload(stored: Any, current: Any, same: bool) -> None:
    # serialized as a save does: the C pickler for builtin containers and scalars, dill for the rest
    _, parts = serialize(stored, 1 << 20, plain_pickle(stored) if type(stored) in PLAIN else None)
    assert same_as_payload(current, b"".join(bytes(p) for p in parts)) is same


def test_the_store_keeps_defined_names_unless_told(tmp_path: Path) -> None:
    key = load_or_create_key(tmp_path / "key")
    store = SnapshotStore(tmp_path / "snaps", key, session="s", root=tmp_path)
    store.save([("x", 1), ("y", "old")], timestamp="2026-01-01T00:00:00Z")
    namespace: dict[str, Any] = {"y": "new"}
    report = SnapshotStore(tmp_path / "snaps", key, session="s", root=tmp_path).restore_into(namespace)
    assert namespace == {"x": 1, "y": "new"} and report.kept == ["y"] and report.restored == ["x"]
    again = SnapshotStore(tmp_path / "snaps", key, session="s", root=tmp_path).restore_into(
        namespace, overwrite=True
    )
    assert namespace == {"x": 1, "y": "old"} and again.kept == [] and sorted(again.restored) == ["x", "y"]
