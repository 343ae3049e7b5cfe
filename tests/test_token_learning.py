"""Estimates that learn the model's tokenizer, in the agent (issue 33, item 4).

Why: the agent decides whether the next request fits from the last usage plus estimates of what was
added since; a tokenizer that makes three times as many tokens of digits as the density estimate
expects made the agent believe it had room it did not have. These tests play such a tokenizer with
the scripted server over HTTP (its usage reports three times its own count) on a real kernel.
"""

from __future__ import annotations

from typing import Any

import pytest

from ipython_compact import Agent
from ipython_compact.agent.events import AgentEvent
from ipython_compact.agent.token_learning import TokenLearner
from ipython_compact.core.entries import Entry
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply

TRIPLE = 3


def triple_tokenizer(req: RecordedRequest) -> Reply:
    """A model whose tokenizer counts three times what the server's chars/4 estimate does."""
    return Reply("OK.", usage={"prompt_tokens": TRIPLE * req.prompt_tokens, "completion_tokens": 2})


def readings(seed: int) -> str:
    return "Readings: " + " ".join(str((seed * 7919 + i * 104729) % 1000003) for i in range(900))


@pytest.mark.slow
def test_after_one_request_the_agent_estimates_numeric_text_by_what_the_model_counted() -> None:
    estimates: list[int] = []
    agent_box: list[Agent] = []

    def on_event(event: AgentEvent) -> None:
        if event.kind == "request":  # just before the request goes out: what the agent believes
            estimates.append(agent_box[0].context_tokens()[0])

    with (
        ModelServer(triple_tokenizer, context_window=None) as srv,
        Agent(model="local-model", base_url=srv.base_url, context_window=200_000, on_event=on_event) as agent,
    ):
        agent_box.append(agent)
        assert agent.status()["estimate"] == "default (density)"
        for seed in range(3):
            agent.ask(readings(seed))
        real = [TRIPLE * r.prompt_tokens for r in srv.requests if r.messages]
        status = agent.status()["estimate"]
    assert len(estimates) == len(real) == 3
    # from the second request on, the estimate is within 15% of what the model counted
    for believed, counted in zip(estimates[1:], real[1:], strict=True):
        assert abs(believed - counted) <= 0.15 * counted, (estimates, real)
    assert status.startswith("calibrated ×") and status.endswith("after 3 requests"), status


def test_without_an_endpoint_or_usage_the_estimate_is_the_default_and_says_so() -> None:
    learner = TokenLearner(None, "m", "density")
    message = {"role": "user", "content": "1 2 3"}
    entry = Entry(
        id="e1", parent_id=None, kind="message", timestamp="2026-01-01T00:00:00Z", data={"message": message}
    )
    assert learner.entry_tokens(entry, 5) == 5
    assert learner.describe() == "default (density)"


def test_a_server_without_a_tokenize_route_is_probed_once_and_left_calibrating() -> None:
    with ModelServer(["x"], context_window=4096) as srv:
        learner = TokenLearner(srv.base_url.removesuffix("/v1"), "m", "density", deadline=5)
        assert learner.probed.wait(30)
        posts: list[Any] = [r.path for r in srv.requests if r.method == "POST"]
    assert learner.route is None and learner.mode() == "default"
    assert posts == ["/extras/tokenize/count", "/tokenize"]
