"""The RLM functions the model's code calls inside the kernel: sub-calls, recall, and the end of a run.

``llm_query(prompt, model=None)`` asks the model (or ``model``) one question (no tools, no
history) and returns its text; ``agent_query(task, name=None, context=None)`` hands a task to a
sub-agent (a child session with its own kernel and its own compaction; ``context`` becomes the
variable ``context`` in that kernel) and returns its bounded answer — with ``name`` the same
sub-agent is asked again; ``llm_query_batched(prompts)`` and ``agent_query_batched(tasks)`` run
several at once (the host bounds how many) and return the answers in order, a failed item as a
``SubcallFailure`` (a ``str`` saying why, with ``.failed`` true); ``sub_agents()`` lists the live ones;
``recall(entry_id)`` returns a logged text whole (a
tool output the context only showed head and tail of); ``FINAL(answer)`` / ``FINAL_VAR(name)`` end
the run with an answer, the second with the value of a kernel variable.

Why they call the host: the sub-calls need the model client, the session log and the registry of
sub-agents, all of which live in the host process and outlive the kernel (a restart or a
compaction loses none of them). Each call is one request over the loopback bridge
(``loopback_client`` to the host's ``subcall_broker``), authenticated by a token the host
installed; the host only ever *reads* the request as data.

What must hold:
- Standard library only (this module is imported inside user kernels).
- The functions are installed as hidden names (``user_ns_hidden``), so the namespace probe, the
  ``<ipython_state>`` notice and snapshots never list or save them; ``install`` is idempotent and
  is run again after every kernel restart.
- A failed sub-call raises ``SubcallError`` (a ``RuntimeError``) with the host's reason in the
  model's cell, shown as that one line (``_render_traceback_``: no frames of this module); nothing
  is guessed.
- ``FINAL_VAR`` of an undefined name raises ``NameError`` (the run goes on; the model sees why).
- The hand-over (``take_final_json``) is bounded: a long answer comes back as head and tail with
  the cut stated, the whole value staying in the kernel under a name the answer gives.
- ``load_context`` reads a host-written file once, removes it, and binds the value to one name.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from ipython_compact.agent import loopback_client
from ipython_compact.agent.context_payload import encode_context

_lock = threading.Lock()
_bridge: dict[str, Any] = {}
_final: dict[str, Any] | None = None


def _shell() -> Any:
    """The kernel's shell. Imported per call for the host's start-up time: the host imports this
    module (``kernel_calls``' table) but never runs these functions, and needs no IPython."""
    from IPython import get_ipython  # deferred for the host's start-up time (see the docstring)

    return get_ipython()


class SubcallError(RuntimeError):
    """A sub-call the host could not answer; IPython shows it as its one line, without frames."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class SubcallFailure(str):
    """One failed item of a batched call: the reason as text (so joining answers never breaks)."""

    failed = True


def _call(op: str, **args: Any) -> Any:
    __tracebackhide__ = True
    with _lock:
        url, token = _bridge.get("url"), _bridge.get("token")
    if not url or not token:
        raise SubcallError(
            f"{op}: no agent is attached to this kernel (sub-calls work only inside an agent run)"
        )
    try:
        return loopback_client.call(url, token, op, kwargs=args)
    except loopback_client.BridgeError as exc:
        raise SubcallError(f"{op} failed: {exc}") from None


def _check_model(model: Any) -> None:
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise TypeError(f"model must be a model name (str) or None, got {model!r}")


def llm_query(prompt: str, model: str | None = None) -> str:
    """Ask the model (or ``model``) one question (no tools, no conversation); returns its answer text."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise TypeError(f"llm_query needs a non-empty str prompt, got {type(prompt).__name__}")
    _check_model(model)
    return str(_call("llm_query", prompt=prompt, model=model))


def _items(replies: Any, count: int, op: str) -> list[str]:
    if not isinstance(replies, list) or len(replies) != count:
        raise SubcallError(f"{op} failed: the host answered {type(replies).__name__}, not {count} results")
    return [
        str(r.get("value"))
        if isinstance(r, dict) and r.get("ok")
        else SubcallFailure(f"[{op} item {i} failed: {r.get('error') if isinstance(r, dict) else r}]")
        for i, r in enumerate(replies)
    ]


def llm_query_batched(prompts: list[str], model: str | None = None) -> list[str]:
    """Ask several questions at once; the answers in the order of ``prompts``, a failed one as a
    ``SubcallFailure`` (text saying why; ``getattr(answer, 'failed', False)`` tells it apart)."""
    prompts = list(prompts)
    bad = [i for i, p in enumerate(prompts) if not isinstance(p, str) or not p.strip()]
    if bad:
        raise TypeError(f"llm_query_batched needs non-empty str prompts; item(s) {bad[:10]} are not")
    _check_model(model)
    return _items(_call("llm_query_batched", prompts=prompts, model=model), len(prompts), "llm_query")


def _task(task: Any, name: Any, context: Any) -> dict[str, Any]:
    if not isinstance(task, str) or not task.strip():
        raise TypeError(f"agent_query needs a non-empty str task, got {type(task).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"agent_query's name must be a str or None, got {type(name).__name__}")
    return {"task": task, "name": name, "context": None if context is None else encode_context(context)}


def agent_query(task: str, name: str | None = None, context: Any = None) -> str:
    """Give ``task`` to a sub-agent (a new one, or the live one called ``name``); returns its answer.

    ``context`` (str, bytes or a JSON value) becomes the variable ``context`` in the sub-agent's
    kernel, so data never has to be pasted into the task text."""
    return str(_call("agent_query", **_task(task, name, context)))


def agent_query_batched(
    tasks: list[str], contexts: list[Any] | None = None, names: list[str | None] | None = None
) -> list[str]:
    """Run several sub-agents at once (``contexts[i]``/``names[i]`` go with ``tasks[i]``); the
    answers in order, a failed one as a ``SubcallFailure``."""
    tasks = list(tasks)
    contexts = [None] * len(tasks) if contexts is None else list(contexts)
    names = [None] * len(tasks) if names is None else list(names)
    if len(contexts) != len(tasks) or len(names) != len(tasks):
        raise ValueError(
            f"agent_query_batched: {len(tasks)} tasks but {len(contexts)} contexts and {len(names)} names"
        )
    items = [_task(t, n, c) for t, n, c in zip(tasks, names, contexts, strict=True)]
    return _items(_call("agent_query_batched", tasks=items), len(items), "agent_query")


def sub_agents() -> list[dict[str, Any]]:
    """The live sub-agents: name, session, first task, how many tasks, last state."""
    value = _call("sub_agents")
    return list(value) if isinstance(value, list) else []


def recall(entry_id: str) -> str:
    """The whole text of a logged entry (e.g. a tool output the context showed only in part)."""
    if not isinstance(entry_id, str) or not entry_id:
        raise TypeError("recall needs an entry id (a str, as shown in the context)")
    return str(_call("recall", entry_id=entry_id))


def FINAL(answer: Any) -> None:
    """End the run with ``answer`` (as text) once this cell finishes."""
    global _final
    text = str(answer)
    with _lock:
        _final = {"answer": text, "source": "FINAL", "name": None}


def FINAL_VAR(name: str) -> None:
    """End the run with the value of the kernel variable ``name`` (as text) once this cell finishes."""
    global _final
    if not isinstance(name, str):
        raise TypeError(f"FINAL_VAR takes a variable name as a str, got {type(name).__name__}")
    ns = _shell().user_ns
    if name not in ns:
        raise NameError(f"FINAL_VAR: no variable named {name!r} is defined")
    text = str(ns[name])  # converted here, in the model's cell and under its timeout, never at hand-over
    with _lock:
        _final = {"answer": text, "source": f"FINAL_VAR({name})", "name": name}


FINAL_NAME = "_final_answer"
"""Where a ``FINAL`` answer too long to hand over whole is kept in the kernel."""


def _bounded(text: str, limit: int) -> str:
    """Head and tail of ``text`` within about ``limit`` characters, the cut stated in the middle."""
    head, tail = text[: limit * 2 // 3], text[len(text) - limit // 3 :]
    return f"{head}\n... [{len(text) - len(head) - len(tail):,} characters omitted] ...\n{tail}"


def take_final_json(limit: int | None = None) -> str:
    """The pending final answer as JSON (``null`` when none), handed over once.

    With ``limit`` an answer longer than that is cut to head and tail (the cut stated, the whole
    value left in the kernel: under its own name for ``FINAL_VAR``, as ``_final_answer`` for
    ``FINAL``), so the hand-over stays small whatever the value's size.
    """
    global _final
    with _lock:
        final, _final = _final, None
    if final is None:
        return "null"
    text, name = final["answer"], final.get("name")
    reply = {"answer": text, "source": final["source"], "chars": len(text), "cut": False, "name": name}
    if limit is not None and len(text) > limit:
        if name is None:
            name = FINAL_NAME
            _shell().user_ns[name] = text
        reply.update(
            answer=_bounded(text, limit) + f"\n[final answer cut: {len(text):,} characters in all; "
            f"the whole value is the kernel variable `{name}`]",
            cut=True,
            name=name,
        )
    return json.dumps(reply)


FUNCTIONS = {
    "llm_query": llm_query,
    "llm_query_batched": llm_query_batched,
    "agent_query": agent_query,
    "agent_query_batched": agent_query_batched,
    "sub_agents": sub_agents,
    "recall": recall,
    "FINAL": FINAL,
    "FINAL_VAR": FINAL_VAR,
}


def install(url: str, token: str, names: list[str] | None = None) -> str:
    """Attach this kernel to the host's broker and define the functions (hidden) in the namespace."""
    with _lock:
        _bridge.update(url=url, token=token)
    shell = _shell()
    chosen = {n: f for n, f in FUNCTIONS.items() if names is None or n in names}
    shell.user_ns.update(chosen)
    shell.user_ns_hidden.update(chosen)
    return "ok"


def load_context(path: str, name: str) -> str:
    """Bind the value the host wrote to ``path`` (JSON: ``{"kind": "str"|"json"|"bytes", "value"}``)
    to ``name`` in the user namespace, then remove the file. Returns ``"ok"``."""
    if not name.isidentifier():
        raise ValueError(f"not a variable name: {name!r}")
    try:
        with open(path, encoding="utf-8") as fh:
            payload = json.load(fh)
    finally:
        os.unlink(path)
    kind, value = payload.get("kind"), payload.get("value")
    if kind == "bytes":
        value = bytes.fromhex(value)
    elif kind not in ("str", "json"):
        raise ValueError(f"unknown context kind {kind!r}")
    _shell().user_ns[name] = value
    return "ok"
