"""A session's compactions as the panel's timeline and ``%compact log`` list them, read from the log
alone (the kernel's ``summaries`` op and ``server_extension`` without a kernel share it, so the
two never disagree).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ipython_compact.core.comm_protocol import CompactionSummary
from ipython_compact.core.entries import (
    BRANCH_SUMMARY,
    COMPACTION,
    CUSTOM_MESSAGE,
    KERNEL_STATE,
    MESSAGE,
    SYSTEM,
    Entry,
)

if TYPE_CHECKING:
    from ipython_compact.store import SessionStore

#: The kinds the model sees verbatim in a kept tail (``core.messages.in_context``, compactions
#: aside): what the compaction's own ``kept_entries`` counts, so the timeline counts them too.
KEPT_KINDS = (MESSAGE, CUSTOM_MESSAGE, SYSTEM, KERNEL_STATE, BRANCH_SUMMARY)


def summaries_of(store: SessionStore, session: str, limit: int = 20) -> list[CompactionSummary]:
    """The ``summaries`` op's compactions of ``session``, oldest first (also served without a kernel
    by ``server_extension``: they are read from the session log alone)."""
    compactions = store.path(session, kinds=(COMPACTION,))  # mark chain only
    out: list[CompactionSummary] = []
    for e in compactions[-limit:] if limit > 0 else compactions:
        details = e.data.get("details")
        details = details if isinstance(details, dict) else {}
        out.append(
            {
                "id": e.id,
                "timestamp": e.timestamp,
                # pi records neither a reason nor the tokens after: such a compaction came in by
                # import (the CLI's `show --list` says so too), and its after is read off the log
                "reason": e.data.get("reason") or "imported",
                "tokens_before": e.data.get("tokens_before"),
                "tokens_after": details.get("tokens_after") or _context_right_after(store, session, e),
                "summary": e.data.get("summary", ""),
                "first_kept_entry_id": e.data.get("first_kept_entry_id"),
                "focus": details.get("focus"),
                "kept_entries": _kept_messages(store, session, e),
            }
        )
    return out


def _context_right_after(store: SessionStore, session: str, compaction: Entry) -> int | None:
    """The context's tokens with ``compaction`` as its leaf (checkpoint and kept tail), estimated as
    ``status`` estimates them; read in proportion to the kept span. None when the log cannot say."""
    from ipython_compact.core.tokens import estimate_context  # start-up: only imported compactions

    try:
        view = store.context_view(session, leaf=compaction.id)
        return int(estimate_context(view.entries, "density", tokens=view.tokens("density")).tokens)
    except (KeyError, ValueError):  # a damaged log: the figure stays unknown
        return None


def _kept_messages(store: SessionStore, session: str, compaction: Entry) -> int:
    """Context entries from the compaction's first kept entry up to it (a walk over that span only):
    the figure the compacting cell showed (``Plan.keep``), not the chat messages alone, which
    left out the kernel-state notices in the tail and disagreed by one."""
    first_kept = compaction.data.get("first_kept_entry_id")
    if not isinstance(first_kept, str):
        return 0
    try:
        return int(store.count_on_path(session, KEPT_KINDS, leaf=compaction.id, from_id=first_kept))
    except KeyError:  # not on the path (a damaged log): nothing counted as kept
        return 0
