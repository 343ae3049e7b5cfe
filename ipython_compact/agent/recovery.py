"""Getting out of trouble: a prompt the server says is too long, and compactions that keep failing.

Why: both are state machines whose decisions are pure (``core.overflow.overflow_step``,
``core.triggers.escalation``). The failure ladder is two plain functions the scheduler applies when
it prepares a payload; the overflow episode is applied by the turn loop (``loop``), which owns the
episode's state.

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

from ipython_compact.core.cutpoints import is_cut_point
from ipython_compact.core.entries import COMPACTION, MESSAGE, Entry
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
    carried = (
        f"\n\n<carried-compaction-summary>\n{previous[-1]}\n</carried-compaction-summary>" if previous else ""
    )
    dropped = sum(1 for e in path[: candidates[-1]] if e.kind == MESSAGE)
    return {
        "summary": f"{EMERGENCY_HEADER}\n{dropped} messages were dropped.{carried}",
        "first_kept_entry_id": cut.id,
        "tokens_before": tokens_before,
        "reason": "emergency",
        "details": {"emergency": True, "trigger": reason, "dropped_messages": dropped},
    }
