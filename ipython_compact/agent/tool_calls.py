"""The agent's one tool: run the model's Python in the kernel, and bring the kernel back if it dies.

Why here: a tool call touches the kernel three ways — it runs code, it may leave a
``compact.run()`` request behind (collected after every call and at the end of the turn), and it
may kill the process. The wording of the reset notice and the restart budget are pure
(``kernel_reset``); this module applies them.

What must hold:
- Every tool call gets exactly one logged tool result (bad arguments and unknown tools included,
  as errors the model can read).
- After a successful cell, the kernel is snapshotted when ``snapshot_dir`` is set.
- A dead kernel is restarted within the budget, restored from its snapshot, and the model is told
  exactly what came back (``<ipython_kernel_reset>``); past the budget the turn stops with the
  same message in the log.
- An interrupted cell stops the whole turn.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

from ipython_compact.agent import requests as compact_requests
from ipython_compact.agent.kernel_reset import budget_exhausted, reset_notice, restart_budget, restart_failed
from ipython_compact.agent.kernel_tool import ExecResult
from ipython_compact.agent.openai_chat import PYTHON_TOOL_NAME
from ipython_compact.agent.state import AgentState, now_iso
from ipython_compact.core.entries import CUSTOM_MESSAGE
from ipython_compact.core.state_notice import SnapshotOutcome


class ToolCalls(AgentState):
    """Running tool calls in the kernel (mixed into ``Agent``)."""

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

    def _append_tool_result(self, call: Mapping[str, Any], text: str, is_error: bool) -> None:
        self._append_message(
            {
                "role": "toolResult",
                "toolCallId": str(call.get("id")),
                "toolName": str(call.get("name")),
                "content": [{"type": "text", "text": text}],
                "isError": is_error,
                "timestamp": now_iso(),
            }
        )
        self._emit("tool_result", text, is_error=is_error)

    # ------------------------------------------------------------------ the turn, as the kernel sees it
    def _begin_kernel_turn(self) -> None:
        """Tell the kernel a turn runs (``compact.run()`` is accepted until it ends)."""
        with contextlib.suppress(Exception):
            self.kernel.begin_turn()

    def _end_kernel_turn(self) -> None:
        """Tell the kernel the turn ended and collect a last ``compact.run()`` request."""
        with contextlib.suppress(Exception):
            self.kernel.end_turn()
            self._collect_request()

    def _collect_request(self) -> None:
        """Take the model's ``compact.run()`` request from the kernel; several in a turn merge."""
        try:
            got = self.kernel.take_compaction_request()
        except Exception:
            got = None
        if got is None:
            return
        self._requested = compact_requests.coalesce(self._requested, got.get("instructions"))
        self._emit("compaction_requested", "the model asked for compaction; it runs when this turn ends")

    # ------------------------------------------------------------------ snapshots and restarts
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
        restored, failed = self._restore()
        text = reset_notice(why, number=len(self._restart_times), max_restarts=self.max_restarts,
                            window_seconds=self.restart_window_seconds, snapshots=self.snapshot_dir is not None,
                            restored=restored, failed=failed)
        self._kernel_reset_message(text)
        self._emit("kernel_restart", text, restored=restored)
        return None

    def _restore(self) -> tuple[list[str], list[tuple[str, str]]]:
        """(names restored, (name, reason) that failed) from the snapshot, if one is configured."""
        restore = getattr(self.kernel, "restore", None)
        if restore is None or self.snapshot_dir is None:
            return [], []
        report = restore(self.snapshot_dir) or {}
        restored = [str(n) for n in report.get("restored", [])]
        failed = [(str(n), str(r)) for n, r in report.get("failed", [])]
        if report.get("error"):
            failed.append(("(snapshot)", str(report["error"])))
        return restored, failed

    def _kernel_failed(self, message: str) -> str:
        self._kernel_reset_message(message)
        self._emit("kernel_failed", message)
        return message

    def _kernel_reset_message(self, text: str) -> None:
        self._append(CUSTOM_MESSAGE, {"custom_type": "ipython_kernel_reset", "content": text, "display": True})
