"""The OpenAI-compatible summarizer (OpenAI, vLLM, Ollama, llama.cpp server, the local test server).

The only module of the summarizer layer that imports ``openai``.

What must hold:
- Configuration: ``model``/``base_url``/``api_key`` arguments, else the environment
  (``IPYTHON_COMPACT_MODEL``, ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``). No model → a clear error.
- Output cap: ``min(request.max_tokens, model_max_tokens)``; the Compactor passes
  ``floor(0.8 * reserve_tokens)`` (or half the reserve for a split turn's prefix).
- Isolation: the request carries only the system prompt and one user message built by
  ``core.prompts`` — no conversation history as chat turns, no ``user`` id, no prompt cache key
  (a resample adds only the model's own reply and the note saying what it lacked).
- Bounded retries: at most ``1 + max_retries`` HTTP attempts per request (and at most
  ``1 + input_retries`` request sizes, below), retrying only rate limits, 5xx, timeouts and
  connection errors; the wait is ``Retry-After`` when the server sends it, else exponential
  backoff, and never more than ``max_wait`` seconds.
- Input too long for the summarizer model (a context-length refusal): the span is summarized in
  pieces sized by the window the error names (with room for the reply), each piece updating the
  summary of the ones before (``previous_summary``), so every message reaches the model once and
  a small window never fails a compaction; ``SummaryResult.pieces`` counts the requests. Only a
  single message too large for the window is left out (never the span's first user request) in
  proportion to the window, with a note saying so, at most ``input_retries`` times. The elided
  text stays in the log.
- Anchors: ``SummaryInput.anchors`` (the texts the checkpoint's ``<anchors>`` block carries
  verbatim) go into the request with ``core.prompts.ANCHORS_NOTE``, so the model refers to them
  instead of restating them; that the checkpoint still holds them is the drift guard's job (the
  Compactor), not the model's.
- Superseded: ``SummaryInput.superseded`` (earlier statements and what replaced them) go into the
  request with ``core.prompts.SUPERSEDED_NOTE``, so the update never carries an old decision or
  constraint forward as current.
- A reply fails only if it is empty, truncated (``finish_reason == "length"``), calls a tool, or
  finishes for another reason than ``stop``; ``SummarizerError`` says which rule failed. A reply
  that lacks a required section is resampled once, with the reason stated (the model's own reply
  and ``core.prompts.resample_note`` follow the original request); if the second reply still
  lacks sections (or fails), the better text is repaired: each missing section is added as
  "(none)" (``core.offline_summary.repair_sections``), and ``SummaryResult.resampled`` /
  ``repaired`` record it. Usage is summed over all attempts that got a reply.
"""

from __future__ import annotations

import dataclasses
import email.utils
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import openai

from ipython_compact.core.entries import Entry
from ipython_compact.core.messages import entry_message
from ipython_compact.core.offline_summary import missing_sections, repair_sections
from ipython_compact.core.overflow import is_context_overflow
from ipython_compact.core.prompts import build_summary_request, resample_note
from ipython_compact.core.serialization import serialize_conversation
from ipython_compact.summarizers.base import (
    ENV_MODEL,
    FailureCode,
    SummarizerError,
    SummaryInput,
    SummaryResult,
)

ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_API_KEY = "OPENAI_API_KEY"


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``retry-after`` seconds or date)."""
    if not headers:
        return None
    low = {k.lower(): v for k, v in headers.items()}
    ms = low.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = low.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unparseable: fall back to our own backoff
    return max(0.0, parsed.timestamp() - time.time())


class OpenAISummarizer:
    """Summaries from an OpenAI-compatible chat endpoint."""

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 1.0,
        max_wait: float = 30.0,
        model_max_tokens: int | None = None,
        input_retries: int = 2,
        kernel_note: bool = True,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model or os.environ.get(ENV_MODEL) or ""
        if not self.model:
            raise SummarizerError(
                f"no summarizer model configured: pass model=... or set {ENV_MODEL} (and {ENV_BASE_URL} for "
                f"a non-OpenAI server)",
                code="config",
            )
        if max_retries < 0 or timeout <= 0 or backoff < 0 or max_wait < 0:
            raise SummarizerError(
                f"bad retry settings: max_retries={max_retries}, timeout={timeout}, backoff={backoff}, "
                f"max_wait={max_wait}",
                code="config",
            )
        self.base_url = base_url or os.environ.get(ENV_BASE_URL) or None
        key = api_key or os.environ.get(ENV_API_KEY)
        if not key:
            if self.base_url is None:
                raise SummarizerError(
                    f"no API key: set {ENV_API_KEY} or pass api_key=... (or point "
                    f"{ENV_BASE_URL} at a local server)",
                    code="config",
                )
            key = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) accept any key
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_wait = max_wait
        self.model_max_tokens = model_max_tokens
        self.input_retries = max(0, input_retries)
        self.kernel_note = kernel_note
        self._sleep = sleep
        self._client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=timeout, max_retries=0)

    def output_cap(self, requested: int) -> int:
        return max(1, min(requested, self.model_max_tokens) if self.model_max_tokens else requested)

    def _wait_for(self, attempt: int, headers: Mapping[str, str] | None) -> float:
        asked = retry_after_seconds(headers)
        wait = asked if asked is not None else self.backoff * (2 ** (attempt - 1))
        return min(wait, self.max_wait)

    def _chat(
        self, request: SummaryInput, messages: list[dict[str, Any]], elided: int, cap: int
    ) -> list[dict[str, str]]:
        conversation = serialize_conversation(messages)
        if elided:
            conversation = (
                f"[Note: {elided} older message(s) were left out to fit the summarizer's input limit; "
                "their text stays in the session log.]\n\n" + conversation
            )
        built = build_summary_request(
            conversation,
            kind=request.kind,
            previous_summary=request.previous_summary,
            focus=request.focus,
            kernel_note=self.kernel_note,
            machine_blocks_note=True,
            max_tokens=cap,
            anchors=request.anchors,
            superseded=request.superseded,
        )
        return [{"role": "system", "content": built.system}, {"role": "user", "content": built.user}]

    def summarize(self, request: SummaryInput) -> SummaryResult:
        messages = [m for m in (entry_message(e) for e in request.entries) if m is not None]
        cap = self.output_cap(request.max_tokens)
        usage: dict[str, int] = {}
        attempts = 0
        elided = 0
        # the first user message (the request that started the span) is never elided
        first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
        for shrink in range(self.input_retries + 1):
            kept = messages[elided:]
            if first_user is not None and first_user < elided:
                kept = [messages[first_user], *kept]
            chat = self._chat(request, kept, elided, cap)
            try:
                reply, attempts = self._send(chat, cap, usage, attempts)
            except SummarizerError as exc:
                if exc.code != "context_length" or shrink == self.input_retries or len(kept) <= 1:
                    raise
                limit, used = _overflow_numbers(str(exc))
                ratio = (limit / used) * 0.9 if limit and used and used > limit else 0.5
                # pieces need room for the reply: a window under the output cap cannot take any
                if shrink == 0 and len(request.entries) > 1 and (limit is None or limit > cap + limit // 10):
                    return self._in_pieces(request, ratio, limit, used, cap)
                total = sum(len(str(m.get("content", ""))) for m in kept) or 1
                target = total * ratio
                dropped_chars = 0
                step = 0
                while elided + step < len(messages) - 1 and total - dropped_chars > target:
                    dropped_chars += len(str(messages[elided + step].get("content", "")))
                    step += 1
                elided += max(1, step)
                continue
            text = self._check(reply, attempts, usage, cap)
            missing = missing_sections(text, request.kind)
            if not missing:
                return self._result(text, reply, attempts, usage)
            reason = f"missing section(s): {', '.join(missing)}"
            retry_chat = [
                *chat,
                {"role": "assistant", "content": text},
                {"role": "user", "content": resample_note(missing)},
            ]
            try:
                second, attempts = self._send(retry_chat, cap, usage, attempts)
                second_text = self._check(second, attempts, usage, cap)
            except SummarizerError as exc:
                if exc.code in ("config", "http_error"):
                    raise
                second_text, reason = None, f"{reason}; the resample failed ({exc.code})"
            if second_text is not None and len(missing_sections(second_text, request.kind)) <= len(missing):
                text, reply = second_text, second
            repaired, added = repair_sections(text, request.kind)
            return self._result(repaired, reply, attempts, usage, resampled=reason, repaired=tuple(added))
        raise AssertionError("unreachable: the last shrink round returns or raises")

    def _in_pieces(
        self, request: SummaryInput, ratio: float, limit: int | None, used: int | None, cap: int
    ) -> SummaryResult:
        """Summarize ``request.entries`` in consecutive pieces that fit: each piece's text is at most
        the share of the whole that fitted (``ratio``, less room for the reply and the growing
        summary), and each later piece updates the summary so far. A piece that still does not
        fit is split again by the same rule (``summarize``), down to single messages."""
        sizes = [len(str((entry_message(e) or {}).get("content", ""))) + 1 for e in request.entries]
        room = ratio
        if limit and used:
            room = ratio * max(0.2, 1 - (cap + limit // 10) / limit)  # the reply and the summary so far
        budget = max(1, int(sum(sizes) * room))
        pieces: list[list[Entry]] = [[]]
        filled = 0
        for entry, size in zip(request.entries, sizes, strict=True):
            if pieces[-1] and filled + size > budget:
                pieces.append([])
                filled = 0
            pieces[-1].append(entry)
            filled += size
        if len(pieces) == 1:  # one message is the whole span: split it in two halves instead
            half = max(1, len(request.entries) // 2)
            pieces = [list(request.entries[:half]), list(request.entries[half:])]
        previous = request.previous_summary
        usage: dict[str, int] = {}
        attempts = count = 0
        result: SummaryResult | None = None
        for piece in pieces:
            result = self.summarize(
                dataclasses.replace(request, entries=tuple(piece), previous_summary=previous)
            )
            previous = result.text
            attempts += result.attempts
            count += result.pieces
            for key, value in result.usage.items():
                usage[key] = usage.get(key, 0) + int(value)
        assert result is not None  # pieces is never empty
        return dataclasses.replace(result, usage=usage, attempts=attempts, pieces=count)

    def _send(
        self, chat: list[dict[str, str]], cap: int, usage: dict[str, int], attempts: int
    ) -> tuple[Any, int]:
        """One request with bounded retries of transient failures; returns (reply, attempts so far)."""
        first = attempts
        last: SummarizerError | None = None
        while attempts - first < 1 + self.max_retries:
            attempts += 1
            try:
                reply = self._client.chat.completions.create(model=self.model, messages=chat, max_tokens=cap)  # type: ignore[arg-type]
            except openai.APIError as exc:
                last = self._classify(exc, attempts, usage)
                if not last.retryable or attempts - first >= 1 + self.max_retries:
                    break
                headers = exc.response.headers if isinstance(exc, openai.APIStatusError) else None
                self._sleep(self._wait_for(attempts - first, headers))
                continue
            if reply.usage is not None:
                for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
                    usage[key] = usage.get(key, 0) + int(getattr(reply.usage, key, 0) or 0)
            return reply, attempts
        assert last is not None
        if attempts - first > 1:
            message = f"summarization failed after {attempts - first} attempts: {last}"
        else:
            message = f"summarization failed: {last}"
        raise SummarizerError(
            message, code=last.code, attempts=attempts, usage=usage, retryable=last.retryable
        )

    def _classify(self, exc: openai.APIError, attempts: int, usage: Mapping[str, int]) -> SummarizerError:
        where = self.base_url or "api.openai.com"
        code: FailureCode
        if isinstance(exc, openai.APITimeoutError):
            return SummarizerError(
                f"no reply from {where} within {self.timeout:g}s (timeout)",
                code="timeout",
                attempts=attempts,
                usage=usage,
                retryable=True,
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = (
                (f"{type(exc.__cause__).__name__}: {exc.__cause__}")
                if exc.__cause__ is not None
                else str(exc)
            )
            return SummarizerError(
                f"cannot connect to {where} ({cause}); is the server running, and is the URL right?",
                code="connection",
                attempts=attempts,
                usage=usage,
                retryable=True,
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = _error_detail(exc)
            if status in (400, 413) and is_context_overflow(error_text=detail, error_code=_error_code(exc)):
                code, retryable = "context_length", False
            elif status == 429:
                code, retryable = "rate_limited", True
            elif status >= 500:
                code, retryable = "server_error", True
            else:
                code, retryable = "http_error", status in (408, 409)
            if status == 404 and "model" in detail.lower():
                detail += self._served_models()
            return SummarizerError(
                f"HTTP {status} from {where}: {detail}",
                code=code,
                attempts=attempts,
                usage=usage,
                retryable=retryable,
            )
        return SummarizerError(
            f"{type(exc).__name__}: {exc}", code="bad_reply", attempts=attempts, usage=usage
        )

    def _served_models(self) -> str:
        """`` — the server serves: a, b`` for a 404 about the model (one quick try; empty when it fails)."""
        try:
            page = self._client.with_options(timeout=5.0, max_retries=0).models.list()
            served = [str(m.id) for m in page.data]
        except Exception:
            return ""
        return f" — the server serves: {', '.join(served)}; pass one of them as --model" if served else ""

    def _check(self, reply: Any, attempts: int, usage: Mapping[str, int], cap: int) -> str:
        """The reply's text, or ``SummarizerError`` for a reply that cannot be a summary."""

        def fail(code: FailureCode, message: str) -> SummarizerError:
            return SummarizerError(
                f"summarization failed: {message}", code=code, attempts=attempts, usage=usage
            )

        if not reply.choices:
            raise fail("bad_reply", "the reply has no choices")
        choice = reply.choices[0]
        finish = choice.finish_reason
        text = (choice.message.content or "").strip()
        if choice.message.tool_calls:
            names = ", ".join(
                getattr(getattr(c, "function", None), "name", "?") for c in choice.message.tool_calls
            )
            raise fail(
                "tool_call", f"the model tried to call a tool ({names}) instead of writing the summary"
            )
        if finish == "length":
            raise fail("length", f"the reply hit the output limit of {cap} tokens; the summary is incomplete")
        if finish != "stop":
            raise fail("bad_reply", f"the reply finished with {finish!r}, not 'stop'")
        if not text:
            raise fail("empty", "the model returned no text")
        return text

    def _result(
        self,
        text: str,
        reply: Any,
        attempts: int,
        usage: Mapping[str, int],
        *,
        resampled: str | None = None,
        repaired: tuple[str, ...] = (),
    ) -> SummaryResult:
        return SummaryResult(
            text=text,
            summarizer=self.name,
            model=str(reply.model or self.model),
            usage=dict(usage),
            attempts=attempts,
            finish_reason=reply.choices[0].finish_reason,
            resampled=resampled,
            repaired=repaired,
        )


def _error_code(exc: openai.APIStatusError) -> str | None:
    code = getattr(exc, "code", None)
    return str(code) if code else None


_LIMITS = re.compile(
    r"maximum context length is ([\d,]+) tokens.*?(?:resulted in|requested) ([\d,]+) "
    r"tokens",
    re.IGNORECASE | re.DOTALL,
)


def _overflow_numbers(text: str) -> tuple[int | None, int | None]:
    """(window, prompt tokens) from an OpenAI-style context-length message, when it says."""
    m = _LIMITS.search(text)
    if m is None:
        return None, None
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))


def _error_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
    return str(exc.message)
