"""The per-session caps that end a run: a maximum number of compactions and a total-token budget.

Why: an RLM run can loop — compacting, forgetting, redoing — or spend without bound through its
sub-calls. Both caps are counted per session from the log (so a resumed session keeps its
count) plus what this process adds, and each ends the run with a reason that names the cap.

What must hold:
- Tokens are what the server reported (prompt + completion) for the session's own requests and
  its ``llm_query`` sub-calls; compactions are the session's ``compaction`` entries.
- ``None`` disables a cap; a cap must otherwise be positive (``ValueError`` names it).
- Reads and updates are thread-safe (sub-calls arrive on the broker's threads).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from ipython_compact.core.entries import COMPACTION, Entry


def logged_tokens(entries: Iterable[Entry]) -> int:
    """Total tokens of the assistant messages (and logged sub-call usage) in ``entries``."""
    total = 0
    for e in entries:
        usage: Any = None
        if e.role == "assistant" and e.message is not None:
            usage = e.message.get("usage")
        elif e.data.get("custom_type") == "subcall_usage":
            usage = e.data.get("usage")
        if isinstance(usage, dict):
            total += int(usage.get("totalTokens") or 0)
    return total


class RunCaps:
    """``max_compactions`` and ``token_budget`` for one session (see the module docstring)."""

    def __init__(self, *, max_compactions: int | None, token_budget: int | None, compactions: int = 0,
                 tokens: int = 0) -> None:
        for name, value in (("max_compactions", max_compactions), ("token_budget", token_budget)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None, got {value}")
        self.max_compactions = max_compactions
        self.token_budget = token_budget
        self._lock = threading.Lock()
        self._compactions = compactions
        self._tokens = tokens

    @staticmethod
    def count_compactions(entries: Iterable[Entry]) -> int:
        return sum(1 for e in entries if e.kind == COMPACTION)

    @property
    def tokens(self) -> int:
        with self._lock:
            return self._tokens

    @property
    def compactions(self) -> int:
        with self._lock:
            return self._compactions

    def spend(self, tokens: int) -> None:
        with self._lock:
            self._tokens += max(0, tokens)

    def compacted(self) -> None:
        with self._lock:
            self._compactions += 1

    def budget_left(self) -> int | None:
        with self._lock:
            return None if self.token_budget is None else self.token_budget - self._tokens

    def may_compact(self) -> bool:
        with self._lock:
            return self.max_compactions is None or self._compactions < self.max_compactions

    def budget_stop(self) -> str | None:
        """The stop message once the token budget is used up, else None."""
        left = self.budget_left()
        if left is None or left > 0:
            return None
        return (f"Stopped: this session has used {self.tokens:,} tokens of its {self.token_budget:,}-token budget "
                "(token_budget).")

    def compaction_stop(self) -> str:
        return (f"Stopped: the context is full again and this session already compacted {self.compactions} "
                f"time(s), its limit (max_compactions={self.max_compactions}).")
