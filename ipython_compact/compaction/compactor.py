"""The Compactor: session log + pure core + a summarizer → one appended compaction entry.

Why it is its own layer: the core decides (cut point, triage, anchors, ledger, drift guard) without
I/O; the store persists; the summarizer writes prose. This module wires them in the order the five
layers demand — fence off anchors and the recent tail first, then encode, externalize and discard —
and appends the ``compaction`` (``compact``), ``branch_summary``, ``pin`` and failure
``compaction_outcome`` entries of this pipeline; ``prepare`` hands the same payload to callers that
place it themselves (the agent loop, at a turn boundary).

What must hold:
- History is never touched: a compaction only *appends* (the compaction entry, or on failure one
  ``compaction_outcome`` entry); ``store.verify()`` passes before and after.
- ``plan()`` and ``prepare()`` write nothing.
- Anchors are re-copied from raw entries at every compaction (``core.anchors.extract_anchors``);
  machine blocks are stripped from the previous summary before any summarizer sees it.
- The ledger and the tracked identifiers are folded over the *summarized* raw entries only, so an
  entry is counted once even though the next span starts at the previous first-kept entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from ipython_compact.compaction.deciding import Decider, Work, collector_paused
from ipython_compact.compaction.results import (
    CompactionError,
    CompactionFailed,
    CompactionResult,
    LayerCount,
    NothingToCompact,
    Plan,
    RecallHit,
    SessionMoved,
)
from ipython_compact.compaction.summary_check import checked_summary
from ipython_compact.core.anchors import Anchor, apply_pins
from ipython_compact.core.context import collect_branch_entries
from ipython_compact.core.decisions import replaced_pairs
from ipython_compact.core.decisions import replacements as decision_replacements
from ipython_compact.core.drift import (
    apply_guard,
    render_block,
    strip_machine_blocks,
    track_identifiers,
)
from ipython_compact.core.entries import (
    BRANCH_SUMMARY,
    COMPACTION,
    COMPACTION_OUTCOME,
    COMPACTION_REASONS,
    CUSTOM,
    KERNEL_FILE_OPS,
    PIN,
    Entry,
    entry_text,
)
from ipython_compact.core.ledger import Ledger
from ipython_compact.core.ledger_records import MAX_FILES
from ipython_compact.core.messages import entry_message
from ipython_compact.core.offline_summary import superseded_by
from ipython_compact.core.prompts import combine_split_turn
from ipython_compact.core.tokens import estimate_message_tokens
from ipython_compact.core.triage import (
    CARRIED_INDEX,
    CARRIED_WITH_GIST,
    carry_pointers,
    externalized_lines,
    triage,
)
from ipython_compact.core.user_statements import one_scan_per_text
from ipython_compact.store import LeafMovedError
from ipython_compact.summarizers.base import SummarizerError, SummaryInput, SummaryResult
from ipython_compact.summarizers.offline import OfflineSummarizer

# The result shapes live in compaction_results; callers keep importing them from here.
__all__ = [
    "CompactionError",
    "CompactionFailed",
    "CompactionResult",
    "Compactor",
    "LayerCount",
    "NothingToCompact",
    "Plan",
    "RecallHit",
    "SessionMoved",
]

MAX_CARRIED_POINTERS = CARRIED_WITH_GIST + CARRIED_INDEX  # the newest with their gist, older as index items

MAX_REPLACED_VALUES = 20  # metric values replaced in a span that the summarizer is told about (newest)


class Compactor(Decider):
    """Compaction for one store. ``summarizer`` defaults to the offline one.

    ``anchors=False`` and ``drift_guard=False`` give the naive rolling summary (for comparisons).
    ``max_identifiers``/``identifier_chars`` bound the drift guard's working set of exact strings
    (most recently seen kept); older ones leave the checkpoint but stay recallable from the log.
    ``judge_summaries`` judges a model's summary against the offline one before it becomes the
    checkpoint (``compaction/summary_check.py``); off, the model's text goes to the drift guard as is.
    """

    # ------------------------------------------------------------------ summarizing
    @collector_paused
    @one_scan_per_text
    def prepare(
        self,
        session: str,
        *,
        reason: str = "manual",
        focus: str | None = None,
        keep_recent_tokens: int | None = None,
    ) -> dict[str, Any] | None:
        """Compute the ``compaction`` entry payload without writing it (the agent loop places it).

        Returns None when there is nothing to compact. Raises ``SummarizerError`` when the
        summarizer fails (nothing is written; ``compact()`` records the failure).
        """
        _check_reason(reason)
        work = self._work(session, keep_recent_tokens)
        if work is None:
            return None
        return self._payload(reason, focus, work)

    def _summarize(
        self,
        work: Work,
        focus: str | None,
        values: Sequence[tuple[str, str]] = (),
        decided: Sequence[tuple[str, str]] = (),
    ) -> tuple[str, list[SummaryResult]]:
        prep = work.prep
        previous = strip_machine_blocks(prep.previous_summary) if prep.previous_summary else None
        results: list[SummaryResult] = []
        history_text: str | None = None
        if work.history or not prep.is_split_turn:
            res = checked_summary(
                self.summarizer,
                SummaryInput(
                    work.history,
                    "history",
                    previous,
                    focus,
                    self.settings.summary_max_tokens,
                    tuple(work.anchors.texts()),
                    self._superseded(work, previous, values, decided),
                ),
                judge=self.judge_summaries,
            )
            results.append(res)
            history_text = res.text
        elif previous:
            history_text = previous
        if prep.is_split_turn and work.prefix:
            res = checked_summary(
                self.summarizer,
                SummaryInput(
                    work.prefix,
                    "turn_prefix",
                    None,
                    None,
                    self.settings.turn_prefix_max_tokens,
                    tuple(work.anchors.texts()),
                ),
                judge=self.judge_summaries,
            )
            results.append(res)
            return combine_split_turn(history_text, res.text), results
        return history_text or "", results

    def _superseded(
        self,
        work: Work,
        previous: str | None,
        values: Sequence[tuple[str, str]],
        decided: Sequence[tuple[str, str]] = (),
    ) -> tuple[tuple[str, str], ...]:
        """(earlier, later) statements the summary must not state as current: revised anchors
        (goal, constraints), the metric values the span replaced (``values``), and for a model
        summarizer also the decisions the span revised (``decided``, from the ledger's decision
        book) and the previous checkpoint's decisions and constraints that the span's statements
        replace (the offline summarizer finds those itself, in the pass that reads the span, and
        marks each on the new line; told them, it would drop the mark)."""
        pairs = [*work.anchors.replacements(), *values]
        if self.summarizer.name != OfflineSummarizer.name:
            pairs.extend(decided)
            if previous:
                pairs.extend(superseded_by(work.history, previous))
        return tuple(dict.fromkeys(pairs))

    def _payload(self, reason: str, focus: str | None, work: Work) -> dict[str, Any]:
        prep, tri = work.prep, work.triage
        prev = work.carried
        # metric values and file versions the span replaced (told to the summarizer)
        replaced: list[tuple[str, str]] = []
        identifiers = track_identifiers(
            prev.identifiers,
            work.span,
            max_count=self.max_identifiers,
            max_chars=self.identifier_chars,
            replaced=replaced,
        )
        ledger = Ledger()
        decided: list[tuple[str, str]] = []
        # plus the files the kernel saw cells open (custom entries written by kernel/fileops.py)
        if self.use_ledger:
            ledger = prev.ledger.update(work.span)
            ledger = _merge_kernel_file_ops(ledger, work.path[prep.boundary_start : prep.first_kept_index])
            # answered in the kept tail: done
            ledger = ledger.settle_answered(work.path[prep.first_kept_index :])
            span_ids = {e.id for e in work.span}  # and the files a newer version replaced in this span
            replaced.extend(
                (a.replaced, a.text) for a in ledger.artifacts if a.replaced and a.entry_id in span_ids
            )
            decided = decision_replacements(ledger.decisions, span_ids)  # the decisions the span revised
        narrative, results = self._summarize(work, focus, replaced[-MAX_REPLACED_VALUES:], decided)

        carried = prev.externalized
        pointers = [p.to_json() for p in tri.externalized]
        all_pointers = carry_pointers(carried, pointers)

        parts = []
        if self.use_anchors:
            parts.append(work.anchors.render())
        parts.append(narrative.strip())
        if self.use_ledger:
            # each request once
            parts.append(ledger.render(work.anchors.replaced_by_entry(), shown="\n".join(parts)))
        parts.append(
            render_block(
                "externalized",
                externalized_lines(all_pointers),
                attrs={"note": "full text stays in the log; recall by entry id"},
            )
        )
        checkpoint = "\n\n".join(p for p in parts if p)
        guard: dict[str, Any] = {"checked": 0, "missing": [], "appended": 0}
        if self.use_drift_guard:
            # an exact string only a superseded anchor said, or an artifact's replaced version, is
            # history, not something to restore
            current = "\n".join([*work.anchors.texts(), *(d.text for d in ledger.decisions)])
            stale = [a.text for a in work.anchors.superseded] + [
                old for d in ledger.decisions for old, _entry in d.earlier
            ]  # and a decision's replaced revisions (issue 32)
            versions = set(ledger.replaced_versions)
            # a value replaced in code, as the guard writes it ("0.085/drop_alert_threshold")
            versions |= {f"{v}/{k.rsplit('.', 1)[-1]}" for k, v in replaced_pairs(ledger.decisions)}
            tracked = [
                i.text
                for i in identifiers
                if i.text not in versions
                and not (any(i.text in old for old in stale) and i.text not in current)
            ]
            required = (work.anchors.texts() if self.use_anchors else []) + tracked
            checkpoint, report = apply_guard(checkpoint, required)
            guard = report.to_json()

        usage: dict[str, int] = {}
        for r in results:
            for k, v in r.usage.items():
                usage[k] = usage.get(k, 0) + int(v)
        tokens_after = self._checkpoint_tokens(checkpoint) + int(tri.tokens.get("keep", 0))
        details: dict[str, Any] = {
            "summarizer": results[0].summarizer if results else self.summarizer.name,
            "model": results[0].model if results else None,
            "usage": usage,
            "attempts": sum(r.attempts for r in results),
            "calls": [r.to_json() for r in results],
            "focus": focus,
            "is_split_turn": prep.is_split_turn,
            "tokens_after": tokens_after,
            "triage": tri.to_json(),
            "externalized": all_pointers,
            "anchors": work.anchors.to_json() if self.use_anchors else None,
            "ledger": ledger.to_json() if self.use_ledger else None,
            "identifiers": [i.to_json() for i in identifiers],
            "drift": guard,
            "read_files": list(prep.read_files),
            "modified_files": list(prep.modified_files),
            "summary_chars": len(checkpoint),
            "budget_tokens": self.settings.summary_max_tokens,
        }
        if not self.use_anchors:
            details.pop("anchors")
        return {
            "summary": checkpoint,
            "first_kept_entry_id": prep.first_kept_entry_id,
            "tokens_before": work.tokens_before,
            "reason": reason,
            "details": details,
        }

    def _checkpoint_tokens(self, checkpoint: str) -> int:
        """The checkpoint's estimate, in the model's tokens when the engine counts that way (the
        kept tail is already): ``tokens_after`` then compares with the gauge's figure."""
        estimate = estimate_message_tokens({"role": "user", "content": checkpoint}, self.settings.estimator)
        if self.count_correction is None:
            return estimate
        # an id of its text: a tokenizer's count is cached by id, and this text has no entry yet
        digest = hashlib.sha256(checkpoint.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        entry = Entry(f"checkpoint:{digest}", None, COMPACTION, "", {"summary": checkpoint})
        return int(self.count_correction(entry, estimate))

    @collector_paused
    @one_scan_per_text
    def compact(
        self,
        session: str,
        *,
        reason: str = "manual",
        focus: str | None = None,
        keep_recent_tokens: int | None = None,
    ) -> CompactionResult:
        """Summarize and append the compaction entry. History is never modified.

        Raises ``NothingToCompact`` (nothing written) — also for a manual compaction whose result
        would not be smaller than the context it replaces — or ``CompactionFailed`` (one
        ``compaction_outcome`` entry written, naming the failure).
        """
        _check_reason(reason)
        for attempt in (1, 2):
            compactions = self.store.count_on_path(session, (COMPACTION,))
            work = self._work_or_raise(session, keep_recent_tokens)
            plan = self._plan_of(session, focus, work)
            try:
                payload = self._payload(reason, focus, work)
            except SummarizerError as exc:
                outcome = self.store.append(
                    session,
                    COMPACTION_OUTCOME,
                    {
                        "reason": reason,
                        "outcome": "failed",
                        "error": str(exc),
                        "code": exc.code,
                        "attempts": exc.attempts,
                        "usage": exc.usage,
                        "summarizer": self.summarizer.name,
                    },
                )
                raise CompactionFailed(
                    f"{reason} compaction failed: {exc}", code=exc.code, outcome_entry=outcome
                ) from exc
            if reason == "manual":
                self._refuse_if_not_smaller(session, work, plan, payload)
            # compare and swap: a run that planned against an older leaf must not stack a second compaction
            try:
                entry = self.store.append(session, COMPACTION, payload, expect_leaf=work.leaf_id)
            except LeafMovedError as exc:
                # Other writers appended while this summary was made (under load every try lost:
                # 0 of 31 landed). Plan once more on the new leaf, unless a compaction landed
                # meanwhile: then this one is not needed.
                if attempt == 1 and self.store.count_on_path(session, (COMPACTION,)) == compactions:
                    continue
                raise SessionMoved(
                    f"session {session!r} moved while this compaction was being made (planned at leaf "
                    f"{exc.expected!r}, "
                    f"now {exc.actual!r}); nothing was written",
                ) from exc
            return CompactionResult(
                entry,
                payload["summary"],
                payload["tokens_before"],
                int(payload["details"]["tokens_after"]),
                plan,
                payload["details"],
            )
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _refuse_if_not_smaller(
        self, session: str, work: Work, plan: Plan, payload: Mapping[str, Any]
    ) -> None:
        """A manual compaction must shrink what it replaces: the checkpoint against the summarized
        span plus the previous summary it supersedes (not ``tokens_before``, which a usage report
        anchors and can disagree with per-entry estimates)."""
        estimator = self.settings.estimator
        checkpoint = estimate_message_tokens({"role": "user", "content": payload["summary"]}, estimator)
        previous = work.prep.previous_summary
        replaced = (
            plan.summarize.tokens
            + plan.turn_prefix.tokens
            + (estimate_message_tokens({"role": "user", "content": previous}, estimator) if previous else 0)
        )
        if checkpoint >= replaced:
            raise NothingToCompact(
                f"compacting session {session!r} now would not make its context smaller: the checkpoint "
                f"({checkpoint:,} tokens) is not smaller than the {replaced:,} tokens it would replace "
                f"({plan.summarize.entries:,} entries before the recent tail); nothing was written"
            )

    # ------------------------------------------------------------------ branches
    def summarize_branch(self, session: str, target_id: str, *, focus: str | None = None) -> Entry:
        """Leave the current branch for ``target_id``: summarize what is left behind and append a
        ``branch_summary`` entry under ``target_id`` (which becomes the leaf's parent)."""
        paths = self.store.branch_paths(session, target_id)  # both sides back to the common ancestor only
        old_path = paths.old
        collected = collect_branch_entries(old_path, paths.target)
        entries = tuple(e for e in collected.entries if entry_message(e) is not None and e.kind != COMPACTION)
        if not entries:
            raise NothingToCompact(
                f"nothing to summarize: the current leaf is already on the path to {target_id!r}"
            )
        tri = triage(
            entries, (), externalize_lines=self.externalize_lines, externalize_chars=self.externalize_chars
        )
        result = self.summarizer.summarize(
            SummaryInput(tri.encode, "branch", None, focus, self.settings.summary_max_tokens)
        )
        identifiers = track_identifiers([], entries)
        text, report = (
            apply_guard(result.text, [i.text for i in identifiers])
            if self.use_drift_guard
            else (result.text, None)
        )
        details = {
            "summarizer": result.summarizer,
            "model": result.model,
            "usage": dict(result.usage),
            "drift": None if report is None else report.to_json(),
            "entries": len(entries),
        }
        return self.store.append(
            session,
            BRANCH_SUMMARY,
            {"summary": text, "from_id": old_path[-1].id if old_path else None, "details": details},
            parent_id=target_id,
        )

    # ------------------------------------------------------------------ recall and pins
    def recall(
        self, session: str, *, entry_id: str | None = None, query: str | None = None, limit: int = 10
    ) -> list[RecallHit]:
        """The original logged text by entry id, or the best full-text matches for ``query``.

        Compaction summaries are excluded from query results: recall answers with source text.
        A query picks the ``limit`` best matches and returns them in the order they were logged,
        so a reader follows what happened (the panel, the CLI and ``%compact recall`` list them so).
        """
        if (entry_id is None) == (query is None):
            raise ValueError("recall needs exactly one of entry_id or query")
        if entry_id is not None:
            try:
                entry = self.store.get(entry_id, session)
            except Exception as exc:  # the store's own message names the entry and session once
                said = str(exc)
                raise ValueError(
                    said
                    if entry_id in said
                    else f"cannot recall entry {entry_id!r} in session {session!r}: {said}"
                ) from exc
            return [_hit(entry)]
        assert query is not None
        if not query.strip():
            raise ValueError("recall query is empty")
        want = max(1, limit)
        fetch = want * 2
        # checkpoints quote their sources (pins, identifiers) and can outrank them: widen until filled
        while True:
            hits = self.store.search(query, session=session, limit=fetch)
            kept = [h for h in hits if h.entry.kind not in (COMPACTION, COMPACTION_OUTCOME)]
            if len(kept) >= want or len(hits) < fetch:
                # the log's own order: two entries written in one millisecond share a timestamp
                return [_hit(h.entry) for h in sorted(kept[:want], key=lambda h: h.seq)]
            fetch *= 4

    def active_pins(self, session: str) -> tuple[Anchor, ...]:
        """Pins in force on the session's current path (text pins and entry pins)."""
        pins = self.store.path(session, kinds=(PIN,))
        return apply_pins((), pins, self._lookup(session))

    def pin(self, session: str, *, text: str | None = None, entry_id: str | None = None) -> Entry:
        """Pin a text or an entry: it is copied verbatim into every later checkpoint."""
        if (text is None) == (entry_id is None):
            raise ValueError("pin needs exactly one of text or entry_id")
        if text is not None and not text.strip():
            raise ValueError("pin text is empty")
        if entry_id is not None:
            try:
                self.store.get(entry_id, session)
            except Exception as exc:
                raise ValueError(f"cannot pin entry {entry_id!r} in session {session!r}: {exc}") from exc
        count = sum(1 for e in self.store.path(session, kinds=(PIN,)) if e.data.get("action", "pin") == "pin")
        data: dict[str, Any] = {"action": "pin", "pin_id": f"pin-{count + 1}"}
        if text is not None:
            data["text"] = text
        else:
            data["entry_id"] = entry_id
        return self.store.append(session, PIN, data)

    def unpin(self, session: str, pin_id: str) -> Entry:
        """Remove an active pin by its id (``pin-N``)."""
        if not any(p.pin_id == pin_id for p in self.active_pins(session)):
            active = ", ".join(p.pin_id or "?" for p in self.active_pins(session)) or "none"
            raise ValueError(f"no active pin {pin_id!r} in session {session!r} (active: {active})")
        return self.store.append(session, PIN, {"action": "unpin", "pin_id": pin_id})

    def compactions(self, session: str) -> list[Entry]:
        """Compaction entries on the current path, oldest first."""
        return self.store.path(session, kinds=(COMPACTION,))


def _check_reason(reason: str) -> None:
    if reason not in COMPACTION_REASONS:
        raise ValueError(
            f"unknown compaction reason {reason!r}; expected one of {', '.join(sorted(COMPACTION_REASONS))}"
        )


def _hit(entry: Entry) -> RecallHit:
    return RecallHit(entry.id, entry.kind, entry.role, entry_text(entry), entry.timestamp)


def _merge_kernel_file_ops(ledger: Ledger, entries: Sequence[Entry]) -> Ledger:
    """Fold ``custom`` entries of type ``ipython_file_ops`` (files read/modified by cells) into the
    ledger's file lists; a file written after being read counts as modified only. Files a person's
    own cells opened (``by: "user"``) are not the agent's work and stay out of its ledger."""
    read, modified = list(ledger.files_read), list(ledger.files_modified)
    for entry in entries:
        data = (
            entry.data.get("data")
            if entry.kind == CUSTOM and entry.data.get("custom_type") == KERNEL_FILE_OPS
            else None
        )
        if not isinstance(data, Mapping) or data.get("by") == "user":
            continue
        for path in (p for p in data.get("modified") or [] if isinstance(p, str)):
            if path in read:
                read.remove(path)
            if path not in modified:
                modified.append(path)
        for path in (p for p in data.get("read") or [] if isinstance(p, str)):
            if path not in modified and path not in read:
                read.append(path)
    if (read, modified) == (list(ledger.files_read), list(ledger.files_modified)):
        return ledger
    return dataclasses.replace(
        ledger, files_read=tuple(read[-MAX_FILES:]), files_modified=tuple(modified[-MAX_FILES:])
    )
