"""Deterministic clocks, ids and message payloads for tests that build sessions on a real store.

The store takes its clock and id source as arguments so tests can be exact; these are the
sources most tests want: a clock that never steps back and ids in append order.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any


def counting_clock() -> Callable[[], str]:
    """ISO-8601 UTC times one second apart, starting at 2026-01-01T00:00:00Z (wraps hourly)."""
    counter = itertools.count()

    def now() -> str:
        n = next(counter)
        return f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}.000Z"

    return now


def counting_ids(prefix: str = "e") -> Callable[[], str]:
    """``e00001``, ``e00002``, ... in the order entries are appended."""
    counter = itertools.count(1)
    return lambda: f"{prefix}{next(counter):05d}"


def user(text: str) -> dict[str, Any]:
    return {"message": {"role": "user", "content": text}}


def assistant(text: str, tool: bool = False) -> dict[str, Any]:
    """An assistant message; with ``tool`` it also calls ``python`` (answered by :func:`tool_result`)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if tool:
        content.append({"type": "toolCall", "id": "call-1", "name": "python", "arguments": {"code": "1"}})
    return {"message": {"role": "assistant", "content": content}}


def tool_result(text: str) -> dict[str, Any]:
    return {"message": {"role": "toolResult", "toolCallId": "call-1", "toolName": "python",
                        "content": [{"type": "text", "text": text}]}}
