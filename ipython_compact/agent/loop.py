"""The RLM-style agent: one tool (Python in a kernel), every message in the session log, and every
compaction trigger with its guards.

Why it is shaped this way: an agent that lives in a kernel keeps half its working state in the
interpreter, so compaction only rewrites the transcript the model sees and then tells the model,
from a live probe, what is still defined. ``Agent`` owns the turn loop and composes three parts,
each with its own state and lock:

- ``CompactionScheduler`` (``scheduler``): when a compaction runs (threshold, manual,
  ``compact.run()``, overflow) and where it lands (now, or queued in the inbox for the next turn
  boundary); background threads, cooldown, failure ladder;
- ``ModelCaller`` (``model_caller``): one request on the wire, whatever can go wrong there;
- ``KernelSupervisor`` (``supervisor``): running code, snapshots, restarts within a budget.

The decisions (thresholds, guards, overflow, escalation) are pure functions in ``core.triggers``
and ``core.overflow``; this module sequences a turn and keeps the overflow episode.

What must hold:
- Every user message, assistant message (with usage), tool call and tool result is appended to
  the log before the next step reads it; a failed request is kept as an error message.
- Before each request: at most one compaction; usage older than the newest compaction never
  triggers; a failure starts a cooldown (the scheduler).
- Overflow: the error message leaves the context (it is appended off the active path, so the log
  keeps it), a blocking compaction runs, and the request is retried once; the next overflow in the
  episode ends the turn with an honest error suggesting a larger window. An unrecovered overflow
  from the current model compacts before the next turn's first request; one from another model
  (before a switch) does not count.
- ``compact.run()`` from the model's code is honoured when the turn ends (even with automatic
  compaction off) and dropped when the turn was aborted.
- After every placed compaction: a fresh system baseline, then the ``<ipython_state>`` notice.
- A dead kernel is restarted and restored within a restart budget; past it the turn stops with a
  clear message, which is also in the log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ipython_compact.agent import requests as compact_requests
from ipython_compact.agent.events import AgentError, AgentEvent, CompactionRecord, TurnResult, summarize_event
from ipython_compact.agent.kernel_tool import ExecResult, KernelTool
from ipython_compact.agent.model_caller import ModelAnswer, ModelCaller
from ipython_compact.agent.openai_chat import PYTHON_TOOL_NAME, error_message, to_openai_messages
from ipython_compact.agent.scheduler import CompactionEngine, CompactionScheduler
from ipython_compact.agent.session_log import SessionLog, now_iso
from ipython_compact.agent.supervisor import KernelReset, KernelSupervisor
from ipython_compact.compactor import Compactor
from ipython_compact.core.context import build_context
from ipython_compact.core.entries import (
    COMPACTION,
    COMPACTION_OUTCOME,
    CUSTOM_MESSAGE,
    GOAL,
    KERNEL_STATE,
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
from ipython_compact.core.state_notice import SnapshotOutcome
from ipython_compact.core.thresholds import threshold_lines
from ipython_compact.core.tokens import estimate_context, usage_of
from ipython_compact.core.triggers import usage_is_stale

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent working inside a persistent IPython kernel. Use the `python` tool to run code; "
    "variables and imports persist between calls. Answer plainly when you are done."
)

CONTINUATION_TEXT = "Context was compacted. Continue working toward the goal from where you left off."


class Agent:
    """An agent whose one tool runs Python in ``kernel``; see the module docstring.

    ``client`` is an ``openai.OpenAI`` (any OpenAI-compatible base URL). ``context_window`` is
    the model's window in tokens; ``settings`` the compaction settings (``for_model`` applied).
    ``compactor`` computes compactions (default: a ``Compactor`` with the offline summarizer).
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
        kernel: KernelTool,
        compactor: CompactionEngine | None = None,
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
        self.provider = provider
        self.model = model
        self.context_window = context_window
        self._base_settings = settings or CompactionSettings()
        self.system_prompt = system_prompt
        self.max_steps = max_steps
        self.autonomous = autonomous
        self.max_continuations = max_continuations
        threshold_lines(context_window, self.settings)  # a window the settings cannot use is an error now
        self._log = SessionLog(store, session, on_event)
        self._caller = ModelCaller(client, request_timeout=request_timeout, stream=stream)
        self._supervisor = KernelSupervisor(
            kernel, snapshot_dir=snapshot_dir, snapshot_outcome=snapshot_outcome, max_restarts=max_restarts,
            restart_window_seconds=restart_window_seconds, tool_timeout=tool_timeout)
        self._scheduler = CompactionScheduler(
            self._log, compactor if compactor is not None else Compactor(store, None, self._base_settings),
            settings=lambda: self.settings, window=lambda: self.context_window,
            tokens=lambda: self.context_tokens()[0], model_label=lambda: f"{self.provider}/{self.model}",
            after_place=self._after_compaction, cooldown_seconds=cooldown_seconds)
        # The turn's own state (only the thread running ``ask`` writes it, except ``_abort``).
        self._recovery: RecoveryState = "idle"
        self._abort = threading.Event()
        self._requested: dict[str, Any] | None = None
        self._continuations: list[str] = []
        self._goal: str | None = None
        try:
            store.get_session(session)
        except KeyError:
            store.create_session(session)
        path = store.path(session, kinds=(GOAL, SYSTEM))  # marked kinds: cost follows their count, not the history
        goal = next((e for e in reversed(path) if e.kind == GOAL), None)
        if goal is not None and goal.data.get("active"):
            self._goal = str(goal.data.get("goal"))  # a resumed session carries its goal on
        if not any(e.kind == SYSTEM for e in path):
            self._log.append(SYSTEM, {"content": self._baseline_text()})

    # ------------------------------------------------------------------ parts and state
    @property
    def settings(self) -> CompactionSettings:
        """The compaction settings for the current model (``model_overrides`` applied)."""
        return self._base_settings.for_model(self.provider, self.model)

    @property
    def scheduler(self) -> CompactionScheduler:
        return self._scheduler

    @property
    def supervisor(self) -> KernelSupervisor:
        return self._supervisor

    @property
    def caller(self) -> ModelCaller:
        return self._caller

    @property
    def compactor(self) -> CompactionEngine:
        """What computes compactions (swap it to change the summarizer; takes effect at once)."""
        return self._scheduler.engine

    @compactor.setter
    def compactor(self, engine: CompactionEngine) -> None:
        self._scheduler.engine = engine

    @property
    def kernel(self) -> KernelTool:
        return self._supervisor.kernel

    @property
    def client(self) -> Any:
        return self._caller.client

    @property
    def on_event(self) -> Callable[[AgentEvent], None] | None:
        return self._log.on_event

    @on_event.setter
    def on_event(self, listener: Callable[[AgentEvent], None] | None) -> None:
        self._log.on_event = listener

    @property
    def busy(self) -> bool:
        """True while a turn runs (manual compactions then queue instead of placing at once)."""
        return self._scheduler.busy

    @property
    def restarts(self) -> int:
        return self._supervisor.restarts

    @property
    def compactions(self) -> list[CompactionRecord]:
        return self._scheduler.records

    @property
    def consecutive_failures(self) -> int:
        return self._scheduler.consecutive_failures

    @property
    def goal(self) -> str | None:
        """The goal kept outside the transcript (None when there is none)."""
        return self._goal

    def set_goal(self, goal: str | None) -> None:
        """Keep a goal outside the transcript (a ``goal`` entry); it survives every compaction."""
        self._goal = goal
        self._log.append(GOAL, {"goal": goal, "active": goal is not None})

    def switch_model(self, model: str, context_window: int, provider: str | None = None) -> None:
        """Change model (recorded as a ``model_change`` entry); overflow state of the old model lapses.

        Raises ValueError (and changes nothing) when the settings cannot work with the new window.
        """
        threshold_lines(context_window, self._base_settings.for_model(provider or self.provider, model))
        self.provider = provider or self.provider
        self.model = model
        self.context_window = context_window
        self._log.append(MODEL_CHANGE, {"provider": self.provider, "model_id": model})

    def interrupt(self) -> None:
        """Abort the running turn at the next step (a running cell is interrupted too)."""
        self._abort.set()
        self._supervisor.interrupt()

    # ------------------------------------------------------------------ compaction, by hand
    def compact(self, focus: str | None = None, *, wait: bool = False) -> CompactionRecord:
        """Manual compaction. Idle: runs and is placed now. Busy: runs beside the turn and its
        summary is queued for the next turn boundary (``wait`` joins the worker)."""
        return self._scheduler.compact(focus, wait=wait)

    def wait_background(self, timeout: float | None = 30.0) -> None:
        """Join background compaction workers (examples, tests, shutdown)."""
        self._scheduler.wait(timeout)

    # ------------------------------------------------------------------ the turn
    def ask(self, text: str) -> TurnResult:
        """Run one user turn to a final answer, the step limit, an interrupt or an error.

        In autonomous mode with a goal, continuations queued by compactions run as further turns.
        An empty or non-string message is refused (ValueError) before anything is logged.
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"the message for the agent must be non-empty text, got {text!r}")
        result = self._turn({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": now_iso()})
        continued = 0
        while self.autonomous and self._continuations and continued < self.max_continuations and result.stopped != "error":
            note = self._continuations.pop(0)
            continued += 1
            self._log.emit("continuation", note)
            result = self._turn(None, custom=note)
        return result

    def _turn(self, user_message: dict[str, Any] | None, custom: str | None = None) -> TurnResult:
        self._scheduler.start_turn()  # turn boundary: queued summaries land before the new message
        self._abort.clear()
        finished = False
        try:
            self._recovery = overflow_step(self._recovery, "user_message").state
            if user_message is not None:
                self._log.append_message(user_message)
                self._log.emit("user", text_of_content(user_message["content"]))
            if custom is not None:
                self._log.append(CUSTOM_MESSAGE, {"custom_type": "continuation", "content": custom, "display": True})
            self._supervisor.begin_turn()
            self._pre_prompt_overflow_check()
            result = self._steps()
            finished = True
        finally:
            aborted = self._abort.is_set() or not finished  # an exception aborts the turn too
            self._supervisor.end_turn()
            self._collect_request()
            requested, self._requested = self._requested, None
            compacted = self._scheduler.finish_turn(requested=requested, aborted=aborted)
            if compacted and self.autonomous and self._goal and not aborted:
                # Compaction is not a completion signal: the goal carries on in a new turn.
                self._continuations.append(CONTINUATION_TEXT)
        self._log.emit("turn_end", result.text, stopped=result.stopped, steps=result.steps)
        return result

    def _steps(self) -> TurnResult:
        steps = 0
        while True:
            if self._abort.is_set():
                return TurnResult("interrupted", "The turn was interrupted.", steps)
            if steps >= self.max_steps:
                return TurnResult("step_limit", f"Stopped after {steps} steps (the step limit).", steps)
            self._scheduler.before_request()
            outcome = self._request()
            if isinstance(outcome, TurnResult):
                return outcome
            if outcome is None:
                continue  # overflow recovered by compaction: retry the request once
            steps += 1
            calls = tool_calls_of(outcome)
            if not calls:
                return TurnResult("final", text_of_content(outcome.get("content")), steps)
            for call in calls:
                if self._abort.is_set():
                    self._append_tool_result(call, "The turn was interrupted before this call ran.", True)
                    continue
                stop = self._run_tool_call(call)
                if stop is not None:
                    return TurnResult("error", stop, steps, error=stop)

    # ------------------------------------------------------------------ one request
    def _request(self) -> dict[str, Any] | TurnResult | None:
        """Send the context; the assistant message, a terminal TurnResult, or None to retry."""
        messages = self._request_messages()
        self._log.emit("request", f"{len(messages)} messages", messages=len(messages))
        answer = self._caller.call(messages, model=self.model, provider=self.provider, abort=self._abort,
                                   on_delta=lambda d: self._log.emit("assistant_delta", d))
        if answer.message is None:
            return self._on_error(answer)
        assistant = answer.message
        self._log.append_message(assistant)
        if answer.aborted:
            return TurnResult("interrupted", "The turn was interrupted while the model was answering.", 0)
        self._recovery = overflow_step(self._recovery, "success").state
        self._scheduler.request_sent()
        text = text_of_content(assistant.get("content"))
        if text:
            self._log.emit("assistant", text, usage=assistant.get("usage"))
        if message_is_overflow(assistant, self.context_window):
            # Silent overflow: the answer went through, but the next request cannot fit as is.
            self._log.emit("overflow", "silent overflow: reported input exceeds the window")
            self._scheduler.compact_blocking("overflow", None)  # the overflow event above already said why
        return assistant

    def _on_error(self, answer: ModelAnswer) -> TurnResult | None:
        """A failed request: log it; an overflow is recovered (None means "retry the request")."""
        text = answer.error_text or "unknown error"
        msg = error_message(provider=self.provider, model=self.model, timestamp=now_iso(), text=text,
                            code=answer.error_code, status=answer.error_status)
        if not message_is_overflow(msg, self.context_window):
            self._log.append_message(msg)
            self._log.emit("error", text, status=answer.error_status)
            return _failed(f"The model request failed: {text}", text)
        # Keep the error in the log but off the active path: it never re-enters the context.
        self._log.append_message(msg, move_leaf=False)
        step = overflow_step(self._recovery, "overflow", same_model=msg["model"] == self.model, enabled=self.settings.enabled)
        if step.action == "compact_and_retry" and self._scheduler.compacted_for_request:
            # At most one compaction per request: this one already waited on a compaction.
            step = overflow_step("attempted", "overflow")
        self._recovery = step.state
        self._log.emit("overflow", f"{text} -> {step.action}", action=step.action)
        if step.action == "compact_and_retry":
            rec = self._scheduler.compact_blocking("overflow", "blocking compaction to recover from the overflow")
            if rec.state == "placed":
                return None
            return _failed(f"{OVERFLOW_FAILURE_MESSAGE} (compaction did not help: {rec.error or rec.state})")
        if step.action == "report_failure":
            self._log.append(COMPACTION_OUTCOME, {"reason": "overflow", "outcome": "failed", "error": OVERFLOW_FAILURE_MESSAGE})
            return _failed(OVERFLOW_FAILURE_MESSAGE)
        return _failed(f"The model request failed: {text}", text)

    def _pre_prompt_overflow_check(self) -> None:
        """Before a new turn's first request: an unrecovered overflow from the *current* model
        (newer than the newest compaction) compacts first; one from another model does not count."""
        since = self.store.entries(self.session, after_newest=COMPACTION)
        last = next((e.message for e in reversed(since) if e.role == "assistant" and e.message), None)
        if last is None or not message_is_overflow(last, self.context_window):
            return
        same = last.get("model") == self.model and last.get("provider") == self.provider
        step = overflow_step("idle", "overflow", same_model=same, enabled=self.settings.enabled)
        if step.action == "ignore":
            self._log.emit("guard", f"earlier overflow ignored: {step.why}", guard="model_switch")
        elif step.action == "compact_and_retry":
            self._scheduler.compact_blocking("overflow", "blocking compaction: the last request of this model overflowed")

    # ------------------------------------------------------------------ one tool call
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
        self._log.emit("tool_call", code)
        if not self._supervisor.alive():
            reset = self._kernel_reset(self._supervisor.recover("the kernel was not running"))
            if reset.stopped:
                self._append_tool_result(call, reset.text, True)
                return reset.text
        result: ExecResult = self._supervisor.execute(code)
        if result.status == "died":
            self._append_tool_result(call, result.text or "The kernel died while running this code.", True)
            reset = self._kernel_reset(self._supervisor.recover("the kernel died while running the last call"))
            return reset.text if reset.stopped else None
        self._append_tool_result(call, result.text or "(no output)", result.is_error)
        if result.status == "interrupted":
            self._abort.set()  # the user interrupted the cell: the whole turn stops, cleanly
        self._collect_request()
        return None

    def _append_tool_result(self, call: Mapping[str, Any], text: str, is_error: bool) -> None:
        self._log.append_message({
            "role": "toolResult",
            "toolCallId": str(call.get("id")),
            "toolName": str(call.get("name")),
            "content": [{"type": "text", "text": text}],
            "isError": is_error,
            "timestamp": now_iso(),
        })
        self._log.emit("tool_result", text, is_error=is_error)

    def _kernel_reset(self, reset: KernelReset) -> KernelReset:
        """Log a restart (or the stop) for the model and report it."""
        self._log.append(CUSTOM_MESSAGE, {"custom_type": "ipython_kernel_reset", "content": reset.text, "display": True})
        if reset.stopped:
            self._log.emit("kernel_failed", reset.text)
        else:
            self._log.emit("kernel_restart", reset.text, restored=list(reset.restored))
        return reset

    def _collect_request(self) -> None:
        """Take the model's ``compact.run()`` request from the kernel; several in a turn merge."""
        got = self._supervisor.take_request()
        if got is None:
            return
        self._requested = compact_requests.coalesce(self._requested, got.get("instructions"))
        self._log.emit("compaction_requested", "the model asked for compaction; it runs when this turn ends")

    # ------------------------------------------------------------------ after a compaction
    def _baseline_text(self) -> str:
        """The system prompt, plus the goal kept outside the transcript when there is one."""
        text = self.system_prompt
        if self._goal:
            text += f"\n\nCurrent goal (kept outside the transcript; still in force): {self._goal}"
        return text

    def _after_compaction(self) -> None:
        """What follows every placed compaction: the system baseline, then the kernel notice."""
        self._log.append(SYSTEM, {"content": self._baseline_text()})
        notice = self._supervisor.notice()
        if notice is not None:
            self._log.append(KERNEL_STATE, {"content": notice})

    # ------------------------------------------------------------------ context and reporting
    def context_messages(self) -> list[dict[str, Any]]:
        """The provider-ready messages the next request would carry (system baseline first)."""
        return build_context(self.store.context_path(self.session))

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

    def log_entries(self) -> list[Entry]:
        """Every entry of the session, in append order (branches included)."""
        entries: list[Entry] = self.store.entries(self.session)
        return entries

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
            "busy": self.busy,
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
        entries: list[Entry] = self.store.entries(self.session, kinds=(COMPACTION,))
        return entries

    def counts(self) -> tuple[int, int]:
        """(messages in the model's context, entries in the log) — the seed's table columns."""
        return len(self._request_messages()), self.store.entry_count(self.session)


def _failed(message: str, error: str | None = None) -> TurnResult:
    """A turn that ends in an error before any step completed (``error`` defaults to ``message``)."""
    return TurnResult("error", message, 0, error=message if error is None else error)


__all__: Sequence[str] = (
    "CONTINUATION_TEXT",
    "DEFAULT_SYSTEM_PROMPT",
    "Agent",
    "AgentError",
    "AgentEvent",
    "CompactionEngine",
    "CompactionRecord",
    "TurnResult",
    "summarize_event",
)
