"""A reply is bounded by the window's reserve (``Agent(reply_max_tokens="auto")``).

Found on the real model (issue 33): llama.cpp sets no reply limit of its own, SmolLM2 looped for
3,639 tokens of a 4,096 window, and every later question of the session failed with an overflow
that compaction could not mend (the reply was one message). The reserve is what compaction keeps
free for a reply, so the agent now asks for no more; a server that refuses the parameter is asked
again without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ipython_compact.agent.kernel_tool import JupyterKernel
from ipython_compact.agent.loop import Agent
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply


@pytest.fixture(scope="module")
def kernel() -> Iterator[JupyterKernel]:
    with JupyterKernel(extension=None) as k:
        yield k


def _agent(tmp_path: Path, server: ModelServer, kernel: JupyterKernel, window: int, **kw: Any) -> Agent:
    store = SessionStore(tmp_path / "s.db")
    settings = kw.pop("settings", None)
    return Agent(
        store=store,
        session="t",
        client=openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0),
        model="local-model",
        context_window=window,
        settings=settings,
        compactor=Compactor(store, None, settings) if settings else None,
        kernel=kernel,
        subcalls=False,
        **kw,
    )


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("window", "option", "sent"),
    [
        (4_096, "auto", 4_096 // 5),  # a small window: its reserve (a fifth)
        (32_768, "auto", 32_768 // 5),
        (128_000, "auto", None),  # pi's reserve (16,384) may exceed a provider's reply limit
        (4_096, None, None),
        (128_000, 2_000, 2_000),
    ],
)
def test_each_request_bounds_the_reply(
    tmp_path: Path, kernel: JupyterKernel, window: int, option: Any, sent: int | None, stream: bool
) -> None:
    with ModelServer(default="four") as srv:
        agent = _agent(tmp_path, srv, kernel, window, reply_max_tokens=option, stream=stream)
        assert agent.ask("What is 2 + 2?").text == "four"
        assert [(r.body or {}).get("max_tokens") for r in srv.chat_requests] == [sent]


def test_a_server_that_refuses_max_tokens_is_asked_again_without_it(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    def answer(req: RecordedRequest) -> Reply | str:
        if "max_tokens" in (req.body or {}):
            return Reply(
                status=400, error_message="max_tokens is too large: 819", error_type="invalid_request_error"
            )
        return "four"

    with ModelServer(answer) as srv:
        agent = _agent(tmp_path, srv, kernel, 4_096)
        assert agent.ask("What is 2 + 2?").text == "four"
        assert agent.ask("And 3 + 1?").text == "four"
        assert ["max_tokens" in (r.body or {}) for r in srv.chat_requests] == [True, False, False]


@pytest.mark.parametrize("bad", [0, -5, "big", 2.5])
def test_a_reply_cap_that_cannot_work_is_refused(tmp_path: Path, kernel: JupyterKernel, bad: Any) -> None:
    with ModelServer(default="x") as srv, pytest.raises(ValueError, match="reply_max_tokens must be"):
        _agent(tmp_path, srv, kernel, 4_096, reply_max_tokens=bad)


def test_a_window_the_settings_scale_keeps_their_reserve(tmp_path: Path, kernel: JupyterKernel) -> None:
    settings = CompactionSettings(reserve_tokens=700, keep_recent_tokens=300, background_tokens=0)
    with ModelServer(default="ok") as srv:
        agent = _agent(tmp_path, srv, kernel, 3_000, settings=settings)
        agent.ask("hi")
        assert [(r.body or {}).get("max_tokens") for r in srv.chat_requests] == [700]
