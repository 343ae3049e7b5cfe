"""``llm_query`` usage under parallel sub-calls (issue 17, minor): each call is charged what the
server reported for that very call, however many threads ask at once.

Real parts: the openai client against the local model server, which holds every request until all
16 have arrived (a barrier, so the calls surely overlap), and a real SQLite log.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

from ipython_compact import SessionStore
from ipython_compact.agent.model_caller import ModelCaller
from ipython_compact.agent.model_resolution import make_client
from ipython_compact.agent.rlm import RlmBridge
from ipython_compact.agent.session_log import SessionLog
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply

THREADS = 16


def test_parallel_llm_queries_are_each_charged_their_own_usage(tmp_path: Path) -> None:
    arrived = threading.Barrier(THREADS, timeout=60)

    def answer(req: RecordedRequest) -> Reply:
        arrived.wait()  # every call is in flight before any is answered
        return Reply("ok", usage={"prompt_tokens": 10, "completion_tokens": 5})

    store = SessionStore(tmp_path / "sessions.db")
    store.create_session("s")
    charged: list[int] = []
    lock = threading.Lock()

    def spent(tokens: int) -> None:
        with lock:
            charged.append(tokens)

    with ModelServer(answer, context_window=8000) as srv:
        bridge = RlmBridge(
            SessionLog(store, "s"),
            ModelCaller(make_client(srv.base_url, None), tools=()),
            current=SimpleNamespace(model="local-model", provider="openai"),
            registry=None,
            budget_left=lambda: None,
            spent=spent,
        )
        threads = [threading.Thread(target=bridge.llm_query, args=(f"question {i}",)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert charged == [15] * THREADS
