"""Adapters that give the agent loop a ``CompactionEngine`` (compute a compaction, do not place it).

Why: the loop decides *when* and *where* a compaction lands (now, or at the next turn boundary via
the inbox); the compaction pipeline decides *what* it says. ``CompactorEngine`` wraps the
project's ``Compactor``; ``CoreEngine`` is the minimal pipeline straight from the pure core
(preparation + the deterministic offline summarizer) for hosts that have no Compactor configured.

What must hold: ``prepare`` never writes to the session log, returns None when there is nothing
to compact, and returns the ``compaction`` entry payload otherwise (``summary``,
``first_kept_entry_id``, ``tokens_before``, ``reason``, ``details``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ipython_compact.core.offline_summary import offline_summary
from ipython_compact.core.preparation import prepare_compaction
from ipython_compact.core.settings import CompactionSettings


class CoreEngine:
    """Preparation from the pure core, summary from the offline extractive summarizer."""

    def __init__(self, store: Any, settings: CompactionSettings) -> None:
        self.store = store
        self.settings = settings

    def prepare(self, session: str, *, reason: str, focus: str | None, keep_recent_tokens: int | None) -> dict[str, Any] | None:
        """The compaction payload for the session's current path, or None when nothing is to summarize."""
        settings = self.settings if keep_recent_tokens is None else replace(self.settings, keep_recent_tokens=keep_recent_tokens)
        view = self.store.context_view(session)  # from the previous compaction's first-kept entry: all preparation reads
        prep = prepare_compaction(view.entries, settings, tokens=view.tokens(settings.estimator))
        if prep is None or not (prep.messages_to_summarize or prep.turn_prefix):
            return None
        summary = offline_summary(
            [*prep.messages_to_summarize, *prep.turn_prefix], previous_summary=prep.previous_summary, focus=focus
        )
        return {
            "summary": summary,
            "first_kept_entry_id": prep.first_kept_entry_id,
            "tokens_before": prep.tokens_before,
            "reason": reason,
            "details": {
                "summarizer": "offline",
                "focus": focus,
                "read_files": list(prep.read_files),
                "modified_files": list(prep.modified_files),
                "is_split_turn": prep.is_split_turn,
            },
        }


class CompactorEngine:
    """The project's ``Compactor`` behind the loop's ``CompactionEngine`` protocol."""

    def __init__(self, compactor: Any) -> None:
        self.compactor = compactor

    def prepare(self, session: str, *, reason: str, focus: str | None, keep_recent_tokens: int | None) -> dict[str, Any] | None:
        """``Compactor.prepare``: triage, summary, drift guard; writes nothing."""
        result: dict[str, Any] | None = self.compactor.prepare(
            session, reason=reason, focus=focus, keep_recent_tokens=keep_recent_tokens
        )
        return result


def default_engine(store: Any, settings: CompactionSettings) -> CompactorEngine | CoreEngine:
    """The project's ``Compactor`` (offline summarizer) when available, else ``CoreEngine``."""
    try:
        from ipython_compact.compactor import Compactor
    except ImportError:
        return CoreEngine(store, settings)
    return CompactorEngine(Compactor(store, None, settings))
