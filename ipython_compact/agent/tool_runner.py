"""One tool call, start to finish: check it, run it through the kernel supervisor, log its result
as the context should see it, and collect what the cell left behind (``compact.run()``, ``FINAL``).

Why a component: a tool call has its own small state — the model's pending compaction request
and the final answer a cell recorded — and its own rules for what reaches the context. The turn
loop asks it to run a call and reads the outcome; the runner is tested with a fake supervisor.

What must hold:
- Every tool call gets exactly one logged tool result (bad arguments and unknown tools included,
  as errors the model can read).
- An output longer than ``max_output_chars`` reaches the context as head and tail with the cut
  stated and a pointer to the whole text, which the log keeps as a ``custom`` entry
  (``custom_type: "tool_output"``) that ``recall`` returns.
- A dead kernel is restarted through the supervisor and the model is told what came back; past
  the budget the call returns the stop message (also in the log).
- ``compact.run()`` requests merge until taken; a ``FINAL``/``FINAL_VAR`` answer is kept until taken.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from ipython_compact.agent import requests as compact_requests
from ipython_compact.agent.kernel_tool import ExecResult, cap_text
from ipython_compact.agent.openai_chat import PYTHON_TOOL_NAME
from ipython_compact.agent.session_log import SessionLog, now_iso
from ipython_compact.agent.supervisor import KernelReset, KernelSupervisor
from ipython_compact.core.entries import CUSTOM, CUSTOM_MESSAGE

TakeFinal = Callable[[Any], "dict[str, Any] | None"]


class ToolRunner:
    """Runs the model's tool calls (see the module docstring). ``take_final(kernel)`` reads a
    ``FINAL`` answer from the kernel (None when sub-calls are off); ``abort`` is set when the
    user interrupted a cell."""

    def __init__(
        self,
        log: SessionLog,
        supervisor: KernelSupervisor,
        *,
        max_output_chars: int,
        abort: threading.Event,
        take_final: TakeFinal | None = None,
    ) -> None:
        self.log = log
        self.supervisor = supervisor
        self.max_output_chars = max_output_chars
        self._abort = abort
        self._take_final = take_final
        self._lock = threading.Lock()
        self._requested: dict[str, Any] | None = None
        self._final: dict[str, Any] | None = None

    # ------------------------------------------------------------------ what a cell left behind
    @property
    def final(self) -> dict[str, Any] | None:
        with self._lock:
            return self._final

    def take_final(self) -> dict[str, Any] | None:
        with self._lock:
            final, self._final = self._final, None
        return final

    def take_requested(self) -> dict[str, Any] | None:
        with self._lock:
            requested, self._requested = self._requested, None
        return requested

    def collect_request(self) -> None:
        """Take the model's ``compact.run()`` request from the kernel; several in a turn merge."""
        got = self.supervisor.take_request()
        if got is None:
            return
        instructions = got.get("instructions")
        if instructions is not None and not isinstance(instructions, str):  # kernel code can forge the reply
            self.log.emit(
                "guard",
                f"a compaction request from the kernel was ignored: its instructions are "
                f"{type(instructions).__name__}, not text",
                guard="compaction_request",
            )
            return
        with self._lock:
            self._requested = compact_requests.coalesce(self._requested, instructions)
        self.log.emit("compaction_requested", "the model asked for compaction; it runs when this turn ends")

    # ------------------------------------------------------------------ one call
    def run(self, call: Mapping[str, Any]) -> str | None:
        """Run one tool call and log its result; a message when the turn must stop."""
        name = call.get("name")
        args = call.get("arguments")
        if name != PYTHON_TOOL_NAME:
            self.append_result(call, f"Unknown tool {name!r}; the only tool is {PYTHON_TOOL_NAME!r}.", True)
            return None
        code = args.get("code") if isinstance(args, dict) else None
        if not isinstance(code, str):
            raw = args.get("_raw") if isinstance(args, dict) else args
            self.append_result(
                call, f"Tool arguments must be a JSON object with a string 'code'; got {raw!r}.", True
            )
            return None
        return self.run_code(
            code, str(call.get("id")), lambda text, is_error: self.append_result(call, text, is_error)
        )

    def run_code(self, code: str, ref: str, record: Callable[[str, bool], None], **event: Any) -> str | None:
        """Run ``code`` as one tool call would; ``record(text, is_error)`` logs what the context is
        to see, exactly once, before any restart notice. ``ref`` names the call in a cut output's
        pointer; ``event`` goes with the ``tool_call`` event. A message when the turn must stop."""
        self.log.emit("tool_call", code, **event)
        if not self.supervisor.alive():
            reset = self._reset(self.supervisor.recover("the kernel was not running"))
            if reset.stopped:
                record(reset.text, True)
                return reset.text
        result: ExecResult = self.supervisor.execute(code)
        if result.status == "died":
            record(result.text or "The kernel died while running this code.", True)
            reset = self._reset(self.supervisor.recover("the kernel died while running the last call"))
            return reset.text if reset.stopped else None
        failed = self._collect_final()
        text = self.for_context({"id": ref}, result.text) or "(no output)"
        if failed is not None:
            text += f"\n[{failed}]"
        record(text, result.is_error or failed is not None)
        if result.status == "interrupted":
            self._abort.set()  # the user interrupted the cell: the whole turn stops, cleanly
        self.collect_request()
        return None

    def _collect_final(self) -> str | None:
        """Keep the ``FINAL`` answer the cell recorded; the one-line failure when it could not be
        collected (the model reads it in the cell's result, the user gets an ``error`` event)."""
        if self._take_final is None:
            return None
        try:
            final = self._take_final(self.supervisor.kernel)
        except Exception as exc:  # any failure of the hand-over is reported, never raised into the turn
            why = str(exc) if type(exc).__name__ == "FinalAnswerError" else f"{type(exc).__name__}: {exc}"
            text = (
                f"A final answer could not be collected: {why}. The run goes on; if this cell called "
                "FINAL or FINAL_VAR, call it again"
            )
            self.log.emit("error", "final answer could not be collected: " + why, guard="final_answer")
            return text
        if final is not None:
            with self._lock:
                self._final = final
        return None

    def for_context(self, call: Mapping[str, Any], text: str) -> str:
        """The output as the context shows it (see the module docstring)."""
        if len(text) <= self.max_output_chars:
            return text
        entry = self.log.append(
            CUSTOM, {"custom_type": "tool_output", "tool_call_id": str(call.get("id")), "text": text}
        )
        shown, _ = cap_text(text, self.max_output_chars)
        how = (
            (f"recall({entry.id!r}) in the kernel returns it")
            if self._take_final is not None
            else "see the session log"
        )
        return (
            f"{shown}\n[output cut for the context: {len(text):,} characters in all; the whole output is "
            f"entry {entry.id}; {how}]"
        )

    def append_result(self, call: Mapping[str, Any], text: str, is_error: bool) -> None:
        self.log.append_message(
            {
                "role": "toolResult",
                "toolCallId": str(call.get("id")),
                "toolName": str(call.get("name")),
                "content": [{"type": "text", "text": text}],
                "isError": is_error,
                "timestamp": now_iso(),
            }
        )
        self.log.emit("tool_result", text, is_error=is_error)

    def _reset(self, reset: KernelReset) -> KernelReset:
        """Log a restart (or the stop) for the model and report it."""
        self.log.append(
            CUSTOM_MESSAGE, {"custom_type": "ipython_kernel_reset", "content": reset.text, "display": True}
        )
        if reset.stopped:
            self.log.emit("kernel_failed", reset.text)
        else:
            self.log.emit("kernel_restart", reset.text, restored=list(reset.restored))
        return reset
