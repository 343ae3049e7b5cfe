"""The context right after each compaction as whoever compacted it counted it, kept beside the log.

Why: with a live ``%%agent`` the context is counted by the agent's estimate, which learns the
model's tokenizer from the server's usage (``agent/token_learning.py``); the gauge, ``%compact
status`` and the agent's own thresholds read that figure. The timeline, ``%compact log`` and the
CLI read the log alone, and re-estimated the context right after a compaction with the density
estimate: for a model whose tokenizer makes three tokens where the density estimate sees one, the
card said 2,040 tokens in context while the gauge said 6,458 for the same moment (issue 35). So
whoever places a compaction records the figure its gauge shows right after it, and the name of
the estimate that counted it; every reader of the log shows that record, and only a compaction
with none (imported, made by the CLI, or logged before this existed) is re-estimated, named as
the density (or chars4) estimate it is.

What must hold: a record is written once per compaction (a status row keyed by the compaction's
id, so two writers never overwrite each other's); writing it is best effort (a compaction is never
failed by its figure); a reader that finds none, or an unreadable one, falls back to the log.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ipython_compact.store import SessionStore

KEY_PREFIX = "context_after:"


@dataclass(frozen=True)
class ContextFigure:
    """The context right after a compaction (``tokens``) and the estimate that counted it
    (``estimate``: ``calibrated ×3.80 after 4 requests``, ``tokenizer (/tokenize)``, ``default
    (density)``: the words ``%compact status`` uses)."""

    tokens: int
    estimate: str

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "estimate": self.estimate}


def record(store: SessionStore, session: str, compaction_id: str, figure: ContextFigure) -> None:
    """Keep ``figure`` for ``compaction_id`` (best effort: a failed write leaves the log's estimate)."""
    with contextlib.suppress(Exception):
        store.status_set(session, KEY_PREFIX + compaction_id, figure.to_json())


def recorded(store: SessionStore, session: str, compaction_id: str) -> ContextFigure | None:
    """The figure kept for ``compaction_id``, or None (none kept, or not readable as one)."""
    try:
        kept = store.status_get(session, KEY_PREFIX + compaction_id)
    except Exception:  # an unreadable row: the log's own estimate
        return None
    if not isinstance(kept, dict):
        return None
    tokens, estimate = kept.get("tokens"), kept.get("estimate")
    if type(tokens) is not int or tokens < 0 or not isinstance(estimate, str):
        return None
    return ContextFigure(tokens, estimate)


def estimator_words(estimator: str) -> str:
    """How a figure re-estimated from the log is named: as ``status`` names the estimate in force
    without a live agent."""
    return f"default ({estimator})"
