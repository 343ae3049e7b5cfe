"""ipython-compact inside ``rlm.RLM`` from the ``rlms`` package (extra ``rlms``, tested on 0.1.3).

rlms' IPython environment never compacts: its loop compacts only when the environment has
``append_compaction_entry``, which only its local and docker environments define. It has no
recovery when the kernel dies, and its ``SHOW_VARS`` lists its own scaffolding as user variables.

``CompactIPythonEnv`` (a subclass of rlms' ``IPythonREPL``, subprocess kernels only):
- defines ``append_compaction_entry``, so ``RLM(compaction=True, environment="ipython")`` compacts,
  and writes every iteration and every summary into our session log (``SessionStore``), with a
  ``kernel_state`` entry naming the kernel's live names at each compaction;
- loads the ipython_compact extension in the kernel and answers ``SHOW_VARS()`` from our probe
  (``agent.kernel_state.describe_names``), with the rlms scaffolding hidden;
- defines ``history``, which rlms' compaction prompt points the model to, as a view of our log in
  rlms' shape (``agent.kernel_history``): it outlives kernel deaths;
- with ``snapshot_dir`` set, snapshots the user's names after every cell
  (``ipython_compact.namespace.snapshot`` through ``agent.kernel_state``); when the kernel has
  died, the next cell starts a fresh kernel, restores the snapshot and tells the model in the
  cell's stderr what came back (``restore_after_death``, on by default with a snapshot dir).

Use: call ``install()`` once, then pass ``environment="ipython"`` and put our options under the
``"ipython_compact"`` key of ``environment_kwargs`` (other environments are unaffected)::

    install()
    RLM(backend="openai", backend_kwargs={...}, environment="ipython", compaction=True,
        environment_kwargs={"ipython_compact": {"store": store, "snapshot_dir": "snaps"}})

Offline: rlms counts tokens with tiktoken when it is importable, and tiktoken downloads its
encodings on first use; the ``rlms`` extra does not install tiktoken (keep it out of that venv).
"""

from __future__ import annotations

import ast
import contextlib
import json
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import rlm.core.rlm as rlm_core
from rlm.core.types import REPLResult
from rlm.environments.ipython_repl import IPythonREPL

from ipython_compact.agent import kernel_history, kernel_state
from ipython_compact.agent.kernel_calls import SHELL, kernel_call
from ipython_compact.core.entries import CUSTOM, KERNEL_STATE, MESSAGE
from ipython_compact.core.state_notice import SnapshotOutcome, state_notice
from ipython_compact.store import SessionStore
from ipython_compact.store.database import utc_now

__all__ = ["OPTIONS_KEY", "CompactIPythonEnv", "install"]

OPTIONS_KEY = "ipython_compact"
SCAFFOLD = ("llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched", "answer", "SHOW_VARS")
_WIRE = (
    "%load_ext ipython_compact\n"
    "def SHOW_VARS():\n"
    "    return "
    + kernel_call(kernel_state.describe_names, SHELL)
    + "\n"
    + kernel_call(kernel_state.hide_names, SHELL, list(SCAFFOLD))
)


class CompactIPythonEnv(IPythonREPL):  # type: ignore[misc]
    """rlms' IPython environment with compaction, our log, the probe and snapshots (see module doc).

    ``ipython_compact`` options: ``store`` (a ``SessionStore``; default: the user's data dir),
    ``session`` (default ``"rlms-<id>"``), ``snapshot_dir`` (None: no snapshots, a death ends
    nothing silently — the cell reports it and the kernel stays dead), ``restore_after_death``.
    """

    _km: Any
    _kc: Any
    _broker: Any

    def __init__(self, *, ipython_compact: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        options = dict(ipython_compact or {})
        unknown = sorted(set(options) - {"store", "session", "snapshot_dir", "restore_after_death"})
        if unknown:
            raise ValueError(f"unknown ipython_compact options: {unknown}")
        mode = kwargs.setdefault("kernel_mode", "subprocess")
        if mode != "subprocess":
            raise ValueError(
                "CompactIPythonEnv needs kernel_mode='subprocess' (a real kernel with the extension)"
            )
        # rlms waits for a dead kernel until the cell timeout: keep one, so a death is noticed.
        kwargs.setdefault("cell_timeout", 600.0)
        self.store: SessionStore = options.get("store") or SessionStore()
        self.session: str = options.get("session") or f"rlms-{uuid.uuid4().hex[:8]}"
        self.snapshot_dir: str | None = options.get("snapshot_dir")
        self.restore_after_death: bool = bool(
            options.get("restore_after_death", self.snapshot_dir is not None)
        )
        if self.restore_after_death and self.snapshot_dir is None:
            raise ValueError("restore_after_death needs snapshot_dir")
        self.store.ensure_session(self.session)
        self.compactions = 0
        self.restarts = 0
        self.wire_error: str | None = None
        self._reviving = False
        self._log_lock = threading.Lock()
        super().__init__(**kwargs)

    # ---- kernel wiring ---------------------------------------------------------------------
    def setup(self) -> None:
        super().setup()
        # The extension binds to the run's session, not to a "kernel:tmp..." session of its own.
        bind = kernel_call(kernel_state.bind_session, self.session) + "\n"
        history = kernel_call(kernel_history.install, SHELL, self.store.url, self.session)
        result = self._execute_in_kernel(
            bind + _WIRE + "\n" + history, timeout=self.startup_timeout, drain_broker=False
        )
        self.wire_error = result.stderr or None

    def _evaluate(self, expression: str, timeout: float = 120.0) -> Any:
        """A silent ``user_expressions`` round trip; the JSON value the expression returned, or None."""
        if self._kc is None or self._km is None or not self._km.is_alive():
            return None
        with self._lock:
            try:
                reply = self._kc.execute_interactive(
                    "",
                    silent=True,
                    store_history=False,
                    allow_stdin=False,
                    user_expressions={"v": expression},
                    timeout=timeout,
                    output_hook=lambda _msg: None,
                )
            except Exception:
                return None
        value = (reply.get("content", {}).get("user_expressions") or {}).get("v") or {}
        if value.get("status") != "ok":
            return None
        try:
            return json.loads(ast.literal_eval(value["data"]["text/plain"]))
        except (ValueError, SyntaxError, KeyError, TypeError):
            return None

    def kernel_alive(self) -> bool:
        return self._km is not None and bool(self._km.is_alive())

    def names(self) -> list[str] | None:
        """The user's names now (the probe's ``%who`` rule), or None when the kernel cannot say."""
        got = self._evaluate(kernel_call(kernel_state.user_names_json))
        if got is None:
            return None
        return [str(n) for n in got] if isinstance(got, list) else []

    # ---- cells, snapshots, restarts --------------------------------------------------------
    def execute_code(self, code: str) -> REPLResult:
        notice = None
        if self._km is not None and not self.kernel_alive():
            notice = self._revive()
        result: REPLResult = super().execute_code(code)
        if self._km is not None and not self.kernel_alive():
            result.stderr += "\n" + (self._revive() or "")
        elif self.snapshot_dir is not None and self._km is not None and not self._reviving:
            self._evaluate(kernel_call(kernel_state.snapshot_json, self.snapshot_dir))
        if notice:
            result.stderr = notice + "\n" + result.stderr
        return result

    def _revive(self) -> str:
        """A fresh kernel after a death: scaffolding, contexts, then the newest snapshot."""
        if not self.restore_after_death or self.snapshot_dir is None:
            return (
                "The kernel process died and was not restarted (no snapshot directory); "
                "every variable is lost."
            )
        with contextlib.suppress(Exception):
            self._kc.stop_channels()
        with contextlib.suppress(Exception):
            self._km.shutdown_kernel(now=True)
        if self._broker is not None:
            with contextlib.suppress(Exception):
                self._broker.stop()
        self._km = self._kc = self._broker = None
        self.setup()  # new kernel, broker, rlms scaffolding and our wiring
        self.restarts += 1
        self._reviving = True  # re-loading the contexts must not overwrite the snapshot to restore
        try:
            for name, payload in sorted(self._subprocess_shadow.items()):
                if name.startswith("context_") and name[len("context_") :].isdigit():
                    self.add_context(payload, int(name[len("context_") :]))
        finally:
            self._reviving = False
        report = self._evaluate(kernel_call(kernel_state.restore_json, self.snapshot_dir)) or {
            "ok": False,
            "error": "no answer",
        }
        lines = ["The kernel died and was restarted (a new process)."]
        if not report.get("ok"):
            lines.append(
                f"Restoring the snapshot failed ({report.get('error')}); only the context was loaded again."
            )
        else:
            restored = ", ".join(sorted(report.get("restored") or [])) or "nothing"
            lines.append(f"Restored from the last snapshot: {restored}.")
            failed = report.get("failed") or []
            if failed:
                lines.append("Not restored: " + ", ".join(f"{n} ({why})" for n, why in failed) + ".")
        lines.append("Imports and anything defined after the last snapshot must be recreated.")
        notice = "\n".join(lines)
        self._log(CUSTOM, {"custom_type": "rlms_kernel_restart", "data": {"notice": notice}})
        return notice

    # ---- compaction and the log ------------------------------------------------------------
    def append_compaction_entry(self, entry: list[dict[str, Any]] | dict[str, Any]) -> None:
        """rlms' hook: a list of new messages after each iteration, or ``{"type": "summary", ...}``."""
        if isinstance(entry, dict) and entry.get("type") == "summary":
            self.compactions += 1
            names = self.names()
            self._log(
                CUSTOM,
                {
                    "custom_type": kernel_history.SUMMARY,
                    "data": {"summary": str(entry.get("content", "")), "count": self.compactions},
                },
            )
            snapshot = None if self.snapshot_dir is None else SnapshotOutcome(True)
            notice = state_notice(kernel_alive=self.kernel_alive(), names=names, snapshot=snapshot)
            if notice is not None:
                self._log(KERNEL_STATE, {"content": notice})
            return
        for message in entry if isinstance(entry, list) else [entry]:
            role = message.get("role")
            text = str(message.get("content", ""))
            if role == "assistant":
                data = {
                    "role": "assistant",
                    "content": [{"type": "text", "text": text}],
                    "timestamp": utc_now(),
                }
            else:
                data = {"role": "user", "content": text, "timestamp": utc_now()}
            self._log(MESSAGE, {"message": data})

    def _log(self, kind: str, data: dict[str, Any]) -> None:
        with self._log_lock:
            self.store.append(self.session, kind, data)


_original_get_environment: Callable[..., Any] | None = None


def _get_environment(environment: str, environment_kwargs: dict[str, Any]) -> Any:
    if environment == "ipython" and OPTIONS_KEY in environment_kwargs:
        return CompactIPythonEnv(**environment_kwargs)
    assert _original_get_environment is not None
    return _original_get_environment(environment, environment_kwargs)


def install() -> Callable[[], None]:
    """Route ``environment="ipython"`` with an ``ipython_compact`` option to ``CompactIPythonEnv``.

    Idempotent; other environments and plain ``"ipython"`` are untouched. Returns the undo.
    """
    global _original_get_environment
    if _original_get_environment is None:
        _original_get_environment = rlm_core.get_environment
        rlm_core.get_environment = _get_environment

    def undo() -> None:
        global _original_get_environment
        if _original_get_environment is not None:
            rlm_core.get_environment = _original_get_environment
            _original_get_environment = None

    return undo
