"""Which entries of a root→leaf path the model's view reads, by index (no messages built).

This is the shared bottom piece of the view: token estimates (``tokens``), the compaction plan
(``preparation``) and the message view (``context``) all need to know where the context starts
and which path entries it holds, and none of them may import the others for it.

Rules:
- Only the newest compaction on the path matters. Its first-kept entry is looked up *before* it
  on the path; a first-kept id that is not there (a damaged or foreign log) yields ``None``.
- The view is the compaction itself (its summary heads the view), then the context entries from
  the first-kept entry up to the compaction (older compactions skipped), then every context entry
  after it. Without a compaction: every context entry of the path.
- ``context_start_index(path)`` is the first path index the view depends on, so a store can load
  ``path[start:]`` and get the identical view from it. A dangling first-kept id starts the view at
  the compaction (summary plus what came after; never older raw history).
"""

from __future__ import annotations

from collections.abc import Sequence

from ipython_compact.core.entries import COMPACTION, Entry, newest_compaction_index
from ipython_compact.core.messages import in_context

__all__ = ["context_start_index", "first_kept_index", "view_indices"]


def first_kept_index(path: Sequence[Entry], compaction_index: int) -> int | None:
    """Path index of the compaction's first-kept entry (searched before it), or None if absent."""
    first_kept_id = path[compaction_index].data.get("first_kept_entry_id")
    for i in range(compaction_index - 1, -1, -1):
        if path[i].id == first_kept_id:
            return i
    return None


def _view_start(path: Sequence[Entry], compaction_index: int) -> int:
    found = first_kept_index(path, compaction_index)
    return compaction_index if found is None else found


def context_start_index(path: Sequence[Entry]) -> int:
    """Index of the first path entry the model's view depends on (0 without a compaction)."""
    c = newest_compaction_index(path)
    return 0 if c < 0 else _view_start(path, c)


def view_indices(path: Sequence[Entry]) -> list[int]:
    """Path indices of the entries whose messages form the view, in view order.

    With a compaction the first index is the compaction itself (its summary heads the view).
    """
    c = newest_compaction_index(path)
    if c < 0:
        return [i for i, e in enumerate(path) if in_context(e)]
    out = [c]
    for i in range(_view_start(path, c), len(path)):
        if i != c and path[i].kind != COMPACTION and in_context(path[i]):
            out.append(i)
    return out
