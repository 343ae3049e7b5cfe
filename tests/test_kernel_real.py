"""The extension in real ipykernel kernels: comm over a subshell while a cell runs, error replies,
busy refusals, automatic snapshots, restart and restore, and bindings that survive a restart."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import KernelManager
from kernel_fixtures import execute, running_kernel, start_held_cell

from ipython_compact.host.kernel_client import KernelClient

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("compact-data")


@pytest.fixture(scope="module")
def km(data_dir: Path) -> Iterator[KernelManager]:
    with running_kernel(data_dir) as manager:
        yield manager


@pytest.fixture(scope="module")
def client(km: KernelManager) -> Iterator[KernelClient]:
    with KernelClient.for_manager(km) as c:
        assert c.ensure_extension()
        yield c


def test_hello_arrives_on_a_subshell(client: KernelClient) -> None:
    hello = client.request("hello")
    assert hello.ok and hello["subshell"] is True and hello.channel == "subshell"
    assert hello["session"].startswith("kernel:")


def test_names_are_answered_while_the_main_shell_runs_a_cell(
    km: KernelManager, client: KernelClient, tmp_path: Path
) -> None:
    execute(km, "import numpy as np\nbig = np.zeros((100, 10))\nitems = [1, 2, 3]")
    release = tmp_path / "release"
    busy = start_held_cell(km, release)  # runs until released: a loaded machine cannot end it first
    try:
        result = client.names()  # its latency is measured in bench/bench_probe.py
        assert result.ok, result.reason
        assert not busy.shell_channel.msg_ready(), (
            "the cell finished first: the probe did not answer while it ran"
        )
        names = {n["name"]: n for n in result["names"]}
        assert names["big"]["shape"] == [100, 10] and names["items"]["length"] == 3
        assert "compact" not in names
        snap = client.request("snapshot")
        assert snap.status == "error" and snap.error and snap.error["code"] == "busy"
        restore = client.request("restore")
        assert restore.status == "error" and restore.error and restore.error["code"] == "busy"
    finally:
        release.touch()
        busy.get_shell_msg(timeout=60)
        busy.stop_channels()


def test_status_names_the_running_cell_and_then_the_cells_that_ended(
    km: KernelManager, client: KernelClient, tmp_path: Path
) -> None:
    """A client that lost the cell's ``idle`` in a flood learns from ``status`` that it ended."""
    go = tmp_path / "go"
    kc = km.client()
    # jupyter_client's clients of one manager share a session id and each counts from 0, so their
    # msg_ids repeat; JupyterLab's are UUIDs. Give this client its own session for unique ids.
    kc.session.session = str(uuid.uuid4())
    kc.start_channels()
    try:
        msg_id = kc.execute(
            "import os, time\n"
            "deadline = time.monotonic() + 60\n"
            f"while not os.path.exists({str(go)!r}) and time.monotonic() < deadline:\n"
            "    time.sleep(0.01)"
        )
        cell: dict[str, Any] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the kernel's hook has seen the cell start
            status = client.status()
            assert status.ok, status.reason
            cell = status["cell"]
            if cell["running"] == msg_id:
                break
        assert cell["running"] == msg_id and msg_id not in cell["finished"]
        go.touch()
        reply = kc.get_shell_msg(timeout=60)
        assert reply["parent_header"]["msg_id"] == msg_id
        after = client.status()
        assert after["cell"]["running"] is None and after["cell"]["finished"][-1] == msg_id
    finally:
        kc.stop_channels()


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"v": 1, "id": "x", "op": "rm -rf"}, "unknown_op"),
        ({"v": 9, "id": "x", "op": "names"}, "unsupported_version"),
    ],
)
def test_bad_requests_get_errors_and_cells_still_run(
    km: KernelManager, client: KernelClient, payload: dict[str, Any], code: str
) -> None:
    kc = client._kc
    msg = kc.session.msg("comm_msg", {"comm_id": client.comm_id, "data": payload})
    msg["header"]["subshell_id"] = client.subshell_id
    kc.shell_channel.send(msg)
    deadline = time.monotonic() + 60  # a bound for a lost reply, not a wait: the loop ends on it
    reply = None
    while time.monotonic() < deadline and reply is None:
        m = kc.iopub_channel.get_msg(timeout=60)
        if m["msg_type"] == "comm_msg" and m["content"]["data"].get("id") == "x":
            reply = m["content"]["data"]
    assert reply is not None and reply["ok"] is False and reply["error"]["code"] == code
    assert execute(km, "after_bad_request = 1")["status"] == "ok"


def test_automatic_snapshot_is_debounced_after_cells(km: KernelManager, client: KernelClient) -> None:
    execute(km, "%config CompactConfig.snapshot_debounce = 2.0")
    before = client.status()["snapshot"]
    gen_before = before["generation"] if before else 0
    # The three cells are queued at once, so they run back to back inside the kernel: one client
    # per cell left gaps that, on a loaded machine, outlasted the debounce (a snapshot each).
    kc = km.client()
    kc.start_channels()
    try:
        sent = [kc.execute(f"counter = {i}") for i in range(3)]
        replies = {kc.get_shell_msg(timeout=60)["parent_header"]["msg_id"] for _ in sent}
    finally:
        kc.stop_channels()
    assert replies == set(sent)
    after = _next_snapshot(client, gen_before)
    assert after["generation"] == gen_before + 1
    assert _next_snapshot_or_none(client, after["generation"], wait=3.0) is None, (
        "three cells, one debounced snapshot"
    )


def _next_snapshot(client: KernelClient, after: int, timeout: float = 60.0) -> dict[str, Any]:
    """The status' snapshot once a generation newer than ``after`` exists (the automatic one is debounced)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snap = client.status()["snapshot"]
        if snap is not None and snap["generation"] > after:
            return dict(snap)
        time.sleep(0.1)
    raise AssertionError(f"no snapshot generation after {after} within {timeout} s")


def _next_snapshot_or_none(client: KernelClient, after: int, wait: float) -> dict[str, Any] | None:
    """A generation newer than ``after`` appearing within ``wait`` seconds, else None (proves absence)."""
    try:
        return _next_snapshot(client, after, timeout=wait)
    except AssertionError:
        return None


def test_automatic_snapshots_trust_samples_until_every_nth_verifies_fully(
    km: KernelManager, client: KernelClient, data_dir: Path
) -> None:
    """%config sets the mode; an edit between the samples is missed by the sampled automatic
    snapshots and saved by the third one (full_verify_every = 3); explicit snapshots are full."""
    from ipython_compact.namespace.snapshot import SnapshotStore, load_or_create_key

    gen = (client.status()["snapshot"] or {"generation": 0})["generation"]
    execute(
        km,
        "%config CompactConfig.snapshot_debounce = 0.2\n%config CompactConfig.verify_unchanged = "
        "'sampled'\n"
        "%config CompactConfig.full_verify_every = 3\nimport numpy as np\nwide = "
        "np.arange(3_000_000.0)",
    )
    gen = _next_snapshot(client, gen)["generation"]
    explicit = client.request("snapshot")
    assert (
        explicit.ok
        and explicit["snapshot"]["verification"] == "full"
        and explicit["snapshot"]["sampled"] == []
    )
    full_gen = explicit["snapshot"]["generation"]
    assert full_gen > gen and explicit["snapshot"]["last_full_verification"]["generation"] == full_gen
    store = SnapshotStore(
        Path(explicit["snapshot"]["path"]).parent,
        load_or_create_key(data_dir / "key"),
        session=client.status()["session"],
    )  # manifests are bound to their session

    def saved_element() -> float:
        values, report = store.load(names=["wide"])
        assert report.restored == ["wide"]
        return float(values["wide"][1_500_007])

    execute(km, "wide[1_500_007] = -1.0")  # in place, between the sampled blocks
    seen: list[tuple[str, int, float]] = []
    for cell in ("tick = 1", "tick = 2", None):
        snap = _next_snapshot(client, full_gen + len(seen))
        seen.append((snap["verification"], snap["last_full_verification"]["generation"], saved_element()))
        if cell is not None:
            execute(km, cell)
    assert seen == [
        ("sampled", full_gen, 1_500_007.0),
        ("sampled", full_gen, 1_500_007.0),
        ("full", full_gen + 3, -1.0),
    ]
    execute(km, "%config CompactConfig.snapshot_debounce = 1.5")


def test_restart_binds_the_same_session_and_restores(km: KernelManager, client: KernelClient) -> None:
    execute(
        km,
        "import numpy as np\nkept = np.arange(5)\ndef twice(x):\n    return 2 * x\nstream = (i for i in [1])",
    )
    snap = client.request("snapshot")
    assert snap.ok and "stream" in {s["name"] for s in snap["snapshot"]["skipped"]}
    session = client.request("hello")["session"]
    restored = client.restart_and_restore()
    assert restored.ok, restored.reason
    assert {"kept", "twice", "np"} <= set(restored["restored"]) and restored["failed"] == []
    assert client.request("hello")["session"] == session
    assert execute(km, "assert twice(kept).tolist() == [0, 2, 4, 6, 8]")["status"] == "ok"


def test_compact_helper_is_hidden_in_a_real_kernel(km: KernelManager, client: KernelClient) -> None:
    reply = execute(
        km,
        "assert 'compact' not in get_ipython().run_line_magic('who_ls', '')\nassert callable(compact.status)",
    )
    assert reply["status"] == "ok", reply
