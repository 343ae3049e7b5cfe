"""The agent loop end to end: real kernels (jupyter_client), the local model server, SQLite logs."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ipython_compact.agent.events import TurnFailed
from ipython_compact.agent.kernel_tool import JupyterKernel
from ipython_compact.agent.loop import Agent, AgentEvent
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.entries import COMPACTION, COMPACTION_OUTCOME, CUSTOM_MESSAGE, KERNEL_STATE, SYSTEM
from ipython_compact.core.overflow import OVERFLOW_FAILURE_MESSAGE
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

pytestmark = pytest.mark.slow

LONG = "Lisbon has seven hills, yellow trams, custard tarts and fado. " * 12
OVERFLOW = Reply(
    status=400,
    error_type="invalid_request_error",
    error_code="context_length_exceeded",
    error_message="This model's maximum context length is 3000 tokens. Please reduce the length "
    "of the messages.",
)


@pytest.fixture(scope="module")
def kernel() -> Iterator[JupyterKernel]:
    with JupyterKernel(extension=None) as k:
        yield k


def _agent(
    tmp_path: Path, server: ModelServer, kernel: Any, settings: CompactionSettings, **kw: Any
) -> tuple[Agent, SessionStore, list[AgentEvent]]:
    store = SessionStore(tmp_path / "s.db")
    events: list[AgentEvent] = []
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    agent = Agent(
        store=store,
        session="t",
        client=client,
        model="local-model",
        context_window=kw.pop("window", 3000),
        settings=settings,
        compactor=Compactor(store, None, settings),
        kernel=kernel,
        on_event=events.append,
        cooldown_seconds=kw.pop("cooldown_seconds", 0.0),
        subcalls=kw.pop("subcalls", False),
        **kw,
    )
    return agent, store, events


def _script(
    fn: Callable[[str, list[dict[str, Any]]], Reply | str],
) -> Callable[[RecordedRequest], Reply | str]:
    def pick(req: RecordedRequest) -> Reply | str:
        users = [
            m
            for m in req.messages
            if m.get("role") == "user"
            and not str(m.get("content", "")).startswith(
                ("<ipython_state>", "Earlier parts", "<ipython_kernel")
            )
        ]
        text = str(users[-1].get("content", "")) if users else ""
        return fn(text.split(" ")[0] if text.startswith("trigger ") else text, req.messages)

    return pick


QUIET = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=150, background_tokens=0)


@pytest.mark.parametrize("stream", [False, True])
def test_every_message_tool_call_result_and_usage_is_logged(
    tmp_path: Path, kernel: JupyterKernel, stream: bool
) -> None:
    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        if msgs[-1]["role"] == "tool":
            return "x is 42."
        return Reply(tool_calls=(ToolCall("python", {"code": "x = 41 + 1\nx"}),))

    with ModelServer(_script(reply)) as srv:
        agent, store, events = _agent(tmp_path, srv, kernel, QUIET, stream=stream)
        result = agent.ask("What is x?")
        assert all(bool((r.body or {}).get("stream")) is stream for r in srv.chat_requests)
    assert (result.stopped, result.text, result.steps) == ("final", "x is 42.", 2)
    roles = [e.role for e in store.path("t") if e.kind == "message"]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    tool_result = next(e.message for e in store.path("t") if e.role == "toolResult")
    assert tool_result is not None and tool_result["content"][0]["text"] == "42"
    usages = [
        e.message["usage"]["totalTokens"] for e in store.path("t") if e.role == "assistant" and e.message
    ]
    assert all(u > 0 for u in usages)
    assert [ev.kind for ev in events].count("tool_call") == 1


@pytest.mark.parametrize("bad", ["", "   ", None, 42])
def test_an_empty_message_is_refused_before_anything_is_logged(
    tmp_path: Path, kernel: JupyterKernel, bad: Any
) -> None:
    with ModelServer(default="hi") as srv:
        agent, store, _ = _agent(tmp_path, srv, kernel, QUIET)
        before = len(store.entries("t"))
        with pytest.raises(ValueError, match="must be non-empty text"):
            agent.ask(bad)
        assert len(store.entries("t")) == before and not srv.chat_requests


def test_step_limit_stops_a_tool_loop(tmp_path: Path, kernel: JupyterKernel) -> None:
    with ModelServer(default=Reply(tool_calls=(ToolCall("python", {"code": "1"}),))) as srv:
        agent, _store, _ = _agent(tmp_path, srv, kernel, QUIET, max_steps=3)
        result = agent.ask("loop forever")
    assert result.stopped == "step_limit" and result.steps == 3


def test_bad_tool_arguments_answer_the_model_with_a_clear_error(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        return "ok" if msgs[-1]["role"] == "tool" else Reply(tool_calls=(ToolCall("python", "not json"),))

    with ModelServer(_script(reply)) as srv:
        agent, store, _ = _agent(tmp_path, srv, kernel, QUIET)
        assert agent.ask("go").stopped == "final"
    result = next(e.message for e in store.path("t") if e.role == "toolResult")
    assert result is not None and result["isError"] is True
    assert "must be a JSON object with a string 'code'" in result["content"][0]["text"]


def _fill(agent: Agent, n: int) -> None:
    for i in range(n):
        assert agent.ask(f"question {i}").stopped == "final"


def test_blocking_line_compacts_before_sending_then_baseline_and_notice(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    # blocking line 800
    settings = CompactionSettings(reserve_tokens=2200, keep_recent_tokens=150, background_tokens=0)
    with ModelServer(default=LONG) as srv:
        agent, store, events = _agent(tmp_path, srv, kernel, settings)
        _fill(agent, 5)
        sizes = [r.prompt_tokens for r in srv.chat_requests]
    comps = [e for e in store.path("t") if e.kind == COMPACTION]
    assert comps and all(
        c.data["reason"] == "threshold" and c.data["details"]["blocking"] is True for c in comps
    )
    path = store.path("t")
    i = path.index(comps[0])
    assert [path[i + 1].kind, path[i + 2].kind] == [SYSTEM, KERNEL_STATE]
    assert ("These names are still defined") in path[i + 2].data["content"] or (
        "not defined any names"
    ) in path[i + 2].data["content"]
    assert max(sizes) < 3000  # the server never saw an oversized prompt
    # The request after the compaction is smaller than the one before it.
    assert any(b < a for a, b in itertools.pairwise(sizes))
    assert any(ev.kind == "compaction_start" and "blocking" in ev.text for ev in events)


def test_background_line_compacts_beside_the_conversation(tmp_path: Path, kernel: JupyterKernel) -> None:
    import threading

    # bg line 700
    settings = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=150, background_tokens=1300)
    started, queued = threading.Event(), threading.Event()

    def reply(req: RecordedRequest) -> Reply:
        if started.is_set():  # the model "thinks" until the background summary is ready
            assert queued.wait(30), "the background compaction never finished"
        return Reply(text=LONG)

    with ModelServer(reply) as srv:
        agent, store, events = _agent(tmp_path, srv, kernel, settings)

        def on_event(ev: AgentEvent) -> None:
            events.append(ev)
            if ev.kind == "compaction_start":
                started.set()
            elif ev.kind == "compaction_queued":
                queued.set()

        agent.on_event = on_event
        _fill(agent, 4)
        agent.wait_background()
    comps = [e for e in store.path("t") if e.kind == COMPACTION]
    assert len(comps) == 1 and comps[0].data["details"]["blocking"] is False
    kinds = [ev.kind for ev in events]
    # Started before a request, finished while the model was answering, placed at the turn's end.
    assert kinds.index("compaction_start") < kinds.index("request", kinds.index("compaction_start"))
    assert (
        kinds.index("compaction_queued")
        < kinds.index("compaction_end")
        < kinds.index("turn_end", kinds.index("compaction_queued"))
    )
    end = next(ev for ev in events if ev.kind == "compaction_end")
    assert "placed at the turn boundary" in end.text


def test_overflow_is_removed_compacted_and_retried_once(tmp_path: Path, kernel: JupyterKernel) -> None:
    state = {"overflows": 0}

    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        if user == "trigger" and state["overflows"] == 0:
            state["overflows"] += 1
            return OVERFLOW
        return LONG

    with ModelServer(_script(reply)) as srv:
        agent, store, _events = _agent(tmp_path, srv, kernel, QUIET)
        _fill(agent, 3)
        result = agent.ask("trigger")
        sent = srv.chat_requests[-1].messages
    assert result.stopped == "final"
    comps = [e for e in store.path("t") if e.kind == COMPACTION]
    assert [c.data["reason"] for c in comps] == ["overflow"]
    errors = [
        e
        for e in store.entries("t")
        if e.role == "assistant" and e.message and e.message.get("stopReason") == "error"
    ]
    assert (
        len(errors) == 1
        and errors[0].message is not None
        and errors[0].message["errorCode"] == "context_length_exceeded"
    )
    assert errors[0] not in store.path("t")  # kept in the log, not on the context path
    assert all("maximum context length" not in str(m.get("content")) for m in sent)


def test_second_overflow_ends_with_an_honest_error(tmp_path: Path, kernel: JupyterKernel) -> None:
    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        return OVERFLOW if user == "trigger" else LONG

    with ModelServer(_script(reply)) as srv:
        agent, store, _ = _agent(tmp_path, srv, kernel, QUIET)
        _fill(agent, 3)
        with pytest.raises(TurnFailed) as failed:
            agent.ask("trigger")
        result = failed.value.result
        assert (
            len([r for r in srv.chat_requests if any(m.get("content") == "trigger" for m in r.messages)]) == 2
        )
    assert result.stopped == "error" and result.text.startswith(OVERFLOW_FAILURE_MESSAGE)
    assert "larger context window" in result.text
    outcomes = [e for e in store.path("t") if e.kind == COMPACTION_OUTCOME]
    assert outcomes[-1].data["outcome"] == "failed" and outcomes[-1].data["reason"] == "overflow"


REQUEST_CODE = "import ipython_compact.agent.requests as r\nr.request('keep the hotel list')"


def test_model_requested_compaction_runs_at_turn_end_even_when_auto_is_off(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    off = CompactionSettings(enabled=False, reserve_tokens=1000, keep_recent_tokens=100, background_tokens=0)

    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        if user == "compact now":
            return (
                "done"
                if msgs[-1]["role"] == "tool"
                else Reply(tool_calls=(ToolCall("python", {"code": REQUEST_CODE}),))
            )
        return LONG

    with ModelServer(_script(reply)) as srv:
        agent, store, _events = _agent(tmp_path, srv, kernel, off)
        _fill(agent, 3)
        result = agent.ask("compact now")
    assert result.stopped == "final"
    path = store.path("t")
    receipt = [e for e in path if e.role == "toolResult"][-1].message
    assert receipt is not None and "runs when the current turn ends" in receipt["content"][0]["text"]
    comps = [e for e in path if e.kind == COMPACTION]
    assert [c.data["reason"] for c in comps] == ["requested"]
    assert comps[0].data["details"]["focus"] == "keep the hotel list"
    # Placed after the final answer: the turn was not cut mid-way.
    final = [e for e in path if e.role == "assistant"][-1]
    assert path.index(comps[0]) > path.index(final)


def test_model_requested_compaction_is_dropped_when_the_turn_is_aborted(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        if user == "compact now":
            return Reply(tool_calls=(ToolCall("python", {"code": REQUEST_CODE}),))
        return LONG

    with ModelServer(_script(reply)) as srv:
        agent, store, _events = _agent(tmp_path, srv, kernel, QUIET)
        _fill(agent, 2)
        agent.on_event = lambda ev: agent.interrupt() if ev.kind == "tool_result" else None
        result = agent.ask("compact now")
    assert result.stopped == "interrupted"
    assert not [e for e in store.path("t") if e.kind == COMPACTION]


def test_autonomous_mode_queues_a_continuation_after_compaction(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        if user == "compact now":
            return (
                "paused"
                if msgs[-1]["role"] == "tool"
                else Reply(tool_calls=(ToolCall("python", {"code": REQUEST_CODE}),))
            )
        return LONG

    with ModelServer(_script(reply)) as srv:
        agent, store, _events = _agent(tmp_path, srv, kernel, QUIET, autonomous=True)
        agent.set_goal("Plan the whole week in Lisbon")
        _fill(agent, 2)
        agent.ask("compact now")
        last_system = [m for m in srv.chat_requests[-1].messages if m["role"] == "system"]
    continuations = [
        e for e in store.path("t") if e.kind == CUSTOM_MESSAGE and e.data.get("custom_type") == "continuation"
    ]
    assert len(continuations) == 1
    assert "Plan the whole week in Lisbon" in last_system[0]["content"]  # the goal survives compaction
    # A new agent on the same session (another process, say) carries the goal on from the log.
    with ModelServer(default=LONG) as srv2:
        again = Agent(
            store=store,
            session="t",
            client=openai.OpenAI(base_url=srv2.base_url, api_key="x", max_retries=0),
            model="local-model",
            context_window=3000,
            settings=QUIET,
            compactor=Compactor(store, None, QUIET),
            kernel=kernel,
            subcalls=False,
        )
        assert again.status()["session"] == "t" and again.goal == "Plan the whole week in Lisbon"


def test_repeated_failures_end_in_a_labelled_emergency_shrink(tmp_path: Path, kernel: JupyterKernel) -> None:
    class Broken(Compactor):
        def prepare(self, session: str, **kw: Any) -> dict[str, Any] | None:  # type: ignore[override]
            raise RuntimeError("summarizer unavailable")

    with ModelServer(default=LONG) as srv:
        agent, store, _ = _agent(tmp_path, srv, kernel, QUIET)
        agent.compactor = Broken(store, None, QUIET)
        _fill(agent, 3)
        states = [agent.compact().state for _ in range(5)]
    assert states == ["failed"] * 4 + ["placed"]
    comp = [e for e in store.path("t") if e.kind == COMPACTION][-1]
    assert comp.data["reason"] == "emergency" and comp.data["summary"].startswith("EMERGENCY CONTEXT SHRINK")
    fails = [e for e in store.path("t") if e.kind == COMPACTION_OUTCOME and e.data["outcome"] == "failed"]
    assert [f.data["consecutive_failures"] for f in fails] == [1, 2, 3, 4]
    status = agent.status()
    assert status["consecutive_failures"] == 0 and status["last_failure"]["error"].endswith(
        "summarizer unavailable"
    )
    assert [c["state"] for c in status["compactions"]] == ["failed"] * 4 + ["placed"]
    assert status["tokens"] < status["blocking_line"] < status["window"]


def test_cooldown_after_a_failure_holds_back_threshold_compaction(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    settings = CompactionSettings(reserve_tokens=2200, keep_recent_tokens=150, background_tokens=0)

    class Broken(Compactor):
        def prepare(self, session: str, **kw: Any) -> dict[str, Any] | None:  # type: ignore[override]
            raise RuntimeError("summarizer unavailable")

    with ModelServer(default=LONG) as srv:
        agent, store, events = _agent(tmp_path, srv, kernel, settings, cooldown_seconds=600.0)
        agent.compactor = Broken(store, None, settings)
        _fill(agent, 8)
    fails = [e for e in store.path("t") if e.kind == COMPACTION_OUTCOME]
    assert len(fails) == 1  # one failure, then the cooldown guard
    assert any(ev.kind == "guard" and ev.data.get("guard") == "cooldown" for ev in events)


def test_kernel_death_restarts_restores_and_tells_the_model(tmp_path: Path) -> None:
    codes = iter(["x = 42", "import os; os._exit(1)", "print(x)"])

    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        code = next(codes, None)
        return Reply(tool_calls=(ToolCall("python", {"code": code}),)) if code else "x survived."

    with (
        ModelServer(_script(reply)) as srv,
        JupyterKernel(extension=None, env={"IPYTHON_COMPACT_DIR": str(tmp_path)}) as k,
    ):
        agent, store, _events = _agent(tmp_path, srv, k, QUIET, snapshot_dir=str(tmp_path / "snap"))
        result = agent.ask("keep x safe")
    assert result.stopped == "final"
    results = [
        e.message["content"][0]["text"] for e in store.path("t") if e.role == "toolResult" and e.message
    ]
    assert results[-1] == "42"
    reset = [
        e
        for e in store.path("t")
        if e.kind == CUSTOM_MESSAGE and e.data.get("custom_type") == "ipython_kernel_reset"
    ]
    assert len(reset) == 1 and "Restored from the last snapshot: x." in reset[0].data["content"]
    assert agent.restarts == 1


def test_restart_budget_stops_with_a_clear_message(tmp_path: Path) -> None:
    with (
        ModelServer(
            default=Reply(tool_calls=(ToolCall("python", {"code": "import os; os._exit(1)"}),))
        ) as srv,
        JupyterKernel(extension=None) as k,
    ):
        agent, _store, _ = _agent(tmp_path, srv, k, QUIET, max_restarts=1)
        with pytest.raises(TurnFailed) as failed:
            agent.ask("crash")
        result = failed.value.result
    assert result.stopped == "error"
    assert "restart budget (1 restarts per 3600 s) is used up" in result.text


@pytest.mark.parametrize(("switch", "expect_compaction"), [(True, False), (False, True)])
def test_an_overflow_from_a_smaller_model_does_not_count_after_a_switch(
    tmp_path: Path, kernel: JupyterKernel, switch: bool, expect_compaction: bool
) -> None:
    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        return OVERFLOW if user == "trigger" else LONG

    with ModelServer(_script(reply)) as srv:
        agent, _store, events = _agent(tmp_path, srv, kernel, QUIET)
        _fill(agent, 3)
        with pytest.raises(TurnFailed, match="Context overflow"):  # compact, retry, overflow again: reported
            agent.ask("trigger")
        events.clear()
        with pytest.raises(ValueError, match="not larger than reserve_tokens"):
            agent.switch_model("tiny-model", 500)  # refused, nothing changed
        assert agent.model == "local-model"
        if switch:
            agent.switch_model("bigger-model", 128_000)
        assert agent.ask("after").stopped == "final"
    # Same model: a compaction is attempted before the first request of the next turn.
    attempted = any(ev.kind == "compaction_start" and ev.data.get("reason") == "overflow" for ev in events)
    assert attempted is expect_compaction
    assert any(ev.data.get("guard") == "model_switch" for ev in events) is switch


def test_a_queued_summary_settles_stale_when_a_newer_cut_won(tmp_path: Path, kernel: JupyterKernel) -> None:
    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        if user == "big":
            done = sum(1 for m in msgs if m["role"] == "tool")
            code = ["print('word ' * 1400)", "n = 1"]
            return "done" if done >= 2 else Reply(tool_calls=(ToolCall("python", {"code": code[done]}),))
        return LONG

    with ModelServer(_script(reply)) as srv:
        agent, store, events = _agent(tmp_path, srv, kernel, QUIET)
        _fill(agent, 3)

        def on_event(ev: AgentEvent) -> None:
            events.append(ev)
            # the model is busy: the manual summary must queue
            if ev.kind == "tool_call" and "word" in ev.text:
                agent.compact("Keep the hotel shortlist")
                agent.wait_background()

        agent.on_event = on_event
        result = agent.ask("big")
    assert result.stopped == "final"
    kinds = [ev.kind for ev in events]
    assert kinds.index("compaction_queued") < kinds.index("compaction_stale")
    comps = [e for e in store.path("t") if e.kind == COMPACTION]
    assert [c.data["reason"] for c in comps] == ["threshold"]  # the blocking one, placed at once
    stale = [e for e in store.path("t") if e.kind == COMPACTION_OUTCOME and "stale" in e.data["error"]]
    assert len(stale) == 1 and stale[0].data["reason"] == "manual"
    assert [r.state for r in agent.compactions if r.reason == "manual"] == ["stale"]


def test_interrupt_stops_a_long_cell_and_keeps_the_kernel(tmp_path: Path, kernel: JupyterKernel) -> None:
    import threading

    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        return Reply(tool_calls=(ToolCall("python", {"code": "kept = 7\nimport time\ntime.sleep(30)"}),))

    with ModelServer(_script(reply)) as srv:
        agent, store, _events = _agent(tmp_path, srv, kernel, QUIET)

        def on_event(ev: AgentEvent) -> None:
            if ev.kind == "tool_call":
                threading.Timer(0.5, agent.interrupt).start()

        agent.on_event = on_event
        result = agent.ask("sleep")
    assert result.stopped == "interrupted"
    out = [e.message for e in store.path("t") if e.role == "toolResult"][-1]
    assert out is not None and out["isError"] is True and "KeyboardInterrupt" in out["content"][0]["text"]
    assert kernel.is_alive() and kernel.execute("kept").text == "7"


def test_silent_overflow_compacts_before_the_next_request(tmp_path: Path, kernel: JupyterKernel) -> None:
    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        return Reply(text=LONG, usage={"prompt_tokens": 3500}) if user == "silent" else LONG

    with ModelServer(_script(reply)) as srv:
        agent, store, events = _agent(tmp_path, srv, kernel, QUIET)
        _fill(agent, 3)
        assert agent.ask("silent").stopped == "final"
    comps = [e for e in store.path("t") if e.kind == COMPACTION]
    assert [c.data["reason"] for c in comps] == ["overflow"]
    assert any(ev.kind == "overflow" and "silent" in ev.text for ev in events)


def test_at_most_one_compaction_per_request(tmp_path: Path, kernel: JupyterKernel) -> None:
    # blocking line 800
    settings = CompactionSettings(reserve_tokens=2200, keep_recent_tokens=150, background_tokens=0)

    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        return OVERFLOW if user == "trigger" else LONG

    with ModelServer(_script(reply)) as srv:
        agent, store, _events = _agent(tmp_path, srv, kernel, settings)
        _fill(agent, 3)
        n_before = len([e for e in store.path("t") if e.kind == COMPACTION])
        with pytest.raises(TurnFailed) as failed:  # crosses the blocking line, then overflows
            agent.ask("trigger " + "filler " * 400)
        result = failed.value.result
    # One compaction for the request (threshold); the overflow may not add a second: honest error.
    assert result.stopped == "error" and result.text.startswith(OVERFLOW_FAILURE_MESSAGE)
    new = [e.data["reason"] for e in store.path("t") if e.kind == COMPACTION][n_before:]
    assert new == ["threshold"]


def test_compact_run_from_the_kernel_helper_is_honoured_at_turn_end(tmp_path: Path) -> None:
    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        if user == "compact now":
            if msgs[-1]["role"] == "tool":
                return "continuing"
            return Reply(
                tool_calls=(ToolCall("python", {"code": "compact.run(instructions='keep the budget')"}),)
            )
        return LONG

    env = {"IPYTHON_COMPACT_DIR": str(tmp_path / "kernel-data")}
    with ModelServer(_script(reply)) as srv, JupyterKernel(extension="ipython_compact", env=env) as k:
        assert k.extension_error is None
        agent, store, _ = _agent(tmp_path, srv, k, QUIET)
        _fill(agent, 3)
        assert agent.ask("compact now").stopped == "final"
        # Outside a turn the helper is not the agent's: the agent sees no request.
        assert k.take_compaction_request() is None
    comps = [e for e in store.path("t") if e.kind == COMPACTION]
    assert [(c.data["reason"], c.data["details"]["focus"]) for c in comps] == [
        ("requested", "keep the budget")
    ]
    receipt = [e.message for e in store.path("t") if e.role == "toolResult"][-1]
    assert receipt is not None and "Continue working normally" in receipt["content"][0]["text"]


def test_each_failure_keeps_less_verbatim_and_success_resets(tmp_path: Path, kernel: JupyterKernel) -> None:
    asked: list[int | None] = []

    class Flaky(Compactor):
        def prepare(
            self, session: str, *, reason: str, focus: str | None, keep_recent_tokens: int | None
        ) -> dict[str, Any] | None:
            asked.append(keep_recent_tokens)
            if len(asked) <= 3:
                raise RuntimeError("summarizer timed out")
            return super().prepare(session, reason=reason, focus=focus, keep_recent_tokens=keep_recent_tokens)

    with ModelServer(default=LONG) as srv:
        agent, store, _ = _agent(tmp_path, srv, kernel, QUIET)
        agent.compactor = Flaky(store, None, QUIET)
        _fill(agent, 4)
        states = [agent.compact().state for _ in range(4)]
        agent.ask("one more")
        assert agent.compact().state == "placed"
    assert states == ["failed", "failed", "failed", "placed"]
    # 150 tokens, then a half, a quarter, an eighth; reset after success
    assert asked == [None, 75, 37, 18, None]
    comp = next(e for e in store.path("t") if e.kind == COMPACTION)
    assert comp.data["reason"] == "manual" and not comp.data["summary"].startswith("EMERGENCY")


def test_usage_from_before_the_newest_compaction_never_triggers(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        # over the 2000 line
        return Reply(text=LONG, usage={"prompt_tokens": 2400}) if user == "big" else LONG

    with ModelServer(_script(reply)) as srv:
        agent, store, events = _agent(tmp_path, srv, kernel, QUIET)
        _fill(agent, 2)
        agent.ask("big")
        assert agent.context_tokens()[0] > 2000  # fresh usage: the next request would compact
        assert agent.compact().state == "placed"  # ... but a manual compaction came first
        kept = store.context_path("t")
        # still in view
        assert any(e.message and e.message.get("usage", {}).get("input") == 2400 for e in kept)
        tokens, ignored = agent.context_tokens()
        assert tokens < 2000 and ignored is True  # its usage describes a context that no longer exists
        events.clear()
        assert agent.ask("next").stopped == "final"
    assert [e.data["reason"] for e in store.path("t") if e.kind == COMPACTION] == ["manual"]
    assert not any(ev.kind == "compaction_start" for ev in events)


def test_a_cell_past_the_tool_timeout_is_interrupted_and_reported(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        if msgs[-1]["role"] == "tool":
            return "it took too long"
        return Reply(tool_calls=(ToolCall("python", {"code": "import time\ntime.sleep(20)"}),))

    with ModelServer(_script(reply)) as srv:
        agent, store, _ = _agent(tmp_path, srv, kernel, QUIET, tool_timeout=0.5)
        result = agent.ask("slow")
    assert result.stopped == "final"  # the model was told and answered; the turn was not aborted
    out = [e.message for e in store.path("t") if e.role == "toolResult"][-1]
    assert out is not None and out["isError"] is True
    assert "[execution timed out after 0.5s and was interrupted]" in out["content"][0]["text"]
    assert kernel.execute("21 * 2").text == "42"


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (
            Reply.server_error("upstream exploded"),
            r"The model request failed: HTTP 500 from http://127\.0\.0\.1:\d+/v1/chat/completions: upstream "
            r"exploded",
        ),
        (
            Reply(
                status=401,
                error_message="Incorrect API key provided.",
                error_type="invalid_request_error",
                error_code="invalid_api_key",
            ),
            r"The model request failed: HTTP 401 from http://127\.0\.0\.1:\d+/v1/chat/completions: Incorrect "
            r"API key "
            r"provided\. — check the API key \(api_key=\.\.\. or \$OPENAI_API_KEY\)",
        ),
    ],
)
def test_a_failed_request_ends_the_turn_with_a_clear_error_and_is_logged(
    tmp_path: Path, kernel: JupyterKernel, fault: Reply, expected: str
) -> None:
    with ModelServer([fault]) as srv:
        agent, store, _ = _agent(tmp_path, srv, kernel, QUIET)
        with pytest.raises(TurnFailed) as failed:
            agent.ask("hello")
        result = failed.value.result
    assert result.stopped == "error" and re.fullmatch(expected, result.text), result.text
    last = store.path("t")[-1].message
    assert last is not None and last["stopReason"] == "error" and last["errorStatus"] == fault.status
    assert not [e for e in store.path("t") if e.kind == COMPACTION]  # not an overflow: nothing compacted


def test_interrupt_while_streaming_keeps_the_partial_answer_out_of_the_next_request(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    with ModelServer(default=LONG) as srv:
        agent, store, _events = _agent(tmp_path, srv, kernel, QUIET, stream=True)
        agent.on_event = lambda ev: agent.interrupt() if ev.kind == "assistant_delta" else None
        result = agent.ask("tell me about Lisbon")
        assert result.stopped == "interrupted"
        partial = store.path("t")[-1].message
        assert partial is not None and partial["stopReason"] == "aborted"
        assert 0 < len(partial["content"][0]["text"]) < len(LONG)
        agent.on_event = None
        assert agent.ask("again").stopped == "final"
        sent = srv.chat_requests[-1].messages
    assert not any(
        m["role"] == "assistant" and m.get("content") == partial["content"][0]["text"] for m in sent
    )


@pytest.mark.parametrize(("manual_fails", "placed"), [(False, ["manual"]), (True, ["requested"])])
def test_a_manual_compaction_during_the_turn_covers_the_models_request(
    tmp_path: Path, kernel: JupyterKernel, manual_fails: bool, placed: list[str]
) -> None:
    class Engine(Compactor):
        def prepare(
            self, session: str, *, reason: str, focus: str | None, keep_recent_tokens: int | None
        ) -> dict[str, Any] | None:
            if reason == "manual" and manual_fails:
                raise RuntimeError("summarizer unavailable")
            return super().prepare(session, reason=reason, focus=focus, keep_recent_tokens=keep_recent_tokens)

    def reply(user: str, msgs: list[dict[str, Any]]) -> Reply | str:
        if user == "compact now":
            return (
                "done"
                if msgs[-1]["role"] == "tool"
                else Reply(tool_calls=(ToolCall("python", {"code": REQUEST_CODE}),))
            )
        return LONG

    with ModelServer(_script(reply)) as srv:
        agent, store, events = _agent(tmp_path, srv, kernel, QUIET)
        agent.compactor = Engine(store, None, QUIET)
        _fill(agent, 3)

        def on_event(ev: AgentEvent) -> None:
            events.append(ev)
            if ev.kind == "tool_call":
                agent.compact("keep the user's focus")  # the user asks too, while the model works

        agent.on_event = on_event
        assert agent.ask("compact now").stopped == "final"
    assert [e.data["reason"] for e in store.path("t") if e.kind == COMPACTION] == placed
    covered = any(ev.kind == "compaction_dropped" and "covered" in ev.text for ev in events)
    assert covered is not manual_fails
