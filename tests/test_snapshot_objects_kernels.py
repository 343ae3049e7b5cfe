"""Real kernels on two "hosts" (two data directories) sharing one session log and one snapshot
location: a shared folder with a SQLite log, and moto's S3 server with a PostgreSQL log (both
started by the tests). The first kernel's automatic snapshot is written by its forked child (which
takes the writer lock in the session store on a connection of its own); the second restores."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from kernel_fixtures import evaluate, magic, running_kernel
from postgres_server import server as postgres

from ipython_compact.kernel.binding import snapshot_slug
from ipython_compact.namespace.snapshot.objects import FsspecObjects, LocalObjects, Objects

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend", ["folder+sqlite", "s3+postgresql"])
def test_a_kernel_on_another_host_restores_what_the_first_one_snapshotted(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    key = tmp_path / "team-key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    if backend == "folder+sqlite":
        snapshots: str = str(tmp_path / "shared-snapshots")
        log: str = str(tmp_path / "team.db")
    else:
        snapshots = request.getfixturevalue("s3_url")
        log = postgres().fresh_url()
    env = {
        "IPYTHON_COMPACT_SNAPSHOTS": snapshots,
        "IPYTHON_COMPACT_DB": log,
        "IPYTHON_COMPACT_KEY_FILE": str(key),
        "IPYTHON_COMPACT_SESSION": "team",
    }
    slug = snapshot_slug("team")
    objects: Objects = (
        LocalObjects(Path(snapshots) / slug)
        if backend == "folder+sqlite"
        else FsspecObjects(f"{snapshots}/{slug}")
    )
    with running_kernel(tmp_path / "host-a", **env) as a:
        evaluate(
            a,
            "%load_ext ipython_compact\n%config CompactConfig.snapshot_debounce = 0.2\n"
            "%config CompactConfig.background_snapshots = True\n"
            "import numpy as np\nbig = np.arange(500_000)\nx = 41",
            "'1'",
        )
        deadline = time.monotonic() + 90
        while not any(n.startswith("manifest-") for n in objects.list("")):  # the child's manifest appears
            assert time.monotonic() < deadline, "no automatic snapshot appeared"
            time.sleep(0.1)
        info = evaluate(
            a,
            "_ext = __import__('ipython_compact.kernel.extension', fromlist=['x'])"
            ".extension_for(get_ipython())\n_ext.service.settle_background(120)",
            "__import__('json').dumps({'pid': __import__('os').getpid(), "
            "'child': getattr(_ext.service._background, 'pid', None), "
            "'error': _ext.service.last_snapshot_error, 'where': str(_ext.service.snapshot_dir), "
            "'recorded': sorted(_ext.service.snapshots.recorded_digests())})",
        )
        assert info["error"] is None and info["child"] not in (None, info["pid"]), info
        assert info["where"].startswith(snapshots) and info["recorded"], info
        x_now = magic(a, "snapshot")["data"]
        assert sorted(x_now["saved"]) == ["big", "np", "x"]
    assert not (tmp_path / "host-a" / "snapshots" / slug).exists()  # nothing went to the local folder
    with running_kernel(tmp_path / "host-b", **env) as b:
        evaluate(b, "%load_ext ipython_compact", "'1'")
        restored = magic(b, "restore")
        assert restored["title"].startswith("Restored from snapshot generation"), restored
        assert sorted(restored["data"]["restored"]) == ["big", "np", "x"]
        assert evaluate(b, "", "__import__('json').dumps([int(big[-1]), x])") == [499_999, 41]
