"""Kernel-process registry for compactions the model asks for from its own code (``compact.run()``).

Why: the model's code runs inside the kernel, but the compaction must happen in the agent loop,
at the end of the current turn (compacting mid-cell would pull the transcript out from under the
running request). So ``compact.run()`` only *records* the request here and returns a receipt; the
loop collects it after each tool call (directly when in-process, through a silent
``user_expressions`` read when the kernel is another process) and runs it when the turn ends.

What must hold:
- Outside an agent turn a request is refused with a reason (nothing would pick it up).
- Instructions must be a string or None; anything else is refused, nothing recorded.
- Several requests in one turn coalesce; distinct instructions are joined in order.
- ``take()`` hands the pending request over exactly once.
Standard library only: this module is imported inside user kernels.
"""

from __future__ import annotations

import json
import threading
from typing import Any

RECEIPT = (
    "Compaction runs when the current turn ends; you resume automatically afterwards. Continue "
    "working "
    "normally."
)

_lock = threading.Lock()
_turn_active = False
_pending: dict[str, Any] | None = None


def begin_turn() -> None:
    """The agent loop marks a turn as running (requests are accepted until ``end_turn``)."""
    global _turn_active
    with _lock:
        _turn_active = True


def end_turn() -> None:
    """The turn is over; a request not yet taken stays pending for ``take``."""
    global _turn_active
    with _lock:
        _turn_active = False


def turn_active() -> bool:
    """True between ``begin_turn`` and ``end_turn`` (the kernel helper asks before scheduling)."""
    with _lock:
        return _turn_active


def coalesce(pending: dict[str, Any] | None, instructions: str | None) -> dict[str, Any]:
    """The pending request after one more ``compact.run(instructions)``: new instructions are
    appended on a new line unless already there. Also used by the notebook helper's per-cell queue."""
    if pending is None:
        return {"instructions": instructions}
    prev = pending.get("instructions")
    if instructions and instructions not in (prev or ""):
        return {"instructions": f"{prev}\n{instructions}" if prev else instructions}
    return pending


def request(instructions: str | None = None) -> dict[str, Any]:
    """Record a model-requested compaction; returns the receipt shown to the model."""
    global _pending
    if instructions is not None and not isinstance(instructions, str):
        return {
            "scheduled": False,
            "reason": f"instructions must be a string or None, got {type(instructions).__name__}",
        }
    with _lock:
        if not _turn_active:
            return {"scheduled": False, "reason": "no active agent turn; nothing would run the compaction"}
        _pending = coalesce(_pending, instructions)
    return {"scheduled": True, "note": RECEIPT}


def take() -> dict[str, Any] | None:
    """Hand over the pending request (once), or None."""
    global _pending
    with _lock:
        pending, _pending = _pending, None
    return pending


def take_json() -> str:
    """``take()`` as JSON text, for a host reading it through ``user_expressions``."""
    return json.dumps(take())


def reset() -> None:
    """Forget everything (tests, and a fresh kernel)."""
    global _pending, _turn_active
    with _lock:
        _pending = None
        _turn_active = False
