"""The summarizer interface: one protocol, one input type, one result type, one error type.

Why: the Compactor must not care whether the checkpoint comes from a model over HTTP or from the
offline extractive rules; both take the same ``SummaryInput`` (entries already triaged, previous
checkpoint already stripped of machine blocks) and either return a ``SummaryResult`` or raise a
``SummarizerError`` whose message says what went wrong. A summarizer never writes to the log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ipython_compact.core.entries import Entry
from ipython_compact.core.summary_sections import SummaryKind

# the summarizer model; here so choosing a summarizer needs no ``openai`` import
ENV_MODEL = "IPYTHON_COMPACT_MODEL"

FailureCode = Literal[
    "config",
    "context_length",
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "http_error",
    "length",
    "empty",
    "tool_call",
    "missing_sections",
    "bad_reply",
]


@dataclass(frozen=True)
class SummaryInput:
    """What to summarize. ``entries`` are in log order; ``max_tokens`` is the output budget.

    ``anchors`` are the texts the checkpoint already carries verbatim in its ``<anchors>`` block
    (goal, constraints, pins); a summarizer may refer to them instead of repeating them. Empty when
    there is no anchor layer, and then the summary must state the goal and constraints itself.

    ``superseded`` are (earlier statement, the later one that replaced it) pairs: a revised
    constraint or goal, a decision of the previous checkpoint that the new messages replace. No
    section may state the earlier one as current.
    """

    entries: Sequence[Entry]
    kind: SummaryKind = "history"
    previous_summary: str | None = None
    focus: str | None = None
    max_tokens: int = 13107
    anchors: tuple[str, ...] = ()
    superseded: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SummaryResult:
    """An accepted summary and how it was obtained (usage is summed over all attempts).

    ``resampled`` says why the model was asked a second time (None: it was not); ``repaired``
    lists the sections added as "(none)" because the model left them out even then.
    """

    text: str
    summarizer: str
    model: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    attempts: int = 1
    finish_reason: str | None = None
    resampled: str | None = None
    repaired: tuple[str, ...] = ()
    # how the summary was judged before it became the checkpoint (compaction/summary_check.py)
    judged: Mapping[str, Any] | None = None
    # how many requests the span was summarized in (more than one: it did not fit the window)
    pieces: int = 1

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "summarizer": self.summarizer,
            "model": self.model,
            "usage": dict(self.usage),
            "attempts": self.attempts,
            "finish_reason": self.finish_reason,
        }
        if self.resampled is not None:
            out["resampled"] = self.resampled
        if self.repaired:
            out["repaired"] = list(self.repaired)
        if self.pieces > 1:
            out["pieces"] = self.pieces
        if self.judged is not None:
            out["judged"] = dict(self.judged)
        return out


class SummarizerError(RuntimeError):
    """A summary could not be produced. ``code`` is machine-readable, the message is for people."""

    def __init__(
        self,
        message: str,
        *,
        code: FailureCode,
        attempts: int = 1,
        usage: Mapping[str, int] | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.code: FailureCode = code
        self.attempts = attempts
        self.usage = dict(usage or {})
        self.retryable = retryable

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": str(self), "attempts": self.attempts, "usage": dict(self.usage)}


@runtime_checkable
class Summarizer(Protocol):
    """``name`` identifies the summarizer in compaction details (``offline``, ``openai``)."""

    name: str

    def summarize(self, request: SummaryInput) -> SummaryResult: ...
