"""Kernel side: rlms' REPL variable ``history``, backed by the ipython-compact session log.

Why: with compaction on, rlms tells the model that "the full conversation history (trajectory
segments and any summaries) is available in the REPL variable ``history`` as a list"; rlms' own
local environment keeps that list in memory, its IPython environment has no such name at all
(``NameError``). Our environment already writes every iteration and every summary to the session
log, so ``history`` reads them from there: it survives a kernel death and a restore (nothing is
pickled, the log is the source), and it costs the kernel no memory until it is read.

What must hold:
- ``history`` looks like rlms' list: its items are trajectory segments (lists of ``{"role",
  "content"}`` dicts, one per iteration: the model's reply and what followed it) and summaries
  (``{"type": "summary", "content": str}``), oldest first. It is a real ``list`` (rlms promises
  one): ``json.dumps``, concatenation and ``isinstance`` work, indexing is O(1); it is refreshed
  from the log before every cell (one row read when nothing changed).
- Only the session's own messages and summaries appear (kernel notices and restarts do not).
- Reading never writes: the log is opened per read and closed again.

It sits with the agent's other kernel-side modules, not with the rlms adapter, because the host
reaches it through ``kernel_calls``' one table, which may not depend on the adapters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from ipython_compact.core.entries import CUSTOM, MESSAGE, Entry, text_of_content
from ipython_compact.store import SessionStore
from ipython_compact.store.errors import UnknownSessionError

SUMMARY = "rlms_compaction"
"""The ``custom_type`` under which ``CompactIPythonEnv`` logs rlms' summaries."""


def as_rlms_history(entries: Sequence[Entry]) -> list[Any]:
    """Log entries in rlms' ``history`` shape (see the module docstring)."""
    items: list[Any] = []
    segment: list[dict[str, str]] | None = None
    for e in entries:
        if e.kind == CUSTOM and e.data.get("custom_type") == SUMMARY:
            data = e.data.get("data")
            summary = data.get("summary") if isinstance(data, dict) else None
            items.append({"type": "summary", "content": str(summary or "")})
            segment = None
            continue
        message = e.message if e.kind == MESSAGE else None
        if message is None or message.get("role") not in ("user", "assistant"):
            continue
        role = str(message["role"])
        if role == "assistant" or segment is None:  # an iteration starts with the model's reply
            segment = []
            items.append(segment)
        segment.append({"role": role, "content": text_of_content(message.get("content"))})
    return items


class LoggedHistory(list[Any]):
    """rlms' ``history``: a real list (``json.dumps``, ``history + [...]``, ``isinstance(history,
    list)`` and O(1) indexing work, as rlms promises "a list"), holding session ``session`` of the
    log at ``db_path`` as of its last ``refresh``: at bind time and before every cell. A refresh
    reads one row (the session's entry count) and re-reads the entries only when it changed, so an
    unchanged session costs nothing and an index never reads the log. Changes a cell makes to the
    list itself are replaced by the log's contents at the next refresh after the session grows."""

    def __init__(self, db_path: str, session: str) -> None:
        super().__init__()
        self._db_path = db_path
        self._session = session
        self._seen = -1
        self.refresh()

    def refresh(self, *_: Any) -> None:
        """Re-read the session when its entry count changed (IPython's ``pre_run_cell`` hook)."""
        store = SessionStore(self._db_path)
        try:
            try:
                count = store.entry_count(self._session)
            except UnknownSessionError:
                count = 0
            if count == self._seen:
                return
            items = as_rlms_history(store.entries(self._session, kinds=(MESSAGE, CUSTOM))) if count else []
        finally:
            store.close()
        self[:] = items
        self._seen = count


def install(shell: Any, db_path: str, session: str) -> str:
    """Bind ``history`` in the user namespace (hidden from the probe and snapshots: it is a view),
    refreshed before every cell; a second install replaces the first and its hook."""
    previous = shell.user_ns_hidden.get("history")
    if isinstance(previous, LoggedHistory):
        with contextlib.suppress(ValueError):
            shell.events.unregister("pre_run_cell", previous.refresh)
    history = LoggedHistory(db_path, session)
    shell.user_ns["history"] = history
    shell.user_ns_hidden["history"] = history
    shell.events.register("pre_run_cell", history.refresh)
    return "ok"
