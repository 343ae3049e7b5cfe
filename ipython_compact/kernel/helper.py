"""The ``compact`` object the model's own code uses inside the kernel.

It lives in ``user_ns`` but is also put in ``user_ns_hidden`` (and excluded by identity), so it is
never listed by ``%who``, the probe, or a snapshot.

``run()`` never compacts mid-cell: inside an agent turn it records a request the agent loop picks
up when the turn ends (``ipython_compact.agent.requests``); in a plain notebook the "turn" is the
current cell, and the extension runs the compaction when the cell has finished.
"""

from __future__ import annotations

from typing import Any

from ipython_compact.agent import requests
from ipython_compact.kernel.service import KernelService


class CompactHelper:
    """``compact.status()``, ``compact.run(instructions=None)``, ``compact.recall(id_or_query)``,
    ``compact.pin(text)``."""

    def __init__(self, service: KernelService) -> None:
        self._service = service
        self.pending: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return "<compact helper: status(), run(instructions=None), recall(id_or_query), pin(text)>"

    def status(self) -> dict[str, Any]:
        """Tokens in context, the window, both threshold lines, and the snapshot state."""
        st = self._service.status()
        window = st["window"] or 1
        return {
            **st,
            "percent": round(100.0 * st["tokens"] / window, 1),
            "scheduled": self.pending is not None,
        }

    def run(self, instructions: str | None = None) -> dict[str, Any]:
        """Ask for a compaction at the end of the current turn; returns a receipt, never compacts now."""
        if instructions is not None and not isinstance(instructions, str):
            return {
                "scheduled": False,
                "reason": f"instructions must be a string or None, got {type(instructions).__name__}",
            }
        if requests.turn_active():
            return requests.request(instructions)
        self.pending = requests.coalesce(self.pending, instructions)
        return {"scheduled": True, "note": requests.RECEIPT}

    def take_pending(self) -> dict[str, Any] | None:
        pending, self.pending = self.pending, None
        return pending

    def recall(self, id_or_query: str, limit: int = 5) -> list[dict[str, Any]]:
        """The original text of log entries: by entry id if one matches, else by full-text search."""
        if not isinstance(id_or_query, str) or not id_or_query.strip():
            raise ValueError("recall needs an entry id or a search text")
        try:
            return self._service.recall(entry_id=id_or_query)
        except ValueError:  # not an entry id of this session (Compactor.recall): search instead
            return self._service.recall(query=id_or_query, limit=limit)

    def pin(self, text: str) -> dict[str, Any]:
        """Keep ``text`` verbatim through every future compaction."""
        return self._service.pin(text)
