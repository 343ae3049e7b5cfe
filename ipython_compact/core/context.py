"""The model's view of a session path, and branch-summary collection.

The view of a root→leaf path is: the newest compaction's summary (wrapped as a user message),
then the path's entries from that compaction's first-kept entry up to the compaction, then every
entry after it. Only ``message``, ``custom_message``, ``branch_summary``, ``system`` and
``kernel_state`` entries produce messages; older compactions inside the kept range are skipped.
Without a compaction the view is every context entry of the path.

Which path entries the view holds (``view_indices``, ``context_start_index``) is decided in
``core/view.py`` and re-exported here; this module builds the messages from them.

What must hold:
- Only the newest compaction matters; history is never removed from the log, only from the view.
- ``context_start_index(path)`` is the first path index the view reads, so a store can load just
  ``path[start:]`` and get an identical view from it (cost grows with the context, not the history).
- If a compaction's first-kept id is not on the path (a damaged or foreign log), the view starts
  at the compaction itself: the summary plus what came after, never older raw history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ipython_compact.core.entries import BRANCH_SUMMARY, COMPACTION, JSON, Entry
from ipython_compact.core.file_lists import file_lists, merge_details_files, track_file_ops
from ipython_compact.core.messages import SUMMARY_PREFIX, entry_message, to_llm
from ipython_compact.core.settings import Estimator
from ipython_compact.core.tokens import estimate_message_tokens
from ipython_compact.core.view import context_start_index, view_indices

__all__ = [
    "SUMMARY_PREFIX",
    "BranchCollection",
    "BranchPreparation",
    "build_agent_messages",
    "build_context",
    "collect_branch_entries",
    "context_start_index",
    "prepare_branch_entries",
    "view_indices",
]


def build_agent_messages(path: Sequence[Entry]) -> list[JSON]:
    """The view as pi-shaped agent messages (``compactionSummary``, ``custom``… kept as such)."""
    out: list[JSON] = []
    for i in view_indices(path):
        message = entry_message(path[i])
        if message is not None:
            out.append(message)
    return out


def build_context(path: Sequence[Entry], *, summary_prefix: str = SUMMARY_PREFIX) -> list[JSON]:
    """The view as provider-ready messages: roles ``system``, ``user``, ``assistant``, ``toolResult``.

    The compaction summary becomes a user message wrapped in ``summary_prefix`` … ``</summary>``.
    """
    out: list[JSON] = []
    for message in build_agent_messages(path):
        llm = to_llm(message, summary_prefix=summary_prefix)
        if llm is not None:
            out.append(llm)
    return out


# --------------------------------------------------------------------------------------------
# Branch summaries
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BranchCollection:
    """Entries of the abandoned branch (chronological) and the deepest common ancestor's id."""

    entries: tuple[Entry, ...]
    common_ancestor_id: str | None


def collect_branch_entries(old_path: Sequence[Entry], target_path: Sequence[Entry]) -> BranchCollection:
    """What the user leaves behind when moving from ``old_path``'s leaf to ``target_path``'s leaf.

    The deepest common ancestor is the newest entry of ``target_path`` that is also on
    ``old_path``; the collected entries are those of ``old_path`` after it. Compaction boundaries
    do not stop the collection (pi's rule).
    """
    old_ids = {e.id for e in old_path}
    ancestor: str | None = None
    for entry in reversed(target_path):
        if entry.id in old_ids:
            ancestor = entry.id
            break
    start = 0
    if ancestor is not None:
        for i, entry in enumerate(old_path):
            if entry.id == ancestor:
                start = i + 1
                break
    return BranchCollection(tuple(old_path[start:]), ancestor)


@dataclass(frozen=True)
class BranchPreparation:
    """Messages to summarize for a branch (chronological), their estimate, and file lists."""

    entries: tuple[Entry, ...]
    messages: tuple[JSON, ...]
    total_tokens: int
    read_files: tuple[str, ...]
    modified_files: tuple[str, ...]


def _branch_message(entry: Entry) -> JSON | None:
    message = entry_message(entry)
    if message is None or message.get("role") == "toolResult":
        return None  # a tool call already says what was done; results are the bulk
    return message


def prepare_branch_entries(
    entries: Sequence[Entry], token_budget: int, estimator: Estimator | str = "density"
) -> BranchPreparation:
    """Newest-first selection within ``token_budget`` (0 = unlimited), tool results skipped.

    File lists merge every branch summary's details (not hook-made ones) and the tool calls of
    every selected message. A summary entry that does not fit is still taken while less than 90%
    of the budget is used; selection stops at the first message that does not fit.
    """
    read: set[str] = set()
    written: set[str] = set()
    edited: set[str] = set()
    for entry in entries:
        if entry.kind == BRANCH_SUMMARY:
            merge_details_files(entry.data, read, edited)
    chosen: list[tuple[Entry, JSON]] = []
    total = 0
    for entry in reversed(entries):
        message = _branch_message(entry)
        if message is None:
            continue
        track_file_ops(message, read, written, edited)
        cost = estimate_message_tokens(message, estimator)
        if token_budget > 0 and total + cost > token_budget:
            if entry.kind in (COMPACTION, BRANCH_SUMMARY) and total < token_budget * 0.9:
                chosen.append((entry, message))
                total += cost
            break
        chosen.append((entry, message))
        total += cost
    chosen.reverse()
    read_files, modified_files = file_lists(read, written, edited)
    return BranchPreparation(
        entries=tuple(e for e, _ in chosen),
        messages=tuple(m for _, m in chosen),
        total_tokens=total,
        read_files=read_files,
        modified_files=modified_files,
    )
