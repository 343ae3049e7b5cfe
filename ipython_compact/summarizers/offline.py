"""The offline summarizer adapter: ``core.offline_summary`` behind the ``Summarizer`` protocol.

It is the default whenever no model is configured. Its character budget is the output budget in
tokens times four (the chars/4 rule the rest of the project uses for text), further capped by
``max_chars`` so an offline checkpoint stays small even with a large reserve.
"""

from __future__ import annotations

from ipython_compact.core.offline_summary import offline_summary
from ipython_compact.summarizers.base import SummaryInput, SummaryResult

DEFAULT_MAX_CHARS = 12000


class OfflineSummarizer:
    """Deterministic, no network. ``max_chars`` caps the checkpoint text."""

    name = "offline"

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        if max_chars <= 0:
            raise ValueError(f"max_chars must be positive, got {max_chars}")
        self.max_chars = max_chars

    def summarize(self, request: SummaryInput) -> SummaryResult:
        budget = min(self.max_chars, max(1, request.max_tokens) * 4)
        text = offline_summary(
            request.entries,
            previous_summary=request.previous_summary,
            focus=request.focus,
            max_chars=budget,
            kind=request.kind,
            anchors=request.anchors,
            superseded=[old for old, _new in request.superseded],
        )
        return SummaryResult(
            text=text, summarizer=self.name, model=None, usage={}, attempts=1, finish_reason="stop"
        )
