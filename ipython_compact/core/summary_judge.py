"""Is a model's summary fit to become the checkpoint? Judged against the offline one on the same span.

Why: a weak model (SmolLM2 through llama.cpp) once returned "Checking for new feature...
Successfully!" ten times with every section "(none)", and it was stored as the checkpoint: the
span's facts were gone, for good, from what the model would see. The offline summarizer never
loses the span's identifiers, so it is the floor a model's summary must reach.

What must hold:
- ``judge_summary`` says ``empty`` when the text has no content beyond headings and "(none)",
  ``looping`` when one line (or sentence) makes up much of it, ``poorer`` when it keeps fewer of
  ``facts`` than ``reference`` does, else ``ok``; with the counts, so the log can say why.
- Pure: standard library only; the facts are found by the caller (``drift.extract_identifiers``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["Verdict", "judge_summary", "kept_facts"]

VerdictCode = Literal["ok", "empty", "looping", "poorer"]

_HEADING = re.compile(r"^\s*(#+\s.*|\*\*[^*]+\*\*:?|[A-Z][A-Za-z &/-]{0,40}:)\s*$")
_NONE = re.compile(r"^[\s\-*]*(\(none\)|none\.?|n/a|-)?\s*$", re.IGNORECASE)
LOOP_SHARE = 0.4  # one repeated line or sentence making up this share of the content lines is a loop
LOOP_LEAST = 3  # ... and repeated at least this often


@dataclass(frozen=True)
class Verdict:
    """``code`` and the figures behind it (facts kept by the summary and by the reference)."""

    code: VerdictCode
    why: str
    kept: int = 0
    reference_kept: int = 0
    facts: int = 0

    @property
    def ok(self) -> bool:
        return self.code == "ok"

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.code,
            "why": self.why,
            "facts": self.facts,
            "kept": self.kept,
            "reference_kept": self.reference_kept,
        }


def _content_lines(text: str) -> list[str]:
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not _HEADING.match(line) and not _NONE.match(line)
    ]


def kept_facts(text: str, facts: Iterable[str]) -> int:
    """How many of ``facts`` (exact strings) ``text`` contains."""
    return sum(1 for f in set(facts) if f and f in text)


def judge_summary(text: str, reference: str, facts: Iterable[str]) -> Verdict:
    """Judge ``text`` (a model's summary) against ``reference`` (the offline one on the same span)."""
    wanted = sorted(set(f for f in facts if f))
    lines = _content_lines(text)
    if not lines:
        return Verdict("empty", "the summary has no content beyond headings and '(none)'", facts=len(wanted))
    pieces = lines + [s.strip() for line in lines for s in re.split(r"(?<=[.!?])\s+", line) if s.strip()]
    most, count = Counter(pieces).most_common(1)[0]
    if count >= LOOP_LEAST and count >= LOOP_SHARE * len(lines):
        return Verdict(
            "looping",
            f"{most[:60]!r} repeats {count} times in {len(lines)} content lines",
            facts=len(wanted),
        )
    kept, reference_kept = kept_facts(text, wanted), kept_facts(reference, wanted)
    if kept < reference_kept:
        return Verdict(
            "poorer",
            f"it keeps {kept} of the span's {len(wanted)} identifiers; "
            f"the offline summary keeps {reference_kept}",
            kept,
            reference_kept,
            len(wanted),
        )
    return Verdict("ok", f"it keeps {kept} of {len(wanted)} identifiers", kept, reference_kept, len(wanted))
