"""``FINAL``/``FINAL_VAR`` hand-over from a real kernel: bounded, validated, and never lost silently.

Why: the final answer travels from the kernel to the host through one silent expression. A huge
value must not be carried whole (it timed the hand-over out, or landed whole in the log), and a
reply the host cannot read must reach the model as an error instead of escaping ``ask`` (issue 17,
items 5 and 9). Real kernel, real model server, real SQLite log.
"""

from __future__ import annotations

from typing import Any

import pytest

from ipython_compact import Agent, SessionStore
from ipython_compact.agent.events import AgentEvent
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

pytestmark = pytest.mark.slow


def code(source: str) -> Reply:
    return Reply(tool_calls=(ToolCall("python", {"code": source}),))


def steps(*replies: Reply | str) -> Any:
    """The model's answers, one per request, by how many tool results it has seen."""

    def pick(req: RecordedRequest) -> Reply | str:
        done = sum(1 for m in req.messages if m.get("role") == "tool")
        return replies[done] if done < len(replies) else "no more steps"

    return pick


def tool_texts(store: SessionStore, session: str) -> list[str]:
    return [
        e.message["content"][0]["text"] for e in store.path(session) if e.role == "toolResult" and e.message
    ]


def test_final_var_of_a_large_value_is_bounded_and_the_whole_value_stays_in_the_kernel() -> None:
    size = 60_000
    script = steps(
        code(f"answer = 'H' * 1000 + 'M' * {size - 2000} + 'T' * 1000\nFINAL_VAR('answer')"),
    )
    with (
        ModelServer(script, context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, final_answer_chars=3000) as agent,
    ):
        result = agent.ask("make a big answer")
        finals = [e for e in agent.store.path(agent.session) if e.data.get("custom_type") == "final_answer"]
        kept = agent.kernel.evaluate({"n": "len(answer)"})
    assert result.stopped == "final"
    assert len(result.text) < 3400 and result.text.startswith("H" * 1000)
    assert result.text.rstrip().splitlines()[-1] == (
        f"[final answer cut: {size:,} characters in all; the whole value is the kernel variable `answer`]"
    )
    assert "T" * 500 in result.text
    assert len(finals) == 1 and finals[0].data["answer"] == result.text  # the log holds the bounded text
    assert finals[0].data["chars"] == size and finals[0].data["cut"] is True
    assert kept == {"n": size}


def test_final_of_long_text_keeps_it_in_the_kernel_as_final_answer() -> None:
    script = steps(code("FINAL('x' * 5000)"))
    with (
        ModelServer(script, context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, final_answer_chars=1000) as agent,
    ):
        result = agent.ask("a long final")
        kept = agent.kernel.evaluate({"n": "len(_final_answer)"})
    assert result.stopped == "final" and len(result.text) < 1300
    assert "the whole value is the kernel variable `_final_answer`" in result.text
    assert kept == {"n": 5000}


def test_a_final_answer_within_the_bound_is_whole() -> None:
    script = steps(code("answer = 'y' * 900\nFINAL_VAR('answer')"))
    with (
        ModelServer(script, context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, final_answer_chars=1000) as agent,
    ):
        result = agent.ask("a short final")
    assert (result.stopped, result.text) == ("final", "y" * 900)


def test_final_answer_chars_must_be_positive() -> None:
    with ModelServer("x", context_window=8000) as srv, pytest.raises(ValueError, match="final_answer_chars"):
        Agent(model="local-model", base_url=srv.base_url, final_answer_chars=10, subcalls=False)


def test_an_unreadable_final_reply_is_an_error_the_model_sees_and_the_turn_ends() -> None:
    events: list[AgentEvent] = []
    forge = (
        "import ipython_compact.agent.rlm_kernel as k\n"
        "k.take_final_json = lambda *a, **kw: '{not json'\n"
        "FINAL('42')"
    )
    script = steps(code(forge), "I could not hand over the answer")
    with (
        ModelServer(script, context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, on_event=events.append) as agent,
    ):
        result = agent.ask("answer")
        texts = tool_texts(agent.store, agent.session)
        second = srv.chat_requests[1].messages if len(srv.chat_requests) > 1 else []
    assert (result.stopped, result.text) == ("final", "I could not hand over the answer")
    assert "final answer could not be collected" in texts[0] and "not JSON" in texts[0]
    assert any("final answer could not be collected" in str(m.get("content")) for m in second)
    assert [e.kind for e in events].count("turn_end") == 1
    assert any(e.kind == "error" and "final answer could not be collected" in e.text for e in events)


@pytest.mark.parametrize(
    "reply", ["'[1, 2]'", "'{\"answer\": 7}'", "None", '\'{"answer": "a", "source": 3}\'']
)
def test_a_final_reply_of_the_wrong_shape_is_reported(reply: str) -> None:
    forge = (
        "import ipython_compact.agent.rlm_kernel as k\n"
        f"k.take_final_json = lambda *a, **kw: {reply}\n"
        "FINAL('42')"
    )
    script = steps(code(forge), "gave up")
    with (
        ModelServer(script, context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url) as agent,
    ):
        result = agent.ask("answer")
        texts = tool_texts(agent.store, agent.session)
    assert (result.stopped, result.text) == ("final", "gave up")
    assert "final answer could not be collected" in texts[0]


@pytest.mark.parametrize(
    "report", ['\'{"ok": true, "skipped": 5}\'', '\'{"ok": true, "skipped": [[1]]}\'', "'[]'"]
)
def test_an_unreadable_snapshot_report_is_a_failed_snapshot_not_a_crash(report: str, tmp_path: Any) -> None:
    forge = (
        "import ipython_compact.agent.kernel_state as s\n"
        f"s.snapshot_json = lambda *a, **kw: {report}\n"
        "print('forged')"
    )
    script = steps(code(forge), code("print('still here')"), "done")
    with (
        ModelServer(script, context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, snapshot_dir=str(tmp_path / "snaps")) as agent,
    ):
        result = agent.ask("go")
        texts = tool_texts(agent.store, agent.session)
        last = agent._supervisor.last_snapshot
    assert (result.stopped, result.text) == ("final", "done")
    assert texts == ["forged", "still here"]
    assert last is not None and last.written is False and "unreadable" in str(last.error)


def test_a_compaction_request_of_the_wrong_shape_is_ignored_with_a_notice() -> None:
    events: list[AgentEvent] = []
    forge = (
        "import ipython_compact.agent.requests as r\n"
        "r.take_json = lambda *a, **kw: '{\"instructions\": [1, 2]}'\n"
        "print('forged')"
    )
    script = steps(code(forge), "done")
    with (
        ModelServer(script, context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, on_event=events.append) as agent,
    ):
        result = agent.ask("go")
        placed = [e for e in agent.store.path(agent.session) if e.kind == "compaction"]
    assert (result.stopped, result.text) == ("final", "done")
    assert placed == []
    assert any(e.kind == "guard" and "compaction request" in e.text for e in events)
