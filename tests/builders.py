"""The one place tests build messages, entries and store payloads; plus deterministic clocks and ids.

Three levels, each built on the one before, so a message looks the same whichever test made it:

- pi-shaped **messages** and content blocks (``user_message``, ``assistant_message``,
  ``tool_calls_message``, ``tool_result_message``, ``bash_message``, ``tool_call``, ``text_block``);
- **entries** of the pure core (``entry(entry_id, message)`` and the ``*_entry`` shorthands);
- **store payloads** for ``store.append(session, "message", ...)`` (``user``, ``assistant``,
  ``tool_result``), where a user's content is a plain string as pi writes it.

The store takes its clock and id source as arguments so tests can be exact; ``counting_clock`` and
``counting_ids`` are the sources most tests want: a clock that never steps back and ids in append order.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ipython_compact.core.entries import Entry

TIMESTAMP = "2026-01-01T00:00:00.000Z"


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


# ---------------------------------------------------------------- messages and blocks


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def user_message(text: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [text_block(text), *blocks]}


def assistant_message(
    text: str = "",
    *,
    blocks: list[Any] | None = None,
    usage: dict[str, int] | None = None,
    stop: str = "stop",
) -> dict[str, Any]:
    """A final assistant message (``stop``), or one whose content is exactly ``blocks``."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": blocks if blocks is not None else [text_block(text)],
        "stopReason": stop,
    }
    if usage is not None:
        message["usage"] = usage
    return message


def tool_calls_message(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant turn that only calls tools: ``(call_id, tool name, arguments)`` each."""
    return assistant_message(
        blocks=[tool_call(cid, name, **args) for cid, name, args in calls], stop="toolUse"
    )


def tool_result_message(
    call_id: str,
    text: str,
    *,
    name: str | None = "python",
    error: bool = False,
    blocks: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    """A tool's answer; ``name=None`` leaves ``toolName`` out, as some transcripts do."""
    message: dict[str, Any] = {"role": "toolResult", "toolCallId": call_id}
    if name is not None:
        message["toolName"] = name
    message["content"] = [text_block(text), *blocks]
    message["isError"] = error
    return message


def bash_message(command: str, output: str, exit_code: int = 0) -> dict[str, Any]:
    return {"role": "bashExecution", "command": command, "output": output, "exitCode": exit_code}


# ---------------------------------------------------------------- entries of the pure core


def entry(
    entry_id: str, message: dict[str, Any], *, kind: str = "message", timestamp: str = TIMESTAMP
) -> Entry:
    return Entry(entry_id, None, kind, timestamp, {"message": message})


def message_entry(entry_id: str, role: str, text: str = "", **fields: Any) -> Entry:
    """Any role's message with one text block (none when ``text`` is empty) and extra message fields."""
    return entry(entry_id, {"role": role, "content": [text_block(text)] if text else [], **fields})


def user_entry(entry_id: str, text: str) -> Entry:
    return entry(entry_id, user_message(text))


def answer_entry(entry_id: str, text: str) -> Entry:
    return entry(entry_id, assistant_message(text))


def calls_entry(entry_id: str, *calls: tuple[str, str, dict[str, Any]]) -> Entry:
    return entry(entry_id, tool_calls_message(*calls))


def result_entry(
    entry_id: str, call_id: str, text: str, *, name: str | None = "python", error: bool = False
) -> Entry:
    return entry(entry_id, tool_result_message(call_id, text, name=name, error=error))


# ---------------------------------------------------------------- store payloads


def user(text: str) -> dict[str, Any]:
    return {"message": {"role": "user", "content": text}}


def assistant(
    text: str,
    tool: bool = False,
    *,
    call_id: str = "call-1",
    name: str = "python",
    arguments: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An assistant message; with ``tool`` it also calls a tool (answered by :func:`tool_result`)."""
    content: list[dict[str, Any]] = [text_block(text)]
    if tool:
        content.append(tool_call(call_id, name, **(arguments if arguments is not None else {"code": "1"})))
    return {"message": {"role": "assistant", "content": content}}


def tool_result(text: str, *, call_id: str = "call-1", name: str = "python") -> dict[str, Any]:
    return {
        "message": {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": [text_block(text)],
        }
    }


def write_pi_chain(path: Path, n: int, pad: int = 0) -> Path:
    """A pi v3 session file of ``n`` user messages in one chain (ids ``00000000``, ``00000001``,
    ... in hex), each ``pad`` characters longer than its few words: long imports made to order."""
    header = {"type": "session", "version": 3, "id": "s", "timestamp": TIMESTAMP}
    lines = [json.dumps(header)]
    parent = None
    for i in range(n):
        entry_id = f"{i:08x}"
        message = {"role": "user", "content": f"message {i} " + "x" * pad, "timestamp": 1}
        entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": TIMESTAMP}
        lines.append(json.dumps({**entry, "message": message}))
        parent = entry_id
    path.write_text("\n".join(lines) + "\n")
    return path
