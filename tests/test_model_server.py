"""The local model server, driven through the real ``openai`` client over HTTP."""

from __future__ import annotations

import json
import time

import openai
import pytest

from ipython_compact.testing import ModelServer, RecordedRequest, Reply, ToolCall


def client(srv: ModelServer, **kw: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url, api_key="test-key", max_retries=0, **kw)  # type: ignore[arg-type]


def ask(c: openai.OpenAI, text: str = "hello") -> openai.types.chat.ChatCompletion:
    return c.chat.completions.create(model="local-model", messages=[{"role": "user", "content": text}])


def test_replies_in_order_with_usage_and_recording() -> None:
    with ModelServer(script=["one", Reply(text="two", usage={"prompt_tokens": 777})]) as srv:
        c = client(srv)
        first = ask(c, "x" * 400)
        second = ask(c, "again")
        assert first.choices[0].message.content == "one"
        assert first.choices[0].finish_reason == "stop"
        assert first.usage is not None and first.usage.prompt_tokens >= 100
        assert first.usage.completion_tokens == 1
        assert second.usage is not None and second.usage.prompt_tokens == 777
        assert second.usage.total_tokens == 777 + second.usage.completion_tokens
        assert [r.messages[0]["content"] for r in srv.chat_requests] == ["x" * 400, "again"]
        assert srv.chat_requests[0].headers["authorization"] == "Bearer test-key"
        assert srv.remaining == 0


def test_exhausted_script_is_a_clear_500() -> None:
    with ModelServer(script=["only"]) as srv:
        c = client(srv)
        ask(c)
        with pytest.raises(openai.InternalServerError, match="script exhausted"):
            ask(c)


def test_callable_script_sees_request() -> None:
    def echo(req: RecordedRequest) -> str:
        return "echo:" + str(req.messages[-1]["content"])

    with ModelServer(script=echo) as srv:
        assert ask(client(srv), "ping").choices[0].message.content == "echo:ping"


def test_models_endpoint() -> None:
    with ModelServer(model="tiny") as srv:
        assert [m.id for m in client(srv).models.list()] == ["tiny"]


def test_context_window_exceeded_is_openai_shaped() -> None:
    with ModelServer(script=["fits"], context_window=50) as srv:
        c = client(srv)
        with pytest.raises(openai.BadRequestError) as info:
            ask(c, "word " * 200)
        assert info.value.code == "context_length_exceeded"
        assert "maximum context length is 50 tokens" in str(info.value)
        assert "However, your messages resulted in" in str(info.value)
        # the oversized request consumed no scripted reply
        assert ask(c, "hi").choices[0].message.content == "fits"


@pytest.mark.parametrize(
    ("reply", "error", "fragment"),
    [
        (Reply.rate_limited(retry_after=2), openai.RateLimitError, "Rate limit"),
        (Reply.server_error(), openai.InternalServerError, "server had an error"),
        (Reply.server_error("bad gateway", status=502), openai.APIStatusError, "bad gateway"),
    ],
)
def test_error_faults(reply: Reply, error: type[Exception], fragment: str) -> None:
    with ModelServer(script=[reply]) as srv, pytest.raises(error, match=fragment):
        ask(client(srv))


def test_rate_limit_carries_retry_after() -> None:
    with ModelServer(script=[Reply.rate_limited(retry_after=3)]) as srv:
        with pytest.raises(openai.RateLimitError) as info:
            ask(client(srv))
        assert info.value.response.headers["retry-after"] == "3"


def test_hang_times_out_and_server_still_stops_quickly() -> None:
    # A stop that waited for the hanging reply would take 600 s; the bound is far from both that
    # and from what a loaded machine needs to stop a server.
    with ModelServer(script=[Reply.hang(600)]) as srv:
        c = client(srv, timeout=0.5)
        with pytest.raises(openai.APITimeoutError):
            ask(c)
        started = time.monotonic()
    assert time.monotonic() - started < 120


@pytest.mark.parametrize(
    ("reply", "finish", "content"),
    [
        (Reply.length_cut("## Goal\nhalf"), "length", "## Goal\nhalf"),
        (Reply.empty(), "stop", ""),
    ],
)
def test_shaped_replies(reply: Reply, finish: str, content: str) -> None:
    with ModelServer(script=[reply]) as srv:
        choice = ask(client(srv)).choices[0]
        assert choice.finish_reason == finish
        assert (choice.message.content or "") == content


def test_tool_calls() -> None:
    with ModelServer(script=[Reply.tool_call("run_python", {"code": "1+1"})]) as srv:
        choice = ask(client(srv)).choices[0]
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls or []
        assert len(calls) == 1
        assert calls[0].function.name == "run_python"  # type: ignore[union-attr]
        assert json.loads(calls[0].function.arguments) == {"code": "1+1"}  # type: ignore[union-attr]


def test_streaming_text_tool_calls_and_usage() -> None:
    script = [Reply(text="streamed reply text that spans chunks", tool_calls=(ToolCall("f", {"a": 1}),))]
    with ModelServer(script=script, chunk_chars=5) as srv:
        stream = client(srv).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "s"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        text, args, finish, usage = "", "", None, None
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for call in choice.delta.tool_calls or []:
                    args += (call.function.arguments or "") if call.function else ""
                finish = choice.finish_reason or finish
        assert text == "streamed reply text that spans chunks"
        assert json.loads(args) == {"a": 1}
        assert finish == "tool_calls"
        assert usage is not None and usage.prompt_tokens > 0


def test_api_key_enforced() -> None:
    with ModelServer(script=["x"], api_key="right") as srv:
        with pytest.raises(openai.AuthenticationError):
            ask(client(srv))
        ok = openai.OpenAI(base_url=srv.base_url, api_key="right", max_retries=0)
        assert ask(ok).choices[0].message.content == "x"


def test_push_extends_script() -> None:
    with ModelServer() as srv:
        srv.push("late")
        assert ask(client(srv)).choices[0].message.content == "late"


def test_stop_closes_keep_alive_connections() -> None:
    import threading

    before = threading.active_count()
    with ModelServer(script=["a", "b"]) as srv:
        c = client(srv)
        ask(c)
        ask(c)
    deadline = time.monotonic() + 3
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before


def test_a_broken_callable_script_answers_500_with_the_reason() -> None:
    def broken(req: RecordedRequest) -> str:
        raise KeyError("no reply for this")

    with (
        ModelServer(script=broken) as srv,
        pytest.raises(openai.InternalServerError, match="script raised KeyError"),
    ):
        ask(client(srv))
