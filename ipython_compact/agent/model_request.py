"""One request to the model: send the context, read the answer or the error, log it.

Why separate: what can go wrong on the wire (status errors with provider-specific bodies,
timeouts, an error event mid-stream, an unreadable answer, an interrupt while streaming) is its
own concern; every failure is turned into one logged error message and handed to ``recovery``.

What must hold:
- The assistant message is appended (with usage) before anything reads it; an answer cut short
  by an interrupt is logged with ``stopReason: aborted`` and never sent again.
- A successful request ends the overflow episode and allows the next request to compact again.
- A "silent" overflow (the answer went through but the reported input exceeds the window)
  compacts before the next request.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ipython_compact.agent.events import TurnResult
from ipython_compact.agent.openai_chat import PYTHON_TOOL, StreamAccumulator, from_openai_completion
from ipython_compact.agent.recovery import OverflowRecovery
from ipython_compact.agent.state import now_iso
from ipython_compact.core.entries import text_of_content
from ipython_compact.core.overflow import message_is_overflow, overflow_step


def api_error_details(exc: Exception) -> tuple[str, str | None, int | None]:
    """(message text, provider error code, HTTP status) of an ``openai`` client exception."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        err = body.get("error", body) if isinstance(body, dict) else {}
        code = err.get("code") if isinstance(err, dict) else None
        text = str(err.get("message")) if isinstance(err, dict) and err.get("message") else str(exc)
        return text, code if isinstance(code, str) else None, exc.status_code
    code = getattr(exc, "code", None)  # e.g. an error event in the middle of a stream
    return f"{type(exc).__name__}: {exc}", code if isinstance(code, str) else None, None


class ModelRequests(OverflowRecovery):
    """Sending the context to the model (mixed into ``Agent``)."""

    def _request(self) -> dict[str, Any] | TurnResult | None:
        """Send the context; the assistant message, a terminal TurnResult, or None to retry."""
        import openai

        messages = self._request_messages()
        self._emit("request", f"{len(messages)} messages", messages=len(messages))
        aborted = False
        try:
            if self.stream:
                completion, aborted = self._streamed(messages)
            else:
                completion = self.client.chat.completions.create(
                    model=self.model, messages=messages, tools=[PYTHON_TOOL], timeout=self.request_timeout
                )
        except openai.APIError as exc:
            return self._on_error(*api_error_details(exc))
        try:
            assistant = from_openai_completion(completion, provider=self.provider, model=self.model, timestamp=now_iso())
        except (ValueError, TypeError, AttributeError) as exc:
            return self._on_error(f"the server's answer could not be read: {exc}", None, None)
        if aborted:
            assistant["stopReason"] = "aborted"  # logged, never sent again, never a usage anchor
            self._append_message(assistant)
            return TurnResult("interrupted", "The turn was interrupted while the model was answering.", 0)
        self._append_message(assistant)
        self._recovery = overflow_step(self._recovery, "success").state
        self._compacted_for_request = False  # the request went through: the next one may compact again
        text = text_of_content(assistant.get("content"))
        if text:
            self._emit("assistant", text, usage=assistant.get("usage"))
        if message_is_overflow(assistant, self.context_window):
            # Silent overflow: the answer went through, but the next request cannot fit as is.
            self._emit("overflow", "silent overflow: reported input exceeds the window")
            self._compact_blocking("overflow", None)  # the overflow event above already said why
        return assistant

    def _streamed(self, messages: list[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
        """Stream one answer (text deltas become ``assistant_delta`` events); stops early, and says
        so, when the turn is interrupted."""
        acc = StreamAccumulator()
        stream = self.client.chat.completions.create(
            model=self.model, messages=messages, tools=[PYTHON_TOOL], timeout=self.request_timeout,
            stream=True, stream_options={"include_usage": True},
        )
        aborted = False
        try:
            for chunk in stream:
                delta = acc.add(chunk)
                if delta:
                    self._emit("assistant_delta", delta)
                if self._abort.is_set():
                    aborted = True
                    break
        finally:
            with contextlib.suppress(Exception):
                stream.close()
        return acc.completion(), aborted
