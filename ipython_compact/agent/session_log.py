"""The agent's handle on its session log and its event stream: append an entry, report a step.

Why a class of its own: the turn loop, the compaction scheduler and the kernel supervisor all write
to the same session and report to the same listener; each holds this handle instead of sharing
the agent's attributes. It has no state of its own beyond where to write and whom to tell.

What must hold:
- Every entry goes through ``append`` (the log is the single record; nothing a resumed session
  needs is kept only in memory).
- ``emit`` never lets a listener's bug break a turn.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from ipython_compact.agent.events import AgentEvent
from ipython_compact.core.entries import MESSAGE, Entry
from ipython_compact.store.sqlite_store import SessionStore, utc_now

Listener = Callable[[AgentEvent], None]


def now_iso() -> str:
    """The wall-clock timestamp stored on messages: the store's own format (UTC, milliseconds, ``Z``)."""
    return utc_now()


class SessionLog:
    """Where one agent writes (``store`` + ``session``) and whom it tells (``on_event``)."""

    def __init__(self, store: SessionStore, session: str, on_event: Listener | None = None) -> None:
        self.store = store
        self.session = session
        self.on_event = on_event

    def emit(self, kind: str, text: str = "", **data: Any) -> None:
        """Report one step to the listener (if any); a listener's exception is swallowed."""
        listener = self.on_event
        if listener is not None:
            with contextlib.suppress(Exception):  # a display bug must never break the turn
                listener(AgentEvent(kind, text, data))

    def append(self, kind: str, data: Mapping[str, Any], *, move_leaf: bool = True) -> Entry:
        """Append one entry under the session's leaf (off the active path with ``move_leaf=False``)."""
        entry: Entry = self.store.append(self.session, kind, dict(data), move_leaf=move_leaf)
        return entry

    def append_message(self, message: Mapping[str, Any], *, move_leaf: bool = True) -> Entry:
        """Append a pi-shaped message entry."""
        return self.append(MESSAGE, {"message": dict(message)}, move_leaf=move_leaf)
