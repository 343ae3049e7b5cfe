"""What a compaction would summarize, keep and cut, decided before any model is called.

The summarized span starts at the *previous compaction's first-kept entry* (pi since 0.7x and Prime do
this; pi's March 2026 versions started after the previous compaction entry, so the messages that
compaction kept verbatim were later dropped without ever being summarized — a regression test
guards against it). Compaction entries are never part of the summarized input; the previous
summary travels separately as ``previous_summary``.

What must hold:
- ``messages_to_summarize`` + ``turn_prefix`` + ``kept`` cover every context entry of
  ``path[boundary_start:]`` except compactions, in order, each exactly once.
- ``None`` means nothing to do: the path is empty, already ends in a compaction, or the cut would
  summarize nothing.
- File lists: tool calls named ``read``/``write``/``edit`` whose ``arguments.path`` is a string;
  ``modified = edited ∪ written``; ``read = read − modified``; both sorted and merged with the
  previous compaction's details unless that compaction came from a hook (``core/file_lists.py``).
- Split turns: with the density estimator a split is reported only when part of the turn is
  really cut away (a kept ``bashExecution``, a kept user message behind a setting change, or an
  empty turn prefix is no split). With ``chars4`` the split is pi's flag as ``findCutPoint``
  gives it, quirks included (the turn prefix may then be a whole earlier turn, or empty).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ipython_compact.core.cutpoints import find_cut_point, is_turn_start
from ipython_compact.core.entries import COMPACTION, Entry, newest_compaction_index
from ipython_compact.core.file_lists import file_lists, merge_details_files, track_file_ops
from ipython_compact.core.messages import in_context
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.tokens import estimate_context
from ipython_compact.core.view import first_kept_index


@dataclass(frozen=True)
class Preparation:
    """A compaction plan. Indices are into the ``path`` given to ``prepare_compaction``."""

    first_kept_entry_id: str
    first_kept_index: int
    messages_to_summarize: tuple[Entry, ...]
    turn_prefix: tuple[Entry, ...]
    kept: tuple[Entry, ...]
    is_split_turn: bool
    turn_start_index: int
    previous_summary: str | None
    previous_compaction_index: int
    tokens_before: int
    read_files: tuple[str, ...]
    modified_files: tuple[str, ...]
    boundary_start: int


def _context_entries(path: Sequence[Entry], start: int, end: int) -> tuple[Entry, ...]:
    return tuple(e for e in path[start:end] if e.kind != COMPACTION and in_context(e))


def _kept_starts_turn(path: Sequence[Entry], first_kept: int) -> bool:
    """True when the first context entry kept opens a turn: then no turn was split.

    Corrects pi's split-turn quirks (see ``cutpoints``; not applied with ``chars4``): a kept
    ``bashExecution``, or a user message behind a setting change, starts its own turn.
    """
    for entry in path[first_kept:]:
        if entry.kind != COMPACTION and in_context(entry):
            return is_turn_start(entry)
    return False


def prepare_compaction(
    path: Sequence[Entry],
    settings: CompactionSettings,
    *,
    tokens: Sequence[int] | None = None,
    files: bool = True,
) -> Preparation | None:
    """Plan a compaction of the root→leaf ``path`` (or its tail from ``context_start_index``).

    ``tokens`` are the per-entry estimates of ``path`` (same estimator as ``settings.estimator``).
    ``files=False`` leaves the file lists empty (a preview shows none; it plans on skeletons).
    """
    if not path or path[-1].kind == COMPACTION:
        return None
    if tokens is not None and len(tokens) != len(path):
        raise ValueError(f"tokens has {len(tokens)} counts for a path of {len(path)} entries")
    previous = newest_compaction_index(path)
    previous_summary: str | None = None
    boundary_start = 0
    if previous >= 0:
        prev = path[previous]
        summary = prev.data.get("summary")
        previous_summary = summary if isinstance(summary, str) else None
        found = first_kept_index(path, previous)
        boundary_start = previous + 1 if found is None else found

    cut = find_cut_point(
        path,
        boundary_start,
        len(path),
        settings.keep_recent_tokens,
        tokens=tokens,
        estimator=settings.estimator,
        align_turns=settings.turn_alignment,
    )
    pi_rules = settings.estimator == "chars4"
    is_split = cut.is_split_turn and (pi_rules or not _kept_starts_turn(path, cut.first_kept_index))
    turn_start = cut.turn_start_index if is_split else -1
    history_end = turn_start if is_split else cut.first_kept_index
    to_summarize = _context_entries(path, boundary_start, history_end)
    prefix = _context_entries(path, turn_start, cut.first_kept_index) if is_split else ()
    if is_split and not prefix and not pi_rules:
        is_split, turn_start = False, -1
    if not to_summarize and not prefix:
        return None

    read: set[str] = set()
    written: set[str] = set()
    edited: set[str] = set()
    if previous >= 0 and files:
        merge_details_files(path[previous].data, read, edited)
    for entry in (*to_summarize, *prefix) if files else ():
        message = entry.message
        if message is not None:  # track_file_ops reads only assistant tool calls
            track_file_ops(message, read, written, edited)
    read_files, modified_files = file_lists(read, written, edited)

    return Preparation(
        first_kept_entry_id=path[cut.first_kept_index].id,
        first_kept_index=cut.first_kept_index,
        messages_to_summarize=to_summarize,
        turn_prefix=prefix,
        kept=_context_entries(path, cut.first_kept_index, len(path)),
        is_split_turn=is_split,
        turn_start_index=turn_start,
        previous_summary=previous_summary,
        previous_compaction_index=previous,
        tokens_before=estimate_context(path, settings.estimator, tokens=tokens).tokens,
        read_files=read_files,
        modified_files=modified_files,
        boundary_start=boundary_start,
    )
