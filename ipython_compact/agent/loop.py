"""The RLM-style agent loop: one tool (Python in a kernel), every message in the session log, and
every compaction trigger with its guards.

Why it is shaped this way: an agent that lives in a kernel keeps half its working state in the
interpreter, so compaction only rewrites the transcript the model sees and then tells the model,
from a live probe, what is still defined. The loop is a sequencer: the decisions (thresholds,
guards, overflow recovery, escalation) are pure functions in ``core.triggers``/``core.overflow``.

What must hold:
- Every user message, assistant message (with usage), tool call and tool result is appended to
  the log before the next step reads it; a failed request is kept as an error message.
- Before each request: at most one compaction (``blocking`` compacts first, ``background`` runs
  in a thread beside the conversation, one in flight at most); usage older than the newest
  compaction never triggers; a failure starts a cooldown.
- A background (or manual-while-busy) result waits in the store's inbox and is placed at the next
  turn boundary, or settles as stale when a newer cut already won. When idle it is placed at once.
- Overflow: the error message leaves the context (it is appended off the active path, so the log
  keeps it), a blocking compaction runs, and the request is retried once; the next overflow in the
  episode ends the turn with an honest error suggesting a larger window.
- ``compact.run()`` from the model's code is honoured when the turn ends (even with automatic
  compaction off) and dropped when the turn was aborted.
- After every placed compaction: a fresh system baseline, then the ``<ipython_state>`` notice.
- Repeated failures keep less verbatim, then shrink lossily with a labelled emergency summary.
- A dead kernel is restarted and restored from its snapshot within a restart budget; past the
  budget the turn stops with a clear message.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol

from ipython_compact.agent.events import (
    AgentError,
    AgentEvent,
    CompactionRecord,
    TurnResult,
    summarize_event,
)
from ipython_compact.agent.kernel_reset import budget_exhausted, reset_notice, restart_budget, restart_failed
from ipython_compact.agent.kernel_tool import ExecResult, KernelTool
from ipython_compact.agent.openai_chat import (
    PYTHON_TOOL,
    PYTHON_TOOL_NAME,
    StreamAccumulator,
    error_message,
    from_openai_completion,
    to_openai_messages,
)
from ipython_compact.core.context import build_context
from ipython_compact.core.cutpoints import is_cut_point
from ipython_compact.core.entries import (
    COMPACTION,
    COMPACTION_OUTCOME,
    CUSTOM_MESSAGE,
    GOAL,
    KERNEL_STATE,
    MESSAGE,
    MODEL_CHANGE,
    SYSTEM,
    Entry,
    text_of_content,
    tool_calls_of,
)
from ipython_compact.core.overflow import (
    OVERFLOW_FAILURE_MESSAGE,
    RecoveryState,
    message_is_overflow,
    overflow_step,
)
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.state_notice import SnapshotOutcome, state_notice
from ipython_compact.core.thresholds import threshold_lines
from ipython_compact.core.tokens import estimate_context, usage_of
from ipython_compact.core.triggers import (
    EMERGENCY_HEADER,
    PreRequest,
    decide,
    decide_turn_end,
    escalation,
    in_cooldown,
    usage_is_stale,
)

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent working inside a persistent IPython kernel. Use the `python` tool to run code; "
    "variables and imports persist between calls. Answer plainly when you are done."
)

CONTINUATION_TEXT = "Context was compacted. Continue working toward the goal from where you left off."


class CompactionEngine(Protocol):
    """What the loop needs from the compaction pipeline: compute a compaction without placing it.

    ``prepare`` returns the ``compaction`` entry payload (``summary``, ``first_kept_entry_id``,
    ``tokens_before``, ``reason``, ``details``) or None when there is nothing to compact; it must
    not write to the log (the loop places the entry itself, now or at a turn boundary).
    """

    def prepare(self, session: str, *, reason: str, focus: str | None, keep_recent_tokens: int | None) -> dict[str, Any] | None: ...


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Agent:
    """An agent whose one tool runs Python in ``kernel``; see the module docstring.

    ``client`` is an ``openai.OpenAI`` (any OpenAI-compatible base URL). ``context_window`` is
    the model's window in tokens; ``settings`` the compaction settings (``for_model`` applied).
    ``max_restarts`` bounds kernel restarts within ``restart_window_seconds`` (Prime: 3 per hour).
    ``snapshot_dir`` enables kernel snapshots after every successful cell (host kernels only);
    ``snapshot_outcome`` instead reports snapshots someone else keeps (the notebook extension).
    """

    def __init__(
        self,
        *,
        store: Any,
        session: str,
        client: Any,
        model: str,
        context_window: int,
        engine: CompactionEngine,
        kernel: KernelTool,
        provider: str = "openai",
        settings: CompactionSettings | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        max_steps: int = 12,
        tool_timeout: float | None = 120.0,
        cooldown_seconds: float = 30.0,
        max_restarts: int = 3,
        restart_window_seconds: float = 3600.0,
        autonomous: bool = False,
        max_continuations: int = 3,
        snapshot_dir: str | None = None,
        on_event: Callable[[AgentEvent], None] | None = None,
        request_timeout: float = 120.0,
        snapshot_outcome: Callable[[], SnapshotOutcome | None] | None = None,
        stream: bool = False,
    ) -> None:
        self.store = store
        self.session = session
        self.client = client
        self.engine = engine
        self.kernel = kernel
        self.provider = provider
        self.model = model
        self.context_window = context_window
        self._base_settings = settings or CompactionSettings()
        self.system_prompt = system_prompt
        self.max_steps = max_steps
        self.tool_timeout = tool_timeout
        self.cooldown_seconds = cooldown_seconds
        self.max_restarts = max_restarts
        self.restart_window_seconds = restart_window_seconds
        self._restart_times: list[float] = []
        self.autonomous = autonomous
        self.max_continuations = max_continuations
        self.snapshot_dir = snapshot_dir
        self.on_event = on_event
        self.request_timeout = request_timeout
        self.snapshot_outcome = snapshot_outcome
        self.stream = stream
        self.restarts = 0
        self.compactions: list[CompactionRecord] = []
        self.consecutive_failures = 0
        self._last_failure_at: float | None = None
        self._recovery: RecoveryState = "idle"
        self._state_lock = threading.RLock()
        self._busy = False
        self._abort = threading.Event()
        self._bg_threads: list[threading.Thread] = []
        self._bg_in_flight = 0
        self._requested: dict[str, Any] | None = None
        self._continuations: list[str] = []
        self._last_snapshot: SnapshotOutcome | None = None
        self._goal: str | None = None
        self._pending_records: list[CompactionRecord] = []
        self._compacted_for_request = False
        threshold_lines(context_window, self.settings)  # a window the settings cannot use is an error now
        try:
            store.get_session(session)
        except KeyError:
            store.create_session(session)
        path = store.path(session, kinds=(GOAL, SYSTEM))  # marked kinds: cost follows their count, not the history
        goal = next((e for e in reversed(path) if e.kind == GOAL), None)
        if goal is not None and goal.data.get("active"):
            self._goal = str(goal.data.get("goal"))  # a resumed session carries its goal on
        if not any(e.kind == SYSTEM for e in path):
            self._append(SYSTEM, {"content": self._baseline_text()})

    # ------------------------------------------------------------------ settings & state
    @property
    def settings(self) -> CompactionSettings:
        """The compaction settings for the current model (``model_overrides`` applied)."""
        return self._base_settings.for_model(self.provider, self.model)

    @property
    def busy(self) -> bool:
        """True while a turn runs (manual compactions then queue instead of placing at once)."""
        return self._busy

    def _emit(self, kind: str, text: str = "", **data: Any) -> None:
        if self.on_event is not None:
            with contextlib.suppress(Exception):  # a display bug must never break the turn
                self.on_event(AgentEvent(kind, text, data))

    def _append(self, kind: str, data: Mapping[str, Any], *, move_leaf: bool = True) -> Entry:
        entry: Entry = self.store.append(self.session, kind, dict(data), move_leaf=move_leaf)
        return entry

    def _append_message(self, message: Mapping[str, Any], *, move_leaf: bool = True) -> Entry:
        return self._append(MESSAGE, {"message": dict(message)}, move_leaf=move_leaf)

    def _baseline_text(self) -> str:
        text = self.system_prompt
        if self._goal_text():
            text += f"\n\nCurrent goal (kept outside the transcript; still in force): {self._goal_text()}"
        return text

    def _goal_text(self) -> str | None:
        return self._goal

    @property
    def goal(self) -> str | None:
        """The goal kept outside the transcript (None when there is none)."""
        return self._goal

    def set_goal(self, goal: str | None) -> None:
        """Keep a goal outside the transcript (a ``goal`` entry); it survives every compaction."""
        self._goal = goal
        self._append(GOAL, {"goal": goal, "active": goal is not None})

    def switch_model(self, model: str, context_window: int, provider: str | None = None) -> None:
        """Change model (recorded as a ``model_change`` entry); overflow state of the old model lapses.

        Raises ValueError (and changes nothing) when the settings cannot work with the new window.
        """
        threshold_lines(context_window, self._base_settings.for_model(provider or self.provider, model))
        self.provider = provider or self.provider
        self.model = model
        self.context_window = context_window
        self._append(MODEL_CHANGE, {"provider": self.provider, "model_id": model})

    def interrupt(self) -> None:
        """Abort the running turn at the next step (a running cell is interrupted too)."""
        self._abort.set()
        with contextlib.suppress(Exception):
            self.kernel.interrupt()

    # ------------------------------------------------------------------ context
    def context_messages(self) -> list[dict[str, Any]]:
        """The provider-ready messages the next request would carry (system baseline first)."""
        return build_context(self.store.context_path(self.session))

    def log_entries(self) -> list[Entry]:
        """Every entry of the session, in append order (branches included)."""
        entries: list[Entry] = self.store.entries(self.session)
        return entries

    def _request_messages(self) -> list[dict[str, Any]]:
        messages = self.context_messages()
        # The newest system baseline supersedes older ones and goes first.
        systems = [m for m in messages if m.get("role") == "system"]
        rest = [m for m in messages if m.get("role") != "system"]
        head = [systems[-1]] if systems else [{"role": "system", "content": self._baseline_text()}]
        return to_openai_messages(head + rest)

    def context_tokens(self) -> tuple[int, bool]:
        """(estimated tokens of the next request, whether a stale usage anchor was ignored).

        The estimate never uses usage reported before the newest compaction (it describes a
        context that no longer exists); the core's path estimate applies that guard and falls back
        to per-message estimates. The flag says that this happened, for status displays.
        """
        view = self.store.context_view(self.session)
        est = estimate_context(view.entries, self.settings.estimator, tokens=view.tokens(self.settings.estimator))
        newest = max((i for i, e in enumerate(view.entries) if e.kind == COMPACTION), default=None)
        anchors = [i for i, e in enumerate(view.entries) if usage_of(e.message) is not None]
        ignored = bool(anchors) and usage_is_stale(anchors[-1], newest)
        return est.tokens, ignored

    # ------------------------------------------------------------------ public turn API
    def ask(self, text: str) -> TurnResult:
        """Run one user turn to a final answer, the step limit, an interrupt or an error.

        In autonomous mode with a goal, continuations queued by compactions run as further turns.
        An empty or non-string message is refused (ValueError) before anything is logged.
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"the message for the agent must be non-empty text, got {text!r}")
        result = self._turn({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": _now_iso()})
        continued = 0
        while self.autonomous and self._continuations and continued < self.max_continuations and result.stopped != "error":
            note = self._continuations.pop(0)
            continued += 1
            self._emit("continuation", note)
            result = self._turn(None, custom=note)
        return result

    def _turn(self, user_message: dict[str, Any] | None, custom: str | None = None) -> TurnResult:
        with self._state_lock:
            if self._busy:
                raise AgentError("a turn is already running")
            self._busy = True
            self._abort.clear()
            self._compacted_for_request = False
            self._place_inbox()  # turn boundary: queued summaries land before the new message
        finished = False
        try:
            self._recovery = overflow_step(self._recovery, "user_message").state
            if user_message is not None:
                self._append_message(user_message)
                self._emit("user", text_of_content(user_message["content"]))
            if custom is not None:
                self._append(CUSTOM_MESSAGE, {"custom_type": "continuation", "content": custom, "display": True})
            self._begin_kernel_turn()
            self._pre_prompt_overflow_check()
            result = self._steps()
            finished = True
        finally:
            aborted = self._abort.is_set() or not finished  # an exception aborts the turn too
            self._end_kernel_turn()
            action = decide_turn_end(requested=self._requested is not None, aborted=aborted)
            compacted = False
            requested, self._requested = self._requested, None
            if action == "run_requested" and self._manual_in_flight():
                self.wait_background()  # a manual compaction the user asked for this turn may cover it
            with self._state_lock:
                if action == "run_requested" and self._manual_in_flight():
                    # A successful manual compaction satisfies the model's request (Prime's rule); a
                    # failed one would have left the request standing.
                    self._emit("compaction_dropped", "model-requested compaction covered by the manual one",
                               reason="requested")
                elif action == "run_requested" and requested is not None:
                    self._emit("compaction_start", "model-requested compaction (end of turn)", reason="requested")
                    rec = self._compact_now("requested", requested.get("instructions"), auto=False)
                    compacted = rec.state == "placed"
                elif action == "drop_requested":
                    self._emit("compaction_dropped", "model-requested compaction dropped: the turn was aborted")
                compacted = bool(self._place_inbox()) or (action == "run_requested" and compacted)  # turn boundary
                if compacted and self.autonomous and self._goal_text() and not aborted:
                    # Compaction is not a completion signal: the goal carries on in a new turn.
                    self._continuations.append(CONTINUATION_TEXT)
                self._busy = False
        self._emit("turn_end", result.text, stopped=result.stopped, steps=result.steps)
        return result

    def _pre_prompt_overflow_check(self) -> None:
        """Before a new turn's first request: an unrecovered overflow from the *current* model
        (newer than the newest compaction) compacts first; one from another model does not count."""
        entries = self.log_entries()
        newest = max((i for i, e in enumerate(entries) if e.kind == COMPACTION), default=-1)
        last = next((e.message for e in reversed(entries[newest + 1 :]) if e.role == "assistant" and e.message), None)
        if last is None or not message_is_overflow(last, self.context_window):
            return
        same = last.get("model") == self.model and last.get("provider") == self.provider
        step = overflow_step("idle", "overflow", same_model=same, enabled=self.settings.enabled)
        if step.action == "ignore":
            self._emit("guard", f"earlier overflow ignored: {step.why}", guard="model_switch")
        elif step.action == "compact_and_retry":
            self._emit("compaction_start", "blocking compaction: the last request of this model overflowed", reason="overflow")
            with self._state_lock:
                self._compact_now("overflow", None, auto=True)

    def _begin_kernel_turn(self) -> None:
        with contextlib.suppress(Exception):
            self.kernel.begin_turn()

    def _end_kernel_turn(self) -> None:
        try:
            self.kernel.end_turn()
            self._collect_request()
        except Exception:
            pass

    def _collect_request(self) -> None:
        try:
            got = self.kernel.take_compaction_request()
        except Exception:
            got = None
        if got is None:
            return
        if self._requested is None:
            self._requested = dict(got)
        else:
            prev, new = self._requested.get("instructions"), got.get("instructions")
            self._requested["instructions"] = "\n".join(x for x in (prev, new) if x) or None
        self._emit("compaction_requested", "the model asked for compaction; it runs when this turn ends")

    # ------------------------------------------------------------------ steps
    def _steps(self) -> TurnResult:
        steps = 0
        while True:
            if self._abort.is_set():
                return TurnResult("interrupted", "The turn was interrupted.", steps)
            if steps >= self.max_steps:
                return TurnResult("step_limit", f"Stopped after {steps} steps (the step limit).", steps)
            self._before_request()
            outcome = self._request()
            if isinstance(outcome, TurnResult):
                return outcome
            if outcome is None:
                continue  # overflow recovered by compaction: retry the request once
            assistant = outcome
            steps += 1
            calls = tool_calls_of(assistant)
            if not calls:
                text = text_of_content(assistant.get("content"))
                return TurnResult("final", text, steps)
            for call in calls:
                if self._abort.is_set():
                    self._append_tool_result(call, "The turn was interrupted before this call ran.", True)
                    continue
                stop = self._run_tool_call(call)
                if stop is not None:
                    return TurnResult("error", stop, steps, error=stop)

    def _before_request(self) -> None:
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
            self._emit("compaction_start", f"blocking compaction: {decision.why}", reason="threshold", tokens=tokens)
            with self._state_lock:
                self._compact_now("threshold", None, auto=True)
        elif decision.action == "background":
            self._emit("compaction_start", f"background compaction: {decision.why}", reason="threshold", tokens=tokens)
            self._start_background("threshold", None)

    def _request(self) -> dict[str, Any] | TurnResult | None:
        """Send the context; the assistant message, a terminal TurnResult, or None to retry."""
        import openai

        messages = self._request_messages()
        self._emit("request", f"{len(messages)} messages", messages=len(messages))
        aborted = False
        try:
            if self.stream:
                completion, aborted = self._streamed(messages)
            else:
                completion = self.client.chat.completions.create(
                    model=self.model, messages=messages, tools=[PYTHON_TOOL], timeout=self.request_timeout
                )
        except openai.APIStatusError as exc:
            body = exc.body if isinstance(exc.body, dict) else {}
            err = body.get("error", body) if isinstance(body, dict) else {}
            code = err.get("code") if isinstance(err, dict) else None
            text = str(err.get("message")) if isinstance(err, dict) and err.get("message") else str(exc)
            return self._on_error(text, code if isinstance(code, str) else None, exc.status_code)
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            return self._on_error(f"{type(exc).__name__}: {exc}", None, None)
        except openai.APIError as exc:  # e.g. an error event in the middle of a stream
            code = getattr(exc, "code", None)
            return self._on_error(f"{type(exc).__name__}: {exc}", code if isinstance(code, str) else None, None)
        try:
            assistant = from_openai_completion(completion, provider=self.provider, model=self.model, timestamp=_now_iso())
        except (ValueError, TypeError, AttributeError) as exc:
            return self._on_error(f"the server's answer could not be read: {exc}", None, None)
        if aborted:
            assistant["stopReason"] = "aborted"  # logged, never sent again, never a usage anchor
            self._append_message(assistant)
            return TurnResult("interrupted", "The turn was interrupted while the model was answering.", 0)
        self._append_message(assistant)
        self._recovery = overflow_step(self._recovery, "success").state
        self._compacted_for_request = False  # the request went through: the next one may compact again
        text = text_of_content(assistant.get("content"))
        if text:
            self._emit("assistant", text, usage=assistant.get("usage"))
        if message_is_overflow(assistant, self.context_window):
            # Silent overflow: the answer went through, but the next request cannot fit as is.
            self._emit("overflow", "silent overflow: reported input exceeds the window")
            with self._state_lock:
                self._compact_now("overflow", None, auto=True)
        return assistant

    def _streamed(self, messages: list[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
        """Stream one answer (text deltas become ``assistant_delta`` events); stops early, and says
        so, when the turn is interrupted."""
        acc = StreamAccumulator()
        stream = self.client.chat.completions.create(
            model=self.model, messages=messages, tools=[PYTHON_TOOL], timeout=self.request_timeout,
            stream=True, stream_options={"include_usage": True},
        )
        aborted = False
        try:
            for chunk in stream:
                delta = acc.add(chunk)
                if delta:
                    self._emit("assistant_delta", delta)
                if self._abort.is_set():
                    aborted = True
                    break
        finally:
            with contextlib.suppress(Exception):
                stream.close()
        return acc.completion(), aborted

    def _on_error(self, text: str, code: str | None, status: int | None) -> TurnResult | None:
        msg = error_message(provider=self.provider, model=self.model, timestamp=_now_iso(), text=text, code=code, status=status)
        if not message_is_overflow(msg, self.context_window):
            self._append_message(msg)
            self._emit("error", text, status=status)
            return TurnResult("error", f"The model request failed: {text}", 0, error=text)
        # Keep the error in the log but off the active path: it never re-enters the context.
        self._append_message(msg, move_leaf=False)
        step = overflow_step(self._recovery, "overflow", same_model=msg["model"] == self.model, enabled=self.settings.enabled)
        if step.action == "compact_and_retry" and self._compacted_for_request:
            # At most one compaction per request: this one already waited on a compaction.
            step = overflow_step("attempted", "overflow")
        self._recovery = step.state
        self._emit("overflow", f"{text} -> {step.action}", action=step.action)
        if step.action == "compact_and_retry":
            self._emit("compaction_start", "blocking compaction to recover from the overflow", reason="overflow")
            with self._state_lock:
                rec = self._compact_now("overflow", None, auto=True)
            if rec.state == "placed":
                return None
            message = f"{OVERFLOW_FAILURE_MESSAGE} (compaction did not help: {rec.error or rec.state})"
            return TurnResult("error", message, 0, error=message)
        if step.action == "report_failure":
            self._append(COMPACTION_OUTCOME, {"reason": "overflow", "outcome": "failed", "error": OVERFLOW_FAILURE_MESSAGE})
            return TurnResult("error", OVERFLOW_FAILURE_MESSAGE, 0, error=OVERFLOW_FAILURE_MESSAGE)
        return TurnResult("error", f"The model request failed: {text}", 0, error=text)

    # ------------------------------------------------------------------ tools & kernel
    def _append_tool_result(self, call: Mapping[str, Any], text: str, is_error: bool) -> None:
        self._append_message(
            {
                "role": "toolResult",
                "toolCallId": str(call.get("id")),
                "toolName": str(call.get("name")),
                "content": [{"type": "text", "text": text}],
                "isError": is_error,
                "timestamp": _now_iso(),
            }
        )
        self._emit("tool_result", text, is_error=is_error)

    def _run_tool_call(self, call: Mapping[str, Any]) -> str | None:
        """Run one tool call and log its result; a message when the turn must stop."""
        name = call.get("name")
        args = call.get("arguments")
        if name != PYTHON_TOOL_NAME:
            self._append_tool_result(call, f"Unknown tool {name!r}; the only tool is {PYTHON_TOOL_NAME!r}.", True)
            return None
        code = args.get("code") if isinstance(args, dict) else None
        if not isinstance(code, str):
            raw = args.get("_raw") if isinstance(args, dict) else args
            self._append_tool_result(call, f"Tool arguments must be a JSON object with a string 'code'; got {raw!r}.", True)
            return None
        self._emit("tool_call", code)
        if not self.kernel.is_alive():
            stop = self._recover_kernel("the kernel was not running")
            if stop is not None:
                self._append_tool_result(call, stop, True)
                return stop
        result: ExecResult = self.kernel.execute(code, timeout=self.tool_timeout)
        if result.status == "died":
            self._append_tool_result(call, result.text or "The kernel died while running this code.", True)
            return self._recover_kernel("the kernel died while running the last call")
        self._append_tool_result(call, result.text or "(no output)", result.is_error)
        if result.status == "interrupted":
            self._abort.set()  # the user interrupted the cell: the whole turn stops, cleanly
        self._collect_request()
        if result.status == "ok" and self.snapshot_dir is not None:
            self._snapshot()
        return None

    def _snapshot(self) -> None:
        snap = getattr(self.kernel, "snapshot", None)
        if snap is None or self.snapshot_dir is None:
            return
        report = snap(self.snapshot_dir)
        if report is None:
            self._last_snapshot = SnapshotOutcome(False, (), "the kernel did not answer")
        else:
            skipped = tuple((str(n), str(r)) for n, r in report.get("skipped", []))
            self._last_snapshot = SnapshotOutcome(bool(report.get("ok")), skipped, report.get("error"))

    def _recover_kernel(self, why: str) -> str | None:
        """Restart within the budget, restore the snapshot, tell the model; else a stop message."""
        restart = getattr(self.kernel, "restart", None)
        now = time.monotonic()
        allowed, recent = restart_budget(self._restart_times, now, self.max_restarts, self.restart_window_seconds)
        if restart is None or not allowed:
            return self._kernel_failed(budget_exhausted(why, self.max_restarts, self.restart_window_seconds))
        self.restarts += 1
        self._restart_times = [*recent, now]
        try:
            restart()
        except Exception as exc:
            return self._kernel_failed(restart_failed(why, f"{type(exc).__name__}: {exc}"))
        self._begin_kernel_turn()  # the new process has not heard of the running turn
        restored: list[str] = []
        failed: list[tuple[str, str]] = []
        restore = getattr(self.kernel, "restore", None)
        if restore is not None and self.snapshot_dir is not None:
            report = restore(self.snapshot_dir) or {}
            restored = [str(n) for n in report.get("restored", [])]
            failed = [(str(n), str(r)) for n, r in report.get("failed", [])]
            if report.get("error"):
                failed.append(("(snapshot)", str(report["error"])))
        text = reset_notice(why, number=len(self._restart_times), max_restarts=self.max_restarts,
                            window_seconds=self.restart_window_seconds, snapshots=self.snapshot_dir is not None,
                            restored=restored, failed=failed)
        self._append(CUSTOM_MESSAGE, {"custom_type": "ipython_kernel_reset", "content": text, "display": True})
        self._emit("kernel_restart", text, restored=restored)
        return None

    def _kernel_failed(self, message: str) -> str:
        self._append(CUSTOM_MESSAGE, {"custom_type": "ipython_kernel_reset", "content": message, "display": True})
        self._emit("kernel_failed", message)
        return message

    # ------------------------------------------------------------------ compaction
    def compact(self, focus: str | None = None, *, wait: bool = False) -> CompactionRecord:
        """Manual compaction. Idle: runs and is placed now. Busy: runs beside the turn and its
        summary is queued for the next turn boundary (``wait`` joins the worker)."""
        with self._state_lock:
            if not self._busy:
                self._emit("compaction_start", "manual compaction", reason="manual")
                return self._compact_now("manual", focus, auto=False)
        record = self._start_background("manual", focus)
        if wait:
            self.wait_background()
        return record

    def _manual_in_flight(self) -> bool:
        """A manual compaction started while busy that has not been placed or settled yet."""
        return any(r.reason == "manual" and r.state == "queued" for r in self.compactions)

    def wait_background(self, timeout: float | None = 30.0) -> None:
        """Join background compaction workers (examples, tests, shutdown)."""
        for t in list(self._bg_threads):
            t.join(timeout)
        self._bg_threads = [t for t in self._bg_threads if t.is_alive()]

    def _keep_recent(self) -> tuple[int | None, bool]:
        esc = escalation(self.consecutive_failures, self.settings.keep_recent_tokens)
        if esc.emergency:
            return 0, True
        return (None if self.consecutive_failures == 0 else esc.keep_recent_tokens), False

    def _prepare(self, reason: str, focus: str | None, *, blocking: bool) -> dict[str, Any] | None:
        keep, emergency = self._keep_recent()
        if emergency:
            payload = self._emergency_payload(reason)
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

    def _compact_now(self, reason: str, focus: str | None, *, auto: bool) -> CompactionRecord:
        """Compute and place at once (blocking, manual-when-idle, requested at turn end)."""
        task = f"{reason}-{time.monotonic_ns()}"
        self._live_begin(task, reason, True)
        record = CompactionRecord(reason, True)
        error: str | None = None
        try:
            self._compacted_for_request = True
            payload = self._prepare(reason, focus, blocking=True)
            if payload is None:
                record.state, record.error = "skipped", "nothing to compact"
                self._append(COMPACTION_OUTCOME, {"reason": reason, "outcome": "skipped", "error": "nothing to compact"})
            else:
                record.entry = self._place(payload)
                record.state = "placed"
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            record.state, record.error = "failed", error
            self._failure(reason, error)
        finally:
            self._live_end(task, error)
        self.compactions.append(record)
        why = f": {record.error}" if record.error else ""
        self._emit("compaction_end", f"{reason} compaction {record.state}{why}", reason=reason, state=record.state,
                   error=record.error)
        return record

    def _start_background(self, reason: str, focus: str | None) -> CompactionRecord:
        record = CompactionRecord(reason, False, state="queued")
        self.compactions.append(record)
        with self._state_lock:
            self._bg_in_flight += 1
        task = f"{reason}-bg-{time.monotonic_ns()}"
        self._live_begin(task, reason, False)

        def work() -> None:
            error: str | None = None
            try:
                payload = self._prepare(reason, focus, blocking=False)
                if payload is None:
                    record.state, record.error = "skipped", "nothing to compact"
                    self._emit("compaction_end", f"{reason} compaction skipped: nothing to compact", reason=reason,
                               state="skipped", error=record.error)
                    return
                with self._state_lock:
                    if self._busy:
                        self.store.inbox_put(self.session, payload, first_kept_entry_id=payload.get("first_kept_entry_id"))
                        self._emit("compaction_queued", f"{reason} compaction finished; its summary is queued", reason=reason)
                        self._pending_records.append(record)
                    else:
                        record.entry = self._place(payload)
                        record.state = "placed"
                        self._emit("compaction_end", f"{reason} compaction placed (idle)", reason=reason, state="placed")
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                record.state, record.error = "failed", error
                with self._state_lock:
                    self._failure(reason, error)
                self._emit("compaction_end", f"{reason} compaction failed: {error}", reason=reason, state="failed",
                           error=error)
            finally:
                self._live_end(task, error)
                with self._state_lock:
                    self._bg_in_flight -= 1

        thread = threading.Thread(target=work, name=f"compaction-{reason}", daemon=True)
        self._bg_threads.append(thread)
        thread.start()
        return record

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
            self._emit("compaction_end", f"{item.payload.get('reason')} compaction placed at the turn boundary",
                       reason=item.payload.get("reason"), state="placed")
        return placed

    def _record_for(self, payload: Mapping[str, Any]) -> CompactionRecord | None:
        for rec in self._pending_records:
            if rec.entry is None and rec.state == "queued" and rec.reason == payload.get("reason"):
                self._pending_records.remove(rec)
                return rec
        return None

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

    def _kernel_notice(self) -> str | None:
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

    def _failure(self, reason: str, error: str) -> None:
        self.consecutive_failures += 1
        self._last_failure_at = time.monotonic()
        self._append(COMPACTION_OUTCOME, {"reason": reason, "outcome": "failed", "error": error,
                                          "consecutive_failures": self.consecutive_failures})

    def _emergency_payload(self, reason: str) -> dict[str, Any] | None:
        """Lossy shrink: keep the last turn verbatim, carry the previous summary, drop the rest."""
        path: list[Entry] = self.store.context_path(self.session)
        candidates = [i for i, e in enumerate(path) if is_cut_point(e) and e.kind == MESSAGE and e.role == "user"]
        if not candidates or candidates[-1] == 0:
            return None
        cut = path[candidates[-1]]
        previous = [e.data.get("summary", "") for e in path if e.kind == COMPACTION]
        carried = f"\n\n<carried-compaction-summary>\n{previous[-1]}\n</carried-compaction-summary>" if previous else ""
        dropped = sum(1 for e in path[: candidates[-1]] if e.kind == MESSAGE)
        return {
            "summary": f"{EMERGENCY_HEADER}\n{dropped} messages were dropped.{carried}",
            "first_kept_entry_id": cut.id,
            "tokens_before": self.context_tokens()[0],
            "reason": "emergency",
            "details": {"emergency": True, "trigger": reason, "dropped_messages": dropped},
        }

    def _live_begin(self, task: str, reason: str, blocking: bool) -> None:
        with contextlib.suppress(Exception):
            self.store.live_begin(self.session, task, reason=reason, blocking=blocking)

    def _live_end(self, task: str, error: str | None) -> None:
        with contextlib.suppress(Exception):
            self.store.live_end(self.session, task, error=error)

    # ------------------------------------------------------------------ reporting
    def status(self) -> dict[str, Any]:
        """Where the context stands: size, window, both lines, what is in flight, the last failure."""
        tokens, stale_ignored = self.context_tokens()
        lines = threshold_lines(self.context_window, self.settings)
        live = self.store.live_status(self.session)
        return {
            "session": self.session,
            "model": f"{self.provider}/{self.model}",
            "tokens": tokens,
            "stale_usage_ignored": stale_ignored,
            "window": self.context_window,
            "blocking_line": lines.blocking,
            "background_line": lines.background,
            "busy": self._busy,
            "in_flight": [{"task_id": c.task_id, "reason": c.reason, "blocking": c.blocking} for c in live.in_flight],
            "last_failure": live.last_failure,
            "consecutive_failures": self.consecutive_failures,
            "overflow_recovery": self._recovery,
            "compactions": [{"reason": r.reason, "blocking": r.blocking, "state": r.state, "error": r.error}
                            for r in self.compactions],
            "restarts": self.restarts,
        }

    def compaction_entries(self) -> list[Entry]:
        """Every compaction entry of the session, oldest first."""
        return [e for e in self.log_entries() if e.kind == COMPACTION]

    def counts(self) -> tuple[int, int]:
        """(messages in the model's context, entries in the log) — the seed's table columns."""
        return len(self._request_messages()), len(self.log_entries())


__all__: Sequence[str] = (
    "Agent",
    "AgentError",
    "AgentEvent",
    "CompactionEngine",
    "CompactionRecord",
    "TurnResult",
    "summarize_event",
)
