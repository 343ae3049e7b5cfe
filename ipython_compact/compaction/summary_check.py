"""A model's summary is judged before it becomes the checkpoint: kept, retried, merged or replaced.

Why: a weak model's summary can be empty, loop, be cut at the output limit, or drop the span's
identifiers; stored as the checkpoint, the span's facts are lost to the model. The offline
summarizer on the same span is the floor (``core.summary_judge``).

What must hold:
- The model's summary is judged against the offline one; ``ok`` is kept as it is.
- ``empty`` or ``looping``: asked once more; still not fit, the offline checkpoint replaces it.
  A failed reply (cut at the output limit, empty, malformed, a tool call, too long for the
  window), which the summarizer has already asked again for where it could: replaced at once.
- ``poorer``: the model's text is kept and the offline checkpoint is appended under a heading, so
  no identifier the offline summary kept is lost (merged); a second request would cost a slow
  model as much again for a text the merge already covers.
- The result says which of ``kept``/``retried``/``merged``/``replaced`` happened and why
  (``SummaryResult.judged``, which lands in the compaction's details); errors other than those
  a fallback can cure (configuration, connection, rate limits) still raise.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ipython_compact.core.entries import entry_text
from ipython_compact.core.identifiers import extract_identifiers
from ipython_compact.core.summary_judge import Verdict, judge_summary
from ipython_compact.summarizers.base import Summarizer, SummarizerError, SummaryInput, SummaryResult
from ipython_compact.summarizers.offline import OfflineSummarizer

__all__ = ["CURABLE", "checked_summary"]

#: Failures of a model's reply that the offline checkpoint can stand in for.
CURABLE = frozenset({"length", "empty", "bad_reply", "missing_sections", "tool_call", "context_length"})

MERGED_HEADING = "## Facts from the offline checkpoint (the model's summary left them out)"


def checked_summary(summarizer: Summarizer, request: SummaryInput, *, judge: bool = True) -> SummaryResult:
    """``summarizer``'s summary of ``request``, judged and, when unfit, retried, merged or replaced
    (``judge=False``, or the offline summarizer itself: as it comes)."""
    if not judge or summarizer.name == OfflineSummarizer.name:
        return summarizer.summarize(request)
    offline = OfflineSummarizer().summarize(request)
    facts = [value for e in request.entries for _cls, value in extract_identifiers(entry_text(e))]
    tries: list[dict[str, Any]] = []
    result: SummaryResult | None = None
    verdict: Verdict | None = None
    for _ in range(2):
        try:
            result = summarizer.summarize(request)
        except SummarizerError as exc:  # the summarizer has already asked again where it could
            if exc.code not in CURABLE:
                raise
            tries.append({"verdict": "failed", "why": f"{exc.code}: {exc}"})
            result, verdict = None, None
            break
        verdict = judge_summary(result.text, offline.text, facts)
        tries.append(verdict.to_json())
        if verdict.ok:
            return _with(result, "kept" if len(tries) == 1 else "retried", verdict.why, tries)
        if verdict.code == "poorer":  # a real summary that dropped facts: the offline ones are added
            merged = f"{result.text.rstrip()}\n\n{MERGED_HEADING}\n\n{offline.text.strip()}"
            return _with(dataclasses.replace(result, text=merged), "merged", verdict.why, tries)
    why = verdict.why if verdict is not None else str(tries[-1]["why"])
    base = result or dataclasses.replace(offline, summarizer=summarizer.name)
    replaced = dataclasses.replace(base, text=offline.text, finish_reason="stop")
    return _with(replaced, "replaced", why, tries)


def _with(result: SummaryResult, action: str, why: str, tries: list[dict[str, Any]]) -> SummaryResult:
    return dataclasses.replace(
        result,
        attempts=max(result.attempts, len(tries)),
        judged={"action": action, "why": why, "tries": tries},
    )
