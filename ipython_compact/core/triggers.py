"""When the agent loop compacts: the trigger and guard decisions, as pure functions.

Why pure: every "should we compact now?" question is a function of a few numbers and flags the
loop already knows (context size, the two threshold lines, where the usage anchor sits relative to
the newest compaction, whether a compaction is in flight, how recently one failed). Keeping the
decisions here makes them table-testable and keeps the loop a thin sequencer.

What must hold:
- Before a request: above the blocking line → ``blocking`` (compact first, then send); above the
  background line → ``background`` (compact beside the conversation, at most one in flight);
  otherwise ``none``. ``decide`` never returns a compaction when automatic compaction is off.
- Guards, each naming itself in ``Decision.guard`` when it is what stopped a trigger: usage older
  than the newest compaction never triggers (``stale_usage``); a cooldown after a failure
  (``cooldown``); at most one compaction per request (``once_per_request``); a background
  compaction already in flight does not start another (``in_flight``).
- At the end of a turn: a model-requested compaction runs even when automatic compaction is off,
  and is dropped when the turn was aborted.
- Repeated failures escalate: keep less verbatim each time, and in the end a clearly-labelled lossy
  emergency shrink instead of a stuck session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Action = Literal["none", "background", "blocking"]
Guard = Literal[
    "disabled", "no_window", "unknown_size", "stale_usage", "cooldown", "once_per_request", "in_flight"
]


@dataclass(frozen=True)
class Decision:
    """What to do before sending a request, and why (``guard`` names the guard that vetoed)."""

    action: Action
    why: str
    guard: Guard | None = None


@dataclass(frozen=True)
class PreRequest:
    """Everything ``decide`` needs, gathered by the loop before each model request.

    ``tokens`` is the estimated context size of the request about to be sent (usage anchor plus
    estimates of what came after it), or None when unknown. ``usage_stale`` is True when that
    anchor is older than the newest compaction (its usage describes a context that no longer
    exists). ``background_line`` of None or ``>= blocking_line`` means background is off.
    """

    enabled: bool
    tokens: int | None
    blocking_line: int
    background_line: int | None
    usage_stale: bool = False
    in_cooldown: bool = False
    compacted_this_request: bool = False
    background_in_flight: bool = False


def decide(s: PreRequest) -> Decision:
    """The pre-request trigger decision (see the module docstring for the rules)."""
    if not s.enabled:
        return Decision("none", "automatic compaction is disabled", "disabled")
    if s.blocking_line <= 0:
        return Decision("none", "the window is too small for a blocking line", "no_window")
    if s.tokens is None:
        return Decision("none", "context size is unknown", "unknown_size")
    over_blocking = s.tokens > s.blocking_line
    bg_on = s.background_line is not None and 0 < s.background_line < s.blocking_line
    over_background = bg_on and s.background_line is not None and s.tokens > s.background_line
    if not (over_blocking or over_background):
        return Decision("none", f"{s.tokens} tokens is below every line")
    if s.usage_stale:
        return Decision("none", "usage predates the newest compaction", "stale_usage")
    if s.compacted_this_request:
        return Decision("none", "this request already waited on a compaction", "once_per_request")
    if s.in_cooldown:
        return Decision("none", "a recent compaction failed; cooling down", "cooldown")
    if over_blocking:
        return Decision("blocking", f"{s.tokens:,} > blocking line {s.blocking_line:,}")
    if s.background_in_flight:
        return Decision("none", "a background compaction is already running", "in_flight")
    return Decision("background", f"{s.tokens:,} > background line {s.background_line:,}")


def in_cooldown(last_failure_at: float | None, now: float, cooldown_seconds: float) -> bool:
    """True while ``now`` is within ``cooldown_seconds`` of the last failure (times are arguments)."""
    if last_failure_at is None or cooldown_seconds <= 0:
        return False
    return now - last_failure_at < cooldown_seconds


def usage_is_stale(anchor_index: int | None, newest_compaction_index: int | None) -> bool:
    """An assistant usage anchor at or before the newest compaction (in path order) is stale.

    Path order, not timestamps: the log's order is the truth, clocks can repeat or go backwards.
    No anchor is not stale (the size then comes from estimates alone).
    """
    if anchor_index is None or newest_compaction_index is None:
        return False
    return anchor_index <= newest_compaction_index


TurnEndAction = Literal["none", "run_requested", "drop_requested"]


def decide_turn_end(*, requested: bool, aborted: bool) -> TurnEndAction:
    """A compaction the model asked for runs when its turn ends, unless the turn was aborted.

    Automatic-compaction settings do not enter: the model's explicit request wins over them.
    """
    if not requested:
        return "none"
    return "drop_requested" if aborted else "run_requested"


# After this many consecutive failures the loop stops summarizing and shrinks the context lossily.
EMERGENCY_AFTER: Final = 4
# Share of keep_recent_tokens kept verbatim after n consecutive failures (n = index).
_KEEP_SHARE: Final = (1.0, 0.5, 0.25, 0.125)


@dataclass(frozen=True)
class Escalation:
    """How hard the next compaction tries after ``failures`` consecutive failures."""

    keep_recent_tokens: int
    emergency: bool
    why: str


def escalation(failures: int, keep_recent_tokens: int) -> Escalation:
    """Keep less verbatim after each failure; after ``EMERGENCY_AFTER`` failures, an emergency shrink."""
    if failures < 0:
        raise ValueError(f"failures must be >= 0, got {failures}")
    if failures >= EMERGENCY_AFTER:
        return Escalation(0, True, f"{failures} consecutive failures: lossy emergency shrink")
    share = _KEEP_SHARE[failures]
    kept = max(1, int(keep_recent_tokens * share)) if keep_recent_tokens > 0 else 0
    why = (
        "normal compaction"
        if failures == 0
        else (f"{failures} consecutive failures: keep {share:g} of the recent tail")
    )
    return Escalation(kept, False, why)


EMERGENCY_HEADER: Final = (
    "EMERGENCY CONTEXT SHRINK - OLDEST MESSAGES WERE DROPPED WITHOUT BEING SUMMARIZED. "
    "Summarization failed repeatedly; the dropped messages are still in the session log and can be recalled."
)
