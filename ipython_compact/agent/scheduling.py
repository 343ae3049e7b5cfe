"""When a compaction runs and where its summary lands: now, beside the turn, or at a turn boundary.

Why: the triggers (threshold before a request, manual ``%compact``/``Agent.compact``, the model's
``compact.run()``, overflow) all end in one of two paths — *blocking* (compute and place now) or
*background* (compute in a worker; place when idle, else queue in the store's inbox for the next
turn boundary). The pure decisions are ``core.triggers.decide`` / ``decide_turn_end``; this module
carries them out.

What must hold:
- At most one compaction per request; at most one background worker in flight; a failure starts
  the cooldown and counts towards the failure ladder (``recovery``).
- A queued summary is placed at the next turn boundary (oldest first, one at a time) or settles
  as stale when a newer cut already reached past it; either way a record of it stays in the log.
- Every placement appends, in order: the compaction, a fresh system baseline, the live
  ``<ipython_state>`` notice (when the kernel answers).
- ``compact.run()`` runs when the turn ends, is dropped when it was aborted, and is covered by a
  manual compaction the user started in the same turn.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from typing import Any

from ipython_compact.agent.events import CompactionRecord
from ipython_compact.agent.recovery import emergency_payload, keep_recent_after_failures
from ipython_compact.agent.state import AgentState
from ipython_compact.core.entries import COMPACTION, COMPACTION_OUTCOME, KERNEL_STATE, SYSTEM, Entry
from ipython_compact.core.state_notice import SnapshotOutcome, state_notice
from ipython_compact.core.thresholds import threshold_lines
from ipython_compact.core.triggers import PreRequest, decide, decide_turn_end, in_cooldown

CONTINUATION_TEXT = "Context was compacted. Continue working toward the goal from where you left off."

NOTHING_TO_COMPACT = "nothing to compact"


class CompactionScheduling(AgentState):
    """The compaction paths of the agent (mixed into ``Agent``)."""

    # ------------------------------------------------------------------ manual
    def compact(self, focus: str | None = None, *, wait: bool = False) -> CompactionRecord:
        """Manual compaction. Idle: runs and is placed now. Busy: runs beside the turn and its
        summary is queued for the next turn boundary (``wait`` joins the worker)."""
        with self._state_lock:
            if not self._busy:
                self._emit("compaction_start", "manual compaction", reason="manual")
                return self._compact_now("manual", focus)
        record = self._start_background("manual", focus)
        if wait:
            self.wait_background()
        return record

    def wait_background(self, timeout: float | None = 30.0) -> None:
        """Join background compaction workers (examples, tests, shutdown)."""
        for t in list(self._bg_threads):
            t.join(timeout)
        self._bg_threads = [t for t in self._bg_threads if t.is_alive()]

    def _manual_in_flight(self) -> bool:
        """A manual compaction started while busy that has not been placed or settled yet."""
        return any(r.reason == "manual" and r.state == "queued" for r in self.compactions)

    # ------------------------------------------------------------------ triggers
    def _before_request(self) -> None:
        """The threshold check before each request: blocking, background, or nothing (with why)."""
        tokens, _ = self.context_tokens()
        lines = threshold_lines(self.context_window, self.settings)
        decision = decide(
            PreRequest(
                enabled=self.settings.enabled,
                tokens=tokens,
                blocking_line=lines.blocking,
                background_line=lines.background,
                usage_stale=False,  # ``tokens`` never rests on stale usage (see context_tokens)
                in_cooldown=in_cooldown(self._last_failure_at, time.monotonic(), self.cooldown_seconds),
                compacted_this_request=self._compacted_for_request,
                background_in_flight=self._bg_in_flight > 0,
            )
        )
        if decision.guard not in (None, "disabled"):
            self._emit("guard", decision.why, guard=decision.guard, tokens=tokens)
        if decision.action == "blocking":
            self._compact_blocking("threshold", f"blocking compaction: {decision.why}", tokens=tokens)
        elif decision.action == "background":
            self._emit("compaction_start", f"background compaction: {decision.why}", reason="threshold", tokens=tokens)
            self._start_background("threshold", None)

    def _finish_turn_compactions(self, *, aborted: bool) -> None:
        """At the end of a turn (state lock taken here): honour or drop ``compact.run()``, place the
        inbox, and queue a continuation when a compaction happened in autonomous mode."""
        action = decide_turn_end(requested=self._requested is not None, aborted=aborted)
        requested, self._requested = self._requested, None
        if action == "run_requested" and self._manual_in_flight():
            self.wait_background()  # a manual compaction the user asked for this turn may cover it
        compacted = False
        with self._state_lock:
            if action == "run_requested" and self._manual_in_flight():
                # A successful manual compaction satisfies the model's request (Prime's rule); a
                # failed one would have left the request standing.
                self._emit("compaction_dropped", "model-requested compaction covered by the manual one",
                           reason="requested")
            elif action == "run_requested" and requested is not None:
                self._emit("compaction_start", "model-requested compaction (end of turn)", reason="requested")
                compacted = self._compact_now("requested", requested.get("instructions")).state == "placed"
            elif action == "drop_requested":
                self._emit("compaction_dropped", "model-requested compaction dropped: the turn was aborted")
            compacted = bool(self._place_inbox()) or compacted  # turn boundary
            if compacted and self.autonomous and self._goal and not aborted:
                # Compaction is not a completion signal: the goal carries on in a new turn.
                self._continuations.append(CONTINUATION_TEXT)
            self._busy = False

    # ------------------------------------------------------------------ the two paths
    def _compact_blocking(self, reason: str, why: str | None, **data: Any) -> CompactionRecord:
        """Announce ``why`` (unless None: the caller has reported it), then compact and place now
        under the state lock (thresholds, overflow)."""
        if why is not None:
            self._emit("compaction_start", why, reason=reason, **data)
        with self._state_lock:
            return self._compact_now(reason, None)

    def _compact_now(self, reason: str, focus: str | None) -> CompactionRecord:
        """Compute and place at once (blocking, manual-when-idle, requested at turn end)."""
        record = CompactionRecord(reason, True)
        with self._live(reason, blocking=True) as live:
            try:
                self._compacted_for_request = True
                payload = self._prepare(reason, focus, blocking=True)
                if payload is None:
                    record.state, record.error = "skipped", NOTHING_TO_COMPACT
                    self._append(COMPACTION_OUTCOME, {"reason": reason, "outcome": "skipped", "error": NOTHING_TO_COMPACT})
                else:
                    record.entry = self._place(payload)
                    record.state = "placed"
            except Exception as exc:
                self._failed(record, live, exc)
        self.compactions.append(record)
        self._ended(reason, record.state, f": {record.error}" if record.error else "", record.error)
        return record

    def _start_background(self, reason: str, focus: str | None) -> CompactionRecord:
        """Compute in a worker thread; place when idle, else queue the summary in the inbox."""
        record = CompactionRecord(reason, False, state="queued")
        self.compactions.append(record)
        with self._state_lock:
            self._bg_in_flight += 1
        live = self._live(reason, blocking=False).begin()  # ended by the worker

        def work() -> None:
            try:
                payload = self._prepare(reason, focus, blocking=False)
                if payload is None:
                    record.state, record.error = "skipped", NOTHING_TO_COMPACT
                    self._ended(reason, "skipped", f": {NOTHING_TO_COMPACT}", record.error)
                    return
                with self._state_lock:
                    if self._busy:
                        self.store.inbox_put(self.session, payload, first_kept_entry_id=payload.get("first_kept_entry_id"))
                        self._emit("compaction_queued", f"{reason} compaction finished; its summary is queued", reason=reason)
                        self._pending_records.append(record)
                    else:
                        record.entry = self._place(payload)
                        record.state = "placed"
                        self._ended(reason, "placed", " (idle)")
            except Exception as exc:
                error = self._failed(record, live, exc)
                self._ended(reason, "failed", f": {error}", error)
            finally:
                live.end()
                with self._state_lock:
                    self._bg_in_flight -= 1

        thread = threading.Thread(target=work, name=f"compaction-{reason}", daemon=True)
        self._bg_threads.append(thread)
        thread.start()
        return record

    def _prepare(self, reason: str, focus: str | None, *, blocking: bool) -> dict[str, Any] | None:
        """The payload to place: the engine's, or after repeated failures the ladder's (less kept
        verbatim, then the lossy emergency shrink); ``details`` say how and for which model."""
        keep, emergency = keep_recent_after_failures(self.consecutive_failures, self.settings.keep_recent_tokens)
        if emergency:
            payload = emergency_payload(self.store.context_path(self.session), reason, self.context_tokens()[0])
        else:
            payload = self.engine.prepare(self.session, reason=reason, focus=focus, keep_recent_tokens=keep)
        if payload is None:
            return None
        payload = dict(payload)
        details = dict(payload.get("details") or {})
        details.update({"blocking": blocking, "model": f"{self.provider}/{self.model}"})
        if focus:
            details.setdefault("focus", focus)
        payload["details"] = details
        return payload

    def _failed(self, record: CompactionRecord, live: _LiveTask, exc: Exception) -> str:
        """A compaction raised: mark its record and live task failed, count it; the error text."""
        error = f"{type(exc).__name__}: {exc}"
        live.error = record.error = error
        record.state = "failed"
        with self._state_lock:
            self._failure(record.reason, error)
        return error

    def _failure(self, reason: str, error: str) -> None:
        """Count a failed compaction (cooldown, ladder) and record it in the log."""
        self.consecutive_failures += 1
        self._last_failure_at = time.monotonic()
        self._append(COMPACTION_OUTCOME, {"reason": reason, "outcome": "failed", "error": error,
                                          "consecutive_failures": self.consecutive_failures})

    # ------------------------------------------------------------------ placement
    def _place(self, payload: Mapping[str, Any]) -> Entry:
        """Append the compaction, then the system baseline, then the live ``<ipython_state>`` notice."""
        entry = self._append(COMPACTION, dict(payload))
        self.consecutive_failures = 0
        self._last_failure_at = None
        self._append(SYSTEM, {"content": self._baseline_text()})
        notice = self._kernel_notice()
        if notice is not None:
            self._append(KERNEL_STATE, {"content": notice})
        return entry

    def _place_inbox(self) -> int:
        """At a turn boundary: settle stale summaries, place the rest (oldest first), one at a
        time, so a summary whose cut an earlier one already reached settles as stale too."""
        placed = 0
        for item in self.store.inbox_settle_stale(self.session):
            self._settle_stale(item.payload)
        for item in self.store.inbox_take(self.session):
            if placed and not self._cut_is_live(item.payload.get("first_kept_entry_id")):
                self._settle_stale(item.payload)
                continue
            rec = self._record_for(item.payload)
            entry = self._place(item.payload)
            placed += 1
            if rec is not None:
                rec.entry, rec.state = entry, "placed"
            self._ended(str(item.payload.get("reason")), "placed", " at the turn boundary")
        return placed

    def _settle_stale(self, payload: Mapping[str, Any]) -> None:
        rec = self._record_for(payload)
        if rec is not None:
            rec.state = "stale"
        self._append(COMPACTION_OUTCOME, {"reason": payload.get("reason", "threshold"), "outcome": "skipped",
                                          "error": "stale: a newer compaction already cut at or past this point"})
        self._emit("compaction_stale", f"a queued {payload.get('reason')} summary settled as stale: a newer cut won",
                   reason=payload.get("reason"), state="stale")

    def _cut_is_live(self, first_kept: Any) -> bool:
        """True when ``first_kept`` lies strictly inside the current context (after its head)."""
        view = self.store.context_view(self.session)
        return any(e.id == first_kept for e in view.entries if e.id != view.head_id)

    def _record_for(self, payload: Mapping[str, Any]) -> CompactionRecord | None:
        """The queued record a placed or settled inbox payload belongs to (same reason, oldest)."""
        for rec in self._pending_records:
            if rec.entry is None and rec.state == "queued" and rec.reason == payload.get("reason"):
                self._pending_records.remove(rec)
                return rec
        return None

    def _kernel_notice(self) -> str | None:
        """The ``<ipython_state>`` notice from a live probe and the last snapshot's outcome."""
        alive = False
        names: list[str] | None = None
        try:
            alive = self.kernel.is_alive()
            names = self.kernel.probe_names() if alive else None
        except Exception:
            names = None
        if self.snapshot_dir is not None:
            snapshot = self._last_snapshot
        elif self.snapshot_outcome is not None:  # snapshots kept by someone else (the kernel extension)
            try:
                snapshot = self.snapshot_outcome()
            except Exception as exc:
                snapshot = SnapshotOutcome(False, (), f"snapshot state unknown: {type(exc).__name__}")
        else:
            snapshot = None
        return state_notice(kernel_alive=alive, names=names, snapshot=snapshot)

    # ------------------------------------------------------------------ reporting
    def _ended(self, reason: str, state: str, note: str, error: str | None = None) -> None:
        """The ``compaction_end`` event: "<reason> compaction <state><note>"."""
        self._emit("compaction_end", f"{reason} compaction {state}{note}", reason=reason, state=state, error=error)

    def _live(self, reason: str, *, blocking: bool) -> _LiveTask:
        """Mark a compaction as in flight in the store (for status displays) until it ends."""
        return _LiveTask(self.store, self.session, f"{reason}-{'' if blocking else 'bg-'}{time.monotonic_ns()}",
                         reason, blocking)


class _LiveTask:
    """The store's in-flight marker for one compaction; a store error never breaks compaction.

    ``error`` set before exit is recorded as the task's failure.
    """

    def __init__(self, store: Any, session: str, task: str, reason: str, blocking: bool) -> None:
        self.store, self.session, self.task = store, session, task
        self.reason, self.blocking = reason, blocking
        self.error: str | None = None

    def begin(self) -> _LiveTask:
        with contextlib.suppress(Exception):
            self.store.live_begin(self.session, self.task, reason=self.reason, blocking=self.blocking)
        return self

    def end(self) -> None:
        with contextlib.suppress(Exception):
            self.store.live_end(self.session, self.task, error=self.error)

    def __enter__(self) -> _LiveTask:
        return self.begin()

    def __exit__(self, *exc: object) -> None:
        self.end()
