"""The order the model reads a context in: its question last, the kernel's state before it.

Why: a compaction placed in the middle of a turn (the blocking line before the turn's first
request, an overflow, a silent overflow) appends its system baseline and ``<ipython_state>``
notice *after* the question that started the turn, because the log is append-only. Sent as
logged, the model would read the question and then a kernel notice as the newest user message,
and answer the notice. The log keeps its order (it is the history); the request is reordered.

What must hold:
- A ``kernel_state`` entry placed inside a turn (after the turn's opening message, a user message
  or a continuation, and not followed directly by the next turn's opening) is moved, in its own
  order, to just before that opening message, for the current turn and the earlier turns still in
  view alike. A notice placed between turns (manual when idle, background at a boundary,
  model-requested at the turn's end) already precedes the next question and stays. Nothing else
  moves and nothing is dropped.
- A notice with no opening message before it in the view (the turn's start went into the summary)
  stays where it is.
- Pure: entries in, entries out (no store, no clock).
"""

from __future__ import annotations

from collections.abc import Sequence

from ipython_compact.core.entries import CUSTOM_MESSAGE, JSON, KERNEL_STATE, MESSAGE, SYSTEM, Entry
from ipython_compact.core.messages import entry_message, to_llm
from ipython_compact.core.view import view_indices

__all__ = ["question_last", "request_context"]


def request_context(path: Sequence[Entry]) -> list[JSON]:
    """``core.context.build_context(path)`` in the order the model must read it: the view's
    entries are chosen first (which compaction, which kept range), then reordered."""
    chosen = question_last([path[i] for i in view_indices(path)])
    out: list[JSON] = []
    for entry in chosen:
        message = entry_message(entry)
        llm = to_llm(message) if message is not None else None
        if llm is not None:
            out.append(llm)
    return out


def _opens_turn(entry: Entry) -> bool:
    if entry.kind == CUSTOM_MESSAGE:
        return True  # a continuation (autonomous mode) opens a turn as a question does
    message = entry.data.get("message") if entry.kind == MESSAGE else None
    return isinstance(message, dict) and message.get("role") == "user"


def _between_turns(entries: Sequence[Entry], i: int) -> bool:
    """True when the notice at ``i`` was placed between turns: the next message after it (past
    other notices and system baselines) opens a turn."""
    for entry in entries[i + 1 :]:
        if entry.kind in (KERNEL_STATE, SYSTEM):
            continue
        return _opens_turn(entry)
    return False


def question_last(entries: Sequence[Entry]) -> list[Entry]:
    """``entries`` (the view's entries, in log order) with each notice placed inside a turn moved to
    just before the message that opened that turn; see the module docstring."""
    out: list[Entry] = []
    opening: int | None = None  # where, in ``out``, the current turn's opening message is
    for i, entry in enumerate(entries):
        if entry.kind == KERNEL_STATE and opening is not None and not _between_turns(entries, i):
            out.insert(opening, entry)
            opening += 1
            continue
        if _opens_turn(entry):
            opening = len(out)
        out.append(entry)
    return out
