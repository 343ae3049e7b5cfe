"""Conversion between our pi-shaped messages and the OpenAI chat-completions wire format.

Why a separate module: the session log keeps pi's message shape (content blocks, ``toolCall``
blocks, ``usage``, ``stopReason``) so pi files import losslessly; any OpenAI-compatible endpoint
wants ``messages``/``tool_calls``/``tool`` roles instead. Both directions live here, with no I/O,
so the loop never hand-builds either shape.

What must hold:
- Every assistant ``toolCall`` sent to the server is followed by a ``tool`` message with its id
  (the API rejects a dangling call); a call whose result is missing (turn interrupted) gets a
  short synthetic result saying so.
- Assistant messages that ended in an error or were aborted are not sent (they are kept in the log).
- Context-only roles (``custom``, ``compactionSummary``, ``branchSummary``, ``bashExecution``)
  reach the model as user messages; ``system`` messages are sent as system messages.
- A reply converts to an assistant message carrying ``usage`` in pi's fields (``input``,
  ``output``, ``cacheRead``, ``cacheWrite``, ``totalTokens``) when the server reported usage, and
  ``stopReason``. Streamed chunks fold into the same shape (``StreamAccumulator``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ipython_compact.core.entries import JSON, text_of_content, tool_calls_of

_STOP_REASONS: dict[str, str] = {
    "stop": "stop",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "length": "length",
}


def _text(content: Any) -> str:
    return text_of_content(content)


def to_openai_messages(messages: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """pi-shaped context messages → OpenAI ``messages`` (see module docstring for the rules)."""
    out: list[JSON] = []
    pending: list[str] = []  # tool-call ids still waiting for their result

    def close_pending() -> None:
        for call_id in pending:
            out.append(
                {"role": "tool", "tool_call_id": call_id, "content": "(no result: the turn was interrupted)"}
            )
        pending.clear()

    for msg in messages:
        role = msg.get("role")
        if role == "toolResult":
            call_id = str(msg.get("toolCallId", ""))
            if call_id not in pending:
                continue  # its call was not sent (e.g. dropped with an errored message)
            pending.remove(call_id)
            text = _text(msg.get("content"))
            out.append({"role": "tool", "tool_call_id": call_id, "content": text or "(no output)"})
            continue
        close_pending()
        if role == "assistant":
            if msg.get("stopReason") in ("error", "aborted"):
                continue
            item: JSON = {"role": "assistant", "content": _text(msg.get("content")) or None}
            calls = tool_calls_of(msg)
            if calls:
                item["tool_calls"] = [
                    {
                        "id": str(c.get("id")),
                        "type": "function",
                        "function": {
                            "name": str(c.get("name")),
                            "arguments": json.dumps(c.get("arguments", {})),
                        },
                    }
                    for c in calls
                ]
                pending.extend(str(c.get("id")) for c in calls)
            elif item["content"] is None:
                item["content"] = ""
            out.append(item)
        elif role == "system":
            out.append({"role": "system", "content": _text(msg.get("content"))})
        elif role == "user" or role == "custom":
            out.append({"role": "user", "content": _text(msg.get("content"))})
        elif role in ("compactionSummary", "branchSummary"):
            out.append({"role": "user", "content": str(msg.get("summary", "")) or _text(msg.get("content"))})
        elif role == "bashExecution":
            out.append(
                {"role": "user", "content": f"Ran `{msg.get('command', '')}`\n{msg.get('output', '')}"}
            )
        else:
            raise ValueError(f"cannot send a message with role {role!r} to an OpenAI chat endpoint")
    close_pending()
    return out


def usage_from_openai(usage: Any) -> JSON:
    """OpenAI ``usage`` (object or dict) → pi usage fields; missing numbers are 0."""

    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)

    if usage is None:
        return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
    prompt = int(get(usage, "prompt_tokens") or 0)
    completion = int(get(usage, "completion_tokens") or 0)
    details = get(usage, "prompt_tokens_details")
    cached = int((get(details, "cached_tokens") if details is not None else 0) or 0)
    total = int(get(usage, "total_tokens") or (prompt + completion))
    return {
        "input": prompt - cached,
        "output": completion,
        "cacheRead": cached,
        "cacheWrite": 0,
        "totalTokens": total,
    }


def from_openai_completion(completion: Any, *, provider: str, model: str, timestamp: str) -> JSON:
    """A chat-completion response (the ``openai`` object or its dict) → a pi assistant message.

    Tool-call arguments that are not a JSON object are kept as ``{"_raw": text}`` so the loop can
    answer the model with a clear tool error instead of crashing.
    """
    as_dict: Mapping[str, Any] = completion.model_dump() if hasattr(completion, "model_dump") else completion
    choices = as_dict.get("choices") or []
    if not choices:
        raise ValueError("chat completion has no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    blocks: list[JSON] = []
    text = message.get("content")
    if isinstance(text, str) and text:
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        raw = fn.get("arguments") or "{}"
        try:
            args = json.loads(raw)
        except ValueError:
            args = {"_raw": raw}
        if not isinstance(args, dict):
            args = {"_raw": raw}
        blocks.append(
            {"type": "toolCall", "id": str(call.get("id")), "name": str(fn.get("name")), "arguments": args}
        )
    finish = choice.get("finish_reason") or "stop"
    stop = _STOP_REASONS.get(str(finish), "error")
    if stop == "stop" and any(b["type"] == "toolCall" for b in blocks):
        stop = "toolUse"
    out: JSON = {"role": "assistant", "content": blocks, "provider": provider, "model": model}
    if as_dict.get("usage"):
        # No usage at all (some servers, some streams) is left out rather than logged as zeros:
        # a zero usage would anchor the context estimate at nothing.
        out["usage"] = usage_from_openai(as_dict.get("usage"))
    out["stopReason"] = stop
    out["timestamp"] = timestamp
    if stop == "error":
        out["errorMessage"] = f"unexpected finish_reason {finish!r}"
    return out


class StreamAccumulator:
    """Folds streamed ``chat.completion.chunk`` objects (or dicts) into one completion dict that
    :func:`from_openai_completion` reads, so streamed and plain answers are logged identically.

    What must hold: text deltas concatenate in order; tool-call fragments join by their ``index``
    (id and name from the first fragment, arguments appended); the last ``finish_reason`` and any
    ``usage`` chunk win. A stream cut short yields what arrived, with ``finish_reason`` None.
    """

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, JSON] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None

    def add(self, chunk: Any) -> str:
        """Take one chunk; returns its text delta ('' when none)."""
        data: Mapping[str, Any] = chunk.model_dump() if hasattr(chunk, "model_dump") else chunk
        if data.get("usage"):
            self.usage = data["usage"]
        delta_text = ""
        for choice in data.get("choices") or []:
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                self.text.append(piece)
                delta_text += piece
            for frag in delta.get("tool_calls") or []:
                index = int(frag.get("index") or 0)
                call = self.calls.setdefault(index, {"id": None, "function": {"name": "", "arguments": ""}})
                if frag.get("id"):
                    call["id"] = frag["id"]
                fn = frag.get("function") or {}
                if fn.get("name"):
                    call["function"]["name"] = fn["name"]
                if fn.get("arguments"):
                    call["function"]["arguments"] += fn["arguments"]
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return delta_text

    def completion(self) -> JSON:
        """The folded answer, shaped like a non-streamed chat completion."""
        message: JSON = {"content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return {"choices": [{"message": message, "finish_reason": self.finish_reason}], "usage": self.usage}


def error_message(
    *, provider: str, model: str, timestamp: str, text: str, code: str | None, status: int | None
) -> JSON:
    """A failed request as a pi assistant message (``stopReason: "error"``), kept in the log."""
    msg: JSON = {
        "role": "assistant",
        "content": [],
        "provider": provider,
        "model": model,
        "usage": usage_from_openai(None),
        "stopReason": "error",
        "errorMessage": text,
        "timestamp": timestamp,
    }
    if code:
        msg["errorCode"] = code
    if status is not None:
        msg["errorStatus"] = status
    return msg


PYTHON_TOOL_NAME = "python"

PYTHON_TOOL: JSON = {
    "type": "function",
    "function": {
        "name": PYTHON_TOOL_NAME,
        "description": (
            "Run Python code in a persistent IPython kernel. Variables, imports and helpers stay defined "
            "between calls. Returns printed output, the value of the last expression, and errors. "
            "A `compact` object is available: compact.status(), compact.run(instructions=None)."
        ),
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python source to execute"}},
            "required": ["code"],
        },
    },
}
