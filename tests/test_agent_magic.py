"""``%%agent`` in an in-process IPython shell: the tool shares the user's namespace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from IPython import get_ipython
from IPython.core.error import UsageError
from IPython.testing.globalipapp import start_ipython

from ipython_compact.kernel.agent_magic import AgentMagics, parse_options
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", {}),
        ("--model m --window 3000", {"model": "m", "window": 3000}),
        ("--base-url http://127.0.0.1:1/v1 --max-steps 4 --reset", {"base_url": "http://127.0.0.1:1/v1", "max_steps": 4, "reset": True}),
        ("--session 'my notes'", {"session": "my notes"}),
        ("--stream --model m", {"stream": True, "model": "m"}),
    ],
)
def test_parse_options(line: str, expected: dict[str, Any]) -> None:
    assert parse_options(line) == expected


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--bogus 1", "unknown option '--bogus'"),
        ("--windw 3", "did you mean `--window`?"),
        ("--window", "argument --window: expected one argument"),
        ("--window big", "argument --window: needs an integer, got 'big'"),
        ("--max-steps 0", "argument --max-steps: must be positive"),
        ("stray", "unexpected argument 'stray'"),
    ],
)
def test_parse_options_errors(line: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_options(line)


@pytest.mark.slow
def test_agent_cell_runs_code_in_this_namespace_and_streams_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path))
    shell = start_ipython() or get_ipython()  # the shared test shell (one singleton per process)
    shell.user_ns["prices"] = [3, 4, 5]

    def reply(req: RecordedRequest) -> Reply:
        if req.messages[-1]["role"] == "tool":
            return Reply(text=f"The total is {req.messages[-1]['content']}.")
        return Reply(tool_calls=(ToolCall("python", {"code": "total = sum(prices)\nprint(total)"}),))

    magics = AgentMagics(shell)
    shell.register_magics(magics)
    try:
        with ModelServer(reply) as srv:
            shell.run_cell_magic("agent", f"--model local --base-url {srv.base_url} --window 32000", "Sum my prices.")
            out = capsys.readouterr().out
            assert shell.user_ns["total"] == 12  # ran in this very namespace
            assert "[tool_call] total = sum(prices)" in out
            assert "[assistant] The total is 12." in out
            # Streaming: the same steps, the answer printed piece by piece (once).
            shell.run_cell_magic("agent", f"--stream --model local --base-url {srv.base_url} --window 32000", "Sum again.")
            out = capsys.readouterr().out
            assert out.count("[assistant] The total is 12.") == 1 and srv.chat_requests[-1].body["stream"] is True
            # Empty cell and bad options: a clear message, nothing sent.
            before = len(srv.chat_requests)
            shell.run_cell_magic("agent", "", "   ")
            shell.run_cell_magic("agent", "--nope", "hello")
            shell.run_cell_magic("agent", f"--model local --base-url {srv.base_url} --window 8000", "hello")
            out = capsys.readouterr().out
            assert "the cell is empty" in out and "unknown option '--nope'" in out
            assert "context window 8000 is not larger than reserve_tokens 16384" in out
            assert len(srv.chat_requests) == before
        assert magics.current is not None
        entries = magics.current.store.entries("agent")
        assert [e.role for e in entries if e.kind == "message"] == ["user", "assistant", "toolResult", "assistant"] * 2
    finally:
        for name in ("prices", "total"):
            shell.user_ns.pop(name, None)


@pytest.mark.slow
def test_agent_cell_in_a_real_kernel_with_the_extension(tmp_path: Path) -> None:
    from ipython_compact.agent.kernel_tool import JupyterKernel

    def reply(req: RecordedRequest) -> Reply:
        last = req.messages[-1]
        users = [m for m in req.messages if m["role"] == "user"]
        if last["role"] == "tool":
            return Reply(text=f"Done: {last['content']}")
        if "compact" in str(users[-1]["content"]):
            return Reply(tool_calls=(ToolCall("python", {"code": "compact.run('keep the prices')"}),))
        return Reply(tool_calls=(ToolCall("python", {"code": "total = sum(prices)\nprint(total)"}),))

    with ModelServer(reply) as srv, JupyterKernel(env={"IPYTHON_COMPACT_DIR": str(tmp_path)}) as k:
        assert k.extension_error is None
        assert k.execute("prices = [3, 4, 5]").status == "ok"
        k.execute("%config CompactConfig.compaction = {'keep_recent_tokens': 40, 'reserve_tokens': 1000}")
        head = f"%%agent --model local --base-url {srv.base_url} --window 32000\n"
        first = k.execute(head + "Sum my prices.", timeout=60)
        assert first.status == "ok", first.text
        assert "[tool_call] total = sum(prices)" in first.text and "[assistant] Done: 12" in first.text
        assert k.execute("total").text == "12"  # the agent's code ran in the notebook's namespace
        second = k.execute("%%agent\nNow compact the context please.", timeout=60)
        assert second.status == "ok", second.text
        assert "runs when the current turn ends" in second.text
        assert "requested compaction placed" in second.text
        # The second cell continued the same conversation.
        assert any(m["role"] == "user" and m["content"] == "Sum my prices." for m in srv.chat_requests[-1].messages)
    from ipython_compact.store import SessionStore

    store = SessionStore(tmp_path / "sessions.db")
    (session,) = [s.name for s in store.sessions()]
    kinds = [e.kind for e in store.path(session)]
    assert kinds[kinds.index("compaction") + 1 : kinds.index("compaction") + 3] == ["system", "kernel_state"]
    notice = next(e.data["content"] for e in store.path(session) if e.kind == "kernel_state")
    assert "These names are still defined: prices, total." in notice
    assert "No state snapshot is configured" not in notice  # the extension keeps snapshots
    store.close()


@pytest.mark.slow
def test_interrupting_the_agent_cell_stops_the_turn(tmp_path: Path) -> None:
    import threading
    import time

    from ipython_compact.agent.kernel_tool import JupyterKernel

    started = tmp_path / "tool-cell-started"

    def reply(req: RecordedRequest) -> Reply:
        code = f"open({str(started)!r}, 'w').close()\nimport time\ntime.sleep(30)"
        return Reply(tool_calls=(ToolCall("python", {"code": code}),))

    def press_interrupt() -> None:  # the user presses "interrupt" once the agent's cell sleeps
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        k.interrupt()

    with ModelServer(reply) as srv, JupyterKernel(env={"IPYTHON_COMPACT_DIR": str(tmp_path)}) as k:
        presser = threading.Thread(target=press_interrupt)
        presser.start()
        out = k.execute(f"%%agent --model local --base-url {srv.base_url} --window 32000\nsleep", timeout=60)
        presser.join()
        assert "[stopped: interrupted]" in out.text, out.text
        assert len(srv.chat_requests) == 1  # no further request after the interrupt
        assert k.execute("1 + 1").text == "2"


@pytest.mark.slow
def test_unload_ext_in_a_real_kernel_removes_agent_and_compact_and_load_restores_them(tmp_path: Path) -> None:
    from ipython_compact.agent.kernel_tool import JupyterKernel

    probe = ("print(sorted(n for n in ('agent', 'compact') if n in get_ipython().magics_manager.magics['cell']"
             " or n in get_ipython().magics_manager.magics['line']))")
    with JupyterKernel(env={"IPYTHON_COMPACT_DIR": str(tmp_path)}) as k:
        assert k.extension_error is None
        assert "['agent', 'compact']" in k.execute(probe).text
        assert k.execute("%unload_ext ipython_compact").status == "ok"
        assert "[]" in k.execute(probe).text
        gone = k.execute("%%agent --model local\nhello")
        assert "agent" in gone.text and "not found" in gone.text, gone.text
        assert "not found" in k.execute("%compact status").text
        assert k.execute("%load_ext ipython_compact").status == "ok"
        assert "['agent', 'compact']" in k.execute(probe).text
        assert "no model" in k.execute("%%agent\nhello").text  # the cell magic answers again


def test_agent_cell_uses_the_extensions_summarizer_setting_and_refuses_an_unknown_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path))
    monkeypatch.setenv("IPYTHON_COMPACT_SESSION", "agent-summarizer")
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "ipython_compact")
    try:
        shell.run_line_magic("config", "CompactConfig.summarizer = 'bogus'")
        shell.run_cell_magic("agent", "--model m --base-url http://127.0.0.1:9/v1", "hello")
        out = capsys.readouterr().out
        assert "%%agent: unknown summarizer 'bogus'" in out  # the same check as %compact; nothing is sent
    finally:
        shell.run_line_magic("config", "CompactConfig.summarizer = 'offline'")  # the shell's config outlives unload
        shell.run_line_magic("unload_ext", "ipython_compact")
