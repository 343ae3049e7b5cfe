"""The overflow episode: a prompt the server says is too long, from the error to the retry or an
honest stop.

Why a component: the episode has state (idle, attempted, reported) that lives across requests
and turns; the decisions are pure (``core.overflow.overflow_step``); this class applies them
with the scheduler (one blocking compaction) and the log.

What must hold:
- An overflow error is kept in the log but appended off the active path, so it never re-enters
  the context; then one blocking compaction and one retry; the next overflow of the episode ends
  the turn with an honest error suggesting a larger window (and a ``compaction_outcome`` entry).
- At most one compaction per request: an overflow right after a compaction is reported, not
  compacted again. At the compaction cap the run ends with the cap's reason instead.
- An unrecovered overflow from the current model, newer than the newest compaction, compacts
  before the next turn's first request; one from another model (before a switch) does not count.
- Any other failed request is logged and ends the turn with the server's message.
"""

from __future__ import annotations

from collections.abc import Callable

from ipython_compact.agent.caps import RunCaps
from ipython_compact.agent.current_model import CurrentModel
from ipython_compact.agent.events import TurnResult
from ipython_compact.agent.model_caller import ModelAnswer
from ipython_compact.agent.openai_chat import error_message
from ipython_compact.agent.scheduler import CompactionScheduler
from ipython_compact.agent.session_log import SessionLog, now_iso
from ipython_compact.agent.window_fit import overflow_explained
from ipython_compact.core.entries import COMPACTION, COMPACTION_OUTCOME
from ipython_compact.core.overflow import (
    OVERFLOW_FAILURE_MESSAGE,
    RecoveryState,
    message_is_overflow,
    overflow_step,
)

Capped = Callable[[str], TurnResult]


class OverflowEpisode:
    """Overflow handling for one agent. ``current`` (the agent) is read when needed (the model
    can change); ``capped(message)`` ends the run at the compaction cap."""

    def __init__(
        self,
        log: SessionLog,
        scheduler: CompactionScheduler,
        caps: RunCaps,
        *,
        current: CurrentModel,
        capped: Capped,
    ) -> None:
        self.log = log
        self.scheduler = scheduler
        self.caps = caps
        self._current = current
        self._capped = capped
        self.state: RecoveryState = "idle"

    def user_message(self) -> None:
        self.state = overflow_step(self.state, "user_message").state

    def success(self) -> None:
        self.state = overflow_step(self.state, "success").state

    def silent(self) -> TurnResult | None:
        """The answer went through but its reported input exceeds the window: compact before the
        next request (or stop at the cap)."""
        self.log.emit("overflow", "silent overflow: reported input exceeds the window")
        if not self.caps.may_compact():
            return self._capped(self.caps.compaction_stop())
        self.scheduler.compact_blocking("overflow", None)  # the overflow event above already said why
        return None

    def on_error(self, answer: ModelAnswer) -> TurnResult | None:
        """A failed request: log it; an overflow is recovered (None means "retry the request")."""
        text = answer.error_text or "unknown error"
        current = self._current
        msg = error_message(
            provider=current.provider,
            model=current.model,
            timestamp=now_iso(),
            text=text,
            code=answer.error_code,
            status=answer.error_status,
        )
        if not message_is_overflow(msg, self._current.context_window):
            self.log.append_message(msg)
            self.log.emit("error", text, status=answer.error_status)
            return failed(f"The model request failed: {text}", text)
        # Keep the error in the log but off the active path: it never re-enters the context.
        self.log.append_message(msg, move_leaf=False)
        step = overflow_step(
            self.state, "overflow", same_model=msg["model"] == current.model, enabled=current.settings.enabled
        )
        if step.action == "compact_and_retry" and self.scheduler.compacted_for_request:
            # At most one compaction per request: this one already waited on a compaction.
            step = overflow_step("attempted", "overflow")
        self.state = step.state
        said = {"compact_and_retry": "compacting, then retrying once", "report_failure": "giving up"}
        self.log.emit("overflow", f"{text} ({said.get(step.action, step.action)})", action=step.action)
        if step.action == "compact_and_retry" and not self.caps.may_compact():
            return self._capped(self.caps.compaction_stop())
        if step.action == "compact_and_retry":
            rec = self.scheduler.compact_blocking(
                "overflow", "blocking compaction to recover from the overflow"
            )
            if rec.state == "placed":
                return None
            return failed(
                f"{OVERFLOW_FAILURE_MESSAGE} (compaction did not help: {rec.error or rec.state})"
                + overflow_explained(self._current)
            )
        if step.action == "report_failure":
            self.log.append(
                COMPACTION_OUTCOME,
                {"reason": "overflow", "outcome": "failed", "error": OVERFLOW_FAILURE_MESSAGE},
            )
            return failed(OVERFLOW_FAILURE_MESSAGE + overflow_explained(self._current))
        return failed(f"The model request failed: {text}", text)

    def before_turn(self) -> None:
        """Before a new turn's first request: an unrecovered overflow from the *current* model
        (newer than the newest compaction) compacts first; one from another model does not count."""
        since = self.log.store.entries(self.log.session, after_newest=COMPACTION)
        last = next((e.message for e in reversed(since) if e.role == "assistant" and e.message), None)
        if last is None or not message_is_overflow(last, self._current.context_window):
            return
        same = last.get("model") == self._current.model and last.get("provider") == self._current.provider
        step = overflow_step("idle", "overflow", same_model=same, enabled=self._current.settings.enabled)
        if step.action == "ignore":
            self.log.emit("guard", f"earlier overflow ignored: {step.why}", guard="model_switch")
        elif step.action == "compact_and_retry":
            self.scheduler.compact_blocking(
                "overflow", "blocking compaction: the last request of this model overflowed"
            )


def failed(message: str, error: str | None = None) -> TurnResult:
    """A turn that ends in an error before any step completed (``error`` defaults to ``message``)."""
    return TurnResult("error", message, 0, error=message if error is None else error)
