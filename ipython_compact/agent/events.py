"""What the agent loop reports: step events, turn results, compaction records.

Plain data, so a cell magic, a terminal or a test can follow a turn without knowing the loop.
``AgentEvent.kind`` is one of: user, request, assistant, assistant_delta, tool_call, tool_result,
guard, compaction_start, compaction_queued, compaction_end, compaction_stale, compaction_dropped,
compaction_requested, overflow, kernel_restart, kernel_failed, error, continuation, turn_end, subcall,
sub_agent, sub_agent_<kind> (a child's events, forwarded).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ipython_compact.core.entries import Entry


@dataclass
class AgentEvent:
    """One step, for streaming into a cell or a terminal."""

    kind: str
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)


StopReason = Literal["final", "step_limit", "interrupted", "error", "compaction_cap", "token_budget"]
"""``final``: a final message or ``FINAL``/``FINAL_VAR``; ``compaction_cap``/``token_budget``: a
per-session cap ended the run (``TurnResult.text`` says which)."""


@dataclass
class TurnResult:
    """How a turn ended: ``text`` is the final answer (or the error message)."""

    stopped: StopReason
    text: str
    steps: int
    error: str | None = None


@dataclass
class CompactionRecord:
    """A compaction the loop ran or queued (``entry`` is set once placed)."""

    reason: str
    blocking: bool
    entry: Entry | None = None
    state: Literal["placed", "queued", "stale", "failed", "skipped"] = "placed"
    error: str | None = None


class AgentError(RuntimeError):
    """The agent cannot go on (restart budget exhausted, bad configuration)."""


class TurnFailed(AgentError):
    """A turn that failed: the model request failed, the context cannot fit the window, the kernel
    could not be restarted. ``ask`` raises it instead of returning the failure as an answer, so a
    caller cannot print an error message as if the model had said it. The turn is in the log as
    always; ``result`` is the ``TurnResult`` (``stopped == "error"``), ``str(exc)`` its message."""

    def __init__(self, result: TurnResult) -> None:
        super().__init__(result.text)
        self.result = result


def summarize_event(event: AgentEvent) -> str:
    """One line per event, for terminals and cell output (long texts are cut at 300 characters)."""
    text = event.text if len(event.text) <= 300 else event.text[:297] + "..."
    return f"[{event.kind}] {text}" if text else f"[{event.kind}]"
