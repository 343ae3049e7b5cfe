"""What cannot fit the model's window, said before any request: the window itself, or a question.

Why: a window too small ended in "Context overflow recovery failed after one compact-and-retry
attempt" after a round trip to the server, naming neither the window nor what did not fit.
Compaction cannot shrink the system prompt, the tool's schema or the question being asked; when
those alone pass the blocking line, no request can ever be sent, and the user must hear what does
not fit, by how many tokens, and the fix.

What must hold: checked before anything is logged or sent; the message names the window, the
sizes (estimated as the thresholds estimate them) and the fix (``context=``, a larger window).
"""

from __future__ import annotations

import json

from ipython_compact.agent.openai_chat import PYTHON_TOOL
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.thresholds import threshold_lines
from ipython_compact.core.tokens import estimate_message_tokens

__all__ = [
    "MIN_QUESTION_TOKENS",
    "fixed_tokens",
    "overflow_explained",
    "question_does_not_fit",
    "window_too_small",
]

#: The least room a window must leave for a question and its first answer beside the fixed part.
MIN_QUESTION_TOKENS = 256


def fixed_tokens(system_text: str, settings: CompactionSettings) -> int:
    """Tokens every request carries whatever the conversation: the system prompt and the tool."""
    estimator = settings.estimator
    system = estimate_message_tokens({"role": "system", "content": system_text}, estimator)
    tool = estimate_message_tokens({"role": "user", "content": json.dumps(PYTHON_TOOL)}, estimator)
    return system + tool


def window_too_small(window: int, settings: CompactionSettings, system_text: str) -> str | None:
    """Why ``window`` can never hold a request (None when it can)."""
    blocking = threshold_lines(window, settings).blocking
    fixed = fixed_tokens(system_text, settings)
    if fixed + MIN_QUESTION_TOKENS <= blocking:
        return None
    need = fixed + MIN_QUESTION_TOKENS + (window - blocking)
    return (
        f"context_window={window:,} is too small for this agent: the system prompt and the python tool "
        f"alone take ~{fixed:,} tokens, and the window keeps {window - blocking:,} (reserve_tokens) for "
        f"the answer, leaving {max(blocking - fixed, 0):,} for the conversation; it needs about "
        f"{need:,} tokens ({need - window:,} more). Give the model's real window "
        f"(context_window=, --window), or a model with a larger one."
    )


def question_does_not_fit(
    text: str, window: int, settings: CompactionSettings, system_text: str
) -> str | None:
    """Why the question ``text`` cannot be sent in ``window`` (None when it can): compaction
    cannot shrink the question being asked. The window itself is the limit (a question past the
    blocking line still fits, with nothing left to compact), less some room for the answer."""
    tokens = estimate_message_tokens({"role": "user", "content": text}, settings.estimator)
    fixed = fixed_tokens(system_text, settings)
    answer = min(window - threshold_lines(window, settings).blocking, MIN_QUESTION_TOKENS)
    room = window - fixed - answer
    if tokens <= room:
        return None
    return (
        f"the question does not fit the {window:,}-token window: it is {len(text):,} characters "
        f"(~{tokens:,} tokens), and beside the system prompt and tool (~{fixed:,}) and room for an "
        f"answer ({answer:,}) there is room for ~{max(room, 0):,}, {tokens - max(room, 0):,} "
        f"tokens short. Pass the text as ask(question, context=TEXT) (it stays in the kernel and the "
        f"model reads it with code), use a model with a larger window, or shorten the question."
    )


_WHAT = {"toolResult": "tool output", "user": "user message", "assistant": "assistant message"}


def overflow_explained(current: object) -> str:
    """What did not fit after an overflow that compaction could not cure: the context's size
    against the window, the largest message's size and kind, and the fixes. ``current`` is the
    agent (read through ``context_tokens``/``context_messages``/``settings``); "" when it cannot say."""
    try:
        tokens = int(current.context_tokens()[0])  # type: ignore[attr-defined]
        window = int(current.context_window)  # type: ignore[attr-defined]
        messages = current.context_messages()  # type: ignore[attr-defined]
        estimator = current.settings.estimator  # type: ignore[attr-defined]
    except Exception:  # an engine without these: the plain message stands
        return ""
    sized = [(estimate_message_tokens(m, estimator), m) for m in messages if isinstance(m, dict)]
    part = ""
    if sized:
        size, largest = max(sized, key=lambda pair: pair[0])
        part = (
            f"; the largest message, a {_WHAT.get(str(largest.get('role')), 'message')}, is ~{size:,} of them"
        )
    over = (
        f", {tokens - window:,} over" if tokens > window else " (the server counts more than this estimate)"
    )
    return (
        f" What does not fit: the context is ~{tokens:,} tokens for the {window:,}-token window{over}{part}. "
        f"Pass large data as ask(question, context=DATA) (the kernel keeps it; the model reads it with "
        f"code), print less of a big output (recall() reads compacted spans back), or give the model's "
        f"real window (context_window=, --window) or use a model with a larger one."
    )
