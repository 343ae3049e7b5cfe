"""``await agent.aask(...)`` (issue 22, item 4): ask's semantics for asyncio harnesses that run many
rollouts at once. Real parts: one ``Agent`` per rollout with its own kernel, the local model server
over HTTP, the SQLite log. Concurrency is shown by the server itself: it holds every first request
until all rollouts' requests have arrived, which only happens when the turns really overlap.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

import pytest
from jupyter_core.utils import ensure_event_loop

from ipython_compact import Agent
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

pytestmark = pytest.mark.slow

ROLLOUTS = 8
SAFETY = 120.0


def run_fresh(coro: Any) -> Any:
    """``asyncio.run`` on a thread of its own: after the browser tests, Playwright's sync API leaves
    a loop marked running on the main thread, where ``asyncio.run`` refuses to start (seen in CI)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def code(source: str) -> Reply:
    return Reply(tool_calls=(ToolCall("python", {"code": source}),))


def test_many_agents_run_their_turns_at_once_with_asks_results() -> None:
    arrived = threading.Barrier(ROLLOUTS, timeout=SAFETY)

    def reply(req: RecordedRequest) -> Reply | str:
        msgs = req.messages
        question = next(str(m["content"]) for m in msgs if m["role"] == "user")
        i = int(question.split()[-1])
        tools = [m for m in msgs if m["role"] == "tool"]
        if not tools:
            arrived.wait()  # every rollout's first request is in flight before any is answered
            return code(f"x = {i} * 2\nprint(x)")
        return f"rollout {i}: {tools[-1]['content']}"

    async def main(url: str) -> list[str]:
        agents = await asyncio.gather(
            *(Agent.acreate(model="local-model", base_url=url) for _ in range(ROLLOUTS))
        )
        try:
            results = await asyncio.gather(*(a.aask(f"rollout {i}") for i, a in enumerate(agents)))
            return [f"{r.stopped} {r.text}" for r in results]
        finally:
            await asyncio.gather(*(a.aclose() for a in agents))

    # jupyter_client's event loop for this thread, in this context (as after any kernel started here
    # before): threads that copy the context (asyncio.to_thread) would all share it, and fail.
    ensure_event_loop()
    with ModelServer(reply, context_window=8000) as srv:
        texts = run_fresh(main(srv.base_url))
    assert texts == [f"final rollout {i}: {2 * i}" for i in range(ROLLOUTS)]


def test_aask_raises_what_ask_raises_and_one_agent_runs_one_turn_at_a_time() -> None:
    held, release = threading.Event(), threading.Event()

    def reply(req: RecordedRequest) -> Reply | str:
        # only the first turn's request is held (the second turn's request also holds "first", as
        # history: answering it with the code too made a late run in the *second* turn look like
        # the cancelled one's, CI proof run at load ~10)
        if not held.is_set():
            held.set()
            assert release.wait(SAFETY)
            return code("print('late')")
        return "second answer"

    async def main(agent: Agent) -> tuple[str, str, str, str]:
        with pytest.raises(ValueError) as empty:
            await agent.aask("  ")
        first = asyncio.create_task(agent.aask("first"))
        assert await asyncio.to_thread(held.wait, SAFETY)
        with pytest.raises(RuntimeError) as busy:
            await agent.aask("second")
        first.cancel()  # interrupts the turn; the task ends once the turn has
        # The reply is held until the cancel has reached the turn: released earlier, the answer
        # could beat the interrupt and its code run (seen on a loaded machine).
        assert await asyncio.to_thread(agent._abort.wait, SAFETY)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await first
        again = await agent.aask("second")
        return str(empty.value), str(busy.value), again.text, agent.session

    with (
        ModelServer(reply, context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url) as agent,
    ):
        empty, busy, again, session = run_fresh(main(agent))
        results = [
            e.message["content"][0]["text"]
            for e in agent.store.path(session)
            if e.role == "toolResult" and e.message
        ]
    assert empty == "the message for the agent must be non-empty text, got '  '"
    assert busy == (
        f"agent {session!r} is already running a turn (ask/aask): one turn at a time per agent; "
        f"use one "
        "Agent per parallel rollout, or wait for the first answer"
    )
    assert again == "second answer"
    # the cancelled turn ran no code: its answer was either dropped (the interrupt was seen while
    # waiting) or logged with its call not run (the answer came in the same instant)
    assert results in ([], ["Not run: the turn was interrupted before this call."])
