"""What a compaction hands back: its errors, the dry-run plan, the result and recall hits.

Why a module of its own: the CLI, the kernel service, the agent and the panel's comm replies all
read these; they need the shapes (``to_json``, ``render``) without the pipeline that makes them,
and ``compaction/compactor.py`` stays one job (plan, summarize, append).
``ipython_compact.compaction.compactor``
re-exports every name, so ``from ipython_compact.compaction.compactor import Plan`` keeps working.

What must hold: ``to_json`` returns plain JSON values only (they cross the comm and the CLI's
``--json`` unchanged); ``Plan.render`` is the terminal's table and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ipython_compact.core.entries import Entry

if TYPE_CHECKING:
    from ipython_compact.compaction.refusals import NothingReason
    from ipython_compact.core.anchors import AnchorSet
    from ipython_compact.core.triage import Pointer  # start-up: triage and drift load with a compaction


#: How many externalized pointers and discarded entries ``Plan.render`` lists; the rest is counted.
SHOWN = 10


class CompactionError(RuntimeError):
    """Base class for compaction failures that the caller should show to the user."""


class NothingToCompact(CompactionError):
    """The context has nothing that can be summarized (too short, or it already ends in a compaction).

    ``why`` (when the cut point decided it) holds the facts, so a caller can word the tail budget
    the way its user sets it: ``why.render(setting)``."""

    def __init__(self, message: str, *, why: NothingReason | None = None) -> None:
        super().__init__(message)
        self.why = why


class SessionMoved(CompactionError):
    """The session's leaf changed between planning and appending (another writer compacted or
    appended); the compaction was not appended."""


class CompactionFailed(CompactionError):
    """The summarizer failed; a ``compaction_outcome`` entry records it (``outcome_entry``)."""

    def __init__(self, message: str, *, code: str, outcome_entry: Entry | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.outcome_entry = outcome_entry


@dataclass(frozen=True)
class LayerCount:
    entries: int
    tokens: int

    def to_json(self) -> dict[str, int]:
        return {"entries": self.entries, "tokens": self.tokens}


@dataclass(frozen=True)
class Plan:
    """What a compaction would do, with token counts (a dry run)."""

    session: str
    focus: str | None
    tokens_before: int
    first_kept_entry_id: str
    is_split_turn: bool
    summarize: LayerCount
    turn_prefix: LayerCount
    keep: LayerCount
    encode: LayerCount
    externalize: tuple[Pointer, ...]
    discard: tuple[dict[str, Any], ...]
    anchors: AnchorSet
    previous_summary: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "focus": self.focus,
            "tokens_before": self.tokens_before,
            "first_kept_entry_id": self.first_kept_entry_id,
            "is_split_turn": self.is_split_turn,
            "summarize": self.summarize.to_json(),
            "turn_prefix": self.turn_prefix.to_json(),
            "keep": self.keep.to_json(),
            "encode": self.encode.to_json(),
            "externalize": [dict(p.to_json(), pointer=p.text) for p in self.externalize],
            "discard": [dict(d) for d in self.discard],
            "anchors": {
                "goal": self.anchors.goal.text if self.anchors.goal else None,
                "constraints": [a.text for a in self.anchors.constraints],
                "pins": [{"pin_id": a.pin_id, "text": a.text} for a in self.anchors.pins],
            },
            "previous_summary": self.previous_summary,
        }

    def render(self) -> str:
        """A readable table for the terminal."""
        ext_tokens = sum(p.tokens for p in self.externalize)
        disc_tokens = sum(int(d.get("tokens", 0)) for d in self.discard)
        rows = [
            (
                "summarize (encode)",
                self.summarize.entries + self.turn_prefix.entries,
                self.summarize.tokens + self.turn_prefix.tokens,
            ),
            ("  of which externalized", len(self.externalize), ext_tokens),
            ("  of which discarded", len(self.discard), disc_tokens),
            ("keep verbatim (recent tail)", self.keep.entries, self.keep.tokens),
        ]
        lines = [
            f"compaction plan for session "
            f"{self.session!r}" + (f" (focus: {self.focus})" if self.focus else "")
        ]
        lines.append(
            f"  context now: {self.tokens_before:,} tokens; first kept entry "
            f"{self.first_kept_entry_id}" + ("; split turn" if self.is_split_turn else "")
        )
        lines.append(f"  {'layer':<30}{'entries':>9}{'tokens':>10}")
        lines.extend(f"  {name:<30}{n:>9,}{t:>10,}" for name, n, t in rows)
        anchors = self.anchors
        lines.append(
            f"  anchors (verbatim): goal {'yes' if anchors.goal else 'no'}, {len(anchors.constraints)} "
            f"constraint(s), {len(anchors.pins)} pin(s)"
        )
        for p in self.externalize[:SHOWN]:
            lines.append(f"  externalize {p.text} ({p.tool})")
        if len(self.externalize) > SHOWN:
            lines.append(f"  +{len(self.externalize) - SHOWN:,} more externalized")
        for d in self.discard[:SHOWN]:
            lines.append(f"  discard entry {d['entry_id']}: {d['reason']}")
        if len(self.discard) > SHOWN:
            lines.append(f"  +{len(self.discard) - SHOWN:,} more discarded (every one in the plan's data)")
        return "\n".join(lines)


@dataclass(frozen=True)
class CompactionResult:
    entry: Entry
    summary: str
    tokens_before: int
    tokens_after: int
    plan: Plan
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.entry.id,
            "timestamp": self.entry.timestamp,
            "reason": self.entry.data.get("reason"),
            "summary": self.summary,
            "first_kept_entry_id": self.entry.data.get("first_kept_entry_id"),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "kept_entries": self.plan.keep.entries,
            "summarizer": self.details.get("summarizer"),
        }


@dataclass(frozen=True)
class RecallHit:
    """Original text of one logged entry."""

    id: str
    kind: str
    role: str | None
    text: str
    timestamp: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "role": self.role,
            "text": self.text,
            "timestamp": self.timestamp,
        }
