"""What makes the agent an RLM: sub-calls from the model's code, context as a kernel variable, and
ending a run from code.

Why: in a recursive language model the prompt's bulk (a corpus, a long document) is not sent to
the model at all; it is a variable in the REPL the model explores with code, asking the model
itself (``llm_query``) or a sub-agent (``agent_query``) about slices it chose. This module is the
host side of that: the broker the kernel calls, the handlers behind it, placing a value in the
kernel and describing it to the model, and collecting ``FINAL``/``FINAL_VAR``.

What must hold:
- The model is shown a context variable's type, size and a short preview, never the value.
- A ``FINAL``/``FINAL_VAR`` answer is bounded (``final_chars``; the cut stated, the whole value
  left in the kernel under a name the answer gives) and validated: a reply the host cannot read
  is a ``FinalAnswerError`` the model is shown, never "no answer".
- ``llm_query`` answers are model text for one prompt (no tools, no history), from the agent's
  model or the ``model=`` asked for; like every sub-call they are refused with a clear reason once
  the call tree's token budget is used up, and a prompt or task text too large for the window is
  refused before any request (data goes in ``context=``, not in the text).
- Batched calls run at most ``max_concurrent`` at once and answer in the order asked, each item
  either its answer or its own error; one failure never sinks the others.
- A failed request reaches the model's cell as one line that names the server and what to do next
  (``SubcallError``, rendered without library frames).
- The kernel functions are (re)installed after every start and restart of the kernel.
- A context value is handed over through an owner-only file in an owner-only directory, read
  and removed by the kernel; only ``str``, ``bytes`` and JSON values are accepted (nothing is
  ever pickled).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ipython_compact.agent import rlm_kernel
from ipython_compact.agent.context_payload import decode_context, encode_context
from ipython_compact.agent.current_model import CurrentModel
from ipython_compact.agent.kernel_calls import kernel_call
from ipython_compact.agent.kernel_tool import cap_text
from ipython_compact.agent.model_caller import ModelAnswer, ModelCaller
from ipython_compact.agent.options import FINAL_CHARS
from ipython_compact.agent.sub_agents import SubAgentRegistry
from ipython_compact.agent.subcall_broker import SubcallBroker
from ipython_compact.core.entries import CUSTOM
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.thresholds import threshold_lines
from ipython_compact.core.tokens import estimate_message_tokens

PREVIEW_CHARS = 400

RLM_PROMPT = (
    "Inside the kernel you also have: `llm_query(prompt, model=None)` asks the model one question and "
    "returns "
    "its answer (use it on slices of large data); `llm_query_batched(prompts)` asks several at once and "
    "returns "
    "the answers in order; `agent_query(task, name=None, context=None)` gives a task to a sub-agent with its "
    "own "
    "kernel and returns its answer (`context` is placed in the sub-agent's kernel as the variable `context`: "
    "pass data there, keep the task text short; pass the same name to ask it again; `sub_agents()` lists "
    "them); "
    "`agent_query_batched(tasks, contexts=None)` runs several sub-agents at once; `recall(entry_id)` returns "
    "a "
    "logged output whole when the context shows only its head and tail; `FINAL(answer)` or "
    "`FINAL_VAR(variable_name)` ends the run with that answer."
)
MAX_CONCURRENT = 8
"""Default bound on the sub-calls one batched call runs at once."""


def describe_value(name: str, value: Any) -> str:
    """What the model is told about a context variable: type, size, preview."""
    if isinstance(value, str):
        size, preview = f"{len(value):,} characters", value[:PREVIEW_CHARS]
    elif isinstance(value, bytes):
        size, preview = f"{len(value):,} bytes", repr(value[:PREVIEW_CHARS])
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
        size = (
            f"{len(value):,} items"
            if isinstance(value, list | dict)
            else (f"{len(text):,} characters as JSON")
        )
        preview = text[:PREVIEW_CHARS]
    more = "…" if len(preview) >= PREVIEW_CHARS else ""
    return (
        f"The kernel variable `{name}` holds the context: {type(value).__name__}, {size}. "
        f"It is not shown here; explore it with code. Preview: {preview!r}{more}"
    )


def too_large_for_window(
    text: str, what: str, *, settings: CompactionSettings, window: int, system_text: str
) -> str | None:
    """Why ``text`` (a sub-agent's task, an ``llm_query`` prompt) cannot fit ``window``, or None.

    A task becomes a sub-agent's first message after its system prompt (``system_text``); both
    must stay under the blocking line, or the child's very first request overflows (and
    compaction has nothing to cut). An ``llm_query`` prompt is sent alone. Checked before any
    request is sent and before a child session is made.
    """
    estimator = settings.estimator
    tokens = estimate_message_tokens({"role": "user", "content": text}, estimator)
    room = threshold_lines(window, settings).blocking
    if what != "llm_query prompt":
        room -= estimate_message_tokens({"role": "system", "content": system_text}, estimator)
    if tokens <= room:
        return None
    fix = (
        "split it and send the pieces with llm_query_batched"
        if what == "llm_query prompt"
        else "pass the data as agent_query(task, context=data), where the sub-agent reads it with code, and "
        "keep the task short"
    )
    return (
        f"{what} refused before any request: it is {len(text):,} characters (~{tokens:,} tokens) and the "
        f"{window:,}-token window leaves room for about {max(room, 0):,} ({tokens - max(room, 0):,} tokens "
        f"too many); {fix}."
    )


class SubcallFailed(RuntimeError):
    """A sub-call's model request failed; the message is the one line the model is shown."""

    one_line = True


class FinalAnswerError(RuntimeError):
    """A ``FINAL``/``FINAL_VAR`` answer the host could not collect (the message says why)."""


_CUT_NOTE = 200  # room for the kernel's "[final answer cut: ...]" line past the bound


def parse_final(raw: Any, limit: int) -> dict[str, Any] | None:
    """Validate the kernel's final-answer reply: None (no answer pending) or
    ``{"answer": str, "source": str, "chars": int, "cut": bool, "name": str | None}``.

    Raises ``FinalAnswerError`` naming what was wrong; an answer longer than the bound allows is
    cut here again (kernel code may have replaced the kernel side).
    """
    if not isinstance(raw, str):
        raise FinalAnswerError(f"the kernel's reply was {type(raw).__name__}, not JSON text")
    try:
        final = json.loads(raw)
    except ValueError as exc:
        raise FinalAnswerError(f"the kernel's reply is not JSON ({exc}): {raw[:80]!r}") from None
    if final is None:
        return None
    if not isinstance(final, dict):
        raise FinalAnswerError(f"the kernel's reply is a JSON {type(final).__name__}, not an object")
    answer, source = final.get("answer"), final.get("source")
    if not isinstance(answer, str) or not isinstance(source, str):
        raise FinalAnswerError("the kernel's reply lacks a text 'answer' and 'source'")
    name = final.get("name")
    chars = final.get("chars")
    out = {
        "answer": answer,
        "source": source[:200],
        "name": name if isinstance(name, str) else None,
        "chars": chars if type(chars) is int else len(answer),
        "cut": final.get("cut") is True,
    }
    if len(answer) > limit + _CUT_NOTE:
        out["answer"], _ = cap_text(answer, limit)
        out["cut"] = True
    return out


class RlmBridge:
    """The broker and its handlers for one agent (see the module docstring).

    ``current`` is the agent (its model and provider, read at each call: ``switch_model`` changes
    them); ``budget_left`` says how many tokens the call tree may still spend (None = no budget);
    ``spent`` is told what each ``llm_query`` cost. ``too_large(text, what)`` returns why a prompt
    or task text cannot fit the window (None when it fits). ``sub_model`` is ``llm_query``'s model
    when the call names none (default: the agent's).
    """

    def __init__(
        self,
        log: Any,
        caller: ModelCaller,
        *,
        current: CurrentModel,
        registry: SubAgentRegistry | None,
        budget_left: Callable[[], int | None],
        spent: Callable[[int], None],
        result_chars: int = 4000,
        final_chars: int = FINAL_CHARS,
        max_concurrent: int = MAX_CONCURRENT,
        too_large: Callable[[str, str], str | None] | None = None,
        sub_model: str | None = None,
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent_subcalls must be at least 1, got {max_concurrent}")
        if final_chars < 100:
            raise ValueError(f"final_answer_chars must be at least 100, got {final_chars}")
        self.log = log
        self.caller = caller
        self._current = current
        self.registry = registry
        self._budget_left = budget_left
        self._spent = spent
        self.result_chars = result_chars
        self.final_chars = final_chars
        self.max_concurrent = max_concurrent
        self._too_large = too_large
        self.sub_model = sub_model
        handlers: dict[str, Callable[..., Any]] = {
            "llm_query": self.llm_query,
            "llm_query_batched": self.llm_query_batched,
            "recall": self.recall,
            "sub_agents": self.sub_agents,
            "agent_query": self.agent_query,
            "agent_query_batched": self.agent_query_batched,
        }
        self.broker = SubcallBroker(handlers)
        self.subcalls = 0
        self._dir: str | None = None

    def start(self) -> RlmBridge:
        self.broker.start()
        return self

    def stop(self) -> None:
        self.broker.stop()
        if self.registry is not None:
            self.registry.close()
        if self._dir is not None:
            for name in os.listdir(self._dir):
                os.unlink(os.path.join(self._dir, name))
            os.rmdir(self._dir)
            self._dir = None

    # ------------------------------------------------------------------ the handlers
    def _check_budget(self, what: str) -> None:
        left = self._budget_left()
        if left is not None and left <= 0:
            raise RuntimeError(f"{what} refused: the session's token budget is used up")

    def _check_size(self, text: str, what: str) -> None:
        why = None if self._too_large is None else self._too_large(text, what)
        if why is not None:
            raise ValueError(why)

    def _failure(self, answer: ModelAnswer, model: str) -> str:
        """One line for a failed request: which server, what happened, what the model can do next."""
        server = str(getattr(self.caller.client, "base_url", "") or "").rstrip("/") or (
            "(the configured server)"
        )
        if answer.error_status is None:
            return (
                f"the model server {server} did not answer ({answer.error_text}). It may be down or "
                "restarting: retry this call later, or carry on without sub-calls and end with "
                "FINAL(answer) from what you have."
            )
        return (
            f"the model server {server} refused the request for model {model!r} with HTTP "
            f"{answer.error_status}: {answer.error_text}. Change the request (a shorter prompt, another "
            "model) or carry on without this sub-call."
        )

    def llm_query(self, prompt: str, model: str | None = None) -> str:
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("llm_query needs a non-empty prompt")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ValueError(f"llm_query's model must be a model name (text), got {model!r}")
        self._check_budget("llm_query")
        chosen = model or self.sub_model or self._current.model
        if chosen == self._current.model:  # another model's window is unknown here: its server decides
            self._check_size(prompt, "llm_query prompt")
        self.subcalls += 1
        self.log.emit(
            "subcall", f"llm_query: {prompt[:200]}", op="llm_query", chars=len(prompt), model=chosen
        )
        answer = self.caller.call(
            [{"role": "user", "content": prompt}], model=chosen, provider=self._current.provider
        )
        if answer.message is None:
            raise SubcallFailed(self._failure(answer, chosen))
        # This call's own usage: the caller's running total also moves with other threads' calls.
        usage = answer.message.get("usage")
        self._spent(int(usage.get("totalTokens") or 0) if isinstance(usage, dict) else 0)
        blocks = answer.message.get("content") or []
        return "".join(
            str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
        )

    def agent_query(self, task: str, name: str | None = None, context: Any = None) -> str:
        if self.registry is None:
            depth = getattr(self._current, "_depth", 0)
            limit = getattr(getattr(self._current, "options", None), "max_depth", depth)
            raise RuntimeError(
                f"agent_query is not available at depth {depth}: the call tree allows max_depth={limit} "
                f"level(s) of sub-agents (raise it with Agent(max_depth=...) on the root agent, or use "
                f"llm_query for a one-shot sub-call)"
            )
        if not isinstance(task, str) or not task.strip():
            raise ValueError("a sub-agent task must be non-empty text")
        value = None if context is None else decode_context(context)
        self._check_budget("agent_query")
        self._check_size(task, "sub-agent task")
        self.subcalls += 1
        return self.registry.ask(task, name, context=value)

    def _batched(self, calls: list[Callable[[], str]]) -> list[dict[str, Any]]:
        """Run ``calls`` at most ``max_concurrent`` at once; ``{"ok", "value"|"error"}`` per call, in
        order."""

        def one(call: Callable[[], str]) -> dict[str, Any]:
            try:
                return {"ok": True, "value": call()}
            except Exception as exc:
                return {
                    "ok": False,
                    "error": str(exc) if isinstance(exc, SubcallFailed) else f"{type(exc).__name__}: {exc}",
                }

        if not calls:
            return []
        with ThreadPoolExecutor(
            max_workers=min(self.max_concurrent, len(calls)), thread_name_prefix="subcall"
        ) as pool:
            return list(pool.map(one, calls))

    def llm_query_batched(self, prompts: list[str], model: str | None = None) -> list[dict[str, Any]]:
        if not isinstance(prompts, list):
            raise ValueError(f"llm_query_batched needs a list of prompts, got {type(prompts).__name__}")
        return self._batched([functools.partial(self.llm_query, p, model) for p in prompts])

    def agent_query_batched(self, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
            raise ValueError("agent_query_batched needs a list of {'task', 'name', 'context'} items")
        return self._batched(
            [
                functools.partial(self.agent_query, str(t.get("task") or ""), t.get("name"), t.get("context"))
                for t in tasks
            ]
        )

    def sub_agents(self) -> list[dict[str, Any]]:
        return [] if self.registry is None else self.registry.describe()

    def recall(self, entry_id: str) -> str:
        entry = self.log.store.get(str(entry_id), self.log.session)
        if entry.kind == CUSTOM and "text" in entry.data:
            return str(entry.data["text"])
        message = entry.message
        if message is not None:
            content = message.get("content")
            if isinstance(content, list):
                return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            return str(content)
        return json.dumps(dict(entry.data), default=str)

    # ------------------------------------------------------------------ the kernel side
    def attach(self, kernel: Any) -> bool:
        """Install the RLM functions in ``kernel`` (True when the kernel confirmed)."""
        evaluate = getattr(kernel, "evaluate", None)
        if evaluate is None:
            return False
        got = evaluate({"v": kernel_call(rlm_kernel.install, self.broker.url, self.broker.token)})
        return bool(got) and got.get("v") == "ok"

    def take_final(self, kernel: Any) -> dict[str, Any] | None:
        """The ``FINAL``/``FINAL_VAR`` answer the last cell recorded (handed over once), or None.

        The kernel cuts an answer longer than ``final_chars`` (see ``rlm_kernel.take_final_json``).
        Raises ``FinalAnswerError`` (one line, for the model) when the kernel did not answer or its
        reply is not a final answer: a hand-over that failed must never pass for "no answer".
        """
        evaluate = getattr(kernel, "evaluate", None)
        if evaluate is None:
            return None
        got = evaluate({"v": kernel_call(rlm_kernel.take_final_json, self.final_chars)})
        if not got:
            raise FinalAnswerError("the kernel did not answer when asked for it")
        return parse_final(got.get("v"), self.final_chars)

    def place(self, kernel: Any, name: str, value: Any) -> str:
        """Bind ``value`` to ``name`` in the kernel; the description the model is shown.

        Raises TypeError for a value that cannot travel, RuntimeError when the kernel refused it.
        """
        if not name.isidentifier():
            raise ValueError(f"context_name must be a Python identifier, got {name!r}")
        payload = encode_context(value)
        evaluate = getattr(kernel, "evaluate", None)
        if evaluate is None:
            raise RuntimeError("this kernel cannot receive a context variable")
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="ipython-compact-ctx-")  # created 0700
        fd, path = tempfile.mkstemp(dir=self._dir, suffix=".json")  # created 0600
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(payload, fh)
        got = evaluate({"v": kernel_call(rlm_kernel.load_context, path, name)}, timeout=300.0)
        if not got or got.get("v") != "ok":
            if os.path.exists(path):
                os.unlink(path)
            raise RuntimeError(f"the kernel did not accept the context variable {name!r}")
        return describe_value(name, value)
