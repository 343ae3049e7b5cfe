"""ipython-compact inside ``dspy.RLM`` (extra ``dspy``, tested on dspy 3.4.x).

- ``KernelInterpreter``: a ``dspy.primitives.code_interpreter.CodeInterpreter`` on a real IPython
  kernel with the ipython_compact extension loaded (``integrations.kernel_runner``).
- ``CompactRLM(dspy.RLM)``: an RLM whose REPL history is compacted by our engine past the
  threshold — the model sees the checkpoint summary, the live ``<ipython_state>`` notice and the
  recent steps verbatim — with every step in the session log and ``recall`` as a tool.

What must hold (the CodeInterpreter protocol):
- ``execute`` returns ``FinalOutput`` after ``SUBMIT``, the cell's text output (or None), raises
  ``SyntaxError`` before running code that does not parse, ``CodeExecutionError`` for an error in
  the code or a tool, a timeout or an interrupt (the kernel and its state are intact), and
  ``CodeInterpreterError`` when the kernel died — never a silent restart. With
  ``restore_after_death=True`` (opt-in) a dead kernel is restarted from its newest snapshot and
  the step raises ``CodeExecutionError`` whose text tells the model what came back.
- ``start`` is idempotent; ``shutdown`` is final.
- Inputs are transferred to the kernel once (and again only when they change), not every step.

Offline: litellm fetches a model cost map over the network on first use unless
``LITELLM_LOCAL_MODEL_COST_MAP`` is set, so this module sets it (and ``LITELLM_OFFLINE_MODE``)
when the user has not chosen, before dspy is imported.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import importlib
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import dspy
from dspy.primitives.code_interpreter import (
    CodeExecutionError,
    CodeInterpreterError,
    FinalOutput,
)
from dspy.primitives.repl_types import REPLEntry, REPLHistory

from ipython_compact.agent.model_resolution import make_client, resolve_model_and_window
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.tokens import estimate_message_tokens
from ipython_compact.integrations.iteration_log import Checkpoint, IterationLog
from ipython_compact.integrations.kernel_runner import KernelRunner, Outcome
from ipython_compact.store import SessionStore

__all__ = ["CompactRLM", "CompactedHistory", "KernelInterpreter"]

EXECUTION_INSTRUCTIONS = (
    "Code runs in a persistent IPython kernel (a real Python process with the ipython_compact extension). "
    "Variables, imports and functions persist between steps; IPython magics work. Host tools and SUBMIT are "
    "global functions; their arguments and results must be JSON-compatible. Print what you need to see."
)


class KernelInterpreter:
    """A dspy ``CodeInterpreter`` backed by a real IPython kernel.

    ``timeout`` bounds one step (the cell is interrupted, the kernel kept). ``snapshot_dir`` saves
    the user's names after each successful step; ``restore_after_death`` (needs ``snapshot_dir``)
    lets a dead kernel be restarted from that snapshot instead of ending the run.
    """

    execution_instructions = EXECUTION_INSTRUCTIONS

    def __init__(
        self,
        tools: dict[str, Callable[..., Any]] | None = None,
        output_fields: list[dict[str, Any]] | None = None,
        *,
        timeout: float | None = None,
        snapshot_dir: str | None = None,
        restore_after_death: bool = False,
        env: dict[str, str] | None = None,
        session: str | None = None,
    ) -> None:
        self._tools: dict[str, Callable[..., Any]] = dict(tools or {})
        self.output_fields = output_fields
        self._tools_registered = False
        self._runner = KernelRunner(
            self._tools,
            timeout=timeout,
            snapshot_dir=snapshot_dir,
            restore_after_death=restore_after_death,
            env=env,
            session=session,
        )
        self._dead: str | None = None
        self._closed = False

    @classmethod
    def factory(cls, **options: Any) -> Callable[[], KernelInterpreter]:
        """A zero-argument factory for ``interpreter_factory=`` that keeps ``execution_instructions``."""

        class _Factory:
            execution_instructions = EXECUTION_INSTRUCTIONS

            def __call__(self) -> KernelInterpreter:
                return cls(**options)

        return _Factory()

    @property
    def tools(self) -> dict[str, Callable[..., Any]]:
        """Host tools by name; RLM updates this dict in place before each run."""
        return self._tools

    @tools.setter
    def tools(self, value: dict[str, Callable[..., Any]]) -> None:
        self._tools.clear()
        self._tools.update(value)

    @property
    def runner(self) -> KernelRunner:
        """The kernel runner (stats, names, bridge calls)."""
        return self._runner

    def names(self) -> list[str] | None:
        """The user's names in the kernel now (the probe), or None when it cannot say."""
        return self._runner.names()

    def start(self) -> None:
        if self._closed:
            raise CodeInterpreterError("this KernelInterpreter was shut down; create a new one")
        try:
            self._runner.start()
        except Exception as exc:
            raise CodeInterpreterError(f"the IPython kernel could not start: {exc}") from exc

    def execute(self, code: str, variables: dict[str, Any] | None = None) -> Any:
        if self._dead is not None:
            raise CodeInterpreterError(self._dead)
        if not isinstance(code, str):
            raise CodeInterpreterError("code must be a string")
        self.start()
        if not self._tools_registered:
            self._runner.reinstall()
            self._tools_registered = True
        fields = None if self.output_fields is None else [str(f["name"]) for f in self.output_fields]
        try:
            outcome = self._runner.run(code, variables, submit_fields=fields)
        except ValueError as exc:
            raise CodeInterpreterError(str(exc)) from exc
        except RuntimeError as exc:
            raise CodeInterpreterError(f"the kernel could not be set up for this step: {exc}") from exc
        return self._map(outcome)

    def _map(self, outcome: Outcome) -> Any:
        if outcome.kind == "syntax":
            raise SyntaxError(outcome.text)
        if outcome.kind == "submitted":
            return FinalOutput(outcome.values)
        if outcome.kind == "output":
            return outcome.text or None
        if outcome.kind == "error":
            raise CodeExecutionError(outcome.text)
        if outcome.kind in ("timeout", "interrupted"):
            raise CodeExecutionError(
                f"{outcome.text}\n(The cell was stopped; the kernel and its variables are intact.)"
            )
        # died
        if self._runner.restore_after_death:
            try:
                notice = self._runner.revive()
            except Exception as exc:
                self._dead = f"The IPython kernel died and could not be restarted: {exc}"
                raise CodeInterpreterError(self._dead) from exc
            raise CodeExecutionError(f"{outcome.text}\n{notice}")
        self._dead = (
            "The IPython kernel died; its state is lost and it is not restarted silently "
            "(pass restore_after_death=True with snapshot_dir to restart from a snapshot). "
            f"Last output: {outcome.text}"
        )
        raise CodeInterpreterError(self._dead)

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._runner.shutdown()


class CompactedHistory(REPLHistory):  # type: ignore[misc]
    """The REPL history as the model sees it after a compaction: checkpoint, state, recent steps.

    ``first_step`` numbers the kept steps as in the whole run, so "Step 12" stays step 12.
    """

    checkpoint: str = ""
    state: str = ""
    first_step: int = 0

    def format(self) -> str:
        parts: list[str] = []
        if self.checkpoint:
            parts.append(
                f"=== Steps 1-{self.first_step} (compacted; recall(query) returns any of them "
                f"verbatim) ===\n"
                f"{self.checkpoint}\n{self.state}"
            )
        parts.extend(
            e.format(index=self.first_step + i, max_output_chars=self.max_output_chars)
            for i, e in enumerate(self.entries)
        )
        return "\n".join(parts) if parts else "You have not interacted with the REPL environment yet."

    def append(self, *, reasoning: str = "", code: str, output: str) -> CompactedHistory:
        entry = REPLEntry(reasoning=reasoning, code=code, output=output)
        return CompactedHistory(
            entries=[*self.entries, entry],
            max_output_chars=self.max_output_chars,
            checkpoint=self.checkpoint,
            state=self.state,
            first_step=self.first_step,
        )


def _message_tokens(messages: Sequence[dict[str, Any]]) -> int:
    return sum(
        estimate_message_tokens(
            {"role": str(m.get("role", "user")), "content": m.get("content", "")}, "chars4"
        )
        for m in messages
    )


def window_of_lm(lm: Any) -> int:
    """The context window of a ``dspy.LM``: its server's ``/v1/models`` card (``api_base``), else
    litellm's table of known models (offline), else ``ValueError`` saying what to pass."""
    if lm is None:
        raise ValueError(
            "CompactRLM needs a language model: dspy.configure(lm=dspy.LM(...)) or dspy.context(lm=...)"
        )
    model = str(getattr(lm, "model", "") or "")
    kwargs = dict(getattr(lm, "kwargs", {}) or {})
    base = kwargs.get("api_base") or kwargs.get("base_url")
    why: list[str] = []
    if base:
        name = model.split("/", 1)[1] if "/" in model else model
        try:
            return resolve_model_and_window(make_client(str(base), kwargs.get("api_key")), name, None)[1]
        except ValueError:  # a card without a window: try the table
            why.append(f"the server at {base} states no window for {name!r} on its /v1/models card")
        except Exception as exc:  # an unreachable server: try the table
            why.append(f"the server at {base} did not answer /v1/models ({type(exc).__name__})")
    try:
        # dspy's own dependency (untyped); its model table is local (LITELLM_LOCAL_MODEL_COST_MAP)
        litellm = importlib.import_module("litellm")
        info = litellm.get_model_info(model)
        window = info.get("max_input_tokens") or info.get("max_tokens")
        if isinstance(window, int) and window > 0:
            return window
        why.append(f"litellm's model table lists {model!r} without a window")
    except Exception:
        why.append(f"litellm's model table does not know {model!r}")
    raise ValueError(
        f"CompactRLM cannot tell the context window of {model!r}: {'; '.join(why)}; pass window_tokens=..."
    )


class CompactRLM(dspy.RLM):  # type: ignore[misc]
    """``dspy.RLM`` with compaction by ipython-compact, a session log and a ``recall`` tool.

    A drop-in: ``CompactRLM(signature, ...)`` takes ``dspy.RLM``'s arguments. ``store`` defaults to
    the data directory's log (a path is accepted too), ``window_tokens`` to the LM's window (its
    server's ``/v1/models`` card, else litellm's known-model table, else a clear error at the first
    call). Each ``forward`` is one session ``"{session_prefix}-{id}"`` in ``store``
    (``last_session``), and the default ``KernelInterpreter`` is bound to it.

    Before each model call the prompt that will really be sent is built (the adapter's messages:
    instructions, tool docs, field formatting, variables, history) and measured, scaled by what
    the server reported for the previous prompts (``usage.prompt_tokens`` against our estimate of
    the same messages); past the blocking line (``settings``: reserve and kept-tail sizes) the
    older steps are summarized by ``compactor`` (default: ours, offline) and replaced in the
    model's view by the checkpoint and the kernel's live names; when the prompt is still past the
    line (the fixed part, not in the log, leaves less room than ``keep_recent_tokens``), it is
    compacted again keeping half as much of the tail, up to four times.
    """

    def __init__(
        self,
        signature: Any,
        *,
        store: SessionStore | str | os.PathLike[str] | None = None,
        window_tokens: int | None = None,
        session_prefix: str = "dspy-rlm",
        settings: CompactionSettings | None = None,
        compactor: Compactor | None = None,
        tools: Sequence[Callable[..., Any]] | None = None,
        interpreter_factory: Callable[[], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if window_tokens is not None and window_tokens <= 0:
            raise ValueError(f"window_tokens must be positive, got {window_tokens}")
        self._store_arg = store
        self._store_obj: SessionStore | None = store if isinstance(store, SessionStore) else None
        self._window = window_tokens
        self._settings = settings
        self._compactor = compactor
        self.session_prefix = session_prefix
        self.log: IterationLog | None = None
        self.last_session: str | None = None
        self._ratio = 1.0  # server-reported prompt tokens per estimated token, from the last measured request
        self._sub_lm_window: int | None = None
        self._own_factory = interpreter_factory is None
        super().__init__(
            signature,
            tools=[*(tools or []), self._recall_tool()],
            interpreter_factory=interpreter_factory or KernelInterpreter,
            **kwargs,
        )

    @property
    def _store(self) -> SessionStore:
        if self._store_obj is None:
            self._store_obj = SessionStore(None if self._store_arg is None else str(self._store_arg))
        return self._store_obj

    def _recall_tool(self) -> Callable[..., Any]:
        def recall(query: str) -> str:
            """Search this run's full log (every earlier step's code and output, verbatim, also the
            compacted ones) for the words in query, or fetch one entry by its id."""
            if self.log is None:
                return "recall is available only during a run."
            return self.log.recall(query)

        return recall

    # ---- one run ---------------------------------------------------------------------------
    def _begin(self, input_args: dict[str, Any]) -> None:
        window = self._window if self._window is not None else window_of_lm(dspy.settings.lm)
        self.last_session = f"{self.session_prefix}-{uuid.uuid4().hex[:8]}"
        self.log = IterationLog(
            self._store,
            self.last_session,
            window_tokens=window,
            settings=self._settings,
            compactor=self._compactor,
        )
        variables = self._build_variables(**input_args)
        task = "\n\n".join(
            [str(self.signature.instructions or "").strip(), *(v.format() for v in variables)]
        ).strip()
        self.log.begin(task)

    def _factory(self, input_args: dict[str, Any]) -> dict[str, Any]:
        """The run's arguments, with our default interpreter bound to the run's session."""
        if (
            self._own_factory
            and input_args.get("interpreter_factory") is None
            and self.last_session is not None
        ):
            return {**input_args, "interpreter_factory": KernelInterpreter.factory(session=self.last_session)}
        return input_args

    def forward(self, **input_args: Any) -> Any:
        self._begin({k: v for k, v in input_args.items() if k != "interpreter_factory"})
        return super().forward(**self._factory(input_args))

    async def aforward(self, **input_args: Any) -> Any:
        self._begin({k: v for k, v in input_args.items() if k != "interpreter_factory"})
        return await super().aforward(**self._factory(input_args))

    def _make_llm_tools(self, *args: Any, **kwargs: Any) -> dict[str, Callable[..., Any]]:
        """dspy's ``llm_query``/``llm_query_batched``, with every prompt checked against the sub-LM's
        window before it is sent (and before it counts against ``max_llm_calls``): a prompt that
        cannot fit is refused with its size, the window and what to do, instead of being sent to
        fail at the server. In a batch only the prompts that cannot fit are refused (dspy's
        ``[ERROR] ...`` item); the others are sent."""
        tools: dict[str, Callable[..., Any]] = super()._make_llm_tools(*args, **kwargs)
        one, many = tools["llm_query"], tools["llm_query_batched"]

        def llm_query(prompt: str) -> str:
            """Query the LLM with a prompt string."""
            why = self._prompt_too_large(prompt)
            if why is not None:
                raise ValueError(why)
            return str(one(prompt))

        def llm_query_batched(prompts: list[str]) -> list[str]:
            """Query prompts concurrently, isolating LM failures while propagating contract errors."""
            prompts = list(prompts)
            refused = [self._prompt_too_large(p) if isinstance(p, str) else None for p in prompts]
            sent = [p for p, why in zip(prompts, refused, strict=True) if why is None]
            answers = iter(many(sent) if sent else [])
            return [f"[ERROR] {why}" if why is not None else next(answers) for why in refused]

        return {**tools, "llm_query": llm_query, "llm_query_batched": llm_query_batched}

    def _prompt_too_large(self, prompt: str) -> str | None:
        """Why ``prompt`` cannot fit the sub-LM's window with room for its answer, or None."""
        if self.log is None:
            return None
        window = self.log.window_tokens if self.sub_lm is None else self._sub_window()
        room = window - min(self.log.settings.reserve_tokens, window // 4)
        tokens = int(_message_tokens([{"role": "user", "content": prompt}]) * max(self._ratio, 1.0))
        if tokens <= room:
            return None
        return (
            f"llm_query prompt refused before any request: it is {len(prompt):,} characters (~{tokens:,} "
            f"tokens) "
            f"and the sub-LM's {window:,}-token window leaves room for about {room:,}; send smaller "
            f"slices "
            "(llm_query_batched over the pieces)"
        )

    def _sub_window(self) -> int:
        if self._sub_lm_window is None:
            self._sub_lm_window = window_of_lm(self.sub_lm)
        return self._sub_lm_window

    def _view(self, history: REPLHistory) -> REPLHistory:
        assert self.log is not None
        cp: Checkpoint | None = self.log.checkpoint
        if cp is None:
            return history
        return CompactedHistory(
            entries=list(history.entries)[cp.first_kept_step :],
            max_output_chars=history.max_output_chars,
            checkpoint=cp.summary,
            state=cp.state,
            first_step=cp.first_kept_step,
        )

    def _messages(
        self, variables: list[Any], view: REPLHistory, rest: tuple[Any, ...]
    ) -> list[dict[str, Any]]:
        """The messages the adapter will send for this step (what ``generate_action`` formats)."""
        iteration, factory, rules = rest[0], rest[3], rest[4]
        signature = self._action_signature_for_current_factory(factory, rules)
        adapter = dspy.settings.adapter or dspy.ChatAdapter()
        inputs = {
            "variables_info": [v.format() for v in variables],
            "repl_history": view,
            "iteration": f"{iteration + 1}/{self.max_iters}",
        }
        messages: list[dict[str, Any]] = adapter.format(
            signature, demos=list(self.generate_action.demos or []), inputs=inputs
        )
        return messages

    def _measure(self, messages: list[dict[str, Any]]) -> int:
        return int(_message_tokens(messages) * self._ratio + 0.999)

    def _calibrate(self, messages: list[dict[str, Any]]) -> None:
        """Learn the server's count from the usage it returned for exactly these messages."""
        lm = dspy.settings.lm
        for entry in reversed(list(getattr(lm, "history", None) or [])[-50:]):
            if entry.get("messages") != messages:
                continue
            prompt = (entry.get("usage") or {}).get("prompt_tokens")
            estimate = _message_tokens(messages)
            if isinstance(prompt, int) and prompt > 0 and estimate > 0:
                self._ratio = min(4.0, max(0.5, prompt / estimate))
                assert self.log is not None
                self.log.note_prompt(prompt)
            return

    def _compacted_view(
        self, repl: Any, variables: list[Any], history: REPLHistory, rest: tuple[Any, ...]
    ) -> tuple[REPLHistory, list[dict[str, Any]]]:
        """The view to send, after compacting when the real prompt would pass the blocking line."""
        assert self.log is not None
        view = self._view(history)
        messages = self._messages(variables, view, rest)
        full = self.log.settings.keep_recent_tokens
        # The instructions and tool docs are not in the log, so a kept tail of keep_recent_tokens may
        # not fit beside them: while still past the line, compact again keeping half as much.
        for keep in (full, full // 2, full // 4, 0):
            if not self.log.should_compact(self._measure(messages)):
                break
            names_of = getattr(repl, "names", None)
            names = names_of() if callable(names_of) else None
            alive = bool(getattr(getattr(repl, "runner", None), "is_alive", lambda: True)())
            if (
                self.log.compact(names=names, kernel_alive=alive, reason="threshold", keep_recent_tokens=keep)
                is not None
            ):
                view = self._view(history)
                messages = self._messages(variables, view, rest)
        self.log.note_prompt(self._measure(messages))
        return view, messages

    def _record(self, history: REPLHistory, result: Any) -> Any:
        """Log the new step and hand the engine its full history back (or the final Prediction)."""
        assert self.log is not None
        if isinstance(result, dspy.Prediction):
            step = (getattr(result, "trajectory", None) or [{}])[-1]
            self.log.record(
                str(step.get("reasoning", "")), str(step.get("code", "")), str(step.get("output", ""))
            )
            return result
        new = result.entries[-1]
        self.log.record(new.reasoning, new.code, new.output, is_error=new.output.startswith("[Error]"))
        return history.append(reasoning=new.reasoning, code=new.code, output=new.output)

    def _execute_iteration(self, repl: Any, variables: list[Any], history: REPLHistory, *rest: Any) -> Any:
        view, messages = self._compacted_view(repl, variables, history, rest)
        result = super()._execute_iteration(repl, variables, view, *rest)
        self._calibrate(messages)
        return self._record(history, result)

    async def _aexecute_iteration(
        self, repl: Any, variables: list[Any], history: REPLHistory, *rest: Any
    ) -> Any:
        view, messages = self._compacted_view(repl, variables, history, rest)
        result = await super()._aexecute_iteration(repl, variables, view, *rest)
        self._calibrate(messages)
        return self._record(history, result)

    def _extract_fallback(
        self, variables: list[Any], history: REPLHistory, output_field_names: list[str]
    ) -> Any:
        return super()._extract_fallback(variables, self._view(history), output_field_names)

    async def _aextract_fallback(
        self, variables: list[Any], history: REPLHistory, output_field_names: list[str]
    ) -> Any:
        return await super()._aextract_fallback(variables, self._view(history), output_field_names)
