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
  (``{"type": "summary", "content": str}``), oldest first; ``len``, indexing, slicing and
  iteration work, and each read sees what the log holds at that moment.
- Only the session's own messages and summaries appear (kernel notices and restarts do not).
- Reading never writes: the log is opened per read and closed again.

It sits with the agent's other kernel-side modules, not with the rlms adapter, because the host
reaches it through ``kernel_calls``' one table, which may not depend on the adapters.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

from ipython_compact.core.entries import CUSTOM, MESSAGE, Entry, text_of_content
from ipython_compact.store import SessionStore

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


class LoggedHistory(Sequence[Any]):
    """rlms' ``history`` list, read from session ``session`` of the log at ``db_path``."""

    def __init__(self, db_path: str, session: str) -> None:
        self._db_path = db_path
        self._session = session

    def _items(self) -> list[Any]:
        store = SessionStore(self._db_path)
        try:
            return as_rlms_history(store.entries(self._session, kinds=(MESSAGE, CUSTOM)))
        finally:
            store.close()

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        return self._items()[index]

    def __len__(self) -> int:
        return len(self._items())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items())

    def __repr__(self) -> str:
        return repr(self._items())


def install(shell: Any, db_path: str, session: str) -> str:
    """Bind ``history`` in the user namespace (hidden from the probe and snapshots: it is a view)."""
    history = LoggedHistory(db_path, session)
    shell.user_ns["history"] = history
    shell.user_ns_hidden["history"] = history
    return "ok"
