"""Our own agent as an RLM, end to end: a real kernel started by ``Agent`` itself, the local model
server (scripted answers over real HTTP), a real SQLite log in the test's data directory.

The scripted model tells its callers apart by what they send: a sub-call (``llm_query``) carries
no tools; a sub-agent's conversation starts with its task; the parent's with the question.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ipython_compact import Agent, CompactionSettings, SessionStore
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

pytestmark = pytest.mark.slow

Script = Callable[[str, int, RecordedRequest], Reply | str]


def scripted(fn: Script) -> Callable[[RecordedRequest], Reply | str]:
    """``fn(first user text, tool results so far, request)``; sub-calls get ``fn("<llm_query> " + prompt, 0,
    req)``."""

    def pick(req: RecordedRequest) -> Reply | str:
        msgs = req.messages
        users = [m for m in msgs if m.get("role") == "user"]
        first = str(users[0].get("content", "")) if users else ""
        if not (req.body or {}).get("tools"):
            return fn("<llm_query> " + first, 0, req)
        return fn(first, sum(1 for m in msgs if m.get("role") == "tool"), req)

    return pick


def code(source: str) -> Reply:
    return Reply(tool_calls=(ToolCall("python", {"code": source}),))


def tool_texts(store: SessionStore, session: str) -> list[str]:
    return [
        e.message["content"][0]["text"] for e in store.path(session) if e.role == "toolResult" and e.message
    ]


def test_defaults_start_and_stop_a_kernel_and_read_the_window_from_the_models_card(compact_dir: Path) -> None:
    with ModelServer(default="hello", context_window=6000) as srv:
        agent = Agent(model="local-model", base_url=srv.base_url)
        kernel = agent.kernel
        try:
            assert agent.context_window == 6000 and agent.session.startswith("agent-")
            assert kernel.is_alive() and agent.ask("hi").text == "hello"
            assert Path(agent.store.db_path).parent == compact_dir  # the data directory's database
        finally:
            agent.close()
        assert not kernel.is_alive()


@pytest.mark.parametrize(
    ("card", "window"), [({"context_length": 5000}, 5000), ({"meta": {"context_window": 7000}}, 7000)]
)
def test_other_card_keys_give_the_window(card: dict[str, Any], window: int) -> None:
    from ipython_compact.agent.model_resolution import window_from_card

    assert window_from_card({"id": "m", **card}) == window


def test_no_window_anywhere_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IPYTHON_COMPACT_CONTEXT_WINDOW", raising=False)
    with (
        ModelServer(default="x") as srv,
        pytest.raises(
            ValueError,
            match=r"pass context_window=\.\.\. or "
            r"set",
        ),
    ):
        Agent(model="local-model", base_url=srv.base_url, subcalls=False)


def test_context_lives_in_the_kernel_and_final_var_ends_the_run() -> None:
    big = "Lisbon " * 20_000 + "NEEDLE " + "Porto " * 20_000

    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if done == 0:
            return code("pos = context.index('NEEDLE')\nprint(pos)")
        if done == 1:
            return code("answer = f'needle at {pos}'\nFINAL_VAR('answer')\nprint('after FINAL_VAR')")
        return "should not be asked again"

    with (
        ModelServer(scripted(reply), context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url) as agent,
    ):
        result = agent.ask("Where is the needle?", context=big)
        sent = srv.chat_requests[0].messages
        finals = [e for e in agent.store.path(agent.session) if e.data.get("custom_type") == "final_answer"]
    assert (result.stopped, result.text) == ("final", f"needle at {big.index('NEEDLE')}")
    user = next(m for m in sent if m["role"] == "user")["content"]
    assert f"`context` holds the context: str, {len(big):,} characters" in user and len(user) < 1000
    assert len(srv.chat_requests) == 2  # the run ended after the cell with FINAL_VAR
    assert [f.data["source"] for f in finals] == ["FINAL_VAR(answer)"]


def test_final_of_an_undefined_variable_is_an_error_the_model_sees() -> None:
    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        return code("FINAL_VAR('missing')") if done == 0 else code("FINAL(6 * 7)") if done == 1 else "no"

    with (
        ModelServer(scripted(reply), context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url) as agent,
    ):
        result = agent.ask("answer")
        texts = tool_texts(agent.store, agent.session)
    assert (result.stopped, result.text) == ("final", "42")
    assert "NameError" in texts[0] and "no variable named 'missing'" in texts[0]


def test_llm_query_from_code_asks_the_model_without_tools() -> None:
    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if first.startswith("<llm_query>"):
            return "Porto" if "second city" in first else "?"
        return code("print(llm_query('Name the second city of Portugal.'))") if done == 0 else "done"

    with (
        ModelServer(scripted(reply), context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, token_budget=1_000_000) as agent,
    ):
        assert agent.ask("use a sub-call").stopped == "final"
        sub = [r for r in srv.chat_requests if not (r.body or {}).get("tools")]
        status = agent.status()
        texts = tool_texts(agent.store, agent.session)
    assert texts == ["Porto"]
    assert len(sub) == 1 and sub[0].messages == [
        {"role": "user", "content": "Name the second city of Portugal."}
    ]
    assert status["subcalls"] == 1 and status["tokens_used"] > 0


def test_sub_agents_are_child_sessions_bounded_and_survive_compaction_and_restarts() -> None:
    long_answer = "The answer is 7. " + "detail " * 2000

    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if first.startswith("count"):  # the sub-agent's own conversation
            return code("x = 7\nprint(x)") if done == 0 else long_answer
        steps = [
            "r = agent_query('count the widgets', name='counter')\nprint(len(r))\n"
            "print('characters of output omitted' in r, r.startswith('The answer is 7.'))",
            "import os\nos._exit(1)",
            "print(sub_agents())",
        ]
        return code(steps[done]) if done < len(steps) else "finished"

    with (
        ModelServer(scripted(reply), context_window=8000) as srv,
        Agent(
            model="local-model",
            base_url=srv.base_url,
            sub_agent_result_chars=1000,
            settings=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=100, background_tokens=0),
        ) as agent,
    ):
        assert agent.ask("delegate the count").stopped == "final"
        store, session = agent.store, agent.session
        texts = tool_texts(store, session)
        link = store.path(f"{session}/counter")[0]
        assert agent.compact().state == "placed"
        notice = [e for e in store.path(session) if e.kind == "kernel_state"][-1].data["content"]
        assert agent.restarts == 1
        child_answer = [e for e in store.path(f"{session}/counter") if e.role == "assistant"][-1]
    assert int(texts[0].splitlines()[0]) < 1100  # bounded: head + tail + the cut stated
    assert texts[0].splitlines()[1] == "True True"
    assert link.data["custom_type"] == "parent_link" and link.data["parent_session"] == session
    assert link.data["name"] == "counter" and link.data["task"] == "count the widgets"
    # whole
    assert child_answer.message is not None and child_answer.message["content"][0]["text"] == long_answer
    assert "'name': 'counter'" in texts[2]  # listed after the parent's kernel was restarted
    assert "<sub_agents>" in notice and "counter" in notice  # and after compaction


def test_a_long_output_reaches_the_context_as_head_and_tail_and_is_recallable() -> None:
    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if done == 0:
            return code("print('A' * 20000 + 'MIDDLE' + 'Z' * 20000)")
        if done == 1:
            cut = req.messages[-1]["content"]
            entry = cut.split("the whole output is entry ")[1].split(";")[0]
            return code(f"full = recall({entry!r})\nprint(len(full), 'MIDDLE' in full)")
        return "done"

    with (
        ModelServer(scripted(reply), context_window=16000) as srv,
        Agent(model="local-model", base_url=srv.base_url, max_output_chars=3000) as agent,
    ):
        assert agent.ask("print a lot").stopped == "final"
        texts = tool_texts(agent.store, agent.session)
        whole = [e for e in agent.store.path(agent.session) if e.data.get("custom_type") == "tool_output"]
    assert len(texts[0]) < 3300 and "MIDDLE" not in texts[0]
    assert "characters of output omitted" in texts[0] and "40,006 characters in all" in texts[0]
    assert len(whole) == 1 and len(whole[0].data["text"]) == 40_006
    assert texts[1] == "40006 True"


def test_the_token_budget_ends_the_run_with_its_reason() -> None:
    with (
        ModelServer(default=code("print(1)"), context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, token_budget=1500, max_steps=50) as agent,
    ):
        result = agent.ask("loop")
    assert (
        result.stopped == "token_budget" and "token budget" in result.text and "(token_budget)" in result.text
    )
    assert 1 <= len(srv.chat_requests) < 10


def test_the_compaction_cap_ends_the_run_with_its_reason() -> None:
    settings = CompactionSettings(reserve_tokens=1500, keep_recent_tokens=100, background_tokens=0)
    with (
        ModelServer(default=code("print('x' * 1500)"), context_window=3000) as srv,
        Agent(
            model="local-model", base_url=srv.base_url, max_compactions=1, max_steps=40, settings=settings
        ) as agent,
    ):
        result = agent.ask("fill the window")
        placed = [e for e in agent.store.path(agent.session) if e.kind == "compaction"]
    assert result.stopped == "compaction_cap" and "max_compactions=1" in result.text
    assert len(placed) == 1


def test_parallel_agent_queries_keep_to_max_live_sub_agents() -> None:
    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if first.startswith("job"):  # a sub-agent's own conversation: answer at once
            return f"did {first}"
        if done == 0:
            return code(
                "import threading\nout = {}\n"
                "def one(i):\n    out[i] = agent_query(f'job {i}', name=f'w{i}')\n"
                "ts = [threading.Thread(target=one, args=(i,)) for i in range(3)]\n"
                "[t.start() for t in ts]; [t.join() for t in ts]\nprint(sorted(out.values()))"
            )
        return "finished"

    lock, live, peak = threading.Lock(), [0], [0]
    with (
        ModelServer(scripted(reply), context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, max_live_sub_agents=1) as agent,
    ):
        registry = agent._bridge.registry if agent._bridge is not None else None
        assert registry is not None
        make = registry.factory

        def counted(name: str, session: str) -> Any:
            child = make(name, session)
            with lock:
                live[0] += 1
                peak[0] = max(peak[0], live[0])
            close = child.close

            def closing() -> None:
                with lock:
                    live[0] -= 1
                close()

            child.close = closing  # type: ignore[method-assign]
            return child

        registry.factory = counted
        assert agent.ask("run three jobs at once").stopped == "final"
        texts = tool_texts(agent.store, agent.session)
    assert texts == ["['did job 0', 'did job 1', 'did job 2']"]
    assert peak[0] == 1
