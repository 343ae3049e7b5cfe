"""Every failure a new user met in issue 34 is explained: what did not fit and by how much, which
setting to change, and the flag's name where the user types flags. Real kernels, the local model
server over HTTP, real subprocesses for the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ipython_compact.agent.kernel_tool import JupyterKernel
from ipython_compact.agent.loop import Agent
from ipython_compact.store import SessionStore
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
SCRIPT = Path(sys.executable).parent / "ipython-compact"


@pytest.fixture(scope="module")
def kernel() -> Iterator[JupyterKernel]:
    with JupyterKernel(extension=None) as k:
        yield k


def _agent(tmp_path: Path, server: ModelServer, kernel: Any, **kw: Any) -> Agent:
    return Agent(
        store=SessionStore(tmp_path / "s.db"),
        session="t",
        client=openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0),
        model="local-model",
        kernel=kernel,
        cooldown_seconds=0.0,
        **kw,
    )


@pytest.mark.slow
def test_the_depth_cap_refusal_names_max_depth(tmp_path: Path, kernel: JupyterKernel) -> None:
    code = "try:\n    agent_query('find the best month')\nexcept RuntimeError as e:\n    print(e)"

    def reply(req: RecordedRequest) -> Reply | str:
        if req.messages[-1]["role"] == "tool":
            return "done"
        return Reply(tool_calls=(ToolCall("python", {"code": code}),))

    with ModelServer(reply) as srv:
        agent = _agent(tmp_path, srv, kernel, context_window=32000, max_depth=0)
        assert agent.ask("use a sub-agent").stopped == "final"
        said = str(srv.chat_requests[-1].messages[-1]["content"])
    assert "agent_query is not available at depth 0" in said, said
    assert "max_depth=0" in said and "Agent(max_depth=...)" in said


def test_the_command_line_names_its_model_flag(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IPYTHON_COMPACT_MODEL", "OPENAI_"))}
    env["IPYTHON_COMPACT_DIR"] = str(tmp_path)
    subprocess.run(
        [str(SCRIPT), "import", str(FIXTURE), "--session", "w"], env=env, check=True, capture_output=True
    )
    done = subprocess.run(
        [str(SCRIPT), "compact", "-s", "w", "--summarizer", "openai"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "pass --model NAME" in done.stderr and "model=..." not in done.stderr, done.stderr


@pytest.mark.slow
def test_a_partial_compaction_override_keeps_the_other_sizes_scaled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trait help's shape, ``{'keep_recent_tokens': 200}``, broke every ``%%agent`` on an
    8,192-token server ("context window 8192 is not larger than reserve_tokens 16384")."""
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path))
    monkeypatch.setenv("IPYTHON_COMPACT_SESSION", "partial-override")
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "ipython_compact")
    try:
        with ModelServer(default="fine", model="local", context_window=8192) as srv:
            shell.run_line_magic("config", "CompactConfig.compaction = {'keep_recent_tokens': 200}")
            shell.run_cell_magic("agent", f"--model local --base-url {srv.base_url}", "hello")
            assert "fine" in capsys.readouterr().out
            status = shell.run_line_magic("compact", "status").data
            assert (status["window"], status["blocking_line"]) == (8192, 8192 - 8192 // 5)
            shell.run_line_magic("config", "CompactConfig.compaction = {'reserve_tokens': 9000}")
            shell.run_cell_magic("agent", f"--reset --model local --base-url {srv.base_url}", "again")
            said = capsys.readouterr().out
            assert len(srv.chat_requests) == 1
    finally:
        shell.run_line_magic("config", "CompactConfig.compaction = {}")
        shell.run_line_magic("unload_ext", "ipython_compact")
    assert "%%agent: CompactConfig.compaction sets reserve_tokens=9,000" in said, said
    assert "8,192-token window" in said and "{'reserve_tokens': 1638}" in said


@pytest.mark.slow
def test_agent_cells_tell_the_true_story_about_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dead port said "(the server reported no window)"; ``--reset`` (or ``--window`` alone) after
    ``--base-url`` went to the public endpoint."""
    import socket

    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path))
    monkeypatch.setenv("IPYTHON_COMPACT_SESSION", "server-story")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # nothing listens once closed
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "ipython_compact")
    try:
        shell.run_cell_magic("agent", f"--model local --base-url {dead}", "hello")
        said_dead = capsys.readouterr().out
        with ModelServer(default="same server", model="local", context_window=8192) as srv:
            url = srv.base_url
            shell.run_cell_magic("agent", f"--model local --base-url {url}", "hello")
            capsys.readouterr()
            shell.run_cell_magic("agent", "--reset", "again")
            said_reset = capsys.readouterr().out
            shell.run_cell_magic("agent", "--window 4096", "and again")
            said_window = capsys.readouterr().out
            shell.run_cell_magic("agent", "", "word " * 9000)  # refused in the cell's output, no traceback
            said_big = capsys.readouterr().out
            assert len(srv.chat_requests) == 3
    finally:
        shell.run_line_magic("unload_ext", "ipython_compact")
    assert f"the server at {dead} did not answer /models: APIConnectionError" in said_dead, said_dead
    assert "reported no window" not in said_dead
    assert f"local at {url} · window 8,192 tokens, from the server's model card" in said_reset
    assert "same server" in said_reset and "same server" in said_window
    assert f"local at {url} · window 4,096 tokens, from the cell's --window" in said_window
    assert said_big.startswith("%%agent: the question does not fit the 4,096-token window"), said_big


@pytest.mark.slow
def test_a_failed_request_raises_so_the_readme_example_cannot_print_it_as_an_answer(tmp_path: Path) -> None:
    """The README's ``print(agent.ask(q).text)`` printed "The model request failed: …" and exited 0."""
    script = (
        "import sys\n"
        "from ipython_compact import Agent\n"
        "with Agent(model='local-model', base_url=sys.argv[1], context_window=32000, store=sys.argv[2],\n"
        "           session='work') as agent:\n"
        "    print(agent.ask('Load data.csv and tell me the best month.').text)\n"
    )
    with ModelServer(default=Reply.server_error("upstream exploded")) as srv:
        done = subprocess.run(
            [sys.executable, "-c", script, srv.base_url, str(tmp_path / "s.db")],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path)},
        )
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert "ipython_compact.agent.events.TurnFailed: The model request failed: HTTP 500" in done.stderr
    assert "upstream exploded" in done.stderr
    # the turn is logged all the same
    log = SessionStore(tmp_path / "s.db").entries("work")
    assert [e.role for e in log if e.role] == ["user", "assistant"]


@pytest.mark.parametrize("window", [100, 300])
def test_a_window_too_small_for_any_request_is_refused_up_front(tmp_path: Path, window: int) -> None:
    with ModelServer(default="ok") as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        with pytest.raises(ValueError, match=rf"context_window={window} is too small for this agent") as err:
            Agent(client=client, model="m", context_window=window, store=tmp_path / "s.db", kernel=object())
        assert srv.chat_requests == []
    said = str(err.value)
    assert "the system prompt and the python tool alone take ~" in said and "more)" in said
    assert "context_window=, --window" in said


@pytest.mark.slow
def test_a_question_larger_than_the_window_is_named_with_the_shortfall_and_the_fix(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    with ModelServer(default="ok", context_window=2000) as srv:
        agent = _agent(tmp_path, srv, kernel, context_window=2000)
        before = len(agent.log_entries())
        with pytest.raises(ValueError, match=r"the question does not fit the 2,000-token window") as err:
            agent.ask("word " * 3000)
        assert srv.chat_requests == [] and len(agent.log_entries()) == before
    said = str(err.value)
    assert "15,000 characters (~3,750 tokens)" in said and "tokens short" in said
    assert "ask(question, context=TEXT)" in said


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_cancelling_aask_interrupts_the_request_and_the_process_ends_cleanly(
    tmp_path: Path, stream: bool
) -> None:
    """Cancelling waited 4.5 s for a 5 s reply, and the process ended with "Exception ignored …
    ValueError: Invalid file descriptor: -1"; a streamed request still waited for the server's first
    chunk. The script (tests/fixtures/cancel_aask.py) holds the reply until after the cancellation
    has returned, so a cancel that waits for it cannot pass. Whether the reply was sent is asked of
    the server, not of a clock: the suite runs on a loaded machine."""
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).parent / "fixtures" / "cancel_aask.py"),
            str(tmp_path / "s.db"),
            *(["stream"] if stream else []),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert "answered before the cancellation returned: False" in done.stdout, done.stdout
    assert "Exception ignored" not in done.stderr, done.stderr
    log = SessionStore(tmp_path / "s.db").entries("c")
    assert [e.role for e in log if e.role] == ["user"]  # the late reply never entered the log


@pytest.mark.slow
def test_a_tool_output_larger_than_the_window_is_named_in_the_overflow_failure(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    code = "print('x' * 16000)"

    def reply(req: RecordedRequest) -> Reply | str:
        return (
            "done"
            if req.messages[-1]["role"] == "tool"
            else Reply(tool_calls=(ToolCall("python", {"code": code}),))
        )

    with ModelServer(reply, context_window=3000) as srv:
        agent = _agent(tmp_path, srv, kernel, context_window=3000, max_output_chars=20000, subcalls=False)
        from ipython_compact.agent.events import TurnFailed

        with pytest.raises(TurnFailed) as failed:
            agent.ask("print the big thing")
    said = str(failed.value)
    assert said.startswith("Context overflow recovery failed"), said
    assert "What does not fit: the context is ~" in said and "for the 3,000-token window" in said
    assert "the largest message, a tool output, is ~4,0" in said, said
    assert "ask(question, context=DATA)" in said and "context_window=, --window" in said
