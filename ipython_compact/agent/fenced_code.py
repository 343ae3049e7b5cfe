"""Code blocks in a reply run as tool calls, for models that write code instead of calling tools.

Why: a model without tool calls (SmolLM2 on llama.cpp, many local models) answers "use Python to
compute ..." with a fenced ```` ```python ```` block and no tool call; before this the agent
returned the code as the answer and nothing ran. rlms' convention — code blocks in the reply,
their output fed back — works with any model, so the agent follows it when a reply has no tool
call (``Agent(fenced_code=False)`` turns it off).

What must hold:
- Each block runs through the same ``ToolRunner.run_code`` a tool call uses (timeouts, restarts,
  output caps, ``FINAL``, ``compact.run()``), in the order written.
- Its output reaches the model as a ``custom_message`` of type ``fenced_code`` (a user-side
  message: the reply had no tool call for a tool result to answer), with the code and the
  output in ``details``; the transcript gets the ``tool_call``/``tool_result`` events a tool
  call gives, marked ``fenced``.
- Blocks after an interrupt, or after one that ended the run with ``FINAL``, are not run, and the
  model is told so; a stop message (kernel restarts exhausted) ends the turn as a tool call's does.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ipython_compact.agent.session_log import SessionLog
from ipython_compact.agent.tool_runner import ToolRunner
from ipython_compact.core.entries import CUSTOM_MESSAGE, text_of_content
from ipython_compact.core.fenced_code import FencedBlock, fenced_code_blocks

__all__ = ["FENCED_CUSTOM_TYPE", "FencedCodeRunner", "fenced_code_blocks", "reply_blocks"]

FENCED_CUSTOM_TYPE = "fenced_code"
ANSWER_HINT = "When you have the answer, reply with it and no code block."


def reply_blocks(message: Mapping[str, Any]) -> list[FencedBlock]:
    """The runnable blocks of an assistant message (closed fences)."""
    # Closed blocks only for now: with open fences run, SmolLM2's long replies made the real-model
    # tier run past 15 minutes (issue 33 notes); ``fenced_code_blocks(open_end=True)`` is ready.
    return fenced_code_blocks(text_of_content(message.get("content")))


class FencedCodeRunner:
    """Runs the fenced blocks of one reply (see the module docstring)."""

    def __init__(self, log: SessionLog, runner: ToolRunner, abort: threading.Event) -> None:
        self.log = log
        self.runner = runner
        self._abort = abort

    def run(self, blocks: Sequence[FencedBlock], step: int) -> str | None:
        """Run ``blocks`` (found in the reply of the turn's ``step``); a message when the turn must stop."""
        count = len(blocks)
        for number, block in enumerate(blocks, 1):
            label = f"```{block.language} block" + (f" {number} of {count}" if count > 1 else "")
            last = number == count

            def record(
                text: str, is_error: bool, block: FencedBlock = block, label: str = label, last: bool = last
            ) -> None:
                self._record(block, label, text, is_error, last=last)

            if self._abort.is_set() or self.runner.final is not None:
                why = (
                    "the run already ended with FINAL"
                    if self.runner.final is not None
                    else "the turn was interrupted"
                )
                record(f"Not run: {why} before this block.", True)
                continue
            stop = self.runner.run_code(block.code, f"fenced-{step}-{number}", record, fenced=block.language)
            if stop is not None:
                return stop
        return None

    def _record(self, block: FencedBlock, label: str, text: str, is_error: bool, *, last: bool) -> None:
        content = f"Output of the {label} in your reply, run in the kernel:\n{text}"
        if last:
            content += f"\n\n{ANSWER_HINT}"
        self.log.append(
            CUSTOM_MESSAGE,
            {
                "custom_type": FENCED_CUSTOM_TYPE,
                "content": content,
                "display": True,
                "details": {
                    "code": block.code,
                    "language": block.language,
                    "output": text,
                    "is_error": is_error,
                },
            },
        )
        self.log.emit("tool_result", text, is_error=is_error, fenced=block.language)
