"""Estimates that learn the model's tokenizer, in the agent (issue 33, item 4).

Why: the agent decides whether the next request fits from the last usage plus estimates of what was
added since; a tokenizer that makes three times as many tokens of digits as the density estimate
expects made the agent believe it had room it did not have. These tests play such a tokenizer with
the scripted server over HTTP (its usage reports three times its own count) on a real kernel.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipython_compact import Agent
from ipython_compact.agent.events import AgentEvent
from ipython_compact.agent.token_learning import TokenLearner, sent_counts
from ipython_compact.core.entries import Entry
from ipython_compact.core.tokens import estimate_entry_tokens
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


# ---------------------------------------------------------------- what a request carries besides messages
# A scripted tokenizer the density estimate matches on prose (4 characters a token), with what the
# scripted server adds to every request: the tool schemas, 4 tokens of framing per message, 3 for the
# reply primer. The learner must not read that fixed part as a tokenizer ratio (issue 33: the travel
# example's first request taught prose ×1.55, and after a compaction the estimate was 45% over).
TOOLS = json.dumps([{"type": "function", "function": {"name": "python", "description": "x" * 440}}])


def _entry(n: int, kind: str, data: dict[str, Any]) -> Entry:
    return Entry(id=f"e{n}", parent_id=f"e{n - 1}" if n else None, kind=kind, timestamp="t", data=data)


def _user(n: int, chars: int) -> Entry:
    return _entry(n, "message", {"message": {"role": "user", "content": "word " * (chars // 5)}})


def _server_count(messages: list[Entry]) -> int:
    """What the scripted server reports for a request carrying ``messages``: chars/4 of each text,
    4 per message, 3 for the primer, chars/4 of the tool schemas."""
    texts = [
        str(e.data.get("content") or (e.data.get("message") or {}).get("content") or "") for e in messages
    ]
    return sum((len(t) + 3) // 4 + 4 for t in texts) + 3 + (len(TOOLS) + 3) // 4


@pytest.mark.parametrize("second_chars", [400, 4000])
def test_the_first_request_teaches_the_fixed_overhead_not_a_tokenizer_ratio(second_chars: int) -> None:
    learner = TokenLearner(None, "m", "density", fixed_text=TOOLS)
    system = _entry(0, "system", {"content": "You are a friendly travel planner. " * 24})
    first = [system, _user(1, 100)]
    learner.learn(first, [estimate_entry_tokens(e) for e in first], _server_count(first))
    # a request with no usage anchor (the first after a compaction): every message estimated
    later = [system, _user(1, 100), _user(2, second_chars)]
    believed = learner.context(later, [estimate_entry_tokens(e) for e in later]).tokens
    assert abs(believed / _server_count(later) - 1) <= 0.05, (believed, _server_count(later))
    assert learner.calibration.ratio("prose") == pytest.approx(1.0, abs=0.05)


def test_an_older_system_baseline_kept_after_a_compaction_is_counted_once() -> None:
    old = _entry(0, "system", {"content": "Baseline. " * 80})
    question = _user(1, 200)
    compaction = _entry(2, "compaction", {"summary": "Summary. " * 40, "first_kept_entry_id": "e0"})
    new = _entry(3, "system", {"content": "Baseline. " * 80})
    path = [old, question, compaction, new, _user(4, 200)]
    counts = [estimate_entry_tokens(e) for e in path]
    assert sent_counts(path, counts) == [0, counts[1], counts[2], counts[3], counts[4]]
    learner = TokenLearner(None, "m", "density")
    assert learner.context(path, counts).tokens == sum(counts) - counts[0]


def test_a_usage_delta_of_mixed_classes_teaches_the_dominant_one_what_the_others_leave() -> None:
    learner = TokenLearner(None, "m", "density")
    learner.calibration.observe("digits", 100, 300)  # digits already known: ×3
    anchor = _entry(
        1,
        "message",
        {
            "message": {
                "role": "assistant",
                "content": "ok",
                "usage": {"input": 500, "output": 2, "totalTokens": 502},
            }
        },
    )
    numbers = _entry(2, "message", {"message": {"role": "user", "content": " ".join(["1234.5678"] * 20)}})
    prose = _user(3, 800)
    path = [_user(0, 40), anchor, numbers, prose]
    counts = [estimate_entry_tokens(e) for e in path]
    real_prose = counts[3] * 2  # this tokenizer makes twice the estimate of prose
    prompt = 502 + 3 * counts[2] + real_prose + 2 * 4
    learner.learn(path, counts, prompt)
    assert learner.calibration.ratio("prose") == pytest.approx(2.0, rel=0.05)


@pytest.mark.parametrize("renders_tools", [True, False])
def test_the_first_requests_ratio_is_provisional_and_the_first_usage_delta_replaces_it(
    renders_tools: bool,
) -> None:
    """A tokenizer making 0.7 tokens of prose per estimated one, behind a server that renders the tool
    schemas or not (llama.cpp's default chat formats do not): after one usage delta, a context with
    no anchor is estimated within 5%."""

    def server(messages: list[Entry]) -> int:
        tokens = sum(round(0.7 * estimate_entry_tokens(e)) + 4 for e in messages) + 3
        return tokens + ((len(TOOLS) + 3) // 4 if renders_tools else 0)

    learner = TokenLearner(None, "m", "density", fixed_text=TOOLS)
    path = [_entry(0, "system", {"content": "You plan trips. " * 60}), _user(1, 1200)]
    learner.learn(path, [estimate_entry_tokens(e) for e in path], server(path))
    prompt = server(path)
    usage = {"input": prompt, "output": 10, "totalTokens": prompt + 10}
    path += [
        _entry(2, "message", {"message": {"role": "assistant", "content": "x" * 40, "usage": usage}}),
        _user(3, 2000),
    ]
    learner.learn(path, [estimate_entry_tokens(e) for e in path], server(path))
    assert learner.calibration.ratio("prose") == pytest.approx(0.7, abs=0.05)
    fresh = [path[0], _user(4, 800), _user(5, 1600)]
    believed = learner.context(fresh, [estimate_entry_tokens(e) for e in fresh]).tokens
    assert abs(believed / server(fresh) - 1) <= 0.05, (believed, server(fresh))
