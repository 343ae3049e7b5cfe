"""The RLM-style agent loop: one tool (Python in a kernel), every message in the session log, and
every compaction trigger with its guards.

Why it is shaped this way: an agent that lives in a kernel keeps half its working state in the
interpreter, so compaction only rewrites the transcript the model sees and then tells the model,
from a live probe, what is still defined. The loop is a sequencer: the decisions (thresholds,
guards, overflow recovery, escalation) are pure functions in ``core.triggers``/``core.overflow``,
and each concern lives in its own module, mixed into ``Agent``:

- ``state``: the shared attributes, logging, events, the size of the next request;
- ``scheduling``: when a compaction runs (threshold, manual, ``compact.run()``) and where it
  lands (now, or queued in the inbox for the next turn boundary), and what a placement appends;
- ``recovery``: the overflow state machine and the failure ladder (less verbatim, then a
  labelled emergency shrink);
- ``model_request``: one request to the model and what can go wrong on the wire;
- ``tool_calls``: running code in the kernel, ``compact.run()`` collection, kernel restarts;
- this module: the public API and the turn itself (user message, steps, turn end).

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
from collections.abc import Callable, Sequence
from typing import Any

from ipython_compact.agent.events import (
    AgentError,
    AgentEvent,
    CompactionRecord,
    TurnResult,
    summarize_event,
)
from ipython_compact.agent.kernel_tool import KernelTool
from ipython_compact.agent.model_request import ModelRequests
from ipython_compact.agent.scheduling import CONTINUATION_TEXT, CompactionScheduling
from ipython_compact.agent.state import CompactionEngine, now_iso
from ipython_compact.agent.tool_calls import ToolCalls
from ipython_compact.core.entries import (
    COMPACTION,
    CUSTOM_MESSAGE,
    GOAL,
    MODEL_CHANGE,
    SYSTEM,
    Entry,
    text_of_content,
    tool_calls_of,
)
from ipython_compact.core.overflow import RecoveryState, overflow_step
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.state_notice import SnapshotOutcome
from ipython_compact.core.thresholds import threshold_lines

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent working inside a persistent IPython kernel. Use the `python` tool to run code; "
    "variables and imports persist between calls. Answer plainly when you are done."
)


class Agent(ModelRequests, ToolCalls, CompactionScheduling):
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

    # ------------------------------------------------------------------ state
    @property
    def busy(self) -> bool:
        """True while a turn runs (manual compactions then queue instead of placing at once)."""
        return self._busy

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

    # ------------------------------------------------------------------ public turn API
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
            self._finish_turn_compactions(aborted=aborted)
        self._emit("turn_end", result.text, stopped=result.stopped, steps=result.steps)
        return result

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
        entries: list[Entry] = self.store.entries(self.session, kinds=(COMPACTION,))
        return entries

    def counts(self) -> tuple[int, int]:
        """(messages in the model's context, entries in the log) — the seed's table columns."""
        return len(self._request_messages()), self.store.entry_count(self.session)


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
