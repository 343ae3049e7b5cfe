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

The same holds for the context now, once the agent is gone (a restarted kernel, the panel reading
the log, the CLI): the kernel keeps the agent's last count with the window and lines
(``FIGURES_KEY``), and while the context the model sees is the one it counted
(``agents_kept_count``) that count is shown, named as the agent's.

What must hold: a record is written once per compaction (a status row keyed by the compaction's
id, so two writers never overwrite each other's); writing it is best effort (a compaction is never
failed by its figure); a reader that finds none, or an unreadable one, falls back to the log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ipython_compact.core.entries import Entry
from ipython_compact.core.messages import in_context

if TYPE_CHECKING:
    from ipython_compact.store import SessionStore

KEY_PREFIX = "context_after:"
#: The session status row holding the window, lines and count the kernel's ``status`` last reported.
FIGURES_KEY = "panel_figures"
#: How a count kept from the last live agent is named (``agents_kept_count``).
AGENTS_COUNT = ", as the last live %%agent counted it"


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


def model_sees(entries: Sequence[Entry]) -> str | None:
    """The id of the newest entry of the view the model reads (bookkeeping after it aside): while it
    is unchanged, so is the context a live agent last counted."""
    return next((e.id for e in reversed(entries) if in_context(e)), None)


def agents_kept_count(store: SessionStore, session: str, seen: str | None) -> tuple[int, str] | None:
    """``(tokens, estimate)`` as the last live ``%%agent`` counted this context, while the context
    the model sees is the one it counted (``model_sees``); else None.

    Why: the agent's estimate learns the model's tokenizer; without it (after a restart, before
    ``%load_ext``) the density estimate of the same context can be a quarter of it, and the gauge
    jumped from 6,418 to 1,629 with nothing changed. The figure is named as the agent's."""
    if seen is None:
        return None
    try:
        kept = store.status_get(session, FIGURES_KEY, {}) or {}
    except Exception:  # an unreadable row: the estimate in force
        return None
    tokens, estimate = kept.get("tokens"), kept.get("estimate")
    if kept.get("context_leaf") != seen or type(tokens) is not int or not isinstance(estimate, str):
        return None
    said = AGENTS_COUNT
    return tokens, estimate if estimate.endswith(said) else f"{estimate}{said}"
