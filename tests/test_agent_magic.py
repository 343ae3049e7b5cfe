"""``%%agent`` in an in-process IPython shell: the tool shares the user's namespace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from IPython import get_ipython
from IPython.core.error import UsageError
from IPython.testing.globalipapp import start_ipython
from kernel_fixtures import running_kernel

from ipython_compact.kernel.agent_magic import AgentMagics, parse_options
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", {}),
        ("--model m --window 3000", {"model": "m", "window": 3000}),
        (
            "--base-url http://127.0.0.1:1/v1 --max-steps 4 --reset",
            {"base_url": "http://127.0.0.1:1/v1", "max_steps": 4, "reset": True},
        ),
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
            shell.run_cell_magic(
                "agent", f"--model local --base-url {srv.base_url} --window 32000", "Sum my prices."
            )
            out = capsys.readouterr().out
            assert shell.user_ns["total"] == 12  # ran in this very namespace
            assert "▶ python\n    total = sum(prices)\n    print(total)\n  ⤷ output (1 line)\n  │ 12\n" in out
            assert out.rstrip().endswith("The total is 12.") and out.count("The total is 12.") == 1
            assert "window 32,000 tokens, from the cell's --window" in out
            # Streaming: the same steps, the answer printed piece by piece (once).
            shell.run_cell_magic(
                "agent", f"--stream --model local --base-url {srv.base_url} --window 32000", "Sum again."
            )
            out = capsys.readouterr().out
            assert out.count("The total is 12.") == 1 and srv.chat_requests[-1].body["stream"] is True
            # Empty cell and bad options: a clear message, nothing sent.
            before = len(srv.chat_requests)
            shell.run_cell_magic("agent", "", "   ")
            shell.run_cell_magic("agent", "--nope", "hello")
            out = capsys.readouterr().out
            assert "the cell is empty" in out and "unknown option '--nope'" in out
            assert len(srv.chat_requests) == before
        assert magics.current is not None
        entries = magics.current.store.entries("agent")
        assert [e.role for e in entries if e.kind == "message"] == [
            "user",
            "assistant",
            "toolResult",
            "assistant",
        ] * 2
    finally:
        for name in ("prices", "total"):
            shell.user_ns.pop(name, None)


def cell_output(kc: Any, code: str, timeout: float = 60) -> tuple[list[dict[str, Any]], str]:
    """Run ``code``; the cell's displays as they finally look (updates applied) and its stdout."""
    displays: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    stdout: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind in ("display_data", "update_display_data", "execute_result"):
            key = (content.get("transient") or {}).get("display_id") or f"anon-{len(order)}"
            if kind != "update_display_data" and key not in displays:
                order.append(key)
            displays[key] = content["data"]
        elif kind == "stream":
            stdout.append(content["text"])

    reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook)
    assert reply["content"]["status"] == "ok", reply["content"]
    return [displays[k] for k in order], "".join(stdout)


@pytest.mark.slow
def test_agent_cell_in_a_real_kernel_with_the_extension(tmp_path: Path) -> None:
    def reply(req: RecordedRequest) -> Reply:
        last = req.messages[-1]
        users = [m for m in req.messages if m["role"] == "user"]
        if last["role"] == "tool":
            return Reply(text=f"Done: {last['content']}")
        if "compact" in str(users[-1]["content"]):
            return Reply(tool_calls=(ToolCall("python", {"code": "compact.run('keep the prices')"}),))
        return Reply(tool_calls=(ToolCall("python", {"code": "total = sum(prices)\nprint(total)"}),))

    with ModelServer(reply) as srv, running_kernel(tmp_path) as km:
        kc = km.client()
        kc.start_channels()
        try:
            cell_output(kc, "%load_ext ipython_compact\nprices = [3, 4, 5]")
            cell_output(
                kc, "%config CompactConfig.compaction = {'keep_recent_tokens': 40, 'reserve_tokens': 1000}"
            )
            head = f"%%agent --model local --base-url {srv.base_url} --window 32000\n"
            (transcript, answer), _ = cell_output(kc, head + "Sum my prices.")
            # one live transcript (updated in place) with the code highlighted and its output folded away,
            # then the answer in full, its Markdown rendered; plain text for terminals and nbconvert
            assert "total = sum(prices)" in transcript["text/plain"] and "│ 12" in transcript["text/plain"]
            assert "<details><summary>output (1 line)</summary>" in transcript["text/html"]
            assert "<span style=" in transcript["text/html"]  # highlighted
            assert "```python\ntotal = sum(prices)\nprint(total)\n```" in transcript["text/markdown"]
            assert answer == {
                "text/html": "<p>Done: 12</p>\n",
                "text/markdown": "```text\nDone: 12\n```",
                "text/plain": "Done: 12",
            }
            # the agent's code ran in the notebook's namespace
            assert cell_output(kc, "print(total)")[1] == "12\n"
            (transcript, _answer), _ = cell_output(kc, "%%agent\nNow compact the context please.")
            plain = transcript["text/plain"]
            assert "runs when the current turn ends" in plain
            compaction_lines = [ln for ln in plain.splitlines() if ln.startswith("⟳ ")]
            assert any("requested compaction placed" in ln for ln in compaction_lines), plain
            # The second cell continued the same conversation.
            assert any(
                m["role"] == "user" and m["content"] == "Sum my prices."
                for m in srv.chat_requests[-1].messages
            )
        finally:
            kc.stop_channels()
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

    probe = (
        "print(sorted(n for n in ('agent', 'compact') if n in "
        "get_ipython().magics_manager.magics['cell']"
        " or n in get_ipython().magics_manager.magics['line']))"
    )
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
        # the shell's config outlives unload
        shell.run_line_magic("config", "CompactConfig.summarizer = 'offline'")
        shell.run_line_magic("unload_ext", "ipython_compact")


def test_settings_are_set_once_with_config_and_the_window_comes_from_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path))
    monkeypatch.setenv("IPYTHON_COMPACT_SESSION", "agent-settings")
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "ipython_compact")
    try:
        with ModelServer(
            [Reply(text="first"), Reply(text="second")], model="local", context_window=60000
        ) as srv:
            shell.run_line_magic("config", "AgentConfig.model = 'local'")
            shell.run_line_magic("config", f"AgentConfig.base_url = '{srv.base_url}'")
            shell.run_cell_magic("agent", "", "hello")
            shell.run_cell_magic("agent", "", "again")  # nothing retyped
            out = capsys.readouterr().out
            assert "window 60,000 tokens, from the server's model card (max_model_len)" in out
            assert "first" in out and "second" in out
            assert [r.body["model"] for r in srv.chat_requests] == ["local", "local"]
            status = shell.run_line_magic("compact", "status").data
            assert status["window"] == 60000  # %compact status (and the panel) show the agent's window
    finally:
        shell.run_line_magic("config", "AgentConfig.model = ''")
        shell.run_line_magic("config", "AgentConfig.base_url = ''")
        shell.run_line_magic("unload_ext", "ipython_compact")


def test_a_small_window_scales_the_default_settings_and_a_configured_reserve_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tried by hand: `%%agent --window 2500` refused every request ("context window 2500 is not
    larger than reserve_tokens 16384"), although the library Agent scales pi's defaults to a small
    window. Now the cell scales them too, unless the user set the sizes themselves."""
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path))
    monkeypatch.setenv("IPYTHON_COMPACT_SESSION", "agent-small-window")
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "ipython_compact")
    try:
        with ModelServer([Reply(text="small and fine")], model="local") as srv:
            shell.run_cell_magic("agent", f"--model local --base-url {srv.base_url} --window 2500", "hello")
            assert "small and fine" in capsys.readouterr().out
            status = shell.run_line_magic("compact", "status").data
            assert (status["window"], status["background_line"], status["blocking_line"]) == (
                2500,
                1750,
                2000,
            )
            shell.run_line_magic("config", "CompactConfig.compaction = {'reserve_tokens': 16384}")
            shell.run_cell_magic(
                "agent", f"--reset --model local --base-url {srv.base_url} --window 2500", "again"
            )
            said = capsys.readouterr().out
            assert "CompactConfig.compaction sets reserve_tokens=16,384" in said, said
            assert "2,500-token window" in said and "{'reserve_tokens': 500}" in said
            assert len(srv.chat_requests) == 1
    finally:
        shell.run_line_magic("config", "CompactConfig.compaction = {}")
        shell.run_line_magic("unload_ext", "ipython_compact")


def test_long_answers_and_tool_output_are_shown_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path))
    shell = start_ipython() or get_ipython()
    answer = "The report, in full: " + " ".join(f"point-{i}" for i in range(200))
    code = "print('\\n'.join(f'row {i}' for i in range(80)))"
    magics = AgentMagics(shell)
    shell.register_magics(magics)
    with ModelServer([Reply(tool_calls=(ToolCall("python", {"code": code}),)), Reply(text=answer)]) as srv:
        shell.run_cell_magic("agent", f"--model local --base-url {srv.base_url} --window 32000", "report")
    out = capsys.readouterr().out
    assert len(answer) > 1000 and answer in out  # was cut at 300 characters
    assert "⤷ output (80 lines)" in out and "│ row 79" in out


def test_the_ledger_records_who_opened_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files the agent's tool calls open are the agent's; the user's cells are the user's; what the
    %%agent machinery itself opens (the model client reading /etc/os-release, …) is nobody's."""
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("IPYTHON_COMPACT_SESSION", "who-opened")
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "ipython_compact")
    mine, theirs = tmp_path / "mine.txt", tmp_path / "agents.csv"
    mine.write_text("x")
    theirs.write_text("a,b\n")
    seen_busy: list[bool] = []

    def reply(req: RecordedRequest) -> Reply:
        from ipython_compact.kernel.extension import extension_for

        ext = extension_for(shell)
        assert ext is not None
        seen_busy.append(ext.service.executing)  # between tool calls the %%agent cell is still running
        tools = [m for m in req.messages if m["role"] == "tool"]
        if len(tools) < 2:
            return Reply(tool_calls=(ToolCall("python", {"code": f"rows = open({str(theirs)!r}).read()"}),))
        return Reply(text="read it")

    try:
        shell.run_cell(f"_ = open({str(mine)!r}).read()")
        with ModelServer(reply) as srv:
            shell.run_cell(f"%%agent --model local --base-url {srv.base_url} --window 32000\nread the csv")
        from ipython_compact.kernel.extension import extension_for

        ext = extension_for(shell)
        assert ext is not None
        ops = [
            e.data["data"]
            for e in ext.service.store.path(ext.service.session)
            if e.kind == "custom" and e.data.get("custom_type") == "ipython_file_ops"
        ]
        assert ops == [
            {"read": [str(mine)], "modified": [], "by": "user"},
            {"read": [str(theirs)], "modified": [], "by": "agent"},
            {"read": [str(theirs)], "modified": [], "by": "agent"},
        ]
        assert seen_busy == [True, True, True]
    finally:
        shell.run_line_magic("unload_ext", "ipython_compact")
