"""The agent's one tool: run Python in a kernel — in this process (notebooks) or another (hosts).

Why two kinds: inside a notebook the agent runs in the user's own kernel (``%%agent``), so its
code must share the user's namespace; a host program instead starts a kernel through
jupyter_client and drives it over ZMQ, which is also what lets it survive (and recover from) the
kernel dying.

What must hold:
- ``execute`` always returns an ``ExecResult`` (never raises for user-code errors): the text the
  model sees (streams, results, displays as text, tracebacks without ANSI colour), capped at
  ``max_output_chars`` with the cut said out loud, and a status of ``ok``/``error``/``died``/
  ``timeout``/``interrupted``. A cell still running ``interrupt_grace`` seconds after its
  timeout's interrupt gets its kernel killed and reports ``died`` (never "was interrupted"), so
  the restart path takes over.
- ``probe_names`` answers the live list of user names or None when the kernel cannot be asked
  (a dead kernel is never reported as having names).
- A model-requested compaction recorded in the kernel (``ipython_compact.agent.requests``) is
  handed to the loop by ``take_compaction_request`` exactly once.
- Only what this object started is stopped by ``shutdown``.
"""

from __future__ import annotations

import ast
import json
import os
import queue
import re
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ipython_compact.agent import kernel_state
from ipython_compact.agent import requests as compact_requests
from ipython_compact.agent.kernel_calls import kernel_call
from ipython_compact.namespace.probe import user_names

ExecStatus = Literal["ok", "error", "died", "timeout", "interrupted"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

LOG_OUTPUT_CHARS = 1_000_000
"""What a kernel tool keeps of one cell's output by default: everything up to this, so the log has
it whole; the agent shows the model only head and tail (``Agent(max_output_chars=...)``)."""


@dataclass(frozen=True)
class ExecResult:
    """What one code execution produced, as text for the model."""

    status: ExecStatus
    text: str
    elapsed_s: float
    truncated: bool = False

    @property
    def is_error(self) -> bool:
        """Anything but a clean run (error, timeout, interrupt, death) is reported to the model as an
        error."""
        return self.status != "ok"


def cap_text(text: str, limit: int) -> tuple[str, bool]:
    """Keep head and tail of an over-long output, saying how much was cut in the middle."""
    if limit <= 0 or len(text) <= limit:
        return text, False
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3) :]
    cut = len(text) - len(head) - len(tail)
    return f"{head}\n... [{cut} characters of output omitted] ...\n{tail}", True


def _safe_repr(value: Any) -> str:
    """``repr`` of a cell's result; a broken ``__repr__`` is reported, never raised."""
    try:
        return repr(value)
    except Exception as exc:
        return f"<{type(value).__name__} object; repr failed: {type(exc).__name__}: {exc}>"


class KernelTool(Protocol):
    """What the loop needs from a kernel."""

    def execute(self, code: str, timeout: float | None = None) -> ExecResult:
        """Run ``code``; never raises for user errors (they come back as ``status="error"``)."""
        ...

    def interrupt(self) -> None:
        """Ask the running cell to stop (SIGINT); a no-op when nothing can be interrupted."""
        ...

    def is_alive(self) -> bool:
        """False once the kernel process is gone."""
        ...

    def probe_names(self) -> list[str] | None:
        """User-defined names right now (the ``%who`` rule), or None when the kernel cannot say."""
        ...

    def begin_turn(self) -> None:
        """Open an agent turn in the kernel, so ``compact.run()`` schedules instead of refusing."""
        ...

    def end_turn(self) -> None:
        """Close the turn; a request still pending stays for ``take_compaction_request``."""
        ...

    def take_compaction_request(self) -> dict[str, Any] | None:
        """The model's pending ``compact.run()`` request (``{"instructions": ...}``), handed over once."""
        ...


class InProcessKernel:
    """Runs code in an IPython shell of this very process (the notebook's own kernel)."""

    def __init__(self, shell: Any, *, max_output_chars: int = LOG_OUTPUT_CHARS) -> None:
        self.shell = shell
        self.max_output_chars = max_output_chars

    def execute(self, code: str, timeout: float | None = None) -> ExecResult:
        from IPython.utils.capture import capture_output  # lazy for start-up time: hosts never need it

        start = time.perf_counter()
        parts: list[str] = []
        status: ExecStatus = "ok"
        with capture_output(display=True) as cap:
            result = self.shell.run_cell(code, store_history=False)
        if cap.stdout:
            parts.append(cap.stdout)
        if cap.stderr:
            parts.append(cap.stderr)
        for out in cap.outputs:
            data = getattr(out, "data", {}) or {}
            parts.append(str(data.get("text/plain", f"[{', '.join(sorted(data))} output]")))
        seen = "\n".join(parts)
        # A terminal shell prints results and tracebacks to the captured stdout; a ZMQ kernel
        # publishes them to the frontend instead, so only then are they added here.
        if result.result is not None and "Out[" not in seen:
            parts.append(_safe_repr(result.result))
        error = result.error_before_exec or result.error_in_exec
        if error is not None:
            status = "interrupted" if isinstance(error, KeyboardInterrupt) else "error"
            if type(error).__name__ not in seen:
                parts.append(
                    "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip()
                )
        text, truncated = cap_text(
            _ANSI.sub("", "\n".join(p.rstrip("\n") for p in parts if p)), self.max_output_chars
        )
        return ExecResult(status, text, time.perf_counter() - start, truncated)

    def interrupt(self) -> None:
        """Code runs on the caller's own thread; only the user's own interrupt can stop it."""

    def is_alive(self) -> bool:
        return True

    def probe_names(self) -> list[str] | None:
        try:
            return [name for name, _ in user_names(self.shell.user_ns, self.shell.user_ns_hidden)]
        except Exception:
            return None

    def evaluate(self, expressions: dict[str, str], timeout: float = 10.0) -> dict[str, Any] | None:
        """Evaluate host-built expressions in the shell's namespace (same contract as
        ``JupyterKernel.evaluate``: a failed expression gives None)."""
        out: dict[str, Any] = {}
        for key, expr in expressions.items():
            try:
                out[key] = eval(expr, self.shell.user_ns)
            except Exception:
                out[key] = None
        return out

    def begin_turn(self) -> None:
        compact_requests.begin_turn()

    def end_turn(self) -> None:
        compact_requests.end_turn()

    def take_compaction_request(self) -> dict[str, Any] | None:
        return compact_requests.take()


_ENV_SESSION = kernel_state.ENV_SESSION


class JupyterKernel:
    """A kernel in another process, started and driven through jupyter_client.

    ``session`` binds the kernel's extension to that session (the host agent's own, so what the
    extension records, e.g. the files cells read, lands in the agent's log, and no session of
    the kernel's own is opened); ``auto_snapshot=False`` turns the extension's automatic
    snapshots off for a host that keeps snapshots itself (no second copy of the namespace).
    ``interrupt_grace`` is how long a timed-out cell may take to stop after its interrupt.
    ``extension`` names an IPython extension loaded at every (re)start (``%load_ext``); a failure
    to load it is recorded in ``extension_error`` rather than raised, because the tool still works
    without it. ``env`` adds environment variables for the kernel process.
    """

    def __init__(
        self,
        *,
        kernel_name: str = "python3",
        extension: str | None = "ipython_compact",
        env: dict[str, str] | None = None,
        max_output_chars: int = LOG_OUTPUT_CHARS,
        startup_timeout: float = 60.0,
        cwd: str | None = None,
        interrupt_grace: float = 5.0,
        session: str | None = None,
        auto_snapshot: bool = True,
        ipc_path: str | None = None,
    ) -> None:
        self.kernel_name = kernel_name
        self.ipc_path = ipc_path  # IPC sockets at this path prefix instead of TCP on localhost
        self.extension = extension
        self.env = env
        self.cwd = cwd
        self.max_output_chars = max_output_chars
        self.startup_timeout = startup_timeout
        self.interrupt_grace = interrupt_grace
        self.session = session
        self.auto_snapshot = auto_snapshot
        self.extension_error: str | None = None
        self._km: Any = None
        self._kc: Any = None
        self._lock = threading.Lock()

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> JupyterKernel:
        """Start the kernel process, wait until it answers, load the extension."""
        from jupyter_client.manager import KernelManager  # lazy for start-up time: notebooks never need it

        if self._km is not None:
            raise RuntimeError("kernel already started")
        km = (
            KernelManager(kernel_name=self.kernel_name)
            if self.ipc_path is None
            else KernelManager(kernel_name=self.kernel_name, transport="ipc", ip=self.ipc_path)
        )
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        if self.session is not None:
            env[_ENV_SESSION] = self.session  # kept by restart_kernel, which relaunches with this env
        kwargs: dict[str, Any] = {"env": env}
        if self.cwd is not None:
            kwargs["cwd"] = self.cwd
        km.start_kernel(**kwargs)
        self._km = km
        self._connect()
        return self

    def _connect(self) -> None:
        kc = self._km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=self.startup_timeout)
        self._kc = kc
        self.extension_error = None
        if self.extension:
            # every cell of this kernel is the agent's tool call (the ledger's file lists say so)
            code = f"%load_ext {self.extension}"
            if self.extension == "ipython_compact":
                code += "\n%config CompactConfig.cells_by = 'agent'"
                if not self.auto_snapshot:  # set in the loading cell, before its first snapshot is scheduled
                    code += "\n%config CompactConfig.auto_snapshot = False"
            res = self.execute(code, timeout=self.startup_timeout)
            if res.status != "ok":
                self.extension_error = res.text

    def shutdown(self) -> None:
        """Stop the kernel this object started (politely, then by force)."""
        kc, km = self._kc, self._km
        self._kc = self._km = None
        if kc is not None:
            kc.stop_channels()
        if km is not None:
            try:
                km.shutdown_kernel(now=True)
            except Exception:
                if km.has_kernel:
                    km.signal_kernel(signal.SIGKILL)

    def __enter__(self) -> JupyterKernel:
        return self.start() if self._km is None else self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def manager(self) -> Any:
        """The jupyter_client ``KernelManager`` (None before ``start``)."""
        return self._km

    def is_alive(self) -> bool:
        return self._km is not None and bool(self._km.is_alive())

    @property
    def pid(self) -> int | None:
        """The kernel process's id (None before ``start`` or when the provisioner does not say):
        entries this process writes to the session log are told apart from the host's."""
        pid = getattr(getattr(self._km, "provisioner", None), "pid", None)
        return pid if isinstance(pid, int) else None

    def kill(self) -> None:
        """Kill the kernel process (tests use this to play a crash)."""
        if self._km is not None:
            self._km.signal_kernel(signal.SIGKILL)

    def restart(self) -> None:
        """Start a fresh kernel process in place of a dead or stuck one, and reconnect."""
        if self._km is None:
            raise RuntimeError("kernel was never started")
        if self._kc is not None:
            self._kc.stop_channels()
            self._kc = None
        self._km.restart_kernel(now=True)
        self._connect()

    def interrupt(self) -> None:
        if self._km is not None:
            self._km.interrupt_kernel()

    # ---- execution ---------------------------------------------------------------------------
    def execute(self, code: str, timeout: float | None = None) -> ExecResult:
        with self._lock:
            return self._execute(code, timeout)

    def _execute(
        self,
        code: str,
        timeout: float | None,
        user_expressions: dict[str, str] | None = None,
        silent: bool = False,
    ) -> ExecResult:
        start = time.perf_counter()
        kc = self._kc
        if kc is None or not self.is_alive():
            return ExecResult("died", "The kernel is not running.", 0.0)
        msg_id = kc.execute(
            code,
            silent=silent,
            store_history=not silent,
            user_expressions=user_expressions or {},
            allow_stdin=False,
        )
        parts: list[str] = []
        status: ExecStatus = "ok"
        deadline = None if timeout is None else start + timeout
        idle = False
        streaming = False  # the last part is stream text (the next chunk extends it)
        while not idle:
            if deadline is not None and time.perf_counter() > deadline:
                self.interrupt()
                if self._drain(msg_id, self.interrupt_grace) and self.is_alive():
                    parts.append(f"[execution timed out after {timeout:g}s and was interrupted]")
                    status = "timeout"
                elif not self.is_alive():
                    parts.append(
                        f"[execution timed out after {timeout:g}s; the kernel died when interrupted]"
                    )
                    status = "died"
                else:  # still running: stop the process, and let whoever restarts kernels restart it
                    self.kill()
                    parts.append(
                        f"[execution timed out after {timeout:g}s; the interrupt did not stop it "
                        f"within "
                        f"{self.interrupt_grace:g}s, so the kernel was stopped]"
                    )
                    status = "died"
                break
            try:
                msg = kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                if not self.is_alive():
                    parts.append("[the kernel died while running this code]")
                    status = "died"
                    break
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            mtype = msg["msg_type"]
            content = msg["content"]
            if mtype == "stream":
                # One print may arrive in several chunks ("5000001", then "\n") on a busy kernel:
                # consecutive stream text is one part, so a chunk boundary never adds a line.
                if streaming and parts:
                    parts[-1] += content.get("text", "")
                else:
                    parts.append(content.get("text", ""))
                streaming = True
                continue
            streaming = False
            if mtype in ("execute_result", "display_data"):
                data = content.get("data", {})
                parts.append(str(data.get("text/plain", f"[{', '.join(sorted(data))} output]")))
            elif mtype == "error":
                ename = content.get("ename", "")
                status = "interrupted" if ename == "KeyboardInterrupt" else "error"
                tb = "\n".join(content.get("traceback") or []) or f"{ename}: {content.get('evalue', '')}"
                parts.append(tb)
            elif mtype == "status" and content.get("execution_state") == "idle":
                idle = True
        self._last_reply = None
        if idle and user_expressions:
            self._last_reply = self._shell_reply(msg_id, 10.0)
        joined = _ANSI.sub("", "\n".join(p.rstrip("\n") for p in parts if p))
        text, truncated = cap_text(joined, self.max_output_chars)
        return ExecResult(status, text, time.perf_counter() - start, truncated)

    def _drain(self, msg_id: str, seconds: float) -> bool:
        """Wait up to ``seconds`` for the interrupted cell to end; False when it did not."""
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            try:
                msg = self._kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                if not self.is_alive():
                    return True  # ended, by dying: the caller's next look says so
                continue
            if (
                msg.get("parent_header", {}).get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"].get("execution_state") == "idle"
            ):
                return True
        return False

    def _shell_reply(self, msg_id: str, seconds: float) -> dict[str, Any] | None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            try:
                reply = self._kc.get_shell_msg(timeout=0.2)
            except queue.Empty:
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                content: dict[str, Any] = reply["content"]
                return content
        return None

    def evaluate(self, expressions: dict[str, str], timeout: float = 10.0) -> dict[str, Any] | None:
        """Evaluate expressions silently (no history, no output) and return their ``repr`` values
        parsed back as Python literals; None when the kernel could not answer."""
        with self._lock:
            if self._kc is None or not self.is_alive():
                return None
            self._execute("", timeout, user_expressions=expressions, silent=True)
            reply = self._last_reply
        if not reply or reply.get("status") != "ok":
            return None
        out: dict[str, Any] = {}
        for key, value in (reply.get("user_expressions") or {}).items():
            if value.get("status") != "ok":
                out[key] = None
                continue
            try:
                out[key] = ast.literal_eval(value["data"]["text/plain"])
            except (ValueError, SyntaxError, KeyError):
                out[key] = None
        return out

    def _evaluate_json(self, expr: str) -> Any:
        """The JSON value ``expr`` returned as text; None when the kernel did not answer or the
        text is not JSON (kernel code can replace the kernel side: its reply is data to check)."""
        got = self.evaluate({"v": expr})
        if got is None or not isinstance(got.get("v"), str):
            return None
        try:
            return json.loads(got["v"])
        except ValueError:
            return None

    def probe_names(self) -> list[str] | None:
        names = self._evaluate_json(kernel_call(kernel_state.user_names_json))
        return [str(n) for n in names] if isinstance(names, list) else None

    def begin_turn(self) -> None:
        self.evaluate({"v": kernel_call(compact_requests.begin_turn)})

    def end_turn(self) -> None:
        self.evaluate({"v": kernel_call(compact_requests.end_turn)})

    def take_compaction_request(self) -> dict[str, Any] | None:
        got = self._evaluate_json(kernel_call(compact_requests.take_json))
        return got if isinstance(got, dict) else None

    # ---- snapshots (kernel-side SnapshotStore through silent expressions) --------------------
    def snapshot(self, directory: str) -> dict[str, Any] | None:
        """Save the user's names into ``directory``; the kernel's JSON report, or None."""
        got = self._evaluate_json(kernel_call(kernel_state.snapshot_json, directory))
        return got if isinstance(got, dict) else None

    def restore(self, directory: str) -> dict[str, Any] | None:
        """Restore the newest snapshot from ``directory``; the kernel's JSON report, or None."""
        got = self._evaluate_json(kernel_call(kernel_state.restore_json, directory))
        return got if isinstance(got, dict) else None
