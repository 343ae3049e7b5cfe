"""The model caller on its own: a fake client for the shapes, the local server for real errors."""

from __future__ import annotations

import threading
from typing import Any

import openai
import pytest

from ipython_compact.agent.model_caller import ModelCaller
from ipython_compact.testing import ModelServer, Reply


class FakeCompletions:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.kwargs: list[dict[str, Any]] = []

    def create(self, **kwargs: Any) -> Any:
        self.kwargs.append(kwargs)
        return self.answer() if callable(self.answer) else self.answer


class FakeClient:
    def __init__(self, answer: Any) -> None:
        self.chat = type("Chat", (), {})()
        self.chat.completions = FakeCompletions(answer)


def _completion(text: str, total: int) -> dict[str, Any]:
    return {
        "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": total - 5, "completion_tokens": 5, "total_tokens": total},
    }


def test_an_answer_becomes_a_pi_message_and_its_usage_is_counted() -> None:
    client = FakeClient(_completion("hello", 120))
    caller = ModelCaller(client, request_timeout=9.0)
    answer = caller.call([{"role": "user", "content": "hi"}], model="m", provider="p")
    assert answer.error_text is None and answer.message is not None
    assert answer.message["content"] == [{"type": "text", "text": "hello"}]
    assert (answer.message["model"], answer.message["provider"], answer.message["usage"]["totalTokens"]) == (
        "m",
        "p",
        120,
    )
    caller.call([{"role": "user", "content": "again"}], model="m", provider="p")
    assert (caller.requests, caller.tokens) == (2, 240)
    assert client.chat.completions.kwargs[0]["timeout"] == 9.0 and client.chat.completions.kwargs[0]["tools"]


def test_an_unreadable_answer_is_an_error_not_an_exception() -> None:
    answer = ModelCaller(FakeClient({"choices": []})).call([], model="m", provider="p")
    assert (
        answer.message is None
        and answer.error_text is not None
        and ("could not be read") in answer.error_text
    )


def _chunks() -> Any:
    def gen() -> Any:
        for piece in ["one ", "two ", "three"]:
            yield {"choices": [{"delta": {"content": piece}, "finish_reason": None}]}

    return type("S", (), {"__iter__": lambda self: gen(), "close": lambda self: None})()


def test_a_stream_stopped_by_abort_keeps_what_arrived_and_says_so() -> None:
    abort = threading.Event()
    deltas: list[str] = []

    def on_delta(piece: str) -> None:
        deltas.append(piece)
        if "two" in piece:
            abort.set()  # the user interrupts while the second piece is shown

    caller = ModelCaller(FakeClient(_chunks), stream=True)
    answer = caller.call([], model="m", provider="p", abort=abort, on_delta=on_delta)
    assert answer.aborted and answer.message is not None and answer.message["stopReason"] == "aborted"
    assert deltas == ["one ", "two "] and answer.message["content"] == [{"type": "text", "text": "one two "}]


@pytest.mark.parametrize(
    ("reply", "status", "code"),
    [
        (Reply.server_error("upstream exploded"), 500, None),
        (
            Reply(
                status=400,
                error_type="invalid_request_error",
                error_code="context_length_exceeded",
                error_message="This model's maximum context length is 10 tokens.",
            ),
            400,
            "context_length_exceeded",
        ),
    ],
)
def test_http_errors_come_back_with_text_code_and_status(reply: Reply, status: int, code: str | None) -> None:
    with ModelServer([reply]) as srv:
        caller = ModelCaller(openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0))
        answer = caller.call([{"role": "user", "content": "hi"}], model="m", provider="p")
        url = f"{srv.base_url}/chat/completions"
    assert answer.message is None and (answer.error_status, answer.error_code) == (status, code)
    assert answer.error_text == f"HTTP {status} from {url}: {reply.error_message}"


def test_an_interrupt_wins_over_a_stream_that_keeps_coming() -> None:
    import queue

    from ipython_compact.agent.model_caller import _ABANDONED, _next_item

    items: queue.Queue[tuple[str, Any]] = queue.Queue()
    items.put(("chunk", "more"))
    abort = threading.Event()
    abort.set()
    assert _next_item(items, abort) is _ABANDONED
