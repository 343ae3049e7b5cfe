"""The values the session store hands out: sessions, views, search hits, reports, inbox items.

Plain frozen dataclasses with no database behind them, so callers can keep and compare them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ipython_compact.core.entries import Entry
from ipython_compact.core.settings import Estimator
from ipython_compact.store.process import Owner


class _Default(enum.Enum):
    LEAF = "leaf"
    ANY = "any"


LEAF = _Default.LEAF
"""Default ``parent_id``: append under the session's current leaf (read inside the transaction)."""

ANY_LEAF = _Default.ANY
"""Default ``expect_leaf``: append whatever the leaf is now (no compare and swap)."""


@dataclass(frozen=True)
class SessionInfo:
    name: str
    created_at: str
    leaf_id: str | None
    entry_count: int
    last_timestamp: str | None = None


@dataclass(frozen=True)
class ContextView:
    """The entries the model's view is built from, with their stored token estimates."""

    session: str
    leaf_id: str | None
    head_id: str | None
    entries: list[Entry]
    tokens_density: list[int]
    tokens_chars4: list[int]
    offset: int = 0
    """Index of ``entries[0]`` on the root→leaf path (how many path entries the view skips)."""

    def tokens(self, estimator: Estimator = "density") -> list[int]:
        return list(self.tokens_density if estimator == "density" else self.tokens_chars4)


@dataclass(frozen=True)
class OutlineView(ContextView):
    """A ``ContextView`` whose entries are skeletons (``core.triage_facts.skeleton_of``; the
    compactions whole), with each entry's outline: what a preview decides from (issue 37)."""

    outlines: list[Mapping[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class SearchHit:
    session: str
    entry: Entry
    rank: float
    seq: int = 0
    """Position in the log (the order entries were written); equal timestamps are common."""


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    sessions: int
    entries: int
    problems: list[str] = field(default_factory=list)
    writers: dict[str, int] = field(default_factory=dict)  # entries per writer ("(not recorded)": older rows)


@dataclass(frozen=True)
class InboxItem:
    item_id: int
    session: str
    first_kept_entry_id: str | None
    payload: dict[str, Any]
    state: str
    created_at: str
    settled_at: str | None


@dataclass(frozen=True)
class LiveCompaction:
    task_id: str
    session: str
    reason: str
    blocking: bool
    started_at: str
    detail: dict[str, Any]
    owner: Owner | None = None
    """The process computing it (None: recorded before owners were, never judged abandoned)."""


@dataclass(frozen=True)
class LiveStatus:
    in_flight: list[LiveCompaction]
    last_failure: dict[str, Any] | None


@dataclass(frozen=True)
class BranchPaths:
    """The two ends of a branch move, each read only back to where they meet.

    ``old`` runs from the common ancestor to the old leaf, ``target`` from the common ancestor to
    the target entry (both oldest first, both starting with the ancestor). Without a common
    ancestor (separate roots) both are whole root→leaf paths and ``common_ancestor_id`` is None.
    """

    old: list[Entry]
    target: list[Entry]
    common_ancestor_id: str | None
