"""What the model reads after each compaction trigger: one system prompt, first, and the user's
question last, with the kernel's ``<ipython_state>`` notice before it (issue 34, item 1).

Found by a user: after a blocking compaction ``Agent.ask("THE QUESTION…")`` sent the question and
then the kernel notice as the newest user message. The log is append-only (the notice is logged
after the question); the request must still read in the right order. Real kernel, the local model
server over HTTP, SQLite; the role sequence is read from the requests the server recorded.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ipython_compact.agent.kernel_tool import JupyterKernel
from ipython_compact.agent.loop import Agent, AgentEvent
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

pytestmark = pytest.mark.slow

LONG = "Lisbon has seven hills, yellow trams, custard tarts and fado. " * 12
OVERFLOW = Reply(
    status=400,
    error_type="invalid_request_error",
    error_code="context_length_exceeded",
    error_message="This model's maximum context length is 3000 tokens. Please reduce the messages.",
)
QUIET = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=150, background_tokens=0)


@pytest.fixture(scope="module")
def kernel() -> Iterator[JupyterKernel]:
    with JupyterKernel(extension=None) as k:
        yield k


def _agent(tmp_path: Path, server: ModelServer, kernel: Any, settings: CompactionSettings) -> Agent:
    store = SessionStore(tmp_path / "s.db")
    return Agent(
        store=store,
        session="t",
        client=openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0),
        model="local-model",
        context_window=3000,
        settings=settings,
        compactor=Compactor(store, None, settings),
        kernel=kernel,
        cooldown_seconds=0.0,
        subcalls=False,
    )


def roles(req: RecordedRequest) -> list[str]:
    """The request as the model reads it: system, summary, state, user:<text>, assistant, tool."""
    out = []
    for m in req.messages:
        text = str(m.get("content") or "")
        if m["role"] != "user":
            out.append(m["role"])
        elif text.startswith("Earlier parts of this conversation"):
            out.append("summary")
        elif text.startswith("<ipython_state>"):
            out.append("state")
        else:
            out.append("user:" + text.split(" Lisbon")[0].split(" word")[0][:20])
    return out


def last_user(req: RecordedRequest) -> str:
    return next(r for r in reversed(roles(req)) if r.startswith("user:"))


def _fill(agent: Agent, n: int) -> None:
    for i in range(n):
        assert agent.ask(f"question {i}").stopped == "final"


def test_blocking_compaction_sends_the_question_last(tmp_path: Path, kernel: JupyterKernel) -> None:
    settings = CompactionSettings(reserve_tokens=2200, keep_recent_tokens=150, background_tokens=0)
    with ModelServer(default=LONG) as srv:
        agent = _agent(tmp_path, srv, kernel, settings)
        while agent.context_tokens()[0] < 700:  # the blocking line is 800
            _fill(agent, 1)
        assert agent.compactions == []
        assert agent.ask("THE QUESTION " + LONG).stopped == "final"
        assert [c.reason for c in agent.compactions] == ["threshold"]
        sent = srv.chat_requests[-1]
    assert roles(sent) == ["system", "summary", "state", "user:THE QUESTION"]


def test_overflow_compaction_retries_with_the_question_last(tmp_path: Path, kernel: JupyterKernel) -> None:
    seen: list[str] = []

    def reply(req: RecordedRequest) -> Reply | str:
        seen.append(last_user(req))
        return OVERFLOW if seen.count("user:THE QUESTION") == 1 and seen[-1] == "user:THE QUESTION" else LONG

    with ModelServer(reply) as srv:
        agent = _agent(tmp_path, srv, kernel, QUIET)
        _fill(agent, 3)
        assert agent.ask("THE QUESTION").stopped == "final"
        assert [c.reason for c in agent.compactions] == ["overflow"]
        sent = srv.chat_requests[-1]
    # the kept tail (the last answer), then the notice, then the question the request retries
    assert roles(sent) == ["system", "summary", "assistant", "state", "user:THE QUESTION"]


def test_a_compaction_between_turns_puts_its_notice_before_the_next_question(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    """Manual (idle) and model-requested compactions land between turns; the next question follows."""
    code = "import ipython_compact.agent.requests as r\nr.request('keep the hotel list')"

    def reply(req: RecordedRequest) -> Reply | str:
        if last_user(req) == "user:compact now" and req.messages[-1]["role"] != "tool":
            return Reply(tool_calls=(ToolCall("python", {"code": code}),))
        return LONG

    with ModelServer(reply) as srv:
        agent = _agent(tmp_path, srv, kernel, QUIET)
        _fill(agent, 2)
        assert agent.compact().state == "placed"
        assert agent.ask("after manual").stopped == "final"
        manual = srv.chat_requests[-1]
        assert agent.ask("compact now").stopped == "final"
        assert [c.reason for c in agent.compactions] == ["manual", "requested"]
        assert agent.ask("after requested").stopped == "final"
        requested = srv.chat_requests[-1]
    assert roles(manual) == ["system", "summary", "assistant", "state", "user:after manual"]
    assert roles(requested)[:2] == ["system", "summary"]
    assert roles(requested)[-2:] == ["state", "user:after requested"]
    assert roles(requested).count("system") == 1


def test_background_compaction_lands_before_the_next_question(tmp_path: Path, kernel: JupyterKernel) -> None:
    settings = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=150, background_tokens=1300)
    started, queued = threading.Event(), threading.Event()

    def reply(req: RecordedRequest) -> Reply:
        if started.is_set() and not queued.is_set():  # answer once the background summary is ready
            assert queued.wait(30), "the background compaction never finished"
        return Reply(text=LONG)

    with ModelServer(reply) as srv:
        agent = _agent(tmp_path, srv, kernel, settings)

        def on_event(ev: AgentEvent) -> None:
            if ev.kind == "compaction_start":
                started.set()
            elif ev.kind == "compaction_queued":
                queued.set()

        agent.on_event = on_event
        while not queued.is_set():
            assert len(srv.chat_requests) < 10, "no background compaction started"
            assert agent.ask(f"question {len(srv.chat_requests)}").stopped == "final"
        agent.wait_background()
        assert agent.ask("THE QUESTION").stopped == "final"
        assert [(c.reason, c.blocking) for c in agent.compactions][:1] == [("threshold", False)]
        sent = srv.chat_requests
    # the first request after the summary was placed (at the turn boundary): the notice, then its question
    first = next(roles(r) for r in sent if "summary" in roles(r))
    assert first[:2] == ["system", "summary"] and first[-2] == "state" and first[-1].startswith("user:"), [
        roles(r) for r in sent
    ]
    assert first.count("system") == 1 and first.count("state") == 1
    assert roles(sent[-1])[-1] == "user:THE QUESTION"


def test_agent_cells_in_terminal_ipython_send_one_system_prompt_and_the_question_last(tmp_path: Path) -> None:
    """``%%agent`` in terminal IPython, with the extension's log and summarizer: blocking
    compactions (8,192-token window, 3,000-word cells), then a question after them."""
    from test_compact_magic_terminal import terminal_ipython

    big = "word " * 3000
    with ModelServer(default="ok answer", context_window=8192) as srv:
        lines = [
            "%load_ext ipython_compact",
            f"%config AgentConfig.base_url = '{srv.base_url}'",
            "%config AgentConfig.model = 'local-model'",
            "sales = [120, 95, 143]",  # a name for the kernel notice to report
            *[f"get_ipython().run_cell_magic('agent', '', 'turn {i} {big}')" for i in range(3)],
            "get_ipython().run_cell_magic('agent', '', 'THE QUESTION')",
        ]
        out = terminal_ipython("\n".join(lines) + "\n", 120, tmp_path)
        sent = srv.chat_requests
    assert out.count("threshold compaction placed") == 2, out
    questions = ["turn 0", "turn 1", "turn 2", "THE QUESTION"]
    assert [roles(r)[-1] for r in sent] == [f"user:{q}" for q in questions]
    assert [roles(r).count("system") for r in sent] == [1, 1, 1, 1]
    assert roles(sent[1]) == ["system", "summary", "state", "user:turn 1"]
    # the notice of turn 2's compaction reads before turn 2's question, not between it and its answer
    assert roles(sent[3]) == ["system", "summary", "state", "user:turn 2", "assistant", "user:THE QUESTION"]
