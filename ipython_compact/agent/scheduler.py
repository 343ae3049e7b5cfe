"""When a compaction runs and where its summary lands: now, beside the turn, or at a turn boundary.

Why a component: the triggers (threshold before a request, manual ``Agent.compact``, the model's
``compact.run()``, overflow) all end in one of two paths — *blocking* (compute and place now) or
*background* (compute in a worker thread; place when idle, else queue in the store's inbox for the
next turn boundary). The scheduler owns everything those paths share: its lock, whether a turn
runs, the worker threads, the cooldown and the failure ladder. The pure decisions are
``core.triggers``; what the agent must add after a placement (a fresh baseline, the kernel
notice) comes in as the ``after_place`` callback, so the scheduler is testable with a fake engine
and a plain store.

What must hold:
- At most one compaction per request; at most one background worker in flight; a failure starts
  the cooldown and counts towards the failure ladder (less kept verbatim, then a labelled lossy
  emergency shrink).
- A queued summary is placed at the next turn boundary (oldest first, one at a time) or settles as
  stale when a newer cut already reached past it; either way a record of it stays in the log.
- Every placement appends the compaction, then calls ``after_place``, then ``placed`` with the
  compaction's entry (the agent records the context right after it), under the scheduler's lock.
- ``compact.run()`` runs when the turn ends, is dropped when it was aborted, and is covered by a
  manual compaction the user started in the same turn.
- Every state change happens under ``_lock``; background workers take it before they touch state.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ipython_compact.agent.events import AgentError, CompactionRecord
from ipython_compact.agent.recovery import emergency_payload, keep_recent_after_failures
from ipython_compact.agent.session_log import SessionLog
from ipython_compact.core.entries import COMPACTION, COMPACTION_OUTCOME, Entry
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.thresholds import threshold_lines
from ipython_compact.core.triggers import PreRequest, decide, decide_turn_end, in_cooldown
from ipython_compact.store import SessionStore

NOTHING_TO_COMPACT = "nothing to compact"


class CompactionEngine(Protocol):
    """What the scheduler needs from the pipeline (``Compactor`` has it): compute, do not place.

    ``prepare`` returns the ``compaction`` entry payload (``summary``, ``first_kept_entry_id``,
    ``tokens_before``, ``reason``, ``details``) or None when there is nothing to compact; it must
    not write to the log (the scheduler places the entry itself, now or at a turn boundary).
    """

    def prepare(
        self, session: str, *, reason: str, focus: str | None, keep_recent_tokens: int | None
    ) -> dict[str, Any] | None: ...


class CompactionScheduler:
    """Blocking and background compaction for one session (see the module docstring).

    ``settings``/``window``/``tokens``/``model_label`` are read when needed (the model can change);
    ``after_place`` appends what must follow every compaction; ``placed`` is told of the compaction
    once that is in. ``clock`` is monotonic seconds.
    """

    def __init__(
        self,
        log: SessionLog,
        engine: CompactionEngine,
        *,
        settings: Callable[[], CompactionSettings],
        window: Callable[[], int],
        tokens: Callable[[], int],
        model_label: Callable[[], str],
        after_place: Callable[[], None],
        placed: Callable[[Entry], None] = lambda entry: None,
        cooldown_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        allowed: Callable[[], bool] = lambda: True,
    ) -> None:
        self.log = log
        self.engine = engine
        self._settings = settings
        self._window = window
        self._tokens = tokens
        self._model_label = model_label
        self._after_place = after_place
        self._placed = placed
        self.cooldown_seconds = cooldown_seconds
        self._clock = clock
        self._allowed = allowed
        self._lock = threading.RLock()
        self._busy = False
        self._threads: list[threading.Thread] = []
        self._in_flight = 0
        self._failures = 0
        self._last_failure_at: float | None = None
        self._pending: list[CompactionRecord] = []  # queued records waiting for their inbox payload
        self._compacted_for_request = False
        self.records: list[CompactionRecord] = []

    # ------------------------------------------------------------------ state, read-only
    @property
    def busy(self) -> bool:
        """True while a turn runs (manual compactions then queue instead of placing at once)."""
        return self._busy

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    @property
    def in_flight(self) -> int:
        """Background workers computing right now."""
        return self._in_flight

    # ------------------------------------------------------------------ the turn's frame
    def start_turn(self) -> int:
        """A turn begins: mark busy (AgentError when one already runs), place the inbox; how many
        queued summaries were placed."""
        with self._lock:
            if self._busy:
                raise AgentError("a turn is already running")
            self._busy = True
            self._compacted_for_request = False
            return self._place_inbox()

    def request_sent(self) -> None:
        """A request went through: the next one may compact again."""
        with self._lock:
            self._compacted_for_request = False

    @property
    def compacted_for_request(self) -> bool:
        """This request already waited on a compaction (at most one per request)."""
        return self._compacted_for_request

    def finish_turn(self, *, requested: Mapping[str, Any] | None, aborted: bool) -> bool:
        """At the end of a turn: honour or drop the model's ``compact.run()`` request, place the
        inbox, leave the busy state. True when a compaction was placed."""
        action = decide_turn_end(requested=requested is not None, aborted=aborted)
        if action == "run_requested" and self._manual_in_flight():
            self.wait()  # a manual compaction the user asked for this turn may cover it
        compacted = False
        with self._lock:
            try:
                if action == "run_requested" and self._manual_in_flight():
                    # A successful manual compaction satisfies the model's request (Prime's rule); a
                    # failed one would have left the request standing.
                    self.log.emit(
                        "compaction_dropped",
                        "model-requested compaction covered by the manual one",
                        reason="requested",
                    )
                elif action == "run_requested" and requested is not None:
                    self.log.emit(
                        "compaction_start", "model-requested compaction (end of turn)", reason="requested"
                    )
                    compacted = (
                        self._compact_now("requested", requested.get("instructions")).state == "placed"
                    )
                elif action == "drop_requested":
                    self.log.emit(
                        "compaction_dropped", "model-requested compaction dropped: the turn was aborted"
                    )
                compacted = bool(self._place_inbox()) or compacted  # turn boundary
            finally:
                self._busy = False
        return compacted

    # ------------------------------------------------------------------ triggers
    def before_request(self) -> str:
        """The threshold check before each request: blocking, background, or nothing (with why).

        Returns ``"capped"`` when a blocking compaction was needed but ``allowed`` refused it (the
        caller ends the run), else ``""``.
        """
        tokens = self._tokens()
        settings = self._settings()
        lines = threshold_lines(self._window(), settings)
        with self._lock:
            decision = decide(
                PreRequest(
                    enabled=settings.enabled,
                    tokens=tokens,
                    blocking_line=lines.blocking,
                    background_line=lines.background,
                    usage_stale=False,  # the agent's token count never rests on stale usage
                    in_cooldown=in_cooldown(self._last_failure_at, self._clock(), self.cooldown_seconds),
                    compacted_this_request=self._compacted_for_request,
                    background_in_flight=self._in_flight > 0,
                )
            )
        if decision.guard not in (None, "disabled"):
            self.log.emit("guard", decision.why, guard=decision.guard, tokens=tokens)
        if decision.action != "none" and not self._allowed():
            self.log.emit(
                "guard",
                f"{decision.action} compaction needed but the compaction cap is reached",
                guard="compaction_cap",
                tokens=tokens,
            )
            return "capped" if decision.action == "blocking" else ""
        if decision.action == "blocking":
            self.compact_blocking("threshold", f"blocking compaction: {decision.why}", tokens=tokens)
        elif decision.action == "background":
            self.log.emit(
                "compaction_start",
                f"background compaction: {decision.why}",
                reason="threshold",
                tokens=tokens,
            )
            self._start_background("threshold", None)
        return ""

    def compact(self, focus: str | None = None, *, wait: bool = False) -> CompactionRecord:
        """Manual compaction. Idle: runs and is placed now. Busy: runs beside the turn and its
        summary is queued for the next turn boundary (``wait`` joins the worker)."""
        with self._lock:
            if not self._busy:
                self.log.emit("compaction_start", "manual compaction", reason="manual")
                return self._compact_now("manual", focus)
        record = self._start_background("manual", focus)
        if wait:
            self.wait()
        return record

    def compact_blocking(self, reason: str, why: str | None, **data: Any) -> CompactionRecord:
        """Announce ``why`` (unless None: the caller has reported it), then compact and place now."""
        if why is not None:
            self.log.emit("compaction_start", why, reason=reason, **data)
        with self._lock:
            return self._compact_now(reason, None)

    def wait(self, timeout: float | None = 30.0) -> None:
        """Join background workers (examples, tests, shutdown)."""
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]

    # ------------------------------------------------------------------ the two paths
    def _manual_in_flight(self) -> bool:
        with self._lock:
            return any(r.reason == "manual" and r.state == "queued" for r in self.records)

    def _compact_now(self, reason: str, focus: str | None) -> CompactionRecord:
        """Compute and place at once (caller holds the lock)."""
        record = CompactionRecord(reason, True)
        if reason != "manual" and not self._allowed():
            record.state, record.error = "skipped", "the compaction cap is reached"
            self.records.append(record)
            self._ended(reason, record.state, f": {record.error}", record.error)
            return record
        with self._live(reason, blocking=True) as live:
            try:
                self._compacted_for_request = True
                payload = self._prepare(reason, focus, blocking=True)
                if payload is None:
                    record.state, record.error = "skipped", NOTHING_TO_COMPACT
                    self.log.append(
                        COMPACTION_OUTCOME,
                        {"reason": reason, "outcome": "skipped", "error": NOTHING_TO_COMPACT},
                    )
                else:
                    record.entry = self._place(payload)
                    record.state = "placed"
            except Exception as exc:
                self._failed(record, live, exc)
        self.records.append(record)
        self._ended(reason, record.state, f": {record.error}" if record.error else "", record.error)
        return record

    def _start_background(self, reason: str, focus: str | None) -> CompactionRecord:
        """Compute in a worker thread; place when idle, else queue the summary in the inbox."""
        record = CompactionRecord(reason, False, state="queued")
        with self._lock:
            self.records.append(record)
            self._in_flight += 1
        live = self._live(reason, blocking=False).begin()  # ended by the worker

        def work() -> None:
            try:
                payload = self._prepare(reason, focus, blocking=False)
                with self._lock:
                    if payload is None:
                        record.state, record.error = "skipped", NOTHING_TO_COMPACT
                        self._ended(reason, "skipped", f": {NOTHING_TO_COMPACT}", record.error)
                    elif self._busy:
                        self.log.store.inbox_put(
                            self.log.session, payload, first_kept_entry_id=payload.get("first_kept_entry_id")
                        )
                        self.log.emit(
                            "compaction_queued",
                            f"{reason} compaction finished; its summary is queued",
                            reason=reason,
                        )
                        self._pending.append(record)
                    else:
                        record.entry = self._place(payload)
                        record.state = "placed"
                        self._ended(reason, "placed", " (idle)")
            except Exception as exc:
                with self._lock:
                    error = self._failed(record, live, exc)
                    self._ended(reason, "failed", f": {error}", error)
            finally:
                live.end()
                with self._lock:
                    self._in_flight -= 1

        thread = threading.Thread(target=work, name=f"compaction-{reason}", daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()
        return record

    def _prepare(self, reason: str, focus: str | None, *, blocking: bool) -> dict[str, Any] | None:
        """The payload to place: the engine's, or after repeated failures the ladder's (less kept
        verbatim, then the lossy emergency shrink); ``details`` say how and for which model."""
        with self._lock:
            failures = self._failures
        keep, emergency = keep_recent_after_failures(failures, self._settings().keep_recent_tokens)
        if emergency:
            payload = emergency_payload(self.log.store.context_path(self.log.session), reason, self._tokens())
        else:
            payload = self.engine.prepare(
                self.log.session, reason=reason, focus=focus, keep_recent_tokens=keep
            )
        if payload is None:
            return None
        payload = dict(payload)
        details = dict(payload.get("details") or {})
        details.update({"blocking": blocking, "model": self._model_label()})
        if focus:
            details.setdefault("focus", focus)
        payload["details"] = details
        return payload

    def _failed(self, record: CompactionRecord, live: _LiveTask, exc: Exception) -> str:
        """A compaction raised (caller holds the lock): mark it failed, count it, log it."""
        error = f"{type(exc).__name__}: {exc}"
        live.error = record.error = error
        record.state = "failed"
        self._failures += 1
        self._last_failure_at = self._clock()
        self.log.append(
            COMPACTION_OUTCOME,
            {
                "reason": record.reason,
                "outcome": "failed",
                "error": error,
                "consecutive_failures": self._failures,
            },
        )
        return error

    # ------------------------------------------------------------------ placement
    def _place(self, payload: Mapping[str, Any]) -> Entry:
        """Append the compaction, then whatever must follow it (caller holds the lock)."""
        entry = self.log.append(COMPACTION, dict(payload))
        self._failures = 0
        self._last_failure_at = None
        self._after_place()
        self._placed(entry)
        return entry

    def _place_inbox(self) -> int:
        """At a turn boundary: settle stale summaries, place the rest one at a time, so a summary
        whose cut an earlier one already reached settles as stale too.

        Manual summaries go first (then oldest first): a compaction the user asked for, with its
        focus, must not be settled as stale by an automatic one that happened to be planned at the
        same cut while the turn ran; the automatic one then settles instead."""
        store, session = self.log.store, self.log.session
        placed = 0
        for item in store.inbox_settle_stale(session):
            self._settle_stale(item.payload)
        taken = store.inbox_take(session)
        # stable: oldest first within each
        taken.sort(key=lambda item: item.payload.get("reason") != "manual")
        for item in taken:
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
        self.log.append(
            COMPACTION_OUTCOME,
            {
                "reason": payload.get("reason", "threshold"),
                "outcome": "skipped",
                "error": "stale: a newer compaction already cut at or past this point",
            },
        )
        self.log.emit(
            "compaction_stale",
            f"a queued {payload.get('reason')} summary settled as stale: a newer cut won",
            reason=payload.get("reason"),
            state="stale",
        )

    def _cut_is_live(self, first_kept: Any) -> bool:
        """True when ``first_kept`` lies strictly inside the current context (after its head)."""
        view = self.log.store.context_view(self.log.session)
        return any(e.id == first_kept for e in view.entries if e.id != view.head_id)

    def _record_for(self, payload: Mapping[str, Any]) -> CompactionRecord | None:
        """The queued record a placed or settled inbox payload belongs to (same reason, oldest)."""
        for rec in self._pending:
            if rec.entry is None and rec.state == "queued" and rec.reason == payload.get("reason"):
                self._pending.remove(rec)
                return rec
        return None

    # ------------------------------------------------------------------ reporting
    def _ended(self, reason: str, state: str, note: str, error: str | None = None) -> None:
        """The ``compaction_end`` event: "<reason> compaction <state><note>"."""
        self.log.emit(
            "compaction_end", f"{reason} compaction {state}{note}", reason=reason, state=state, error=error
        )

    def _live(self, reason: str, *, blocking: bool) -> _LiveTask:
        """Mark a compaction as in flight in the store (for status displays) until it ends."""
        return _LiveTask(
            self.log.store,
            self.log.session,
            f"{reason}-{'' if blocking else 'bg-'}{time.monotonic_ns()}",
            reason,
            blocking,
        )


class _LiveTask:
    """The store's in-flight marker for one compaction; a store error never breaks compaction.

    ``error`` set before exit is recorded as the task's failure.
    """

    def __init__(self, store: SessionStore, session: str, task: str, reason: str, blocking: bool) -> None:
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
