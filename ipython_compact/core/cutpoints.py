"""Where to cut: keep roughly ``keep_recent_tokens`` of the newest context verbatim.

Rules (pi's, with the differences named):

- Valid cut points are entries a kept region may start with: messages with role ``user``,
  ``assistant``, ``bashExecution``, ``custom``, ``branchSummary`` or ``compactionSummary``, and
  ``branch_summary``, ``custom_message``, ``system`` and ``kernel_state`` entries. Never a
  ``toolResult``: it must stay with the assistant message that called the tool. A cut at an
  assistant message keeps its tool results, which follow it.
- Walk back from the newest entry summing the estimates of context entries (compactions are
  skipped); at the first index where the sum reaches ``keep_recent_tokens``, cut at the first
  valid cut point at or after it. If the budget is never reached, keep everything (cut at the first
  cut point); if there is no cut point at all, the cut is ``start``.
- Fallback when the budget is reached but no valid cut point follows the crossing (the newest
  entries alone exceed ``keep_recent_tokens``, e.g. one huge trailing tool result): pi's rule
  (``"keep_all"``) keeps everything, so an overflow or blocking compaction finds nothing to
  summarize and the session stays stuck; Prime's rule (``"last_cut"``) cuts at the last valid cut
  point before the crossing, keeping less than the budget would ask but always making room.
  The default follows the estimator: ``chars4`` is the pi-compatible path and keeps pi's rule;
  the density estimator (the product's default, used by the agent engine and the Compactor)
  takes Prime's. An explicit ``fallback`` overrides either.
- Extend the cut backwards over entries that are not messages (model/thinking changes, labels,
  custom state, our system/kernel notices...) until a ``message`` entry or a ``compaction``.
- Split turn: if the cut is not a user message, the turn start is the nearest preceding ``user`` or
  ``bashExecution`` message or user-side entry (``branch_summary``, ``custom_message``, ``system``,
  ``kernel_state``), and the cut is a split turn when one exists. This is pi's rule to the letter,
  quirks included: a cut at a ``bashExecution`` message, a ``custom_message`` or a
  ``branch_summary`` reports itself as the turn start of a split (pi 0.73.1 does so after a
  compaction too, also when the cut is the compaction's first kept entry: issue 36), and a cut
  extended back over a setting change before a user message reports the previous turn as split.
  ``preparation`` corrects both for ``density`` (no split when nothing of the turn is cut away),
  while this function stays comparable with pi's ``findCutPoint`` index for index.
- Optional turn alignment (Prime): a split cut moves back to its turn start when the extra kept
  cost is at most ``keep_recent_tokens``, so the kept region keeps its own request.
- pi counts only ``message`` entries in the walk, and so does ``chars4``; the density estimator
  counts every entry that puts a message in the context (custom messages, branch summaries and
  notices take room too).

``tokens`` (optional) gives the per-entry estimates of ``path`` (the store keeps them), so the walk
re-scans nothing; entries that put nothing in context must be 0 there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from ipython_compact.core.entries import COMPACTION, MESSAGE, Entry
from ipython_compact.core.messages import USER_SIDE_KINDS, in_context
from ipython_compact.core.settings import Estimator
from ipython_compact.core.tokens import estimate_entry_tokens

CUT_ROLES: Final = frozenset(
    {"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)
TURN_START_ROLES: Final = frozenset({"user", "bashExecution"})
#: Prime's TURN_ALIGNMENT_EXTRA_SHARE: extra kept cost allowed, as a share of keep_recent_tokens.
TURN_ALIGNMENT_EXTRA_SHARE: Final = 1.0

CutFallback = Literal["keep_all", "last_cut"]
CUT_FALLBACKS: Final = ("keep_all", "last_cut")


def default_fallback(estimator: Estimator | str) -> CutFallback:
    """pi's rule on the pi-compatible ``chars4`` path, Prime's everywhere else (see module docs)."""
    return "keep_all" if estimator == "chars4" else "last_cut"


@dataclass(frozen=True)
class CutPoint:
    """``first_kept_index``: first path index kept verbatim; ``turn_start_index``: -1 unless split."""

    first_kept_index: int
    turn_start_index: int
    is_split_turn: bool


def is_cut_point(entry: Entry) -> bool:
    """True when a kept region may start at ``entry``."""
    if entry.kind == MESSAGE:
        return entry.role in CUT_ROLES
    return entry.kind in USER_SIDE_KINDS


def is_turn_start(entry: Entry) -> bool:
    """True when ``entry`` opens a turn (a user request or a user-side notice)."""
    if entry.kind == MESSAGE:
        return entry.role in TURN_START_ROLES
    return entry.kind in USER_SIDE_KINDS


def find_turn_start(path: Sequence[Entry], index: int, start: int) -> int:
    """Nearest turn start at or before ``index`` (not before ``start``), or -1."""
    for i in range(index, start - 1, -1):
        if is_turn_start(path[i]):
            return i
    return -1


def _counts(entry: Entry) -> bool:
    return entry.kind != COMPACTION and in_context(entry)


def _counts_pi(entry: Entry) -> bool:
    return entry.kind == MESSAGE  # pi's walk prices message entries only


def _extend_back(path: Sequence[Entry], cut: int, start: int) -> int:
    while cut > start:
        previous = path[cut - 1]
        if previous.kind in (MESSAGE, COMPACTION):
            break
        cut -= 1
    return cut


def find_cut_point(
    path: Sequence[Entry],
    start: int,
    end: int,
    keep_recent_tokens: int,
    *,
    tokens: Sequence[int] | None = None,
    estimator: Estimator | str = "density",
    align_turns: bool = False,
    fallback: CutFallback | None = None,
) -> CutPoint:
    """The cut for ``path[start:end]`` that keeps about ``keep_recent_tokens`` (see module docs).

    ``fallback`` (default: ``default_fallback(estimator)``) decides what happens when the budget
    is reached with no valid cut point after the crossing.
    """
    if not 0 <= start <= end <= len(path):
        raise ValueError(f"bad range [{start}, {end}) for a path of {len(path)} entries")
    if tokens is not None and len(tokens) != len(path):
        raise ValueError(f"tokens has {len(tokens)} counts for a path of {len(path)} entries")
    if keep_recent_tokens < 0:
        raise ValueError(f"keep_recent_tokens must be >= 0, got {keep_recent_tokens}")
    rule = default_fallback(estimator) if fallback is None else fallback
    if rule not in CUT_FALLBACKS:
        raise ValueError(f"unknown cut fallback {rule!r}; expected one of {', '.join(CUT_FALLBACKS)}")

    counts = _counts_pi if estimator == "chars4" else _counts

    def cost(i: int) -> int:
        if not counts(path[i]):
            return 0
        return tokens[i] if tokens is not None else estimate_entry_tokens(path[i], estimator)

    cut = -1
    accumulated = 0
    crossed = -1
    for i in range(end - 1, start - 1, -1):
        if not counts(path[i]):
            continue
        accumulated += cost(i)
        if accumulated >= keep_recent_tokens:
            crossed = i
            break
    if crossed >= 0:
        for c in range(crossed, end):
            if is_cut_point(path[c]):
                cut = c
                break
        if cut < 0 and rule == "last_cut":  # Prime: the last valid cut point before the crossing
            for c in range(crossed - 1, start - 1, -1):
                if is_cut_point(path[c]):
                    cut = c
                    break
    if cut < 0:  # budget never reached, or nothing cuttable after the crossing: keep everything
        for c in range(start, end):
            if is_cut_point(path[c]):
                cut = c
                break
    if cut < 0:
        return CutPoint(start, -1, False)

    cut = _extend_back(path, cut, start)
    cut_entry = path[cut]
    if cut_entry.kind == MESSAGE and cut_entry.role == "user":
        return CutPoint(cut, -1, False)
    turn_start = find_turn_start(path, cut, start)
    if turn_start < 0:
        return CutPoint(cut, -1, False)
    if align_turns:
        extra = sum(cost(i) for i in range(turn_start, cut))
        if extra <= keep_recent_tokens * TURN_ALIGNMENT_EXTRA_SHARE:
            return CutPoint(_extend_back(path, turn_start, start), -1, False)
    return CutPoint(cut, turn_start, True)
