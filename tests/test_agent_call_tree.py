"""The call tree of an RLM run (issue 22): one token budget for the root, its sub-agents and every
``llm_query``; a cap on how many sub-agents a run starts; data handed to a sub-agent as a kernel
variable; batched sub-calls with a concurrency cap; a sub-model; a dead server as one line.

Real parts: ``Agent`` with its own kernels (the root's and each child's), the local model server
answering over HTTP, the SQLite log in the test's data directory. The scripted model tells its
callers apart by what they send: a sub-call carries no tools; a sub-agent's conversation starts
with its task; the root's with the question. Every reply costs exactly ``COST`` tokens (the server
reports that usage), so the budget arithmetic is exact.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from ipython_compact import Agent, SessionStore
from ipython_compact.agent.events import TurnFailed
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

pytestmark = pytest.mark.slow

COST = 500
USAGE = {"prompt_tokens": 400, "completion_tokens": 100}
SAFETY = 60.0

Script = Callable[[str, int, RecordedRequest], Reply | str]


def scripted(fn: Script) -> Callable[[RecordedRequest], Reply]:
    """``fn(first user text, tool results so far, request)``; sub-calls get ``"<llm_query> " + prompt``."""

    def pick(req: RecordedRequest) -> Reply:
        msgs = req.messages
        users = [m for m in msgs if m.get("role") == "user"]
        first = str(users[0].get("content", "")) if users else ""
        if not (req.body or {}).get("tools"):
            got = fn("<llm_query> " + first, 0, req)
        else:
            got = fn(first, sum(1 for m in msgs if m.get("role") == "tool"), req)
        reply = Reply(got) if isinstance(got, str) else got
        return (
            reply
            if reply.status != 200 or reply.usage
            else Reply(reply.text, reply.tool_calls, usage=USAGE, delay=reply.delay)
        )

    return pick


def code(source: str) -> Reply:
    return Reply(tool_calls=(ToolCall("python", {"code": source}),))


def tool_texts(store: SessionStore, session: str) -> list[str]:
    return [
        e.message["content"][0]["text"] for e in store.path(session) if e.role == "toolResult" and e.message
    ]


def sessions(store: SessionStore) -> list[str]:
    return sorted(s.name for s in store.sessions())


FAN_OUT = (
    "rs = []\nfor i in range({n}):\n    try:\n        rs.append(agent_query(f'job {{i}}'))\n"
    "    except Exception as e:\n        rs.append(f'refused: {{e}}')\nprint('\\n'.join(rs))"
)


def test_sub_agents_spend_the_roots_budget_and_the_run_stops_when_it_is_gone() -> None:
    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if first.startswith("job"):
            return code(f"print({done})")  # a child that would work forever
        return code(FAN_OUT.format(n=6)) if done == 0 else "all done"

    with (
        ModelServer(scripted(reply), context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, token_budget=6 * COST, max_steps=50) as agent,
    ):
        result = agent.ask("fan out six jobs")
        status = agent.status()
        lines = tool_texts(agent.store, agent.session)[0].splitlines()
        requests = len(srv.chat_requests)
        children = [s for s in sessions(agent.store) if s.startswith(agent.session + "/")]
        with Agent(
            model="local-model",
            base_url=srv.base_url,
            token_budget=6 * COST,
            store=agent.store,
            session=agent.session,
            subcalls=False,
        ) as resumed:  # the log carries the tree's spend on
            again = resumed.ask("go on")
            resumed_tree = resumed.status()["tree"]
        after_resume = len(srv.chat_requests)
    assert again.stopped == "token_budget" and after_resume == requests  # refused before any request
    assert resumed_tree["tokens_used"] == 6 * COST
    assert result.stopped == "token_budget" and "call tree" in result.text
    assert requests == 6  # the root's first request, then five of the child's: the budget, exactly
    assert status["tree"]["tokens_used"] == 6 * COST == requests * COST  # what the server billed, all of it
    assert status["tokens_used"] == COST  # the root's own share
    assert [(a["name"], a["tokens"], a["last_stop"]) for a in status["sub_agents"]] == [
        ("sub1", 5 * COST, "token_budget")
    ]
    assert lines[0].startswith("[sub-agent sub1 stopped: token_budget]")
    assert (
        lines[1:]
        == [
            "refused: agent_query failed: RuntimeError: agent_query refused: the session's "
            "token budget is used up"
        ]
        * 5
    )
    assert children == [f"{agent.session}/sub1"]  # the refused ones left no session behind


def test_max_sub_agents_stops_a_fan_out_before_a_session_is_made() -> None:
    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if first.startswith("job"):
            return f"did {first}"
        return code(FAN_OUT.format(n=4)) if done == 0 else "done"

    with (
        ModelServer(scripted(reply), context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, max_sub_agents=2) as agent,
    ):
        assert agent.ask("fan out four jobs").stopped == "final"
        lines = tool_texts(agent.store, agent.session)[0].splitlines()
        children = [s for s in sessions(agent.store) if s.startswith(agent.session + "/")]
        started = agent.status()["tree"]["sub_agents_started"]
    assert lines[:2] == ["did job 0", "did job 1"]
    assert (
        lines[2:]
        == [
            "refused: agent_query failed: RuntimeError: sub-agent 'sub3' was not started: this "
            "run "
            "already started 2 sub-agents, its limit (max_sub_agents=2); give the task to an "
            "existing "
            "sub-agent by name, or do it with llm_query"
        ]
        * 2
    )
    assert children == [f"{agent.session}/sub1", f"{agent.session}/sub2"] and started == 2


def test_agent_query_places_its_context_in_the_childs_kernel() -> None:
    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if first.startswith("count"):
            return (
                code("print(len(context), context.count('L'))")
                if done == 0
                else (f"child saw: {req.messages[-1]['content']}")
            )
        if done == 0:
            return code(
                "data = 'L' * 1000 + 'x' * 199_000\nprint(agent_query('count the Ls in context', "
                "context=data))"
            )
        return "done"

    with (
        ModelServer(scripted(reply), context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url) as agent,
    ):
        assert agent.ask("delegate with data").stopped == "final"
        texts = tool_texts(agent.store, agent.session)
        child_first = next(r for r in srv.chat_requests if "count the Ls" in str(r.messages))
    assert texts == ["child saw: 200000 1000"]
    user = next(m for m in child_first.messages if m["role"] == "user")["content"]
    assert (
        "count the Ls in context" in user and ("`context` holds the context: str, 200,000 characters") in user
    )
    assert len(user) < 1500  # the data stayed in the kernels


def test_a_task_too_large_for_the_childs_window_is_refused_before_any_request() -> None:
    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if done == 0:
            return code(
                "try:\n    agent_query('summarize: ' + 'word ' * 40_000)\nexcept Exception as e:\n   "
                " print(e)\n"
                "try:\n    llm_query('word ' * 40_000)\nexcept Exception as e:\n    print(e)"
            )
        return "done"

    with (
        ModelServer(scripted(reply), context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url) as agent,
    ):
        assert agent.ask("delegate a huge task").stopped == "final"
        text, prompt = tool_texts(agent.store, agent.session)[0].splitlines()
        requests = len(srv.chat_requests)
        children = [s for s in sessions(agent.store) if s.startswith(agent.session + "/")]
    assert text.startswith(
        "agent_query failed: ValueError: sub-agent task refused before any request: it is 200,011 characters"
    )
    assert "agent_query(task, context=data)" in text
    assert prompt.startswith(
        "llm_query failed: ValueError: llm_query prompt refused before any request: it is 200,000 characters"
    )
    assert prompt.endswith("split it and send the pieces with llm_query_batched.")
    assert requests == 2 and children == []  # the root's two requests; no child, no child session


def test_llm_query_batched_answers_in_order_with_failures_per_item_and_a_concurrency_cap() -> None:
    cond = threading.Condition()
    state = {"in_flight": 0, "peak": 0, "done": 0}
    prompts = [f"p{i}" for i in range(6)]

    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if first.startswith("<llm_query>"):
            prompt = first.removeprefix("<llm_query> ")
            with cond:
                state["in_flight"] += 1
                state["peak"] = max(state["peak"], state["in_flight"])
                cond.notify_all()
                # hold until a second call is in flight (or none can come): a cap above 2 shows as a peak
                # above 2
                assert cond.wait_for(
                    lambda: state["in_flight"] >= 2 or state["done"] + state["in_flight"] == 6, SAFETY
                )
                state["in_flight"] -= 1
                state["done"] += 1
                cond.notify_all()
            if prompt == "p3":
                return Reply(status=400, error_message="bad prompt p3", error_type="invalid_request_error")
            return f"answer to {prompt} from {(req.body or {}).get('model')}"
        if done == 0:
            return code(
                f"rs = llm_query_batched({prompts!r}, model='small-model')\n"
                "print([getattr(r, 'failed', False) for r in rs])\nprint('\\n'.join(rs))"
            )
        return "done"

    with (
        ModelServer(scripted(reply), context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, max_concurrent_subcalls=2) as agent,
    ):
        assert agent.ask("batch").stopped == "final"
        lines = tool_texts(agent.store, agent.session)[0].splitlines()
        status = agent.status()
    assert lines[0] == "[False, False, False, True, False, False]"
    assert lines[1:4] == [f"answer to p{i} from small-model" for i in range(3)]
    assert lines[4].startswith("[llm_query item 3 failed: the model server http://127.0.0.1:")
    assert ("refused the request for model 'small-model' with HTTP 400") in lines[
        4
    ] and "bad prompt p3" in lines[4]
    assert lines[5:] == [f"answer to p{i} from small-model" for i in (4, 5)]
    assert state["peak"] == 2 and status["subcalls"] == 6
    assert status["tree"]["tokens_used"] == 2 * COST + 5 * COST  # the root's two requests and five answers


def test_a_server_that_dies_while_llm_query_waits_is_one_line_in_the_cell() -> None:
    holder: dict[str, Any] = {}

    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if first.startswith("<llm_query>"):
            threading.Thread(target=holder["srv"].stop).start()  # dies while this call waits
            return Reply.hang(SAFETY)
        return code("print(llm_query('anything'))") if done == 0 else "done"

    srv = ModelServer(scripted(reply), context_window=8000).start()
    holder["srv"] = srv
    url = srv.base_url
    try:
        with Agent(model="local-model", base_url=url) as agent:
            with pytest.raises(TurnFailed) as failed:
                agent.ask("sub-call while the server dies")
            result = failed.value.result
            texts = tool_texts(agent.store, agent.session)
    finally:
        srv.stop()
    assert result.stopped == "error"  # the root's next request cannot reach the server either
    assert len(texts) == 1 and "\n" not in texts[0] and "Traceback" not in texts[0]  # one line, no frames
    assert texts[0].startswith(
        f"SubcallError: llm_query failed: the model server {url.rstrip('/')} did not answer ("
    )
    # the cause, in the caller's words
    assert "Connection refused" in texts[0] or "Connection error" in texts[0]
    assert texts[0].endswith(
        ". It may be down or restarting: retry this call later, or carry on without "
        "sub-calls and end with FINAL(answer) from what you have."
    )


def test_agent_query_batched_runs_sub_agents_with_their_contexts_in_order() -> None:
    def reply(first: str, done: int, req: RecordedRequest) -> Reply | str:
        if first.startswith("measure"):
            return (
                code("print(len(context))")
                if done == 0
                else f"{first.split()[1]}={req.messages[-1]['content']}"
            )
        if done == 0:
            return code(
                "rs = agent_query_batched(['measure a', 'measure b', '  '], contexts=['x' * 10, 'y' "
                "* 20, None])\n"
                "print([getattr(r, 'failed', False) for r in rs])"
            )
        if done == 1:
            return code(
                "rs = agent_query_batched(['measure a', 'measure b'], contexts=['x' * 10, 'y' * "
                "20])\nprint(rs)"
            )
        return "done"

    with (
        ModelServer(scripted(reply), context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, max_concurrent_subcalls=2) as agent,
    ):
        assert agent.ask("two things at once").stopped == "final"
        texts = tool_texts(agent.store, agent.session)
        status = agent.status()
    # checked in the kernel, nothing sent
    assert "TypeError: agent_query needs a non-empty str task" in texts[0]
    assert texts[1] == "['a=10', 'b=20']"
    assert sorted((a["name"], a["tokens"]) for a in status["sub_agents"]) == [
        ("sub1", 2 * COST),
        ("sub2", 2 * COST),
    ]
