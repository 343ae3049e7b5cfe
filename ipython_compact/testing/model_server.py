"""A local OpenAI-compatible chat server for tests, examples and users testing their own agents.

Why it exists: every layer that talks to a model (summarizers, the agent loop, the overflow state
machine) must be exercised through the real ``openai`` client over real HTTP, including the ugly
cases — rate limits, server errors, hangs, replies cut by the length limit, tool calls where text
was expected, empty text, and prompts larger than the model's window. This server plays a script
of replies and records every request it receives so tests can assert on what was sent.

Usage::

    with ModelServer(script=["first reply", Reply.rate_limited(retry_after=1), "second"]) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="test")
        ...
        assert len(srv.requests) == 3

What must hold:
- It binds 127.0.0.1 only, on an ephemeral port, and stops (including hanging handlers) on exit.
- Replies are consumed in order; a callable script chooses a reply per request instead. When a
  list script runs out the server answers 500 with a message saying so (never a silent default),
  unless ``default`` is given.
- Usage numbers are estimated from the request (prompt: characters / 4 over messages and tools,
  plus a small per-message overhead) and from the reply text, unless a reply overrides them.
- With ``context_window`` set, a prompt estimated above it gets HTTP 400 with OpenAI's
  ``context_length_exceeded`` error shape and wording; that request consumes no scripted reply.
- Standard library only (http.server in a thread), so it costs no dependency.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ModelServer", "RecordedRequest", "Reply", "ToolCall", "estimate_prompt_tokens"]

JSON = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """A function call the scripted model makes; ``arguments`` is serialised to a JSON string."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``status`` other than 200 sends an OpenAI-style error body (``error_message``/``error_type``/
    ``error_code``) with ``headers``. ``delay`` sleeps before answering (a hang when longer than the
    client's timeout). ``finish_reason`` defaults to ``"tool_calls"`` when there are tool calls,
    else ``"stop"``. ``usage`` overrides any of ``prompt_tokens``/``completion_tokens``.
    """

    text: str | None = ""
    tool_calls: Sequence[ToolCall] = ()
    finish_reason: str | None = None
    usage: Mapping[str, int] | None = None
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    error_message: str = ""
    error_type: str = "server_error"
    error_code: str | None = None
    delay: float = 0.0
    model: str | None = None

    # ---- fault constructors -------------------------------------------------------------
    @staticmethod
    def rate_limited(
        retry_after: float | None = 1.0, message: str = "Rate limit reached; try again later."
    ) -> Reply:
        headers = {} if retry_after is None else {"Retry-After": _fmt_seconds(retry_after)}
        return Reply(
            status=429,
            headers=headers,
            error_message=message,
            error_type="rate_limit_exceeded",
            error_code="rate_limit_exceeded",
        )

    @staticmethod
    def server_error(
        message: str = "The server had an error while processing your request.", status: int = 500
    ) -> Reply:
        return Reply(status=status, error_message=message, error_type="server_error", error_code=None)

    @staticmethod
    def hang(seconds: float = 30.0, text: str = "late reply") -> Reply:
        """Answer only after ``seconds``: longer than the client timeout, it looks like a hang."""
        return Reply(text=text, delay=seconds)

    @staticmethod
    def length_cut(text: str = "## Goal\nThe user wants") -> Reply:
        return Reply(text=text, finish_reason="length")

    @staticmethod
    def tool_call(
        name: str = "run_python", arguments: Mapping[str, Any] | str | None = None, text: str | None = None
    ) -> Reply:
        return Reply(
            text=text,
            tool_calls=(
                ToolCall(
                    name=name,
                    arguments=dict(arguments or {}) if not isinstance(arguments, str) else arguments,
                ),
            ),
        )

    @staticmethod
    def empty() -> Reply:
        return Reply(text="")


ReplyLike = Reply | str
Script = Sequence[ReplyLike] | Callable[["RecordedRequest"], ReplyLike]


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server received it (parsed JSON body when there was one; header names
    lower-cased)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: JSON | None
    received_at: float
    prompt_tokens: int = 0

    @property
    def messages(self) -> list[JSON]:
        msgs = (self.body or {}).get("messages")
        return list(msgs) if isinstance(msgs, list) else []


def _fmt_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text")
                total += len(text) if isinstance(text, str) else len(json.dumps(part))
            else:
                total += len(str(part))
        return total
    return 0 if content is None else len(json.dumps(content))


def estimate_prompt_tokens(body: Mapping[str, Any]) -> int:
    """Tokens a chat request would cost: characters/4 over message text, tool calls and tool
    definitions, plus 4 per message and 3 for the reply primer (OpenAI's accounting shape)."""
    chars = 0
    messages = body.get("messages")
    count = 0
    if isinstance(messages, list):
        for msg in messages:
            if not isinstance(msg, Mapping):
                continue
            count += 1
            chars += _content_chars(msg.get("content"))
            for call in msg.get("tool_calls") or []:
                chars += len(json.dumps(call))
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        chars += len(json.dumps(tools))
    return (chars + 3) // 4 + 4 * count + 3


def _estimate_text_tokens(text: str | None) -> int:
    return 0 if not text else max(1, (len(text) + 3) // 4)


class ModelServer:
    """The server. Use as a context manager, or call ``start()``/``stop()``.

    Parameters: ``script`` (replies in order, or a callable of the request), ``model`` (the id
    reported by ``/v1/models`` and in replies), ``context_window`` (tokens; None = unlimited; when
    set, ``/v1/models`` reports it as ``max_model_len``, as vLLM does),
    ``api_key`` (when set, requests must carry ``Authorization: Bearer <key>`` or get 401),
    ``default`` (reply used when a list script is exhausted), ``chunk_chars`` (streamed delta size),
    ``card`` (extra fields of the model's ``/v1/models`` entry, e.g. ``{"context_length": 8192}`` as
    other servers spell the window).
    """

    def __init__(
        self,
        script: Script = (),
        *,
        model: str = "local-model",
        context_window: int | None = None,
        api_key: str | None = None,
        default: ReplyLike | None = None,
        chunk_chars: int = 16,
        card: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.card = dict(card or {})
        self.context_window = context_window
        self.api_key = api_key
        self.default = default
        self.chunk_chars = max(1, chunk_chars)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._script_fn: Callable[[RecordedRequest], ReplyLike] | None = None
        self._queue: list[ReplyLike] = []
        if callable(script):
            self._script_fn = script
        else:
            self._queue = list(script)
        self._served = 0
        self._requests: list[RecordedRequest] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._call_seq = 0
        self._connections: set[Any] = set()

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> ModelServer:
        if self._httpd is not None:
            raise RuntimeError("ModelServer already started")
        self._stopping.clear()
        handler = _make_handler(self)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="model-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes hanging handlers
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for conn in connections:  # keep-alive connections would otherwise park handler threads
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- public state -----------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("ModelServer is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    @property
    def remaining(self) -> int:
        """Scripted replies not yet consumed (0 for a callable script)."""
        with self._lock:
            return len(self._queue)

    def push(self, *replies: ReplyLike) -> None:
        """Append replies to a list script while the server runs."""
        if self._script_fn is not None:
            raise RuntimeError("push() needs a list script, not a callable one")
        with self._lock:
            self._queue.extend(replies)

    # ---- internals --------------------------------------------------------------------------
    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(req)

    def _next_reply(self, req: RecordedRequest) -> Reply:
        if self._script_fn is not None:
            try:
                return _as_reply(self._script_fn(req))
            except Exception as exc:  # a broken script must answer, not hang the client
                return Reply.server_error(f"model server script raised {type(exc).__name__}: {exc}")
        with self._lock:
            if self._queue:
                self._served += 1
                return _as_reply(self._queue.pop(0))
            served = self._served
        if self.default is not None:
            return _as_reply(self.default)
        return Reply.server_error(
            f"model server script exhausted: all {served} scripted replies were already used"
        )

    def _next_call_id(self) -> str:
        with self._lock:
            self._call_seq += 1
            return f"call_{self._call_seq:04d}"

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when the server is stopping."""
        return self._stopping.wait(seconds) if seconds > 0 else False


def _as_reply(value: ReplyLike) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(text=value)
    raise TypeError(f"script item must be a Reply or str, got {type(value).__name__}")


def _make_handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
            return

        def setup(self) -> None:
            super().setup()
            with server._lock:
                server._connections.add(self.connection)

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                with server._lock:
                    server._connections.discard(self.connection)

        # -- plumbing
        def _send_json(self, status: int, payload: JSON, headers: Mapping[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _send_error(
            self,
            status: int,
            message: str,
            etype: str,
            code: str | None,
            param: str | None = None,
            headers: Mapping[str, str] | None = None,
        ) -> None:
            self._send_json(
                status, {"error": {"message": message, "type": etype, "param": param, "code": code}}, headers
            )

        def _read_body(self) -> tuple[JSON | None, str | None]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not raw:
                return None, None
            try:
                body = json.loads(raw)
            except ValueError as exc:
                return None, f"request body is not valid JSON: {exc}"
            if not isinstance(body, dict):
                return None, "request body must be a JSON object"
            return body, None

        def _authorised(self) -> bool:
            if server.api_key is None:
                return True
            if self.headers.get("Authorization", "") == f"Bearer {server.api_key}":
                return True
            self._send_error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
            return False

        # -- routes
        def do_GET(self) -> None:
            server._record(
                RecordedRequest(
                    "GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None, time.time()
                )
            )
            if not self._authorised():
                return
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                entry: JSON = {
                    "id": server.model,
                    "object": "model",
                    "created": 0,
                    "owned_by": "ipython-compact",
                }
                if server.context_window is not None:
                    entry["max_model_len"] = server.context_window
                entry.update(server.card)
                self._send_json(200, {"object": "list", "data": [entry]})
            else:
                self._send_error(404, f"unknown path {self.path}", "invalid_request_error", "not_found")

        def do_POST(self) -> None:
            body, problem = self._read_body()
            prompt_tokens = estimate_prompt_tokens(body) if body else 0
            req = RecordedRequest(
                "POST",
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                body,
                time.time(),
                prompt_tokens,
            )
            server._record(req)
            if not self._authorised():
                return
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send_error(404, f"unknown path {self.path}", "invalid_request_error", "not_found")
                return
            if problem is not None or body is None:
                self._send_error(400, problem or "request body is missing", "invalid_request_error", None)
                return
            if not isinstance(body.get("messages"), list) or not body["messages"]:
                self._send_error(
                    400, "'messages' must be a non-empty array", "invalid_request_error", None, "messages"
                )
                return
            window = server.context_window
            if window is not None and prompt_tokens > window:
                self._send_error(
                    400,
                    f"This model's maximum context length is {window} tokens. However, your messages "
                    f"resulted in "
                    f"{prompt_tokens} tokens. Please reduce the length of the messages.",
                    "invalid_request_error",
                    "context_length_exceeded",
                    "messages",
                )
                return
            reply = server._next_reply(req)
            if server._wait(reply.delay):
                return  # server is stopping: drop the connection
            if reply.status != 200:
                code = reply.error_code
                self._send_error(
                    reply.status,
                    reply.error_message or f"scripted error {reply.status}",
                    reply.error_type,
                    code,
                    headers=reply.headers,
                )
                return
            self._answer(body, reply, prompt_tokens)

        def _answer(self, body: JSON, reply: Reply, prompt_tokens: int) -> None:
            calls: list[JSON] = [
                {
                    "id": c.id or server._next_call_id(),
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.arguments
                        if isinstance(c.arguments, str)
                        else json.dumps(dict(c.arguments)),
                    },
                }
                for c in reply.tool_calls
            ]
            finish = reply.finish_reason or ("tool_calls" if calls else "stop")
            completion_tokens = _estimate_text_tokens(reply.text) + sum(
                _estimate_text_tokens(c["function"]["arguments"]) + 3 for c in calls
            )
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
            if reply.usage:
                usage.update({k: int(v) for k, v in reply.usage.items()})
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            model = reply.model or str(body.get("model") or server.model)
            created = int(time.time())
            rid = f"chatcmpl-local-{server._next_call_id()}"
            if body.get("stream"):
                self._stream(
                    rid,
                    created,
                    model,
                    reply,
                    calls,
                    finish,
                    usage,
                    bool((body.get("stream_options") or {}).get("include_usage")),
                )
                return
            message: JSON = {"role": "assistant", "content": reply.text}
            if calls:
                message["tool_calls"] = calls
            self._send_json(
                200,
                {
                    "id": rid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                    "usage": usage,
                },
            )

        def _stream(
            self,
            rid: str,
            created: int,
            model: str,
            reply: Reply,
            calls: list[JSON],
            finish: str,
            usage: JSON,
            include_usage: bool,
        ) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

            def chunk(
                delta: JSON,
                finish_reason: str | None = None,
                with_usage: JSON | None = None,
                no_choice: bool = False,
            ) -> bytes:
                obj: JSON = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model}
                obj["choices"] = (
                    []
                    if no_choice
                    else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]
                )
                if with_usage is not None:
                    obj["usage"] = with_usage
                return f"data: {json.dumps(obj)}\n\n".encode()

            def pieces() -> Iterator[bytes]:
                yield chunk({"role": "assistant", "content": ""})
                text = reply.text or ""
                for i in range(0, len(text), server.chunk_chars):
                    yield chunk({"content": text[i : i + server.chunk_chars]})
                for index, call in enumerate(calls):
                    yield chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {"name": call["function"]["name"], "arguments": ""},
                                }
                            ]
                        }
                    )
                    yield chunk(
                        {
                            "tool_calls": [
                                {"index": index, "function": {"arguments": call["function"]["arguments"]}}
                            ]
                        }
                    )
                yield chunk({}, finish)
                if include_usage:
                    yield chunk({}, with_usage=usage, no_choice=True)
                yield b"data: [DONE]\n\n"

            try:
                for piece in pieces():
                    self.wfile.write(piece)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return

    return Handler
