"""Compact builders of session paths for the core's table-driven tests.

A spec is a tuple: ``("u", n)`` user message of ``n`` chars4 tokens, ``("a", n)`` assistant text,
``("ac", n, tool, path)`` assistant with one tool call, ``("t", n)`` tool result, ``("b", n)``
bashExecution, ``("cm", n)`` custom_message, ``("ks", n)`` kernel_state notice, ``("sys", n)``
system baseline, ``("bs", n)`` branch summary, ``("mc",)`` model change, ``("tl",)`` thinking
level change, ``("c", first_kept_index, summary)`` compaction. Ids are ``e0, e1, ...`` on one chain.
"""

from __future__ import annotations

from typing import Any

from ipython_compact.core.entries import Entry


def _text(n: int, ch: str) -> str:
    return ch * (4 * n)


def make_entry(i: int, parent: str | None, spec: tuple[Any, ...]) -> Entry:
    tag = spec[0]
    n = spec[1] if len(spec) > 1 and isinstance(spec[1], int) else 0
    kind = "message"
    data: dict[str, Any]
    if tag == "u":
        data = {"message": {"role": "user", "content": [{"type": "text", "text": _text(n, "u")}]}}
    elif tag == "a":
        data = {
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": _text(n, "a")}],
                "stopReason": "stop",
            }
        }
    elif tag == "ac":
        tool, file_path = spec[2], spec[3]
        call = {"type": "toolCall", "id": f"call{i}", "name": tool, "arguments": {"path": file_path}}
        data = {
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": _text(n, "a")}, call],
                "stopReason": "toolUse",
            }
        }
    elif tag == "t":
        data = {
            "message": {
                "role": "toolResult",
                "toolCallId": f"call{i - 1}",
                "toolName": "read",
                "content": [{"type": "text", "text": _text(n, "t")}],
                "isError": False,
            }
        }
    elif tag == "b":
        data = {"message": {"role": "bashExecution", "command": "", "output": _text(n, "b"), "exitCode": 0}}
    elif tag == "cm":
        kind, data = "custom_message", {"custom_type": "note", "content": _text(n, "m"), "display": True}
    elif tag == "ks":
        kind, data = "kernel_state", {"content": _text(n, "k")}
    elif tag == "sys":
        kind, data = "system", {"content": _text(n, "s")}
    elif tag == "bs":
        kind, data = "branch_summary", {"summary": _text(n, "r"), "from_id": "e0"}
    elif tag == "mc":
        kind, data = "model_change", {"provider": "p", "model_id": "m"}
    elif tag == "tl":
        kind, data = "thinking_level_change", {"thinking_level": "high"}
    elif tag == "c":
        kind = "compaction"
        data = {"summary": spec[2], "first_kept_entry_id": f"e{spec[1]}", "tokens_before": 0}
        if len(spec) > 3:
            data["details"] = spec[3]
    else:
        raise ValueError(f"unknown spec {spec!r}")
    return Entry(f"e{i}", parent, kind, f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z", data)


def path_of(*specs: tuple[Any, ...]) -> list[Entry]:
    out: list[Entry] = []
    for i, spec in enumerate(specs):
        out.append(make_entry(i, out[-1].id if out else None, spec))
    return out
