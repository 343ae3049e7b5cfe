"""Issue 9 on real files: which generation restore picks across kernel processes, many writers,
authenticity (session/generation binding, the ledger against rollback), filesystem hygiene,
two-phase restore, and pandas' unchanged-check.

Kernel processes are simulated with ``process=`` ids here; tests/test_snapshot_kernels.py does the
same flows with real kernels.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from snapshot_ledger import MemoryLedger

from ipython_compact.namespace.snapshot import SnapshotError, SnapshotStore, load_or_create_key
from ipython_compact.store.writer_locks import writer_locks

KEY = b"k" * 32


def _store(tmp_path: Path, process: str = "p1", **kw: Any) -> SnapshotStore:
    kw.setdefault("session", "s1")
    return SnapshotStore(tmp_path / "snap", KEY, durable=False, process=process, **kw)


@pytest.fixture(params=["folder", "s3"])
def both_places(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test on the local folder, then on moto's S3 server (``_store`` points there, its
    writer lock in a SQLite log's file lock): the rules of this file hold on both."""
    if request.param == "s3":
        url = request.getfixturevalue("s3_url")
        locks = writer_locks(tmp_path / "log.db")

        def on_s3(tmp_path: Path, process: str = "p1", **kw: Any) -> SnapshotStore:
            kw.setdefault("session", "s1")
            return SnapshotStore(
                f"{url}/{kw['session']}", KEY, durable=False, process=process, locks=locks, **kw
            )

        monkeypatch.setattr(sys.modules[__name__], "_store", on_s3)
    return str(request.param)


# ---------------------------------------------------------------- 1: restore picks the user's work


@pytest.mark.usefixtures("both_places")
def test_a_fresh_kernels_automatic_snapshots_neither_supersede_nor_prune_the_previous_kernels_work(
    tmp_path: Path,
) -> None:
    old = _store(tmp_path, "old", generations=2)
    old.save([("data", [1, 2, 3]), ("x", 41)])
    fresh = _store(tmp_path, "fresh", generations=2)
    for i in range(5):  # the restart's automatic snapshots, more than `generations`
        fresh.save([("tmp", i)], automatic=True)
    gens = {g.generation: g for g in fresh.generations_info()}
    assert any(g.process == "old" for g in gens.values())  # kept: not restored, not discarded
    values, report = fresh.load()
    assert values == {"data": [1, 2, 3], "x": 41} and report.process == "old"


@pytest.mark.usefixtures("both_places")
def test_work_of_a_kernel_that_never_restored_is_kept_and_pointed_at(tmp_path: Path) -> None:
    _store(tmp_path, "first").save([("x", 41)])
    second = _store(tmp_path, "second")  # worked without restoring, then died
    second.save([("y", 1)], automatic=True)
    second.save([("y", 2), ("z", 3)], automatic=True)
    values, report = _store(tmp_path, "third").load()
    assert values == {"x": 41}
    assert (
        len(report.warnings) == 1
        and ("--generation 3") in report.warnings[0]
        and "y, z" in report.warnings[0]
    )
    values, _ = _store(tmp_path, "third").load(generation=3)
    assert values == {"y": 2, "z": 3}


@pytest.mark.usefixtures("both_places")
def test_after_a_restore_the_previous_kernels_snapshot_may_be_pruned(tmp_path: Path) -> None:
    _store(tmp_path, "old", generations=2).save([("x", 41)])
    fresh = _store(tmp_path, "fresh", generations=2)
    ns: dict[str, Any] = {}
    assert fresh.restore_into(ns).restored == ["x"]
    for i in range(4):
        fresh.save([("x", 41), ("i", i)], automatic=True)
    assert {g.process for g in fresh.generations_info()} == {"fresh"}
    values, report = _store(tmp_path, "third").load()
    assert values == {"x": 41, "i": 3} and report.process == "fresh"


@pytest.mark.usefixtures("both_places")
def test_a_generation_and_names_can_be_picked_and_a_listing_says_what_each_holds(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save([("a", 1), ("b", 2)])
    store.save([("a", 10)])
    info = store.generations_info()
    assert [(g.generation, g.names, g.verified, g.process) for g in info] == [
        (1, ["a", "b"], True, "p1"),
        (2, ["a"], True, "p1"),
    ]
    values, report = store.load(generation=1, names=["b"])
    assert values == {"b": 2} and report.generation == 1


@pytest.mark.usefixtures("both_places")
def test_discarding_an_earlier_kernels_snapshots_lets_them_go(tmp_path: Path) -> None:
    _store(tmp_path, "old").save([("x", 41)])
    fresh = _store(tmp_path, "fresh", generations=1)
    fresh.save([("y", 1)], automatic=True)
    old_gen = next(g.generation for g in fresh.generations_info() if g.process == "old")
    fresh.discard(old_gen)
    fresh.save([("y", 2)], automatic=True)
    assert {g.process for g in fresh.generations_info()} == {"fresh"}
    with pytest.raises(SnapshotError, match="this kernel's own"):
        fresh.discard(fresh.generations_info()[-1].generation)


# ---------------------------------------------------------------- 3: many writers on one session


def _writer(directory: str, process: str, rounds: int, out: Any) -> None:
    store = SnapshotStore(Path(directory), KEY, durable=False, process=process, session="s1", generations=2)
    gens = []
    for i in range(rounds):
        arr = np.full(200_000, i, dtype=np.int64)  # its own blob each round
        gens.append(store.save([("arr", arr), ("i", i), ("who", process)]).generation)
    out.put(gens)


@pytest.mark.slow
def test_two_processes_writing_one_session_never_share_a_generation_or_lose_a_kept_ones_payloads(
    tmp_path: Path,
) -> None:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path / "snap"), f"w{n}", 20, out)) for n in range(2)]
    for p in procs:
        p.start()
    gens = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sorted(gens[0] + gens[1]) == list(range(1, 41))  # numbering is atomic: no duplicates, no gaps
    reader = _store(tmp_path, "reader")
    kept = reader.generations_info()
    assert kept and all(g.verified for g in kept)
    for g in kept:
        values, report = reader.load(generation=g.generation)
        assert report.failed == [] and sorted(report.restored) == ["arr", "i", "who"]
        assert int(values["arr"][0]) == values["i"]


# ---------------------------------------------------------------- 4: rollback and substitution


def test_a_manifest_copied_in_under_a_newer_number_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save([("x", "old")])
    store.save([("x", "new")])
    m = sorted(store.directory.glob("manifest-*.json"))
    shutil.copy(m[0], store.directory / "manifest-00000003.json")
    values, report = _store(tmp_path).load()
    assert values == {"x": "new"} and report.generation == 2
    assert any("generation 1" in r and "manifest-00000003.json" in r for r in report.refused)


def test_a_manifest_from_another_session_is_refused(tmp_path: Path) -> None:
    other = SnapshotStore(tmp_path / "other", KEY, durable=False, session="s2")
    other.save([("x", "theirs")])
    mine = _store(tmp_path)
    mine.save([("x", "mine")])
    shutil.copy(next(other.directory.glob("manifest-*.json")), mine.directory / "manifest-00000009.json")
    values, report = _store(tmp_path).load()
    assert values == {"x": "mine"}
    assert any("session 's2'" in r for r in report.refused)


def test_a_snapshot_folder_replaced_by_an_older_copy_is_refused_unless_a_generation_is_named(
    tmp_path: Path,
) -> None:
    ledger = MemoryLedger()
    store = _store(tmp_path, ledger=ledger)
    store.save([("x", 1)])
    shutil.copytree(store.directory, tmp_path / "copy")
    store.save([("x", 2)])
    shutil.rmtree(store.directory)
    shutil.copytree(tmp_path / "copy", store.directory)
    values, report = _store(tmp_path, ledger=ledger).load()
    assert values == {} and report.generation is None
    assert any("older than the session log" in r and "generation 2" in r for r in report.refused)
    values, report = _store(tmp_path, ledger=ledger).load(generation=1)
    assert values == {"x": 1} and any("older than the session log" in w for w in report.warnings)
    # New generations continue above what the log recorded.
    assert _store(tmp_path, ledger=ledger).save([("x", 3)]).generation == 3


@pytest.mark.usefixtures("both_places")
def test_discarding_the_newest_generations_is_not_taken_for_a_rollback(tmp_path: Path) -> None:
    ledger = MemoryLedger()
    _store(tmp_path, "old", ledger=ledger).save([("x", 1)])
    fresh = _store(tmp_path, "fresh", ledger=ledger)
    fresh.save([("y", 1)])
    # the earlier kernel's newest is also the newest overall
    _store(tmp_path, "old", ledger=ledger).save([("x", 2)])
    fresh.discard(3)
    values, report = _store(tmp_path, "third", ledger=ledger).load()
    assert values == {"y": 1} and report.refused == [] and report.warnings == []


@pytest.mark.usefixtures("both_places")
def test_a_manifest_whose_digest_differs_from_the_recorded_one_is_refused(tmp_path: Path) -> None:
    ledger = MemoryLedger()
    store = _store(tmp_path, ledger=ledger)
    store.save([("x", 1)])
    ledger.records[1] = "0" * 64  # as if a different, validly signed file had been recorded
    values, report = _store(tmp_path, ledger=ledger).load()
    assert values == {} and any("does not match the digest recorded" in r for r in report.refused)


# ---------------------------------------------------------------- 5: crash and filesystem hygiene


@pytest.mark.slow
def test_a_writer_killed_mid_snapshot_leaves_no_temporary_file_after_the_next_save(tmp_path: Path) -> None:
    code = (
        "import numpy as np, sys\n"
        "from pathlib import Path\n"
        "from ipython_compact.namespace.snapshot import SnapshotStore\n"
        f"s = SnapshotStore(Path({str(tmp_path / 'snap')!r}), b'k' * 32, session='s1', durable=True)\n"
        "arr = np.ones(40_000_000)\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    arr[0] += 1\n"
        "    s.save([('arr', arr)], full=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env={**os.environ})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        deadline = time.monotonic() + 60
        while not list((tmp_path / "snap").rglob("*.tmp")):
            assert time.monotonic() < deadline, "the writer never started a payload"
            time.sleep(0.005)
        proc.kill()
    finally:
        proc.kill()
        proc.wait()
    assert list((tmp_path / "snap").rglob("*.tmp"))  # the crash left one behind
    _store(tmp_path).save([("x", 1)])
    assert list((tmp_path / "snap").rglob("*.tmp")) == []


def _in_thread(fn: Any) -> Any:
    result: list[Any] = []
    t = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    t.start()
    t.join(timeout=20)
    assert not t.is_alive(), "hung"
    return result[0]


@pytest.mark.parametrize("what", ["manifest", "blob"])
def test_a_fifo_named_like_a_snapshot_file_is_refused_not_opened(tmp_path: Path, what: str) -> None:
    store = _store(tmp_path)
    store.save([("x", 1), ("arr", np.arange(300_000.0))])
    if what == "manifest":
        os.mkfifo(store.directory / "manifest-00000002.json")
    else:
        blob = next(store.blobs.glob("*.blob"))
        blob.unlink()
        os.mkfifo(blob)
    values, report = _in_thread(lambda: _store(tmp_path).load())
    if what == "manifest":
        assert values["x"] == 1 and any("not a regular file" in r for r in report.refused)
    else:
        assert "arr" not in values and any("not a regular file" in r for r in report.refused)
    _in_thread(lambda: _store(tmp_path).save([("x", 2)]))  # saving and listing do not hang either


def test_a_deeply_nested_manifest_falls_back_to_the_previous_generation(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save([("x", 1)])
    (store.directory / "manifest-00000002.json").write_text("[" * 200_000 + "]" * 200_000)
    values, report = _store(tmp_path).load()
    assert values == {"x": 1} and report.generation == 1
    assert any("manifest-00000002.json" in r for r in report.refused)
    assert _store(tmp_path).save([("x", 5)]).generation == 3  # saves and listings still work
    assert [g.verified for g in _store(tmp_path).generations_info()] == [True, False, True]


def _make_key(path: str, barrier: Any, out: Any) -> None:
    barrier.wait()
    try:
        out.put(load_or_create_key(Path(path)).hex())
    except Exception as exc:
        out.put(f"error: {exc}")


@pytest.mark.slow
def test_processes_creating_the_key_at_once_all_get_the_same_complete_key(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    for round_ in range(20):  # the old create-then-write lost about one round in 20
        path = tmp_path / f"k{round_}" / "key"
        barrier, out = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_make_key, args=(str(path), barrier, out)) for _ in range(6)]
        for p in procs:
            p.start()
        keys = {out.get(timeout=30) for _ in procs}
        for p in procs:
            p.join()
        assert len(keys) == 1 and not next(iter(keys)).startswith("error"), keys
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_symlinked_snapshot_folder_is_refused_and_not_chmodded(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    os.chmod(outside, 0o755)
    (data / "snapshots").symlink_to(outside)
    with pytest.raises(SnapshotError, match="symbolic link"):
        SnapshotStore(data / "snapshots" / "s1", KEY, root=data, session="s1")
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755 and list(outside.iterdir()) == []


# ---------------------------------------------------------------- 6: restore order and data frames


@pytest.mark.usefixtures("both_places")
def test_restore_binds_globals_before_values_whose_setstate_needs_them(tmp_path: Path) -> None:
    import __main__

    saved = dict(__main__.__dict__)
    try:  # defined in __main__'s namespace, as a kernel cell would
        exec(
            "class Scaled:\n"
            "    def __init__(self, v):\n        self.v = v\n"
            "    def __getstate__(self):\n        return {'v': self.v}\n"
            "    def __setstate__(self, state):\n        self.v = state['v'] * scale\n"
            "scale = 10\nobj = Scaled(4)\n",
            __main__.__dict__,
        )
        ns = __main__.__dict__
        # "obj" sorts before "scale": name order alone would unpickle obj before its global exists
        _store(tmp_path).save([("obj", ns["obj"]), ("Scaled", ns["Scaled"]), ("scale", 10)])
        for name in ("scale", "Scaled", "obj"):
            del ns[name]
        report = _store(tmp_path).restore_into(ns)
        assert report.failed == [] and sorted(report.restored) == ["Scaled", "obj", "scale"]
        assert ns["obj"].v == 40
    finally:
        __main__.__dict__.clear()
        __main__.__dict__.update(saved)


def _frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"a": np.arange(rows, dtype=np.int64), "b": np.linspace(0, 1, rows), "c": np.arange(rows) % 7 == 0}
    )


@pytest.mark.usefixtures("both_places")
def test_an_unchanged_data_frame_is_not_rewritten_and_an_edit_is(tmp_path: Path) -> None:
    df = _frame(300_000)
    store = _store(tmp_path)
    first = store.save([("df", df)])
    again = store.save([("df", df)], verify="sampled")
    assert again.unchanged == ["df"] and again.written_bytes == 0 and again.sampled == ["df"]
    full = store.save([("df", df)])  # explicit: proven unchanged by a full re-hash
    assert full.unchanged == ["df"] and full.written_bytes == 0 and full.verified_bytes > 0
    df.iloc[150_001, 1] = -5.0  # in place, between samples: only a full verification sees it
    edited = store.save([("df", df)])
    assert edited.unchanged == [] and edited.written_bytes > 0
    df["d"] = 1  # a new column: a new fingerprint at once
    assert store.save([("df", df)], verify="sampled").unchanged == []
    values, _ = _store(tmp_path).load()
    pd.testing.assert_frame_equal(values["df"], df)
    assert first.written_bytes > 0


@pytest.mark.usefixtures("both_places")
def test_an_automatic_snapshot_that_repeats_the_newest_writes_no_generation(tmp_path: Path) -> None:
    df, arr = _frame(300_000), np.arange(300_000.0)
    store = _store(tmp_path)
    first = store.save([("df", df), ("arr", arr)], verify="sampled", automatic=True)
    # trusted on samples: written
    second = store.save([("df", df), ("arr", arr)], verify="sampled", automatic=True)
    # repeats the second: not written
    third = store.save([("df", df), ("arr", arr)], verify="sampled", automatic=True)
    assert second.generation == first.generation + 1 and second.verification == "sampled"
    assert third.generation == second.generation and third.written_bytes == 0 and store.manifests()[-1] == 2
    arr[0] = 5.0  # a sampled block changes: a new generation
    assert store.save([("df", df), ("arr", arr)], verify="sampled", automatic=True).generation == 3


@pytest.mark.parametrize(
    ("env", "ns", "conn", "cwd", "expected"),
    [
        (
            {"JPY_SESSION_NAME": "/w/a.ipynb"},
            {},
            "/r/kernel-1.json",
            "/w",
            ("notebook:/w/a.ipynb", "notebook"),
        ),
        ({}, {}, "/r/kernel-1.json", "/w", ("kernel:kernel-1", "connection")),
        ({}, {}, None, "/w/proj", ("terminal:/w/proj:work", "terminal")),
    ],
    ids=["notebook", "connection-file", "terminal"],
)
def test_a_terminal_binds_to_its_directory_and_profile_not_its_process(
    env: dict[str, str], ns: dict[str, Any], conn: str | None, cwd: str, expected: tuple[str, str]
) -> None:
    from ipython_compact.kernel.binding import natural_key

    assert natural_key(env, ns, conn, "work", cwd) == expected


def test_a_snapshot_written_before_session_binding_still_restores_with_a_warning_and_is_kept(
    tmp_path: Path,
) -> None:
    import json as _json

    from ipython_compact.namespace.snapshot.signing import sign_text

    store = _store(tmp_path)
    store.save([("x", 41)])
    path = next(store.directory.glob("manifest-*.json"))
    m = _json.loads(path.read_text())["manifest"]
    for k in ("session", "process", "pid", "started", "origin", "provisional", "supersedes"):
        m.pop(k)
    m["version"] = 1  # as version 1 wrote it
    text = _json.dumps(m, sort_keys=True, separators=(",", ":"))
    path.write_text('{"hmac":"' + sign_text(KEY, text) + '","manifest":' + text + "}")
    values, report = _store(tmp_path, "upgraded").load()
    assert values == {"x": 41} and any("older version" in w for w in report.warnings)
    _store(tmp_path, "upgraded").save([("y", 1)], automatic=True)
    assert _store(tmp_path, "later").load(generation=1)[0] == {"x": 41}  # its payload was not pruned


@pytest.mark.parametrize("junk", ["file", "directory", "fifo", "other-generation"])
def test_a_rolled_back_folder_is_refused_whatever_lies_at_the_newest_recorded_name(
    tmp_path: Path, junk: str
) -> None:
    """Red team 3, item 1: junk planted at ``manifest-<newest recorded>.json`` once made the rollback
    check pass (restoring x = 1 instead of 3) with only a warning."""
    ledger = MemoryLedger()
    store = _store(tmp_path, ledger=ledger)
    store.save([("x", 1)])
    shutil.copytree(store.directory, tmp_path / "copy")
    store.save([("x", 2)])
    store.save([("x", 3)])
    shutil.rmtree(store.directory)
    shutil.copytree(tmp_path / "copy", store.directory)
    planted = store.directory / "manifest-00000003.json"
    if junk == "file":
        planted.write_bytes(b"junk")
    elif junk == "directory":
        planted.mkdir()
    elif junk == "fifo":
        os.mkfifo(planted)
    else:
        shutil.copy(store.directory / "manifest-00000001.json", planted)
    values, report = _store(tmp_path, ledger=ledger).load()
    assert values == {} and report.generation is None
    assert any("older than the session log" in r and "generation 3" in r for r in report.refused)
    values, report = _store(tmp_path, ledger=ledger).load(generation=1)
    assert values == {"x": 1} and any("older than the session log" in w for w in report.warnings)


def test_an_automatic_save_skips_instead_of_waiting_for_a_stuck_lock_holder(tmp_path: Path) -> None:
    """Red team 3, item 6: a SIGSTOP'd process holding ``.lock`` stalled every cell ~60 s, because
    the automatic snapshot waited on the kernel's main thread. It now skips at once and says so;
    an explicit save still waits (bounded) and reports the holder."""
    import fcntl

    from ipython_compact.namespace.snapshot.locking import SnapshotLockBusy

    store = _store(tmp_path, lock_timeout=0.2)
    store.save([("x", 1)])
    fd = os.open(store.directory / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: conflicts like another process
        with pytest.raises(SnapshotLockBusy, match="skipped rather than wait"):
            store.save([("x", 2)], automatic=True)
        with pytest.raises(SnapshotError, match="held the snapshot lock"):
            store.save([("x", 2)])
    finally:
        os.close(fd)
    assert store.save([("x", 2)], automatic=True).generation == 2


def test_an_oversized_manifest_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team 3, minor: a planted 300 MB manifest made the first status take 65 s to parse it."""
    from ipython_compact.namespace.snapshot import manifests

    monkeypatch.setattr(manifests, "MAX_MANIFEST_BYTES", 4096)
    store = _store(tmp_path)
    store.save([("x", 1)])
    (store.directory / "manifest-00000002.json").write_bytes(b"[" * 5000)
    values, report = _store(tmp_path).load()
    assert values == {"x": 1}
    assert any("manifest-00000002.json is 5,000 bytes, more than the 4,096" in r for r in report.refused)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_background_save_writes_in_a_child_and_the_parent_adopts_its_state(tmp_path: Path) -> None:
    """Issue 21: automatic snapshots are written by a forked child. The generation it writes is the
    same as a foreground save's; the parent learns the incremental cache (the next save finds the
    values unchanged) and records the digest in the session log's ledger."""
    from ipython_compact.namespace.snapshot.background import BackgroundSave

    ledger = MemoryLedger()
    store = _store(tmp_path, ledger=ledger)
    big = np.arange(300_000, dtype=np.float64)
    job = BackgroundSave(store, lambda: [("big", big), ("x", 1)], verify="sampled", timestamp="t")
    assert job.wait(120) and job.error is None and job.report is not None
    assert job.pid is not None and job.pid != os.getpid()
    assert job.report.generation == 1 and sorted(job.report.saved) == ["big", "x"]
    assert ledger.records == {1: job.report.manifest_digest}
    again = BackgroundSave(store, lambda: [("big", big), ("x", 1)], verify="sampled", timestamp="t")
    assert again.wait(120) and again.report is not None
    assert sorted(again.report.unchanged) == ["big", "x"]  # the child's cache reached the parent
    values, _ = _store(tmp_path, "p2", ledger=ledger).load()
    assert values["x"] == 1 and np.array_equal(values["big"], big)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_background_save_that_fails_says_why(tmp_path: Path) -> None:
    import fcntl

    from ipython_compact.namespace.snapshot.background import BackgroundSave

    store = _store(tmp_path)
    store.save([("x", 1)])
    fd = os.open(store.directory / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        job = BackgroundSave(store, lambda: [("x", 2)], verify="sampled", timestamp="t")
        assert job.wait(120)
    finally:
        os.close(fd)
    assert job.report is None and job.error is not None and "skipped rather than wait" in job.error


@pytest.mark.usefixtures("both_places")
def test_an_unchanged_frame_with_a_string_column_is_reused_not_serialized_again(tmp_path: Path) -> None:
    """Issue 21, item 2: a DataFrame with an object (str) column was never recognised as unchanged,
    so every automatic snapshot serialized it again (97% of a full save). It is now a sampled kind:
    reused on identity, pointers and sampled contents; a full save still proves it by its bytes."""
    store = _store(tmp_path)
    df = pd.DataFrame({"s": [f"row {i}" for i in range(50_000)], "x": np.arange(50_000)})
    store.save([("df", df)])
    sampled = store.save([("df", df)], verify="sampled", automatic=True)
    assert sampled.unchanged == ["df"] and sampled.sampled == ["df"] and sampled.written_bytes == 0
    df.loc[7, "s"] = "changed"  # a slot re-pointed: the pointer digest changes
    changed = store.save([("df", df)], verify="sampled", automatic=True)
    assert changed.unchanged == [] and changed.written_bytes > 0
    values, _ = _store(tmp_path, "p2").load()
    assert values["df"].loc[7, "s"] == "changed" and values["df"].equals(df)


@pytest.mark.parametrize(
    ("before", "after"), [(0.0, -0.0), (1, True), (1, 1.0), (None, 0), (2**70, 2**70 + 1)]
)
def test_scalars_keyed_by_value_never_take_one_value_for_another(
    tmp_path: Path, before: Any, after: Any
) -> None:
    store = _store(tmp_path)
    store.save([("v", before)])
    report = store.save([("v", after)], automatic=True, verify="sampled")
    assert report.unchanged == []
    values, _ = _store(tmp_path, "p2").load()
    assert type(values["v"]) is type(after) and repr(values["v"]) == repr(after)


@pytest.mark.parametrize("value", ["text", "x" * 100_000, b"raw", [1, "a"], {"k": (1, 2)}, np.arange(10)])
@pytest.mark.usefixtures("both_places")
def test_a_value_equal_to_the_snapshots_compares_equal_to_its_payload(tmp_path: Path, value: Any) -> None:
    """Restore keeps a defined name only when its value differs from the snapshot's; a string (saved
    by dill) was compared as a plain pickle and always looked different (an rlms kernel restart
    then kept the re-sent context instead of restoring it)."""
    from ipython_compact.namespace.snapshot.restore import same_as_payload

    store = _store(tmp_path)
    store.save([("v", value)])
    manifest = store.read_manifest(1)
    body = store._files.read_ref(manifest["names"]["v"]["ref"], {})
    assert same_as_payload(value, body)
    _, report = _store(tmp_path, "p2").load(namespace={"v": value})
    assert report.restored == ["v"] and report.kept == []


@pytest.mark.parametrize("value", [7, 2.5, True, None, 2**80])
def test_scalars_keyed_by_value_are_still_written_by_the_c_pickler(tmp_path: Path, value: Any) -> None:
    """Restore compares a defined name with the snapshot by its bytes; a scalar written by dill
    (when its key no longer needed the pickled bytes) never compared equal to the same value."""
    from ipython_compact.namespace.snapshot.restore import same_as_payload

    store = _store(tmp_path)
    store.save([("v", value)])
    manifest = store.read_manifest(1)
    assert manifest["names"]["v"]["format"] == "pickle"
    body = store._files.read_ref(manifest["names"]["v"]["ref"], {})
    assert same_as_payload(value, body)
