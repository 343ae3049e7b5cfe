"""Issue 9's user-visible flows in real ipykernel kernels (jupyter_client): the quickstart restart
flow, many kernels on one session, rollback, key and folder problems reaching the user as one
sentence, two-phase restore and data frames."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager
from kernel_fixtures import evaluate, execute, magic, running_kernel

from ipython_compact.host.kernel_client import KernelClient
from ipython_compact.kernel.binding import snapshot_slug
from ipython_compact.namespace.snapshot import SnapshotStore, load_or_create_key

pytestmark = pytest.mark.slow


def restart(km: KernelManager) -> None:
    km.restart_kernel(now=True)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
    finally:
        kc.stop_channels()


def _session_dir(data_dir: Path) -> Path:
    dirs = [p for p in (data_dir / "snapshots").iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _newest(directory: Path) -> int:
    gens = [int(p.stem.split("-")[1]) for p in directory.glob("manifest-*.json")]
    return max(gens, default=0)


def _wait_for_generation_after(directory: Path, after: int, timeout: float = 180.0) -> int:
    """Until the automatic snapshot lands. Its forked child runs at the lowest CPU priority, so on
    a loaded machine it can wait long for a core: the bound only ends a test that would hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        newest = _newest(directory)
        if newest > after:
            return newest
        time.sleep(0.1)
    raise AssertionError(f"no automatic snapshot after generation {after} within {timeout} s")


@pytest.fixture()
def kernel(compact_dir: Path) -> Iterator[KernelManager]:
    with running_kernel(compact_dir) as km:
        yield km


# ---------------------------------------------------------------- 1: the quickstart restart flow


def test_restore_after_a_restart_brings_back_the_work_not_the_restarts_own_snapshots(
    kernel: KernelManager, compact_dir: Path
) -> None:
    execute(kernel, "%load_ext ipython_compact")
    execute(kernel, "data = list(range(5))\nx = 41")
    assert magic(kernel, "snapshot")["data"]["saved"] == ["data", "x"]
    restart(kernel)
    # its own cell, as the quickstart says
    assert execute(kernel, "%load_ext ipython_compact")["status"] == "ok"
    directory = _session_dir(compact_dir)
    gen = _newest(directory)
    # more automatic snapshots than the 3 generations kept; wait past the debounce each time
    for i in range(5):
        execute(kernel, f"scratch = {i}")
        gen = _wait_for_generation_after(directory, gen)
    listing = magic(kernel, "snapshots")["data"]
    assert any(r["names"] == ["data", "x"] and not r["own"] for r in listing)  # the earlier kernel's, kept
    assert all(r["provisional"] for r in listing if r["own"])
    restored = magic(kernel, "restore")
    assert restored["title"].startswith("Restored from snapshot generation")
    assert sorted(restored["data"]["restored"]) == ["data", "x"]
    assert evaluate(kernel, "", "__import__('json').dumps([x, data, scratch])") == [41, [0, 1, 2, 3, 4], 4]


def test_a_restore_that_finds_nothing_is_a_warning_saying_where_it_looked(kernel: KernelManager) -> None:
    execute(kernel, "%load_ext ipython_compact")
    shown = magic(kernel, "restore")
    assert shown["title"] == "Warning: nothing was restored"
    assert "looked in" in shown["data"] and "IPYTHON_COMPACT_SESSION" in shown["data"]


# ---------------------------------------------------------------- 3: many kernels, one session

_ROUNDS = (
    "import numpy as np\n"
    "gens = []\n"
    "for i in range(20):\n"
    "    arr = np.full(200_000, i)\n"
    "    n = i\n"
    "    who = {who!r}\n"
    "    gens.append(get_ipython().run_line_magic('compact', 'snapshot').data['generation'])\n"
)


def test_two_kernels_snapshotting_one_session_concurrently_keep_every_generation_restorable(
    compact_dir: Path,
) -> None:
    with (
        running_kernel(compact_dir, IPYTHON_COMPACT_SESSION="shared") as a,
        running_kernel(compact_dir, IPYTHON_COMPACT_SESSION="shared") as b,
    ):
        for km in (a, b):
            execute(km, "%load_ext ipython_compact\n%config CompactConfig.auto_snapshot = False")
        gens: dict[str, list[int]] = {}

        def rounds(name: str, km: KernelManager) -> None:
            gens[name] = evaluate(km, _ROUNDS.format(who=name), "__import__('json').dumps(gens)")

        threads = [threading.Thread(target=rounds, args=(n, km)) for n, km in (("A", a), ("B", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert len(gens["A"]) == len(gens["B"]) == 20
        assert len(set(gens["A"]) | set(gens["B"])) == 40  # no generation number was handed out twice
    store = SnapshotStore(
        compact_dir / "snapshots" / snapshot_slug("shared"),
        load_or_create_key(compact_dir / "key"),
        session="shared",
        process="reader",
    )
    kept = store.generations_info()
    assert len(kept) >= 2 and all(g.verified for g in kept), [g.problem for g in kept]
    for g in kept:
        values, report = store.load(generation=g.generation)
        assert report.failed == [] and report.refused == []
        assert sorted(report.restored) == ["arr", "gens", "i", "n", "np", "who"]
        assert int(values["arr"][0]) == values["n"]


# ---------------------------------------------------------------- 4: rollback through the real session log


def test_a_snapshot_folder_rolled_back_to_an_older_copy_is_refused(
    kernel: KernelManager, compact_dir: Path
) -> None:
    execute(kernel, "%load_ext ipython_compact\n%config CompactConfig.auto_snapshot = False")
    execute(kernel, "x = 1")
    first = magic(kernel, "snapshot")["data"]["generation"]
    directory = _session_dir(compact_dir)
    shutil.copytree(directory, compact_dir / "older-copy")
    execute(kernel, "x = 2")
    magic(kernel, "snapshot")
    shutil.rmtree(directory)
    shutil.copytree(compact_dir / "older-copy", directory)
    restart(kernel)
    execute(kernel, "%load_ext ipython_compact")
    shown = magic(kernel, "restore")
    assert shown["title"] == "Warning: nothing was restored" and "older than the session log" in shown["data"]
    named = magic(kernel, f"restore --generation {first}")["data"]
    assert named["restored"] == ["x"] and any("older than the session log" in w for w in named["warnings"])
    with KernelClient.for_manager(kernel) as client:  # the panel's comm picks a generation the same way
        over_comm = client.request("restore", generation=first)
        assert over_comm.ok and over_comm["restored"] == ["x"] and over_comm["warnings"]


# ---------------------------------------------------------------- 5: problems reach the user as one sentence


def _usage_error(km: KernelManager, code: str) -> str:
    reply = execute(km, code)
    assert reply["status"] == "error" and reply["ename"] == "UsageError", reply
    return str(reply["evalue"])


def test_key_and_folder_problems_are_one_sentence_with_what_to_do(
    kernel: KernelManager, compact_dir: Path
) -> None:
    execute(kernel, "%load_ext ipython_compact\nx = 1")
    key = compact_dir / "key"
    key.write_bytes(b"short")
    os.chmod(key, 0o600)
    assert "expected 32" in _usage_error(kernel, "%compact snapshot")
    os.chmod(key, 0o644)
    assert "chmod 600" in _usage_error(kernel, "%compact snapshot")
    key.unlink()
    outside = compact_dir.parent / f"{compact_dir.name}-outside"
    outside.mkdir(mode=0o755)
    os.chmod(outside, 0o755)
    shutil.rmtree(compact_dir / "snapshots", ignore_errors=True)
    (compact_dir / "snapshots").symlink_to(outside)
    restart(kernel)
    execute(kernel, "%load_ext ipython_compact\nx = 1")
    assert "symbolic link" in _usage_error(kernel, "%compact snapshot")
    assert "symbolic link" in magic(kernel, "status")["data"]["snapshot_problem"]  # status still answers
    assert (outside.stat().st_mode & 0o777) == 0o755 and list(outside.iterdir()) == []


# ---------------------------------------------------------------- 6: restore order and data frames

_SCALED = (
    "class Scaled:\n"
    "    def __init__(self, v):\n        self.v = v\n"
    "    def __getstate__(self):\n        return {'v': self.v}\n"
    "    def __setstate__(self, state):\n        self.v = state['v'] * scale\n"
    "obj = Scaled(4)\n"
    "scale = 10\n"
)


def test_restore_binds_the_global_a_setstate_needs_before_the_object(kernel: KernelManager) -> None:
    execute(kernel, "%load_ext ipython_compact")
    execute(kernel, _SCALED)
    magic(kernel, "snapshot")
    restart(kernel)
    execute(kernel, "%load_ext ipython_compact")
    report = magic(kernel, "restore")["data"]
    assert report["failed"] == [] and sorted(report["restored"]) == ["Scaled", "obj", "scale"]
    assert evaluate(kernel, "", "__import__('json').dumps(obj.v)") == 40


def test_an_unchanged_data_frame_is_reused_by_the_next_snapshot(kernel: KernelManager) -> None:
    execute(kernel, "%load_ext ipython_compact\n%config CompactConfig.auto_snapshot = False")
    execute(
        kernel,
        "import numpy as np, pandas as pd\n"
        "df = pd.DataFrame({'a': np.arange(500_000), 'b': np.linspace(0, 1, 500_000)})",
    )
    first = magic(kernel, "snapshot")["data"]
    again = magic(kernel, "snapshot")["data"]
    assert "df" not in first["unchanged"] and "df" in again["unchanged"]
    assert again["written_bytes"] < 1000 < first["written_bytes"]


def test_automatic_snapshots_in_a_kernel_are_written_by_a_child_and_restore(
    kernel: KernelManager, compact_dir: Path
) -> None:
    """Issue 21: the automatic snapshot is written by a forked child (the kernel only forks), and
    it is as good as a foreground one: it names the kernel's pid, records its digest, restores."""
    execute(
        kernel,
        "%load_ext ipython_compact\n%config CompactConfig.snapshot_debounce = 0.2\n"
        "%config CompactConfig.background_snapshots = True",
    )
    execute(kernel, "import numpy as np\nbig = np.arange(500_000)\nx = 7")
    deadline = time.monotonic() + 60
    while not list(compact_dir.glob("snapshots/*/manifest-*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)  # the event: the child's first manifest appears
    directory = _session_dir(compact_dir)
    gen = _wait_for_generation_after(directory, 0)
    info = evaluate(
        kernel,
        "ext = __import__('ipython_compact.kernel.extension', fromlist=['x'])"
        ".extension_for(get_ipython())\next.service.settle_background(120)\nimport os",
        "__import__('json').dumps({'pid': os.getpid(), 'child': ext.service._background.pid, "
        "'error': ext.service.last_snapshot_error, "
        "'recorded': sorted(ext.service.snapshots.recorded_digests())})",
    )
    assert info["child"] not in (None, info["pid"]) and info["error"] is None
    assert gen in info["recorded"]
    listing = magic(kernel, "snapshots")["data"]
    assert any(
        r["generation"] == gen and r["pid"] == info["pid"] and r["origin"] == "automatic" for r in listing
    )
    restart(kernel)
    execute(kernel, "%load_ext ipython_compact")
    assert sorted(magic(kernel, "restore")["data"]["restored"]) == ["big", "np", "x"]
    assert evaluate(kernel, "", "__import__('json').dumps([int(big[-1]), x])") == [499_999, 7]
