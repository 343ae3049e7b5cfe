"""One request to the model: send the messages, read the answer or the error, nothing else.

Why a component: what can go wrong on the wire (status errors with provider-specific bodies,
timeouts, an error event mid-stream, an unreadable answer, an interrupt while streaming) is its
own concern. The caller turns every outcome into one ``ModelAnswer``; the turn loop decides what
it means (log it, recover from an overflow, stop). It never touches the session log, so it is
tested with a fake client.

What must hold:
- Exactly one of ``message`` / ``error_text`` is set on an answer.
- A stream stopped by ``abort`` yields what arrived, marked ``aborted`` (and ``stopReason:
  aborted`` on the message, so it is never sent again nor used as a usage anchor).
- ``requests`` and ``tokens`` count what this caller sent and was billed (reported usage), under
  its own lock, so a budget can be checked from any thread.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ipython_compact.agent.openai_chat import PYTHON_TOOL, StreamAccumulator, from_openai_completion
from ipython_compact.agent.session_log import now_iso
from ipython_compact.core.entries import JSON


def api_error_details(exc: Exception) -> tuple[str, str | None, int | None]:
    """(message text, provider error code, HTTP status) of an ``openai`` client exception."""
    import openai  # deferred for start-up time (heavy); loaded already when an openai call raised

    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        err = body.get("error", body) if isinstance(body, dict) else {}
        code = err.get("code") if isinstance(err, dict) else None
        text = str(err.get("message")) if isinstance(err, dict) and err.get("message") else str(exc)
        return text, code if isinstance(code, str) else None, exc.status_code
    code = getattr(exc, "code", None)  # e.g. an error event in the middle of a stream
    return f"{type(exc).__name__}: {exc}", code if isinstance(code, str) else None, None


@dataclass(frozen=True)
class ModelAnswer:
    """The outcome of one request: the assistant message, or an error (text, code, HTTP status)."""

    message: JSON | None = None
    aborted: bool = False
    error_text: str | None = None
    error_code: str | None = None
    error_status: int | None = None


class ModelCaller:
    """Sends chat requests through an ``openai.OpenAI``-like ``client`` (``chat.completions.create``)."""

    def __init__(self, client: Any, *, request_timeout: float = 120.0, stream: bool = False,
                 tools: Sequence[JSON] = (PYTHON_TOOL,)) -> None:
        self.client = client
        self.request_timeout = request_timeout
        self.stream = stream
        self.tools = list(tools)
        self._lock = threading.Lock()
        self._requests = 0
        self._tokens = 0

    @property
    def requests(self) -> int:
        with self._lock:
            return self._requests

    @property
    def tokens(self) -> int:
        """Total tokens the server reported for this caller's answers (prompt + completion)."""
        with self._lock:
            return self._tokens

    def call(self, messages: list[JSON], *, model: str, provider: str, abort: threading.Event | None = None,
             on_delta: Callable[[str], None] | None = None) -> ModelAnswer:
        """Send ``messages``; see ``ModelAnswer``. ``on_delta`` gets streamed text pieces."""
        import openai  # lazy for start-up time: the agent package is imported by the kernel extension

        with self._lock:
            self._requests += 1
        aborted = False
        try:
            if self.stream:
                completion, aborted = self._streamed(messages, model, abort, on_delta)
            else:
                completion = self.client.chat.completions.create(
                    model=model, messages=messages, tools=self.tools, timeout=self.request_timeout)
        except openai.APIError as exc:
            text, code, status = api_error_details(exc)
            return ModelAnswer(error_text=text, error_code=code, error_status=status)
        try:
            message = from_openai_completion(completion, provider=provider, model=model, timestamp=now_iso())
        except (ValueError, TypeError, AttributeError) as exc:
            return ModelAnswer(error_text=f"the server's answer could not be read: {exc}")
        if aborted:
            message["stopReason"] = "aborted"  # logged, never sent again, never a usage anchor
        usage = message.get("usage")
        if isinstance(usage, dict):
            with self._lock:
                self._tokens += int(usage.get("totalTokens") or 0)
        return ModelAnswer(message=message, aborted=aborted)

    def _streamed(self, messages: list[JSON], model: str, abort: threading.Event | None,
                  on_delta: Callable[[str], None] | None) -> tuple[JSON, bool]:
        """Stream one answer; stops early, and says so, when ``abort`` is set."""
        acc = StreamAccumulator()
        stream = self.client.chat.completions.create(
            model=model, messages=messages, tools=self.tools, timeout=self.request_timeout,
            stream=True, stream_options={"include_usage": True},
        )
        aborted = False
        try:
            for chunk in stream:
                delta = acc.add(chunk)
                if delta and on_delta is not None:
                    on_delta(delta)
                if abort is not None and abort.is_set():
                    aborted = True
                    break
        finally:
            with contextlib.suppress(Exception):
                stream.close()
        return acc.completion(), aborted
