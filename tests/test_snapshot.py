"""Snapshots: per-name payloads, skip reasons, caps, incremental saves, signatures, generations."""

from __future__ import annotations

import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ipython_compact.namespace.snapshot import SnapshotError, SnapshotStore, fingerprint, load_or_create_key
from ipython_compact.namespace.snapshot.objects import LocalObjects, Objects
from ipython_compact.store.writer_locks import writer_locks

KEY = b"k" * 32


def _store(tmp_path: Path, **kw: Any) -> SnapshotStore:
    return SnapshotStore(tmp_path / "snap", KEY, durable=False, **kw)


@pytest.fixture(params=["folder", "s3"])
def both_places(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test on the local folder, then on moto's S3 server: ``_store(tmp_path / X)`` points
    at ``<bucket>/X/snap`` (its writer lock in a SQLite log's file lock)."""
    if request.param == "s3":
        url = request.getfixturevalue("s3_url")
        locks = writer_locks(tmp_path / "log.db")

        def on_s3(where: Path, **kw: Any) -> SnapshotStore:
            parts = [*Path(where).relative_to(tmp_path).parts, "snap"]
            return SnapshotStore("/".join([url, *parts]), KEY, durable=False, locks=locks, **kw)

        monkeypatch.setattr(sys.modules[__name__], "_store", on_s3)
    return str(request.param)


def _raw(store: SnapshotStore) -> Objects:
    """The store's files or objects, read and written behind its back."""
    objects = getattr(store._place, "objects", None)
    if objects is not None:
        return objects  # type: ignore[no-any-return]
    assert store.directory is not None
    return LocalObjects(store.directory, durable=False)


def _gen() -> Any:
    yield 1


@pytest.mark.usefixtures("both_places")
def test_round_trip_with_unpicklable_values_skipped_with_reasons(tmp_path: Path) -> None:
    sock = socket.socket()
    try:
        items = {
            "a": 1,
            "arr": np.arange(10.0),
            "fn": lambda x: x + 1,
            "g": _gen(),
            "s": sock,
            "d": {"k": [1, 2]},
        }
        store = _store(tmp_path)
        report = store.save(items.items())
        assert sorted(report.saved) == ["a", "arr", "d", "fn"]
        reasons = {s.name: s.reason for s in report.skipped}
        assert set(reasons) == {"g", "s"}
        assert "generator" in reasons["g"] and "socket" in reasons["s"]
        values, restored = _store(tmp_path).load()
        assert sorted(restored.restored) == ["a", "arr", "d", "fn"]
        assert values["fn"](1) == 2 and values["d"] == {"k": [1, 2]}
        np.testing.assert_array_equal(values["arr"], np.arange(10.0))
    finally:
        sock.close()


def test_files_are_owner_only(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save([("x", b"data")])
    for p in [store.directory, store.blobs]:
        assert stat.S_IMODE(p.stat().st_mode) == 0o700
    store.save([("x", b"data"), ("big", np.zeros(300_000))])
    assert store.directory is not None
    files = list(store.directory.rglob("*.json")) + [store.directory / n for n in _payloads(store)]
    assert len(_payloads(store)) >= 2
    assert files
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("kw", "value", "reason"),
    [
        ({"max_name_bytes": 1000}, np.zeros(1000), "per-name"),
        ({"max_name_bytes": 1000}, list(range(5000)), "per-name"),
        ({"max_total_bytes": 1500}, np.zeros(200), "total"),
    ],
    ids=["array-per-name", "list-per-name", "total"],
)
@pytest.mark.usefixtures("both_places")
def test_size_caps_skip_with_reason(tmp_path: Path, kw: dict[str, int], value: Any, reason: str) -> None:
    store = _store(tmp_path, **kw)
    report = store.save([("small", 1), ("big", value), ("small2", "x")])
    assert sorted(report.saved) == ["small", "small2"]
    assert [s.name for s in report.skipped] == ["big"] and reason in report.skipped[0].reason


@pytest.mark.usefixtures("both_places")
def test_incremental_save_reuses_unchanged_values_and_sees_changes(tmp_path: Path) -> None:
    arr = np.ones(1_000_000)
    data: dict[str, Any] = {"arr": arr, "b": b"x" * 100, "lst": [1, 2, 3]}
    store = _store(tmp_path)
    first = store.save(data.items())
    assert first.unchanged == [] and first.written_bytes > 8_000_000
    second = store.save(data.items())
    assert sorted(second.unchanged) == ["arr", "b", "lst"]
    assert second.written_bytes == 0
    arr *= 2  # in place: same identity, new content
    data["lst"].append(4)
    third = store.save(data.items())
    assert sorted(third.unchanged) == ["b"]
    values, _ = _store(tmp_path).load()
    assert values["arr"][0] == 2.0 and values["lst"] == [1, 2, 3, 4]


@pytest.mark.usefixtures("both_places")
def test_generations_are_limited_and_unreferenced_blobs_removed(tmp_path: Path) -> None:
    store = _store(tmp_path, generations=2)
    for i in range(4):
        store.save([("v", f"value {i}")])
    assert store.manifests() == [3, 4]
    assert len(_payloads(store)) == 2
    values, report = store.load(generation=3)
    assert values == {"v": "value 2"} and report.generation == 3


def _payloads(store: SnapshotStore) -> list[str]:
    return [n for n in _raw(store).list("blobs/") if n.endswith((".blob", ".pack"))]


def _tamper_blob(store: SnapshotStore) -> None:
    raw, name = _raw(store), _payloads(store)[0]
    data = bytearray(raw.get(name))
    data[len(data) // 2] ^= 0xFF
    raw.put(name, bytes(data))


def _truncate_blob(store: SnapshotStore) -> None:
    raw, name = _raw(store), _payloads(store)[0]
    raw.put(name, raw.get(name)[:-5])


def _tamper_manifest(store: SnapshotStore) -> None:
    raw = _raw(store)
    name = next(n for n in raw.list("") if n.startswith("manifest-"))
    text = raw.get(name).decode()
    raw.put(name, text.replace('"bytes"', '"bytes" ', 1).replace("value", "evil").encode())


@pytest.mark.parametrize("damage", [_tamper_blob, _truncate_blob], ids=["flipped-byte", "truncated"])
@pytest.mark.parametrize("value", ["value", np.arange(300_000.0)], ids=["packed-small", "own-blob-array"])
@pytest.mark.usefixtures("both_places")
def test_damaged_payload_is_refused_before_unpickling(
    tmp_path: Path, damage: Any, value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    store.save([("v", value)])
    damage(store)
    calls: list[Any] = []
    import pickle

    import dill

    monkeypatch.setattr(dill, "loads", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: calls.append(a))
    values, report = store.load()
    assert values == {} and calls == []
    # The only generation's payload did not verify: the generation is refused (no older one to fall back to).
    assert report.generation is None and len(report.refused) == 1 and "not unpickled" in report.refused[0]


@pytest.mark.usefixtures("both_places")
def test_tampered_manifest_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save([("value", 1)])
    _tamper_manifest(store)
    values, report = store.load()
    assert values == {} and report.generation is None
    # The edit keeps the JSON valid, so it is the signature check that must refuse it.
    assert len(report.refused) == 1 and "failed its signature check" in report.refused[0]


def test_wrong_key_refuses_everything(tmp_path: Path) -> None:
    _store(tmp_path).save([("v", 1)])
    values, report = SnapshotStore(tmp_path / "snap", b"z" * 32, durable=False).load()
    assert values == {} and report.refused


class Point:
    def __init__(self, x: int) -> None:
        self.x = x


@pytest.mark.usefixtures("both_places")
def test_code_from_other_python_is_quarantined_data_returns(tmp_path: Path) -> None:
    def helper() -> int:
        return 7

    _store(tmp_path, python="2.7").save([("helper", helper), ("data", [1, 2]), ("arr", np.zeros(3))])
    values, report = _store(tmp_path).load()
    assert sorted(values) == ["arr", "data"]
    assert [q.name for q in report.quarantined] == ["helper"]
    assert "2.7" in report.quarantined[0].reason


@pytest.mark.usefixtures("both_places")
def test_session_code_inside_a_builtin_container_travels_by_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    ns: dict[str, Any] = {"__name__": "__main__"}
    exec("def bump(x):\n    return x + 1\n", ns)  # defined in the session, as a cell would
    monkeypatch.setattr(sys.modules["__main__"], "bump", ns["bump"], raising=False)
    items = [("fns", [ns["bump"]]), ("table", {"f": ns["bump"], "n": 1})]
    _store(tmp_path).save(items)
    _store(tmp_path / "older", python="2.7").save(items)
    monkeypatch.delattr(sys.modules["__main__"], "bump")  # a restarted kernel does not have it
    values, report = _store(tmp_path).load()
    assert report.failed == [] and values["fns"][0](1) == 2 and values["table"]["f"](2) == 3
    values, report = _store(tmp_path / "older").load()  # code in a container is quarantined like code alone
    assert sorted(q.name for q in report.quarantined) == ["fns", "table"] and values == {}


def test_key_file_is_created_owner_only_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "d" / "key"
    key = load_or_create_key(path)
    assert len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key(path) == key
    path.chmod(0o644)
    with pytest.raises(SnapshotError, match="chmod 600"):
        load_or_create_key(path)


def test_open_files_and_non_string_names_are_skipped(tmp_path: Path) -> None:
    f = (tmp_path / "f.txt").open("w")
    try:
        report = _store(tmp_path).save([("f", f), (3, "x"), ("ok", 1)])  # type: ignore[list-item]
    finally:
        f.close()
    assert report.saved == ["ok"]
    assert {s.reason for s in report.skipped} == {"open file handles are not persisted", "not a string name"}


class SlowToPickle:
    def __reduce__(self) -> Any:
        import time

        time.sleep(600)  # far from any loaded machine's seconds: the bound below tells the two apart
        return (SlowToPickle, ())


@pytest.mark.parametrize("wrap", [lambda v: v, lambda v: [v]], ids=["alone", "inside-a-list"])
def test_a_value_that_hangs_while_serializing_is_skipped_with_a_reason(tmp_path: Path, wrap: Any) -> None:
    import time

    start = time.monotonic()  # a list is fingerprinted with the C pickler first: that must be bounded too
    report = _store(tmp_path, name_timeout=0.3).save([("slow", wrap(SlowToPickle())), ("ok", 1)])
    assert time.monotonic() - start < 120  # an unbounded save would take 600 s
    assert report.saved == ["ok"]
    assert report.skipped[0].name == "slow" and "longer than 0.3 s" in report.skipped[0].reason


@pytest.mark.parametrize("elements", [300_000, 3_000_000], ids=["2.4MB-one-thread", "24MB-two-lanes"])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.usefixtures("both_places")
def test_an_in_place_edit_of_one_element_anywhere_in_a_large_array_is_seen(
    tmp_path: Path, elements: int, where: str
) -> None:
    arr = np.arange(float(elements))
    store = _store(tmp_path)
    first = store.save([("arr", arr)])
    again = store.save([("arr", arr)])
    assert again.unchanged == ["arr"] and again.written_bytes == 0
    assert again.verified_bytes == first.bytes  # proven unchanged by hashing every byte, not by samples
    index = {"first": 0, "middle": elements // 2 + 7, "last": elements - 1}[where]
    arr[index] = -1.0  # in place: same object, same address, same shape
    edited = store.save([("arr", arr)])
    assert edited.unchanged == [] and edited.written_bytes == first.bytes
    if where == "middle":  # between the sampled blocks: only the full re-hash can see it
        assert edited.verified_bytes == first.bytes
    values, report = _store(tmp_path).load()
    assert report.restored == ["arr"] and values["arr"][index] == -1.0
    np.testing.assert_array_equal(values["arr"], arr)


def test_a_full_snapshot_is_fsynced_and_restores(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "snap", KEY, durable=True)
    arr = np.arange(3_000_000.0)
    report = store.save([("arr", arr), ("small", {"k": 1})])
    assert report.saved == ["arr", "small"] and store._files.unsynced == []
    values, _ = SnapshotStore(tmp_path / "snap", KEY, durable=True).load()
    np.testing.assert_array_equal(values["arr"], arr)
    assert values["small"] == {"k": 1}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (b"a" * (2 << 20), b"a" * ((2 << 20) - 1) + b"b"),
        ("a" * (2 << 20), "a" * (1 << 20) + "b" + "a" * ((1 << 20) - 1)),
    ],
    ids=["bytes", "str"],
)
def test_large_immutable_values_are_compared_by_full_content(tmp_path: Path, before: Any, after: Any) -> None:
    store = _store(tmp_path)
    store.save([("v", before)])
    assert store.save([("v", before)]).unchanged == ["v"]
    assert store.save([("v", after)]).unchanged == []
    values, _ = _store(tmp_path).load()
    assert values["v"] == after


def test_an_array_whose_samples_changed_is_written_without_a_verification_pass(tmp_path: Path) -> None:
    arr = np.arange(3_000_000.0)
    store = _store(tmp_path)
    first = store.save([("arr", arr)])
    arr *= 2  # every sampled block changes
    edited = store.save([("arr", arr)])
    assert edited.unchanged == [] and edited.verified_bytes == 0 and edited.written_bytes == first.bytes
    values, _ = _store(tmp_path).load()
    np.testing.assert_array_equal(values["arr"], arr)


# ---------------------------------------------------------------- verification modes (sampled / full)

_BETWEEN_SAMPLES = 1_500_007  # an element of a 3,000,000-float array outside every sampled block


def _edit_between_samples(arr: Any) -> None:
    before = fingerprint(arr)
    arr[_BETWEEN_SAMPLES] = -1.0
    assert fingerprint(arr) == before  # the samples cannot see this edit


@pytest.mark.usefixtures("both_places")
def test_sampled_mode_misses_an_edit_between_samples_and_the_next_full_verification_catches_it(
    tmp_path: Path,
) -> None:
    arr = np.arange(3_000_000.0)
    store = _store(tmp_path)
    first = store.save([("arr", arr)], timestamp="t1")
    _edit_between_samples(arr)
    # First half: the sampled save trusts the samples, reads nothing else, and keeps the old content.
    sampled = store.save([("arr", arr)], verify="sampled", timestamp="t2")
    assert sampled.verification == "sampled" and sampled.sampled == ["arr"]
    assert sampled.unchanged == ["arr"] and sampled.written_bytes == 0 and sampled.verified_bytes == 0
    assert sampled.last_full_verification == {"generation": first.generation, "timestamp": "t1"}
    values, _ = _store(tmp_path).load()
    assert values["arr"][_BETWEEN_SAMPLES] == float(_BETWEEN_SAMPLES)  # the miss, as documented
    # Second half: the next full verification re-hashes every byte, sees the edit and writes it.
    full = store.save([("arr", arr)], verify="full", timestamp="t3")
    assert full.verification == "full" and full.sampled == [] and full.unchanged == []
    assert full.verified_bytes == first.bytes and full.written_bytes == first.bytes
    assert full.last_full_verification == {"generation": full.generation, "timestamp": "t3"}
    values, report = _store(tmp_path).load()
    assert report.restored == ["arr"] and values["arr"][_BETWEEN_SAMPLES] == -1.0
    np.testing.assert_array_equal(values["arr"], arr)


@pytest.mark.parametrize("verify", ["sampled", "full"])
def test_an_edit_the_samples_see_is_written_in_either_mode(tmp_path: Path, verify: str) -> None:
    arr = np.arange(3_000_000.0)
    store = _store(tmp_path)
    first = store.save([("arr", arr)])
    arr *= 2  # every sampled block changes
    edited = store.save([("arr", arr)], verify=verify)
    assert edited.unchanged == [] and edited.written_bytes == first.bytes and edited.verified_bytes == 0
    assert edited.verification == "full" and edited.sampled == []  # nothing was trusted on samples
    values, _ = _store(tmp_path).load()
    np.testing.assert_array_equal(values["arr"], arr)


@pytest.mark.parametrize(
    ("every", "expected"),
    [
        (1, "FFFFFFF"),
        (3, "FSSFSSF"),
        (4, "FSSSFSS"),
        (10, "FSSSSSSSSSFSS"),
    ],
)
def test_every_nth_automatic_snapshot_verifies_fully(tmp_path: Path, every: int, expected: str) -> None:
    """The first save has nothing to trust (full); after a full one, every-1 sampled ones, then full."""
    arr = np.arange(300_000.0)  # 2.4 MB: a sampled fingerprint
    store = _store(tmp_path)
    reports = [
        store.save([("arr", arr)], verify=store.automatic_verification("sampled", every)) for _ in expected
    ]
    assert "".join("F" if r.verification == "full" else "S" for r in reports) == expected
    for i, r in enumerate(reports):
        assert r.unchanged == ([] if i == 0 else ["arr"]) and r.written_bytes == (r.bytes if i == 0 else 0)
        assert r.sampled == (["arr"] if r.verification == "sampled" else [])
        assert r.verified_bytes == (0 if i == 0 or r.verification == "sampled" else r.bytes)


@pytest.mark.parametrize("how", ["explicit-default", "automatic-in-full-mode"])
def test_explicit_saves_and_full_mode_always_verify_every_byte(tmp_path: Path, how: str) -> None:
    arr = np.arange(300_000.0)
    store = _store(tmp_path)
    first = store.save([("arr", arr)])
    for _ in range(3):
        if how == "explicit-default":
            report = store.save([("arr", arr)])
        else:
            report = store.save([("arr", arr)], verify=store.automatic_verification("full", 10))
        assert report.verification == "full" and report.sampled == [] and report.verified_bytes == first.bytes


@pytest.mark.usefixtures("both_places")
def test_an_explicit_full_verification_restarts_the_count_and_the_count_survives_a_restart(
    tmp_path: Path,
) -> None:
    arr = np.arange(300_000.0)
    store = _store(tmp_path)

    def auto(s: SnapshotStore) -> str:
        return s.save([("arr", arr)], verify=s.automatic_verification("sampled", 3)).verification

    assert [auto(store), auto(store)] == ["full", "sampled"]
    assert store.save([("arr", arr)]).verification == "full"  # explicit
    assert [auto(store), auto(store), auto(store)] == ["sampled", "sampled", "full"]
    assert auto(store) == "sampled"
    restarted = _store(tmp_path)  # a new kernel: the count is read back from the newest manifest
    assert [restarted.automatic_verification("sampled", n) for n in (3, 2)] == ["sampled", "full"]  # 1 since
    assert restarted.last_full_verification == {"generation": 6, "timestamp": None}


@pytest.mark.usefixtures("both_places")
def test_the_manifest_records_the_verification_of_each_generation(tmp_path: Path) -> None:
    arr = np.arange(300_000.0)
    store = _store(tmp_path)
    store.save([("arr", arr), ("x", 1)], timestamp="t1")
    store.save([("arr", arr), ("x", 1)], verify="sampled", timestamp="t2")
    store.save([("arr", arr), ("x", 2)], verify="sampled", timestamp="t3")
    rows = [
        (
            m["generation"],
            m["verification"],
            m["sampled"],
            m["last_full_verification"],
            m["sampled_since_full"],
        )
        for m in map(store.read_manifest, store.manifests())
    ]
    assert rows == [
        (1, "full", [], {"generation": 1, "timestamp": "t1"}, 0),
        (2, "sampled", ["arr"], {"generation": 1, "timestamp": "t1"}, 1),
        (3, "sampled", ["arr"], {"generation": 1, "timestamp": "t1"}, 2),
    ]
    latest = store.latest_manifest()
    assert latest is not None and latest["generation"] == 3


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.save([("x", 1)], verify="fast"), "verify must be one of 'sampled', 'full', got 'fast'"),
        (lambda s: s.automatic_verification("fast", 10), "verification mode must be one of"),
        (lambda s: s.automatic_verification("sampled", 0), "full_verify_every must be at least 1, got 0"),
    ],
    ids=["save-mode", "auto-mode", "auto-every"],
)
def test_a_bad_verification_setting_is_refused_and_nothing_changes(
    tmp_path: Path, call: Any, message: str
) -> None:
    store = _store(tmp_path)
    store.save([("x", 1)])
    with pytest.raises(SnapshotError, match=message):
        call(store)
    assert store.manifests() == [1]
    values, _ = _store(tmp_path).load()
    assert values == {"x": 1}


# ---------------------------------------------------------------- the kernel side's wiring (in-process shell)


@pytest.fixture()
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("IPYTHON_COMPACT_SESSION", f"verify-{tmp_path.name}")
    ip = start_ipython() or get_ipython()  # type: ignore[no-untyped-call]
    for name in [n for n in ip.user_ns if not n.startswith("_") and n not in ip.user_ns_hidden]:
        del ip.user_ns[name]
    ip.run_line_magic("load_ext", "ipython_compact")
    yield ip
    ip.run_line_magic("unload_ext", "ipython_compact")


def test_config_drives_automatic_snapshots_and_explicit_ones_verify_fully(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from ipython_compact.kernel.extension import extension_for

    ext = extension_for(shell)
    assert ext is not None
    shell.run_line_magic("config", "CompactConfig.full_verify_every = 100")
    shell.user_ns["wide"] = np.arange(300_000.0)
    service = ext.service
    auto = [service.snapshot(record=False, automatic=True).verification for _ in range(3)]
    assert auto == ["full", "sampled", "sampled"]  # the first has nothing to trust
    status = shell.run_line_magic("compact", "status").data["snapshot"]
    assert status["verification"] == "sampled" and status["last_full_verification"]["generation"] == 1
    magic = shell.run_line_magic("compact", "snapshot").data  # explicit: always a full verification
    assert magic["verification"] == "full" and magic["sampled"] == []
    # the array re-hashed (plus its pickle header)
    assert 2_400_000 <= magic["verified_bytes"] < 2_400_000 + 4096
    status = shell.run_line_magic("compact", "status").data["snapshot"]
    # 3, not 4: the third automatic snapshot repeated the second exactly, so it wrote no generation
    assert status["last_full_verification"]["generation"] == magic["generation"] == 3
    shell.run_line_magic("config", "CompactConfig.verify_unchanged = 'full'")
    assert service.snapshot(record=False, automatic=True).verification == "full"
    capsys.readouterr()
    assert shell.run_line_magic("compact", "snapshot --help") is None  # help is printed, not the cell's value
    help_text = " ".join(capsys.readouterr().out.split())
    assert "missed until the next full verification" in help_text and "full_verify_every" in help_text


def test_an_automatic_snapshot_problem_is_told_once_as_one_sentence(
    shell: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from ipython_compact.kernel.extension import extension_for

    ext = extension_for(shell)
    assert ext is not None
    shell.user_ns["kept"] = 1
    (tmp_path / "data" / "key").write_bytes(b"short")
    (tmp_path / "data" / "key").chmod(0o600)
    ext._auto_snapshot()
    ext._auto_snapshot()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "automatic snapshot was not written" in err[0] and "expected 32" in err[0]
    assert "Traceback" not in capsys.readouterr().err
