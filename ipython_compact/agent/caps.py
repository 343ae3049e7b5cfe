"""The caps that end a run: a maximum number of compactions per session, and a token budget and a
sub-agent cap for the whole call tree (a root agent, its sub-agents, theirs, and every
``llm_query`` any of them makes).

Why: an RLM run can loop — compacting, forgetting, redoing — or spend without bound through its
sub-calls. A budget that only counted the root's own requests let six sub-agents spend fifteen
times the root's budget; so the budget belongs to the tree (``TreeBudget``, shared by reference
with every descendant): each child may spend what is left, and the fan-out itself is capped.
Counts start from the log (a resumed session keeps them) plus what this process adds, and each
cap ends the run with a reason that names it.

What must hold:
- Tokens are what the server reported (prompt + completion). A session's own count
  (``RunCaps.tokens``) covers its requests and its ``llm_query`` sub-calls; the tree's count adds
  every descendant's, kept per session so a parent can say what each child spent.
- A sub-agent is charged to the tree from its first request on, not when it answers: a child
  that spends the budget stops itself, and its parent stops at its next step.
- ``max_sub_agents`` counts the sub-agents the tree has started; one more is refused before its
  session is created (nothing empty is left behind).
- ``None`` disables a cap; a cap must otherwise be positive (``ValueError`` names it).
- Reads and updates are thread-safe (sub-calls arrive on the broker's threads).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from ipython_compact.core.entries import COMPACTION, Entry


def logged_child_tokens(entries: Iterable[Entry]) -> int:
    """Tokens the session's sub-agents spent, as their ``answered`` records in its log say."""
    total = 0
    for e in entries:
        if e.data.get("custom_type") == "sub_agent" and e.data.get("event") == "answered":
            tokens = e.data.get("tokens")
            total += tokens if type(tokens) is int and tokens > 0 else 0
    return total


class TreeBudget:
    """The token budget and the sub-agent cap of one call tree (see the module docstring)."""

    def __init__(
        self,
        *,
        root: str,
        token_budget: int | None,
        max_sub_agents: int | None,
        spent: int = 0,
        started: int = 0,
    ) -> None:
        for name, value in (("token_budget", token_budget), ("max_sub_agents", max_sub_agents)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None, got {value}")
        self.root = root
        self.token_budget = token_budget
        self.max_sub_agents = max_sub_agents
        self._lock = threading.Lock()
        self._before = spent  # what the log says the tree spent before this process
        self._by_session: dict[str, int] = {}
        self._started = started

    def spend(self, session: str, tokens: int) -> None:
        with self._lock:
            self._by_session[session] = self._by_session.get(session, 0) + max(0, tokens)

    @property
    def tokens(self) -> int:
        with self._lock:
            return self._before + sum(self._by_session.values())

    def left(self) -> int | None:
        if self.token_budget is None:
            return None
        return self.token_budget - self.tokens

    def spent_under(self, session: str) -> int:
        """What ``session`` and its descendants (``session/...``) spent in this process."""
        with self._lock:
            return sum(t for s, t in self._by_session.items() if s == session or s.startswith(session + "/"))

    def by_session(self) -> dict[str, int]:
        with self._lock:
            return dict(self._by_session)

    @property
    def sub_agents_started(self) -> int:
        with self._lock:
            return self._started

    def start_sub_agent(self, name: str) -> None:
        """Count one more sub-agent, or raise ``RuntimeError`` saying which cap refused it."""
        with self._lock:
            if self.max_sub_agents is not None and self._started >= self.max_sub_agents:
                raise RuntimeError(
                    f"sub-agent {name!r} was not started: this run already started {self._started} "
                    f"sub-agents, "
                    f"its limit (max_sub_agents={self.max_sub_agents}); give the task to an existing "
                    f"sub-agent "
                    "by name, or do it with llm_query"
                )
            self._started += 1

    def describe(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "token_budget": self.token_budget,
            "tokens_used": self.tokens,
            "tokens_left": self.left(),
            "by_session": self.by_session(),
            "sub_agents_started": self.sub_agents_started,
            "max_sub_agents": self.max_sub_agents,
        }


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
    """``max_compactions`` for one session and its share of the tree's budget (module docstring).

    ``tree`` is the call tree's ``TreeBudget`` (shared with the parent for a sub-agent);
    ``session`` names this session in it. Without a tree, ``token_budget`` is the session's own.
    """

    def __init__(
        self,
        *,
        max_compactions: int | None,
        token_budget: int | None,
        compactions: int = 0,
        tokens: int = 0,
        tree: TreeBudget | None = None,
        session: str = "",
    ) -> None:
        for name, value in (("max_compactions", max_compactions), ("token_budget", token_budget)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None, got {value}")
        self.max_compactions = max_compactions
        self.token_budget = token_budget
        self._lock = threading.Lock()
        self._compactions = compactions
        self._tokens = tokens
        self.tree = tree
        self.session = session

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
        if self.tree is not None:
            self.tree.spend(self.session, tokens)

    def compacted(self) -> None:
        with self._lock:
            self._compactions += 1

    def budget_left(self) -> int | None:
        """Tokens this session may still spend: its own budget and the tree's, whichever is less."""
        with self._lock:
            own = None if self.token_budget is None else self.token_budget - self._tokens
        tree = None if self.tree is None else self.tree.left()
        if own is None or tree is None:
            return own if tree is None else tree
        return min(own, tree)

    def may_compact(self) -> bool:
        with self._lock:
            return self.max_compactions is None or self._compactions < self.max_compactions

    def budget_stop(self) -> str | None:
        """The stop message once the token budget is used up, else None."""
        left = self.budget_left()
        if left is None or left > 0:
            return None
        tree = self.tree
        if tree is not None and tree.token_budget is not None and tree.left() == left:
            return (
                f"Stopped: the call tree of {tree.root!r} has used {tree.tokens:,} tokens of its "
                f"{tree.token_budget:,}-token budget (token_budget), this session {self.tokens:,} of "
                f"them."
            )
        return (
            f"Stopped: this session has used {self.tokens:,} tokens of its {self.token_budget:,}-token "
            f"budget "
            "(token_budget)."
        )

    def compaction_stop(self) -> str:
        return (
            f"Stopped: the context is full again and this session already compacted {self.compactions} "
            f"time(s), its limit (max_compactions={self.max_compactions})."
        )
