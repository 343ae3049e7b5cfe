"""One RLM step on a real kernel: host tools bridged in, inputs injected once, answer submitted.

Why engine-independent: dspy's ``CodeInterpreter`` and any other REPL-engine adapter need the same
things from a kernel — run a cell, tell a syntax error from a runtime error, catch ``SUBMIT``,
make host tools callable from the cell, hand large inputs over once, and say the truth when the
kernel died. This module does that on ``agent.kernel_tool.JupyterKernel`` (the extension loaded)
and returns an ``Outcome``; each adapter maps outcomes to its engine's exceptions.

What must hold:
- A syntax error is found on the host before anything runs (IPython's own transforms, so magics
  and top-level ``await`` are accepted) and reported as ``kind="syntax"``.
- ``SUBMIT(...)`` reports its values to the host over the loopback bridge (``agent.subcall_broker``)
  and then ends the cell; the
  step's outcome is ``submitted`` with those values even though the cell shows a traceback.
- An input is transferred to the kernel only when its value changed since the last transfer
  (a fingerprint per name); a name the code rebound gets its injected value back without a
  transfer. A 5 MB context is therefore sent once, not at every step.
- A dead kernel is never silently replaced: the outcome is ``died``. Only with
  ``restore_after_death`` does ``revive()`` start a fresh kernel and restore the newest snapshot
  (taken after each successful step), and the text it returns says what came back and what not.
"""

from __future__ import annotations

import ast
import contextvars
import hashlib
import inspect
import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ipython_compact.agent import host_tools
from ipython_compact.agent.kernel_calls import SHELL, kernel_call
from ipython_compact.agent.kernel_tool import JupyterKernel
from ipython_compact.agent.subcall_broker import SubcallBroker

OutcomeKind = Literal["output", "error", "syntax", "submitted", "died", "timeout", "interrupted"]

SUBMIT_TOOL = "__submit__"
FETCH_TOOL = "__fetch__"
_SUBMIT_TRACEBACK = re.compile(r"\n?-{20,}\nSubmitted\s+Traceback.*\Z", re.DOTALL)


@dataclass(frozen=True)
class Outcome:
    """What one step produced. ``values`` is the submitted answer for ``submitted``."""

    kind: OutcomeKind
    text: str
    values: dict[str, Any] | None = None
    elapsed_s: float = 0.0


@dataclass
class RunnerStats:
    """Counters the adapters and benches report."""

    steps: int = 0
    transfers: dict[str, int] = field(default_factory=dict)
    restarts: int = 0


class KernelRunner:
    """A kernel plus a tool bridge; ``tools`` is read live at every call (engines update it)."""

    def __init__(
        self,
        tools: dict[str, Callable[..., Any]] | None = None,
        *,
        kernel: JupyterKernel | None = None,
        timeout: float | None = None,
        max_output_chars: int = 100_000,
        snapshot_dir: str | None = None,
        restore_after_death: bool = False,
        env: dict[str, str] | None = None,
        session: str | None = None,
    ) -> None:
        if restore_after_death and snapshot_dir is None:
            raise ValueError(
                "restore_after_death needs snapshot_dir (where the snapshots to restore are written)"
            )
        self.tools: dict[str, Callable[..., Any]] = tools if tools is not None else {}
        self.timeout = timeout
        self.snapshot_dir = snapshot_dir
        self.restore_after_death = restore_after_death
        self.kernel = (
            kernel
            if kernel is not None
            else JupyterKernel(max_output_chars=max_output_chars, env=env, session=session)
        )
        self.stats = RunnerStats()
        self._bridge: SubcallBroker | None = None
        self._installed: tuple[tuple[str, ...], tuple[str, ...] | None] | None = None
        self._fingerprints: dict[str, str] = {}
        self._pending: dict[str, Any] = {}
        self._submitted: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._started = False
        self._closed = False

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the kernel and the bridge; idempotent. Raises RuntimeError after ``shutdown``."""
        if self._closed:
            raise RuntimeError("this kernel runner was shut down; create a new one")
        if self._started:
            return
        if self.kernel.manager is None:
            self.kernel.start()
        if self.kernel.extension_error:
            raise RuntimeError(
                f"the ipython_compact extension did not load in the kernel: {self.kernel.extension_error}"
            )
        self._bridge = SubcallBroker(self._resolve).start()
        self._started = True

    def shutdown(self) -> None:
        """Stop the bridge and the kernel; idempotent."""
        self._closed = True
        if self._bridge is not None:
            self._bridge.stop()
            self._bridge = None
        self.kernel.shutdown()

    @property
    def bridge_calls(self) -> dict[str, int]:
        """Calls per host tool so far (internal ``__fetch__``/``__submit__`` included)."""
        return dict(self._bridge.calls) if self._bridge is not None else {}

    def is_alive(self) -> bool:
        return self._started and self.kernel.is_alive()

    def reinstall(self) -> None:
        """Bind the tools in the kernel again before the next step (the engine replaced them)."""
        self._installed = None

    def _resolve(self, name: str) -> Callable[..., Any] | None:
        if name == SUBMIT_TOOL:
            return self._record_submission
        if name == FETCH_TOOL:
            return self._fetch
        tool = self.tools.get(name)
        return None if tool is None else _by_keyword(tool)

    def _record_submission(self, values: dict[str, Any]) -> None:
        with self._lock:
            self._submitted = dict(values)

    def _fetch(self, name: str) -> Any:
        with self._lock:
            if name not in self._pending:
                raise KeyError(f"no pending input named {name!r}")
            return self._pending.pop(name)

    # ---- one step --------------------------------------------------------------------------
    def run(
        self, code: str, variables: Mapping[str, Any] | None = None, *, submit_fields: list[str] | None = None
    ) -> Outcome:
        """Run ``code`` as one cell; see the module docstring for what each outcome means.

        Raises ValueError for variables JSON cannot carry or names that clash with tools.
        """
        self.start()
        assert self._bridge is not None
        syntax = _syntax_error(code)
        if syntax is not None:
            return Outcome("syntax", syntax)
        if not self.kernel.is_alive():
            return Outcome("died", "The kernel is not running (it died earlier).")
        self._bridge.use_context(contextvars.copy_context())
        prepared = self._prepare(dict(variables or {}), submit_fields)
        if prepared is not None:
            return prepared
        with self._lock:
            self._submitted = None
        result = self.kernel.execute(code, timeout=self.timeout)
        self.stats.steps += 1
        with self._lock:
            submitted, self._submitted = self._submitted, None
        if submitted is not None:
            self._snapshot()
            return Outcome("submitted", _SUBMIT_TRACEBACK.sub("", result.text), submitted, result.elapsed_s)
        if result.status == "ok":
            self._snapshot()
            return Outcome("output", result.text, None, result.elapsed_s)
        kind: OutcomeKind = "error" if result.status == "error" else result.status
        if kind == "died":
            self._installed = None
            self._fingerprints.clear()
        return Outcome(kind, result.text, None, result.elapsed_s)

    def _prepare(self, variables: dict[str, Any], submit_fields: list[str] | None) -> Outcome | None:
        """Install tools when their set changed; transfer changed inputs; rebind the others."""
        assert self._bridge is not None
        clash = sorted(set(variables) & (set(self.tools) | {"SUBMIT"}))
        if clash:
            raise ValueError(f"input names clash with tool names: {clash}")
        bad = [n for n in variables if not (isinstance(n, str) and n.isidentifier())]
        if bad:
            raise ValueError(f"input names must be Python identifiers: {bad!r}")
        changed: list[str] = []
        for name, value in variables.items():
            mark = _fingerprint(name, value)
            if self._fingerprints.get(name) != mark:
                changed.append(name)
                self._pending[name] = value
                self._fingerprints[name] = mark
        wanted = (tuple(sorted(self.tools)), tuple(submit_fields) if submit_fields is not None else None)
        expressions: dict[str, str] = {}
        url, token = self._bridge.url, self._bridge.token
        if wanted != self._installed:
            expressions["tools"] = kernel_call(
                host_tools.install,
                SHELL,
                url,
                token,
                list(wanted[0]),
                submit_fields=submit_fields,
                submit_tool=SUBMIT_TOOL,
            )
        if changed:
            expressions["inputs"] = kernel_call(
                host_tools.load_inputs, SHELL, url, token, changed, FETCH_TOOL
            )
        unchanged = [n for n in variables if n not in changed]
        if unchanged:
            expressions["rebind"] = kernel_call(host_tools.rebind_inputs, SHELL, unchanged)
        if not expressions:
            return None
        got = self.kernel.evaluate(expressions, timeout=self.timeout or 120.0)
        failed = [k for k in expressions if got is None or got.get(k) != "ok"]
        if failed or got is None:
            for name in changed:
                self._fingerprints.pop(name, None)
            if not self.kernel.is_alive():
                return Outcome("died", "The kernel died while its tools and inputs were being set up.")
            raise RuntimeError(
                f"setting up the kernel ({', '.join(failed)}) failed; the kernel did not answer"
            )
        self._installed = wanted
        for name in changed:
            self.stats.transfers[name] = self.stats.transfers.get(name, 0) + 1
        return None

    def _snapshot(self) -> None:
        if self.snapshot_dir is not None:
            self.kernel.snapshot(self.snapshot_dir)

    # ---- kernel state ----------------------------------------------------------------------
    def names(self) -> list[str] | None:
        """The user's names right now (the probe's ``%who`` rule), or None when the kernel cannot say."""
        if not self.is_alive():
            return None
        return self.kernel.probe_names()

    def revive(self) -> str:
        """Start a fresh kernel after a death and restore the newest snapshot; the notice for the model.

        Only with ``restore_after_death``; raises RuntimeError otherwise.
        """
        if not self.restore_after_death or self.snapshot_dir is None:
            raise RuntimeError("restoring after a kernel death was not enabled (restore_after_death=False)")
        self.kernel.restart()
        self.stats.restarts += 1
        self._installed = None
        self._fingerprints.clear()
        report = self.kernel.restore(self.snapshot_dir) or {"ok": False, "error": "the kernel did not answer"}
        restored = list(report.get("restored") or [])
        failed = [f"{n} ({why})" for n, why in report.get("failed") or []]
        lines = [
            "The kernel died and was restarted: a new process, so anything not in the last snapshot is gone."
        ]
        if not report.get("ok"):
            lines.append(f"Restoring the snapshot failed ({report.get('error')}); no names were restored.")
        elif report.get("none"):
            lines.append("No snapshot had been written yet, so no names were restored.")
        else:
            lines.append(
                "Restored from the last snapshot: " + (", ".join(sorted(restored)) or "nothing") + "."
            )
            if failed:
                lines.append("Not restored: " + ", ".join(failed) + ".")
        lines.append(
            "Inputs are injected again; imports and anything defined after the snapshot must be recreated."
        )
        return "\n".join(lines)


def _by_keyword(tool: Callable[..., Any]) -> Callable[..., Any]:
    """Call ``tool`` with positional arguments passed by parameter name: engines wrap tools as
    ``invoke(**kwargs)`` (dspy does), but the model writes ``recall('x')``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if args:
            try:
                params = list(inspect.signature(tool).parameters.values())
            except (TypeError, ValueError):
                params = []
            if params and not any(p.kind in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY) for p in params):
                named = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
                if len(args) > len(named):
                    raise TypeError(
                        f"{getattr(tool, '__name__', 'tool')}() takes {len(named)} positional "
                        f"arguments "
                        f"but {len(args)} were given"
                    )
                clash = sorted(set(named[: len(args)]) & set(kwargs))
                if clash:
                    raise TypeError(f"{getattr(tool, '__name__', 'tool')}() got multiple values for {clash}")
                kwargs = {**dict(zip(named, args, strict=False)), **kwargs}
                args = ()
        return tool(*args, **kwargs)

    return call


def _syntax_error(code: str) -> str | None:
    """The syntax error IPython would raise for ``code`` (after its magic transforms), or None."""
    # deferred, heavy: IPython's input machinery, needed only to report a syntax error (start-up)
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        source = TransformerManager().transform_cell(code)  # type: ignore[no-untyped-call]
        compile(
            source,
            "<cell>",
            "exec",
            flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
            dont_inherit=True,
        )
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return f"{type(exc).__name__}: {exc.msg}{where}"
    return None


def _fingerprint(name: str, value: Any) -> str:
    """Changes when the value changes. ``hash`` of a str is cached by Python, so an unchanged 8 MB
    context costs nothing; containers are hashed through their JSON form."""
    if isinstance(value, str):
        return f"str:{hash(value)}:{len(value)}"
    try:
        text = json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"input {name!r} must be JSON-compatible to reach the kernel: {exc}") from exc
    return type(value).__name__ + ":" + hashlib.sha256(text.encode("utf-8")).hexdigest()
