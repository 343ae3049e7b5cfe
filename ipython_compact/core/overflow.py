"""Recognising a provider's "the prompt is too long" answer, and the one-shot recovery around it.

Why this lives in the core: whether an error is a context overflow, and what the agent does about
it, are pure decisions over strings and a small state. The loop feeds them what the server said;
nothing here touches the network or the clock.

What must hold:
- An overflow is recognised from the usual provider phrasings (Anthropic, OpenAI, Bedrock, Gemini,
  xAI, Groq, OpenRouter, Copilot, llama.cpp, LM Studio, MiniMax, Kimi, generic), from OpenAI's
  error code ``context_length_exceeded``, from a bare 400/413 "(no body)" answer, and from a
  *silent* overflow (the request "succeeded" but reported more input tokens than the window).
- Recovery is one compact-and-retry per overflow episode: ``idle → attempted → reported``. The
  second overflow in an episode yields an honest error that suggests a larger window; a third is
  silent (the failure was already reported). Any successful answer or new user message resets.
- An overflow reported by a different (smaller-window) model than the one now selected does not
  count, and neither does an error older than the newest compaction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

# One pattern per provider phrasing; matched case-insensitively anywhere in the error text.
OVERFLOW_PATTERNS: Final[tuple[re.Pattern[str], ...]] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"prompt is too long",  # Anthropic
        r"input is too long for requested model",  # Amazon Bedrock
        r"exceeds the context window",  # OpenAI (chat completions and responses)
        r"input token count.*exceeds the maximum",  # Google Gemini
        r"maximum prompt length is \d+",  # xAI
        r"reduce the length of the messages",  # Groq
        r"maximum context length is \d+ tokens",  # OpenRouter / OpenAI-compatible servers
        r"exceeds the limit of \d+",  # GitHub Copilot
        r"exceeds the available context size",  # llama.cpp server
        r"greater than the context length",  # LM Studio
        r"context window exceeds limit",  # MiniMax
        r"exceeded model token limit",  # Kimi
        r"context[_ ]length[_ ]exceeded",  # generic, and OpenAI's error code spelled in text
        r"too many tokens",  # generic
        r"token limit exceeded",  # generic
        r"request too large",  # generic 413 phrasing
        r"input too long",  # generic
    )
)

# Some providers answer an oversized request with a bare status line and no body.
_BARE_STATUS: Final = re.compile(r"^\s*4(?:00|13)\s*(?:status code)?\s*\(no body\)", re.IGNORECASE)

OVERFLOW_CODES: Final = frozenset({"context_length_exceeded", "string_above_max_length", "request_too_large"})

OVERFLOW_FAILURE_MESSAGE: Final = (
    "Context overflow recovery failed after one compact-and-retry attempt. "
    "Try reducing the context, or switch to a model with a larger context window."
)


def is_overflow_text(text: str | None) -> bool:
    """True when an error text reads like a provider's context-length refusal."""
    if not text:
        return False
    if _BARE_STATUS.search(text):
        return True
    return any(p.search(text) for p in OVERFLOW_PATTERNS)


def is_context_overflow(
    *,
    error_text: str | None = None,
    error_code: str | None = None,
    stop_reason: str | None = None,
    input_tokens: int | None = None,
    context_window: int | None = None,
) -> bool:
    """Decide whether a provider answer means "the prompt did not fit".

    ``error_code`` is the structured code when the API gives one (OpenAI: ``context_length_exceeded``).
    A *silent* overflow is a normal stop whose reported input exceeds ``context_window``.
    """
    if error_code is not None and error_code.lower() in OVERFLOW_CODES:
        return True
    if is_overflow_text(error_text):
        return True
    return (
        stop_reason == "stop"
        and input_tokens is not None
        and context_window is not None
        and context_window > 0
        and input_tokens > context_window
    )


def message_is_overflow(message: Mapping[str, Any], context_window: int | None = None) -> bool:
    """Apply :func:`is_context_overflow` to a pi-shaped assistant message.

    The loop stores a failed request as an assistant message with ``stopReason: "error"``,
    ``errorMessage`` and (ours) ``errorCode``; a silent overflow shows only in ``usage``.
    """
    if message.get("role") != "assistant":
        return False
    usage = message.get("usage")
    input_tokens: int | None = None
    if isinstance(usage, Mapping):
        raw = usage.get("input", 0)
        cache = usage.get("cacheRead", 0)
        if isinstance(raw, int) and isinstance(cache, int):
            input_tokens = raw + cache
    stop = message.get("stopReason")
    text = message.get("errorMessage")
    code = message.get("errorCode")
    return is_context_overflow(
        error_text=text if isinstance(text, str) and stop == "error" else None,
        error_code=code if isinstance(code, str) and stop == "error" else None,
        stop_reason=stop if isinstance(stop, str) else None,
        input_tokens=input_tokens,
        context_window=context_window,
    )


RecoveryState = Literal["idle", "attempted", "reported"]
RecoveryEvent = Literal["overflow", "success", "user_message"]
RecoveryAction = Literal["compact_and_retry", "report_failure", "ignore", "none"]


@dataclass(frozen=True)
class RecoveryStep:
    """The result of feeding one event to the overflow state machine."""

    state: RecoveryState
    action: RecoveryAction
    why: str


def overflow_step(
    state: RecoveryState,
    event: RecoveryEvent,
    *,
    same_model: bool = True,
    stale: bool = False,
    enabled: bool = True,
) -> RecoveryStep:
    """One transition of ``idle → attempted → reported``.

    - ``success`` / ``user_message`` reset to ``idle``.
    - An ``overflow`` from another model (``same_model=False``) or older than the newest compaction
      (``stale=True``) is ignored and leaves the state alone.
    - With automatic compaction off (``enabled=False``) an overflow is reported at once: nothing
      may compact on its own, and the user must hear why the request failed.
    """
    if event in ("success", "user_message"):
        return RecoveryStep("idle", "none", f"{event} resets overflow recovery")
    if not same_model:
        return RecoveryStep(state, "ignore", "overflow came from a different model than the one now selected")
    if stale:
        return RecoveryStep(state, "ignore", "overflow is older than the newest compaction")
    if state == "idle":
        if not enabled:
            return RecoveryStep("reported", "report_failure", "automatic compaction is disabled")
        return RecoveryStep("attempted", "compact_and_retry", "first overflow: compact, then retry once")
    if state == "attempted":
        return RecoveryStep("reported", "report_failure", "overflow again after one compact-and-retry")
    return RecoveryStep("reported", "ignore", "failure already reported")
