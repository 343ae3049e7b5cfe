"""The loopback bridge and KernelRunner: what every engine adapter builds on (no extra needed)."""

from __future__ import annotations

import http.server
import json
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ipython_compact.agent.loopback_client import BridgeError, HostCallError, call
from ipython_compact.agent.subcall_broker import SubcallBroker
from ipython_compact.integrations.kernel_runner import KernelRunner


def _slow_echo(value: Any, delay: float = 0.0) -> Any:
    time.sleep(delay)
    return value


@pytest.fixture
def bridge() -> Iterator[SubcallBroker]:
    tools = {"echo": _slow_echo, "boom": lambda: 1 / 0, "opaque": lambda: object()}
    with SubcallBroker(tools.get) as b:
        yield b


def test_concurrent_calls_from_threads_each_get_their_own_result(bridge: SubcallBroker) -> None:
    rng = random.Random(7)
    delays = [rng.random() / 20 for _ in range(48)]
    with ThreadPoolExecutor(16) as pool:
        got = list(
            pool.map(lambda i: call(bridge.url, bridge.token, "echo", [i], {"delay": delays[i]}), range(48))
        )
    assert got == list(range(48))
    assert bridge.calls == {"echo": 48}


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("boom", "ZeroDivisionError: division by zero"),
        ("missing", "unknown op 'missing'"),
        ("opaque", "TypeError: opaque returned a value JSON cannot carry (object)"),
    ],
)
def test_tool_failures_are_raised_with_the_hosts_message(
    bridge: SubcallBroker, name: str, message: str
) -> None:
    with pytest.raises(HostCallError) as info:
        call(bridge.url, bridge.token, name)
    assert str(info.value).startswith(message)


def test_a_wrong_token_calls_nothing(bridge: SubcallBroker) -> None:
    with pytest.raises(HostCallError, match="bad or missing token"):
        call(bridge.url, "0" * 32, "echo", [1])
    assert bridge.calls == {}


def test_arguments_json_cannot_carry_are_refused_before_any_request(bridge: SubcallBroker) -> None:
    with pytest.raises(HostCallError, match=r"the arguments of echo\(\) must be JSON values"):
        call(bridge.url, bridge.token, "echo", [object()])
    assert bridge.calls == {}


def test_a_body_over_the_limit_is_refused_both_ways() -> None:
    """One limit: a request over it is refused before it is read, a reply over it is never sent."""
    with SubcallBroker({"echo": _slow_echo, "big": lambda: "x" * 2000}, max_body=1000) as small:
        with pytest.raises(HostCallError, match=r"request body must be 0\.\.1000 bytes"):
            call(small.url, small.token, "echo", ["x" * 2000])
        assert small.calls == {}
        with pytest.raises(
            HostCallError,
            match=r"the reply is 2,02[0-9] bytes, over the bridge's limit of "
            r"1,000",
        ):
            call(small.url, small.token, "big")


def _serve_once(body: bytes, status: int = 200) -> tuple[http.server.HTTPServer, threading.Thread]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.handle_request)
    thread.start()
    return server, thread


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"<html>oops</html>", 200, "is not JSON"),
        (json.dumps({"value": 1}).encode(), 200, "is not a bridge reply"),
        (b"Bad Gateway", 502, "the host answered HTTP 502"),
    ],
)
def test_an_answer_that_is_not_the_bridges_reply_is_a_bridge_error(
    body: bytes, status: int, message: str
) -> None:
    """What a wrong server on the port looks like: an error naming it, never a result."""
    server, thread = _serve_once(body, status)
    try:
        with pytest.raises(BridgeError, match=message) as info:
            call(f"http://127.0.0.1:{server.server_address[1]}/call", "t", "echo", [1])
        assert not isinstance(info.value, HostCallError)
    finally:
        thread.join(5)
        server.server_close()


def test_an_unreachable_host_is_a_bridge_error_in_one_line(bridge: SubcallBroker) -> None:
    url = bridge.url
    bridge.stop()
    with pytest.raises(BridgeError, match="the host did not answer") as info:
        call(url, bridge.token, "echo", [1])
    assert info.value._render_traceback_() == [f"BridgeError: {info.value}"]


def test_the_bridge_listens_on_loopback_only(bridge: SubcallBroker) -> None:
    assert bridge.address[0] == "127.0.0.1"


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
    outcome = runner.run(
        "print('before')\nSUBMIT(7, 'because')\nprint('after')", submit_fields=["answer", "why"]
    )
    assert (outcome.kind, outcome.values, outcome.text) == (
        "submitted",
        {"answer": 7, "why": "because"},
        "before",
    )
    wrong = runner.run("SUBMIT(1)", submit_fields=["answer", "why"])
    assert wrong.kind == "error" and "SUBMIT needs exactly these fields: answer, why" in wrong.text


@pytest.mark.slow
def test_a_syntax_error_is_found_before_anything_runs(runner: KernelRunner) -> None:
    assert runner.run("ran = 1\nif True print(2)").kind == "syntax"
    # magics and top-level await parse
    assert runner.run("%who_ls\nawait __import__('asyncio').sleep(0)").kind == "output"
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
