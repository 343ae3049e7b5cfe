"""The tool bridge and KernelRunner: what every engine adapter builds on (no extra needed)."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ipython_compact.integrations.bridge_client import BridgeClient, BridgeError, ToolCallError
from ipython_compact.integrations.kernel_runner import KernelRunner
from ipython_compact.integrations.tool_bridge import ToolBridge


def _slow_echo(value: Any, delay: float = 0.0) -> Any:
    time.sleep(delay)
    return value


@pytest.fixture
def bridge() -> Iterator[ToolBridge]:
    tools = {"echo": _slow_echo, "boom": lambda: 1 / 0, "opaque": lambda: object()}
    with ToolBridge(tools.get) as b:
        yield b


def test_concurrent_calls_from_threads_each_get_their_own_result(bridge: ToolBridge) -> None:
    client = BridgeClient(bridge.port, bridge.token)
    rng = random.Random(7)
    delays = [rng.random() / 20 for _ in range(48)]
    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda i: client.call("echo", [i], {"delay": delays[i]}), range(48)))
    assert got == list(range(48))
    assert bridge.calls == {"echo": 48}


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("boom", ToolCallError, "ZeroDivisionError: division by zero"),
        ("missing", ToolCallError, "NameError: no host tool named 'missing'"),
        ("opaque", ToolCallError, "returned a value JSON cannot carry (object)"),
    ],
)
def test_tool_failures_are_raised_with_the_hosts_message(bridge: ToolBridge, name: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        BridgeClient(bridge.port, bridge.token).call(name)


def test_a_wrong_token_calls_nothing(bridge: ToolBridge) -> None:
    with pytest.raises(ToolCallError, match="wrong bridge token"):
        BridgeClient(bridge.port, "0" * 32).call("echo", [1])
    assert bridge.calls == {}


def test_a_reply_for_another_request_id_is_refused() -> None:
    """A server answering with a stale id (what crossed calls look like) is an error, not a result."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer_wrong() -> None:
        conn, _ = server.accept()
        with conn, conn.makefile("rb") as rf:
            rf.readline()
            conn.sendall(json.dumps({"id": "someone-else", "value": 1}).encode() + b"\n")

    t = threading.Thread(target=answer_wrong)
    t.start()
    try:
        with pytest.raises(BridgeError, match="id mismatch"):
            BridgeClient(port, "t").call("echo", [1])
    finally:
        t.join(5)
        server.close()


def test_the_bridge_listens_on_loopback_only(bridge: ToolBridge) -> None:
    assert bridge._server.server_address[0] == "127.0.0.1"


# ---- KernelRunner on a real kernel ------------------------------------------------------------

@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KernelRunner]:
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    r = KernelRunner({"echo": _slow_echo}, snapshot_dir=str(tmp_path / "snaps"), restore_after_death=True)
    try:
        yield r
    finally:
        r.shutdown()


@pytest.mark.slow
def test_kernel_threads_calling_tools_concurrently_do_not_cross(runner: KernelRunner) -> None:
    code = (
        "import random\nfrom concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(8) as ex:\n"
        "    got = list(ex.map(lambda i: echo(i, delay=random.random() / 20), range(40)))\n"
        "print(got == list(range(40)), len(got))"
    )
    outcome = runner.run(code)
    assert (outcome.kind, outcome.text) == ("output", "True 40")
    assert runner.bridge_calls["echo"] == 40


@pytest.mark.slow
def test_submit_ends_the_cell_and_hands_over_the_values(runner: KernelRunner) -> None:
    outcome = runner.run("print('before')\nSUBMIT(7, 'because')\nprint('after')", submit_fields=["answer", "why"])
    assert (outcome.kind, outcome.values, outcome.text) == ("submitted", {"answer": 7, "why": "because"}, "before")
    wrong = runner.run("SUBMIT(1)", submit_fields=["answer", "why"])
    assert wrong.kind == "error" and "SUBMIT needs exactly these fields: answer, why" in wrong.text


@pytest.mark.slow
def test_a_syntax_error_is_found_before_anything_runs(runner: KernelRunner) -> None:
    assert runner.run("ran = 1\nif True print(2)").kind == "syntax"
    assert runner.run("%who_ls\nawait __import__('asyncio').sleep(0)").kind == "output"  # magics and top-level await parse
    assert "ran" not in (runner.names() or [])


@pytest.mark.slow
def test_inputs_are_transferred_once_and_a_rebound_name_is_repaired(runner: KernelRunner) -> None:
    context = "x" * 5_000_000
    first = runner.run("print(len(context)); context = 'overwritten'", {"context": context})
    second = runner.run("print(len(context))", {"context": context})
    third = runner.run("print(len(context))", {"context": context + "y"})
    assert [first.text, second.text, third.text] == ["5000000", "5000000", "5000001"]
    assert runner.stats.transfers == {"context": 2}  # the first run and the changed value, not every step


@pytest.mark.slow
def test_tools_are_hidden_from_the_users_names(runner: KernelRunner) -> None:
    runner.run("mine = 1", submit_fields=["answer"])
    assert runner.names() == ["mine"]


@pytest.mark.slow
def test_a_dead_kernel_is_reported_and_revived_only_on_request(runner: KernelRunner) -> None:
    assert runner.run("kept = [1, 2, 3]").kind == "output"
    died = runner.run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert died.kind == "died"
    assert runner.run("print(kept)").kind == "died"  # never silently restarted
    notice = runner.revive()
    assert "Restored from the last snapshot: kept." in notice
    assert runner.run("print(kept, echo('bridge back'))").text == "[1, 2, 3] bridge back"
