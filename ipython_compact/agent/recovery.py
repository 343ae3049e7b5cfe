"""Getting out of trouble: a prompt the server says is too long, and compactions that keep failing.

Why: both are state machines whose decisions are pure (``core.overflow.overflow_step``,
``core.triggers.escalation``); this module applies them to the agent. The failure ladder is two
plain functions (so ``scheduling`` can use them when it prepares a payload); the overflow handling
is a mixin because it writes to the log and compacts.

What must hold:
- An overflow error is kept in the log but appended off the active path, so it never re-enters
  the context; then one blocking compaction and one retry; the next overflow of the episode ends
  the turn with an honest error suggesting a larger window (and a ``compaction_outcome`` entry).
- At most one compaction per request: an overflow right after a compaction is reported, not
  compacted again.
- An unrecovered overflow from the current model, newer than the newest compaction, compacts
  before the next turn's first request; one from another model (before a switch) does not count.
- Repeated failures keep less verbatim; at the end of the ladder the context is shrunk lossily
  with a clearly labelled emergency summary that keeps the last user turn and carries the
  previous summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ipython_compact.agent.events import TurnResult
from ipython_compact.agent.openai_chat import error_message
from ipython_compact.agent.state import AgentState, now_iso
from ipython_compact.core.cutpoints import is_cut_point
from ipython_compact.core.entries import COMPACTION, COMPACTION_OUTCOME, MESSAGE, Entry
from ipython_compact.core.overflow import OVERFLOW_FAILURE_MESSAGE, message_is_overflow, overflow_step
from ipython_compact.core.triggers import EMERGENCY_HEADER, escalation


def keep_recent_after_failures(failures: int, keep_recent_tokens: int) -> tuple[int | None, bool]:
    """(tokens to keep verbatim — None for the settings' own —, whether to shrink lossily)."""
    esc = escalation(failures, keep_recent_tokens)
    if esc.emergency:
        return 0, True
    return (None if failures == 0 else esc.keep_recent_tokens), False


def emergency_payload(path: Sequence[Entry], reason: str, tokens_before: int) -> dict[str, Any] | None:
    """Lossy shrink of the context ``path``: keep the last user turn verbatim, carry the previous
    summary, drop the rest (None when there is no earlier user turn to cut at)."""
    candidates = [i for i, e in enumerate(path) if is_cut_point(e) and e.kind == MESSAGE and e.role == "user"]
    if not candidates or candidates[-1] == 0:
        return None
    cut = path[candidates[-1]]
    previous = [e.data.get("summary", "") for e in path if e.kind == COMPACTION]
    carried = f"\n\n<carried-compaction-summary>\n{previous[-1]}\n</carried-compaction-summary>" if previous else ""
    dropped = sum(1 for e in path[: candidates[-1]] if e.kind == MESSAGE)
    return {
        "summary": f"{EMERGENCY_HEADER}\n{dropped} messages were dropped.{carried}",
        "first_kept_entry_id": cut.id,
        "tokens_before": tokens_before,
        "reason": "emergency",
        "details": {"emergency": True, "trigger": reason, "dropped_messages": dropped},
    }


class OverflowRecovery(AgentState):
    """The overflow state machine applied to the agent (mixed into ``Agent``)."""

    def _pre_prompt_overflow_check(self) -> None:
        """Before a new turn's first request: an unrecovered overflow from the *current* model
        (newer than the newest compaction) compacts first; one from another model does not count."""
        since = self.store.entries(self.session, after_newest=COMPACTION)
        last = next((e.message for e in reversed(since) if e.role == "assistant" and e.message), None)
        if last is None or not message_is_overflow(last, self.context_window):
            return
        same = last.get("model") == self.model and last.get("provider") == self.provider
        step = overflow_step("idle", "overflow", same_model=same, enabled=self.settings.enabled)
        if step.action == "ignore":
            self._emit("guard", f"earlier overflow ignored: {step.why}", guard="model_switch")
        elif step.action == "compact_and_retry":
            self._compact_blocking("overflow", "blocking compaction: the last request of this model overflowed")

    def _on_error(self, text: str, code: str | None, status: int | None) -> TurnResult | None:
        """A failed request: log it; an overflow is recovered (None means "retry the request")."""
        msg = error_message(provider=self.provider, model=self.model, timestamp=now_iso(), text=text, code=code, status=status)
        if not message_is_overflow(msg, self.context_window):
            self._append_message(msg)
            self._emit("error", text, status=status)
            return _failed(f"The model request failed: {text}", text)
        # Keep the error in the log but off the active path: it never re-enters the context.
        self._append_message(msg, move_leaf=False)
        step = overflow_step(self._recovery, "overflow", same_model=msg["model"] == self.model, enabled=self.settings.enabled)
        if step.action == "compact_and_retry" and self._compacted_for_request:
            # At most one compaction per request: this one already waited on a compaction.
            step = overflow_step("attempted", "overflow")
        self._recovery = step.state
        self._emit("overflow", f"{text} -> {step.action}", action=step.action)
        if step.action == "compact_and_retry":
            rec = self._compact_blocking("overflow", "blocking compaction to recover from the overflow")
            if rec.state == "placed":
                return None
            return _failed(f"{OVERFLOW_FAILURE_MESSAGE} (compaction did not help: {rec.error or rec.state})")
        if step.action == "report_failure":
            self._append(COMPACTION_OUTCOME, {"reason": "overflow", "outcome": "failed", "error": OVERFLOW_FAILURE_MESSAGE})
            return _failed(OVERFLOW_FAILURE_MESSAGE)
        return _failed(f"The model request failed: {text}", text)


def _failed(message: str, error: str | None = None) -> TurnResult:
    """A turn that ends in an error before any step completed (``error`` defaults to ``message``)."""
    return TurnResult("error", message, 0, error=message if error is None else error)
