"""The host client against real kernels: main-shell fallback, timeouts, silent and dead kernels
give an explicit "unknown", never a guess."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager
from kernel_fixtures import execute, running_kernel, start_held_cell, stopped_process

from ipython_compact.host.kernel_client import KernelClient, Result

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def km(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelManager]:
    with running_kernel(
        tmp_path_factory.mktemp("client-data"), IPYTHON_COMPACT_SESSION="client-tests"
    ) as manager:
        yield manager


def test_env_session_binding_and_subshell_detection(km: KernelManager) -> None:
    with KernelClient.for_manager(km) as client:
        assert client.detect_subshells() is True
        assert client.ensure_extension()
        hello = client.request("hello")
        assert hello["session"] == "client-tests" and hello.channel == "subshell"


def test_main_shell_fallback_waits_behind_a_cell_and_times_out_as_unknown(
    km: KernelManager, tmp_path: Path
) -> None:
    # Answers that must come get a long bound (a loaded machine); only the one that must time out
    # is given 1 s.
    with KernelClient.for_manager(km, use_subshell=False, timeout=60.0) as client:
        assert client.ensure_extension()
        assert client.request("hello").channel == "main"
        release = tmp_path / "release"
        busy = start_held_cell(km, release)  # runs until released: the request times out behind it
        try:
            result = client.request("names", timeout=1.0)
            assert result.status == "unknown" and "did not answer within 1.0 s" in result.reason
            # it gave up at its timeout, not when the cell ended (asked of the cell, not the clock)
            assert not busy.shell_channel.msg_ready(), "the cell ended first: the request waited for it"
            with pytest.raises(KeyError, match="unknown"):
                result["names"]
        finally:
            release.touch()
            busy.get_shell_msg(timeout=60)
            busy.stop_channels()
        assert client.request("names").ok


def test_a_stopped_kernel_is_unknown_not_guessed(km: KernelManager) -> None:
    with KernelClient.for_manager(km, timeout=60.0) as client:  # 1 s only where it must time out
        assert client.ensure_extension()
        pid = km.provisioner.process.pid  # type: ignore[union-attr]
        with stopped_process(pid):
            result = client.names(timeout=1.0)
        assert result == Result(
            "unknown",
            reason="the kernel did not answer within 1.0 s",
            channel="subshell",
            elapsed_ms=result.elapsed_ms,
        )
        assert client.names().ok


def test_state_notice_from_a_live_probe(km: KernelManager) -> None:
    with KernelClient.for_manager(km, timeout=60.0) as client:  # 0.5 s only where it must time out
        assert client.ensure_extension()
        execute(km, "alpha = 1\ngen = (i for i in [1])")
        notice = client.state_notice()
        assert notice is not None and "These names are still defined:" in notice and "alpha" in notice
        assert "gen (TypeError" in notice and "will not survive a restart" in notice
        pid = km.provisioner.process.pid  # type: ignore[union-attr]
        with stopped_process(pid):
            silent = client.state_notice(timeout=0.5)
        assert silent is not None and "could not be listed" in silent and "could not be written" in silent


def test_a_kernel_without_the_extension_says_so(tmp_path: Path) -> None:
    with running_kernel(tmp_path) as manager, KernelClient.for_manager(manager, timeout=60.0) as client:
        result = client.request("hello")
        assert result.status == "error" and result.error == {"code": "not_loaded", "message": result.reason}
        assert client.ensure_extension()
        assert client.request("hello").ok


def test_a_dead_kernel_is_unknown(tmp_path: Path) -> None:
    with running_kernel(tmp_path) as manager:
        client = KernelClient.for_manager(manager, timeout=2.0)
        assert client.ensure_extension()
        assert execute(manager, "x = 1")["status"] == "ok"
        manager.shutdown_kernel(now=True)
        result = client.names()
        client.close()
    assert result.status == "unknown" and "not running" in result.reason


def test_every_one_of_100000_names_is_listed_in_pages_while_a_cell_runs(
    km: KernelManager, tmp_path: Path
) -> None:
    """Issue 21, item 3: at 100,000 names one answer returned 127 of 100,001 names (listing them ate
    the budget). Pages, each within the budget, reach them all, also while a cell runs."""
    with KernelClient.for_manager(km, timeout=30.0) as client:
        assert client.ensure_extension()
        execute(km, "globals().update({f'n{i:06d}': i for i in range(100_000)})\nkeep_me = 'x'")
        release = tmp_path / "release"
        busy = start_held_cell(km, release)  # runs until released, however long the listing takes
        try:
            listed = client.all_names(timeout=120)
            assert listed.ok, listed.reason
            one = client.names()
            assert not busy.shell_channel.msg_ready()  # the cell still runs: answers from the subshell
        finally:
            release.touch()
            busy.get_shell_msg(timeout=60)
            busy.stop_channels()
        names = [n["name"] for n in listed["names"]]
        assert len(names) == listed["total"] >= 100_001 and names == sorted(set(names))
        assert {"keep_me", "n000000", "n099999"} <= set(names) and listed["pages"] >= 1
        assert one.ok and (one["next"] is None) == (len(one["names"]) == one["total"])
        execute(km, "for _k in [k for k in globals() if k.startswith('n0')]:\n    del globals()[_k]")
