"""A session's compactions as the panel's timeline, ``%compact log`` and the CLI's ``show --list``
list them, read from the log alone (the kernel's ``summaries`` op, ``server_extension`` without a
kernel and the CLI share it, so none of them disagrees with another).

Two figures follow each compaction, and both are named wherever they are shown (issue 35, item 6:
one number for one thing): ``tokens_after`` is the compaction's own estimate of its checkpoint
and kept tail; ``context_after`` is the context right after it as ``%compact status`` counts it
(the checkpoint as the model sees it, the kept tail, and the kernel-state notice the kernel places
after a compaction). The gauge shows the second, so the timeline leads with it. With a live
``%%agent`` the gauge counts with the agent's learned estimate: the figure it recorded right after
its compaction (``compaction/context_figures.py``) is the one shown, and ``estimate`` names which
estimate counted it; only a compaction with no record is re-estimated from the log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ipython_compact.compaction.context_figures import estimator_words, recorded
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
from ipython_compact.core.settings import Estimator
from ipython_compact.core.tokens import estimate_context

if TYPE_CHECKING:
    from ipython_compact.store import SessionStore

#: The kinds the model sees verbatim in a kept tail (``core.messages.in_context``, compactions
#: aside): what the compaction's own ``kept_entries`` counts, so the timeline counts them too.
KEPT_KINDS = (MESSAGE, CUSTOM_MESSAGE, SYSTEM, KERNEL_STATE, BRANCH_SUMMARY)
#: What the model sees: past one of these, what follows is no longer "right after" the compaction.
CONTEXT_KINDS = (*KEPT_KINDS, COMPACTION)
#: Bookkeeping entries (snapshot records, pins) stepped over looking for the compaction's notice.
NOTICE_SEARCH_STEPS = 4


def summaries_of(
    store: SessionStore, session: str, limit: int = 20, estimator: Estimator = "density"
) -> list[CompactionSummary]:
    """The ``summaries`` op's compactions of ``session``, oldest first (``limit`` 0: all of them;
    also served without a kernel by ``server_extension``: they are read from the session log alone).
    ``estimator``: the one ``status`` counts with (``CompactionSettings.estimator``)."""
    compactions = store.path(session, kinds=(COMPACTION,))  # mark chain only
    chosen = compactions[-limit:] if limit > 0 else compactions
    return [summary_of(store, session, e, estimator) for e in chosen]


def summary_of(
    store: SessionStore, session: str, e: Entry, estimator: Estimator = "density"
) -> CompactionSummary:
    """One compaction as the timeline shows it (see the module's note on its two figures)."""
    details = e.data.get("details")
    details = details if isinstance(details, dict) else {}
    kept = recorded(store, session, e.id)  # as whoever compacted counted it (the live agent's estimate)
    context_after = kept.tokens if kept is not None else _context_right_after(store, session, e, estimator)
    return {
        "id": e.id,
        "timestamp": e.timestamp,
        # pi records neither a reason nor the tokens after: such a compaction came in by import,
        # and its after is read off the log (checkpoint and kept tail as the log holds them)
        "reason": e.data.get("reason") or "imported",
        "tokens_before": e.data.get("tokens_before"),
        "tokens_after": details.get("tokens_after") or _context_at(store, session, e.id, estimator),
        "context_after": context_after,
        "estimate": kept.estimate if kept is not None else estimator_words(estimator),
        "summary": e.data.get("summary", ""),
        "first_kept_entry_id": e.data.get("first_kept_entry_id"),
        "focus": details.get("focus"),
        "kept_entries": _kept_messages(store, session, e),
    }


def _context_right_after(
    store: SessionStore, session: str, compaction: Entry, estimator: Estimator
) -> int | None:
    """The context as ``status`` counted it right after ``compaction``: with the kernel-state
    notice the kernel appended after it when there is one (a snapshot record may sit between
    them: the kernel snapshots first, then writes the notice naming that snapshot), else with the
    compaction as leaf. Only entries the model never sees are stepped over, a few at most."""
    leaf, step = compaction.id, compaction.id
    try:
        for _ in range(NOTICE_SEARCH_STEPS):
            children = store.children(session, step)
            if not children or (children[0].kind in CONTEXT_KINDS and children[0].kind != KERNEL_STATE):
                break
            step = children[0].id
            if children[0].kind == KERNEL_STATE:
                leaf = step
                break
    except KeyError:  # a damaged log: the compaction alone
        leaf = compaction.id
    return _context_at(store, session, leaf, estimator)


def _context_at(store: SessionStore, session: str, leaf: str, estimator: Estimator) -> int | None:
    """The context's tokens with ``leaf`` as its leaf, estimated as ``status`` estimates them;
    read in proportion to the kept span. None when the log cannot say."""
    try:
        view = store.context_view(session, leaf=leaf)
        return int(estimate_context(view.entries, estimator, tokens=view.tokens(estimator)).tokens)
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
