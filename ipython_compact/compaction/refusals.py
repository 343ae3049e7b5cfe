"""Why there is nothing to compact, with the entry and the numbers that decided it.

Why: "context 20,612 tokens, tail 500" read as a contradiction. The usual cause is one entry (a
long command output, a pasted file) larger than the whole recent tail: an entry is kept or
summarized whole, so the tail starts at it, and when it is already the first entry after the last
checkpoint nothing older is left. The refusal names that entry, its size, why it cannot be cut,
and what would help.

What must hold:
- Pure: reads the view's entries and stored token counts, writes nothing.
- ``render(setting)`` names the tail budget the way the caller's user sets it
  (``--keep-recent-tokens`` in the CLI, ``CompactConfig.compaction['keep_recent_tokens']`` in a
  kernel): a message never names a setting that cannot be set as named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ipython_compact.core.cutpoints import find_cut_point
from ipython_compact.core.entries import COMPACTION, MESSAGE, Entry, newest_compaction_index
from ipython_compact.core.messages import in_context
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.view import first_kept_index

Case = Literal["ends_in_compaction", "no_conversation", "within_tail", "entry_too_big", "no_cut_point"]

#: The tail budget as the library and its settings mapping call it.
KEEP_SETTING = "keep_recent_tokens"


@dataclass(frozen=True)
class NothingReason:
    """The facts behind one refusal; ``render`` words them."""

    session: str
    case: Case
    context_tokens: int
    keep: int
    tail_tokens: int = 0
    checkpoint_tokens: int = 0
    after_compaction: bool = False
    entry_id: str | None = None
    entry_label: str = ""
    entry_tokens: int = 0

    def render(self, setting: str = KEEP_SETTING) -> str:
        return f"nothing to compact in session {self.session!r}: {self.detail(setting)}"

    def detail(self, setting: str = KEEP_SETTING) -> str:
        """The reason without the session: what decided it, and what would help."""
        if self.case == "ends_in_compaction":
            return "the context ends in a compaction (nothing new since)"
        if self.case == "no_conversation":
            return f"it holds no conversation yet ({self.context_tokens:,} tokens in context)"
        since = (
            f"the last compaction's checkpoint ({self.checkpoint_tokens:,} tokens)"
            if self.after_compaction
            else "the start of the session"
        )
        if self.case == "within_tail":
            scope = "since the last compaction" if self.after_compaction else "of conversation"
            verb = "fit in" if self.tail_tokens < self.keep else "just fill"
            return (
                f"the context holds {self.context_tokens:,} tokens; the {self.tail_tokens:,} tokens "
                f"{scope} {verb} the recent tail kept verbatim ({setting} {self.keep:,}), which starts at "
                f"a turn or message, so nothing older is left to summarize. A smaller {setting} (say "
                f"{max(1, self.tail_tokens // 2):,}) would summarize the older part"
            )
        if self.case == "entry_too_big":
            return (
                f"the context holds {self.context_tokens:,} tokens; one entry, {self.entry_id} "
                f"({self.entry_label}), is larger than the whole recent tail kept verbatim ({setting} "
                f"{self.keep:,}). An entry is kept or summarized whole, never cut in half, so the kept "
                f"tail ({self.tail_tokens:,} tokens) starts at it, and it directly follows {since}: "
                f"nothing older is left to summarize. A smaller {setting} does not help; once about "
                f"{self.keep:,} tokens of newer conversation follow the entry, the tail starts after "
                "it and it can be summarized"
            )
        return (
            f"the context holds {self.context_tokens:,} tokens; the recent tail ({setting} "
            f"{self.keep:,}) reaches its budget at entry {self.entry_id} ({self.entry_label}), and may "
            "start only at a user or assistant message (never between a tool call and its result); "
            f"the nearest such place directly follows {since}: nothing older is left to summarize"
        )


def entry_label(entry: Entry, tokens: int) -> str:
    """``bashExecution, 17,102 tokens``: what the entry is and its size."""
    kind = str(entry.role) if entry.kind == MESSAGE and entry.role else entry.kind
    return f"{kind}, {tokens:,} tokens"


def why_nothing(
    session: str,
    path: Sequence[Entry],
    counts: Sequence[int],
    settings: CompactionSettings,
    context_tokens: int,
) -> NothingReason:
    """The reason ``prepare_compaction`` found nothing in ``path`` (the context view) with
    ``settings``; ``counts`` are the view's per-entry estimates for ``settings.estimator``."""
    keep = settings.keep_recent_tokens
    if not path:
        return NothingReason(session, "no_conversation", context_tokens, keep)
    if path[-1].kind == COMPACTION:
        return NothingReason(session, "ends_in_compaction", context_tokens, keep)
    previous = newest_compaction_index(path)
    start = 0
    checkpoint = 0
    if previous >= 0:
        found = first_kept_index(path, previous)
        start = previous + 1 if found is None else found
        checkpoint = counts[previous]
    pi_walk = settings.estimator == "chars4"

    def counted(i: int) -> bool:
        e = path[i]
        return e.kind == MESSAGE if pi_walk else (e.kind != COMPACTION and in_context(e))

    cut = find_cut_point(
        path,
        start,
        len(path),
        keep,
        tokens=counts,
        estimator=settings.estimator,
        align_turns=settings.turn_alignment,
    ).first_kept_index
    tail = sum(counts[i] for i in range(cut, len(path)) if counted(i))
    base = NothingReason(
        session, "within_tail", context_tokens, keep, tail, checkpoint, after_compaction=previous >= 0
    )
    accumulated, crossed = 0, -1
    for i in range(len(path) - 1, start - 1, -1):
        if counted(i):
            accumulated += counts[i]
            if accumulated >= keep:
                crossed = i
                break
    first = next((i for i in range(start, len(path)) if counted(i)), len(path))
    if crossed < 0 and tail == 0 and previous < 0:
        return replace(base, case="no_conversation")
    if crossed < 0 or (crossed == first and counts[crossed] < keep):
        return base
    return replace(
        base,
        case="entry_too_big" if counts[crossed] >= keep else "no_cut_point",
        entry_id=path[crossed].id,
        entry_label=entry_label(path[crossed], counts[crossed]),
        entry_tokens=counts[crossed],
    )
