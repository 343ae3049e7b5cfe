"""A real model in the loop: llama.cpp's server with SmolLM2-135M-Instruct (issue 33).

Why: every other model path meets servers we script ourselves. These tests start the real one
(``tests/llama_server.py``; ``make realmodel`` builds it) and assert what must hold for any model,
never the weak model's wording: the window it does not state is asked for, its overflow error is
recognised, and code it writes in its replies runs in the kernel.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path

import httpx
import openai
import pytest
from llama_server import llama_server

from ipython_compact import Agent
from ipython_compact.agent.events import AgentEvent, TurnFailed
from ipython_compact.agent.fenced_code import reply_blocks
from ipython_compact.agent.model_resolution import ModelServerError
from ipython_compact.cli.demo_transcript import TranscriptGenerator
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.drift import extract_identifiers
from ipython_compact.core.entries import MESSAGE, text_of_content, tool_calls_of
from ipython_compact.core.overflow import is_overflow_text
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.summary_judge import judge_summary
from ipython_compact.store import SessionStore
from ipython_compact.summarizers.openai_summarizer import OpenAISummarizer
from ipython_compact.testing.llama_server import LlamaServer

pytestmark = [pytest.mark.realmodel, pytest.mark.slow, pytest.mark.timeout(900)]

QUESTIONS = (
    "Use Python to compute 17 * 23.",
    "Use Python to compute the sum of the numbers from 1 to 100.",
    "Use Python to compute 2 ** 10.",
    "Use Python to compute the length of the string 'compaction'.",
)


def test_the_server_states_no_window_and_the_agent_asks_for_one(llama: LlamaServer) -> None:
    with pytest.raises(ModelServerError, match="context_window"):
        Agent(model=llama.alias, base_url=llama.base_url, subcalls=False)


def test_a_prompt_over_the_window_gets_an_error_the_overflow_path_recognises(llama: LlamaServer) -> None:
    client = openai.OpenAI(base_url=llama.base_url, api_key="none", max_retries=0)
    big = "1 2 3 4 5 6 7 8 9 " * 1000  # one token per digit and per space: far over 4,096
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=llama.alias, messages=[{"role": "user", "content": big}], max_tokens=5
        )
    assert caught.value.code == "context_length_exceeded"
    assert is_overflow_text(caught.value.message)


def test_code_the_model_writes_in_its_replies_runs_in_the_kernel(llama: LlamaServer) -> None:
    """Whatever the model writes, every runnable block of a reply without a tool call runs before the
    next reply, each exactly once (whether it writes any is the model's doing: the bench
    ``bench/bench_realmodel_agent.py`` counts that, and the grammar test below makes one)."""
    events: list[AgentEvent] = []
    with Agent(
        model=llama.alias,
        base_url=llama.base_url,
        context_window=llama.n_ctx,
        max_steps=2,
        request_timeout=600,  # a long reply on 2 loaded cores takes minutes (seen: 4)
        subcalls=False,
        on_event=events.append,
    ) as agent:
        for question in QUESTIONS:
            agent.ask(question)
        entries = agent.store.path(agent.session)
    ran = [e for e in entries if e.data.get("custom_type") == "fenced_code"]
    replies = [
        i
        for i, e in enumerate(entries)
        if e.kind == MESSAGE and e.message and e.message.get("role") == "assistant"
    ]
    assert len(replies) >= len(QUESTIONS)
    # every reply that held a runnable block (and no tool call) had it run before the next reply
    for n, at in enumerate(replies):
        blocks = reply_blocks(entries[at].message)
        until = replies[n + 1] if n + 1 < len(replies) else len(entries)
        outputs = [e for e in entries[at:until] if e.data.get("custom_type") == "fenced_code"]
        expected = [] if tool_calls_of(entries[at].message) else [b.code for b in blocks]
        assert [e.data["details"]["code"] for e in outputs] == expected, entries[at].message
    assert sum(e.kind == "tool_call" for e in events) >= len(ran)


class _GrammarTransport(httpx.HTTPTransport):
    """Adds llama.cpp's ``grammar`` to every chat request: the server then lets the model write only
    replies of that shape, whatever the model (it still picks the digits)."""

    def __init__(self, grammar: str) -> None:
        super().__init__()
        self.grammar = grammar

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chat/completions"):
            body = json.loads(request.read())
            body["grammar"] = self.grammar
            headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
            request = httpx.Request(request.method, request.url, headers=headers, json=body)
        return super().handle_request(request)


#: A sentence, then a ```python block printing a product of two numbers, then nothing.
PRODUCT_REPLY = r"""
root ::= "I will compute it.\n```python\nprint(" num " * " num ")\n```\n"
num ::= [1-9] [0-9]? [0-9]?
"""


def test_a_reply_the_server_shapes_as_prose_and_a_python_block_runs_in_the_kernel(
    llama: LlamaServer,
) -> None:
    transport = _GrammarTransport(PRODUCT_REPLY)
    client = openai.OpenAI(
        base_url=llama.base_url, api_key="none", max_retries=0, http_client=httpx.Client(transport=transport)
    )
    with Agent(
        client=client, model=llama.alias, context_window=llama.n_ctx, max_steps=2, subcalls=False
    ) as agent:
        result = agent.ask(QUESTIONS[0])
        entries = agent.store.path(agent.session)
    ran = [e.data["details"] for e in entries if e.data.get("custom_type") == "fenced_code"]
    assert len(ran) == 2 and result.stopped == "step_limit"  # each reply's block ran, once
    for details in ran:
        a, b = map(int, re.findall(r"\d+", details["code"]))
        assert details["output"].strip() == str(a * b) and not details["is_error"], details


def test_a_compaction_through_the_model_never_stores_a_summary_poorer_than_the_offline_one(
    llama: LlamaServer, tmp_path: Path
) -> None:
    settings = CompactionSettings(keep_recent_tokens=300, reserve_tokens=1000)
    stores = [SessionStore(tmp_path / f"{name}.db") for name in ("model", "offline")]
    messages = [m for round_ in TranscriptGenerator(7).rounds(8) for m in round_]
    for store in stores:
        store.create_session("s")
        store.append_many("s", [("message", {"message": m}) for m in messages])
    summarizer = OpenAISummarizer(model=llama.alias, base_url=llama.base_url, api_key="none", timeout=600)
    started = time.monotonic()
    real = Compactor(stores[0], summarizer, settings).compact("s", reason="threshold")
    seconds = time.monotonic() - started
    offline = Compactor(stores[1], settings=settings).compact("s", reason="threshold")
    facts = [v for m in messages for _cls, v in extract_identifiers(text_of_content(m.get("content")))]
    judged = real.details["calls"][0]["judged"]
    assert judged["action"] in ("kept", "retried", "merged", "replaced"), judged
    verdict = judge_summary(real.summary, offline.summary, facts)
    assert verdict.code in ("ok",), (verdict, judged)  # never empty, looping or poorer than offline
    print(f"compaction through the model: {seconds:.1f} s, {judged['action']}: {judged['why']}")


def readings(seed: int, count: int = 60) -> str:
    """Numeric tool-output-like text: the density estimate makes about a quarter of SmolLM2's count."""
    return " ".join(str((seed * 7919 + i * 104729) % 1000003) for i in range(count))


def test_numeric_text_on_a_small_window_never_overflows_because_of_an_estimate() -> None:
    """Every request's estimate is the server's own count (its tokenize route), so a request the
    agent believed fits is never refused; a refusal can only be one it already knew was over."""
    server = llama_server(2048)
    believed: list[int] = []
    box: list[Agent] = []

    def on_event(event: AgentEvent) -> None:
        if event.kind == "request":  # just before it goes out: what the agent believes it sends
            believed.append(box[0].context_tokens()[0])

    with Agent(
        model=server.alias,
        base_url=server.base_url,
        context_window=server.n_ctx,
        max_steps=1,
        subcalls=False,
        fenced_code=False,
        on_event=on_event,
    ) as agent:
        box.append(agent)
        assert agent._learner.probed.wait(120)  # the probe is an event; nothing else waits for it
        assert agent.status()["estimate"] == "tokenizer (/extras/tokenize/count)"
        for seed in range(4):
            with contextlib.suppress(TurnFailed):  # a checkpoint too big for the window (see below)
                agent.ask(f"Sensor readings: {readings(seed)}. Reply with one word.")
        entries = agent.store.entries(agent.session)
    counted: list[int] = []
    for e in entries:
        if e.kind != MESSAGE or not e.message or e.message.get("role") != "assistant":
            continue
        refused = re.search(r"requested (\d+) tokens", str(e.message.get("errorMessage") or ""))
        counted.append(int(refused.group(1)) if refused else int(e.message["usage"]["input"]))
    assert len(counted) == len(believed) >= 4
    for estimate, real in zip(believed, counted, strict=True):
        assert abs(estimate - real) <= 0.05 * real + 16, (believed, counted)  # density: ~4x under
        assert real <= server.n_ctx or estimate > server.n_ctx, (believed, counted)
    assert sum(e.kind == "compaction" for e in entries) >= 1  # the window was really filled


def test_compactions_through_the_model_on_a_2048_window_are_judged(tmp_path: Path) -> None:
    """A span over the summarizer's window is summarized in pieces (never failed, never elided), and
    every checkpoint stored is judged: never empty, looping, truncated or poorer than offline."""
    server = llama_server(2048)
    settings = CompactionSettings(keep_recent_tokens=200, reserve_tokens=500)
    stores = [SessionStore(tmp_path / f"{name}.db") for name in ("model", "offline")]
    rounds = list(TranscriptGenerator(11).rounds(8))
    summarizer = OpenAISummarizer(model=server.alias, base_url=server.base_url, api_key="none", timeout=600)
    compactors = [Compactor(stores[0], summarizer, settings), Compactor(stores[1], settings=settings)]
    for store in stores:
        store.create_session("s")
    outcomes: list[tuple[str, int, float]] = []
    for batch in (rounds[:5], rounds[5:]):  # two compactions, the second updating the first
        messages = [m for round_ in batch for m in round_]
        for store in stores:
            store.append_many("s", [("message", {"message": m}) for m in messages])
        started = time.monotonic()
        real = compactors[0].compact("s", reason="threshold")
        seconds = time.monotonic() - started
        offline = compactors[1].compact("s", reason="threshold")
        facts = [v for m in messages for _cls, v in extract_identifiers(text_of_content(m.get("content")))]
        call = real.details["calls"][0]
        judged = call["judged"]
        assert judged["action"] in ("kept", "retried", "merged", "replaced"), judged
        verdict = judge_summary(real.summary, offline.summary, facts)
        assert verdict.code == "ok", (verdict, judged)
        outcomes.append((f"{judged['action']}: {judged['why']}", int(call.get("pieces", 1)), seconds))
    print("compactions on a 2,048-token window:", outcomes)
