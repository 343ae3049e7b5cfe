"""The conversation as plain text for the summarizer.

Serializing (instead of replaying the messages as chat turns) keeps the summarizer from treating
the transcript as a conversation to continue. Our format:

- ``[User]: text`` (text blocks joined with no separator; images dropped) — never truncated.
- ``[Assistant thinking]: ...``, ``[Assistant]: ...`` — never truncated.
- ``[Assistant tool calls]: #1 read(path="a.py"); #2 bash(command="ls")`` — calls numbered in
  order across the whole conversation, arguments as compact JSON, never truncated.
- ``[Tool result (read)] #1: text`` / ``[Tool result (bash, error)] #2: text`` — the number is the
  call's, found by ``toolCallId``; a result longer than 2500 characters keeps its first 2000 and
  last 500 characters around ``[... N characters truncated ...]``.
- ``custom``/``bashExecution``/summary messages read as user text (the provider view of them);
  ``system`` messages as ``[System]: ...``.

``mode="pi"`` reproduces pi 0.73.1's ``serializeConversation(convertToLlm(messages))`` byte for byte
(unnumbered calls, ``[Tool result]:`` with the first 2000 characters and
``[... N more characters truncated]``), for comparisons with the reference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from ipython_compact.core.entries import JSON, text_of_content
from ipython_compact.core.javascript import js_json, js_length, js_ordered_items
from ipython_compact.core.messages import to_llm

TOOL_RESULT_HEAD_CHARS: Final = 2000
TOOL_RESULT_TAIL_CHARS: Final = 500

SerializationMode = Literal["ours", "pi"]

# pi's wrapper texts for summaries (used only in mode="pi").
_PI_SUMMARY_PREFIX: Final = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
_PI_BRANCH_PREFIX: Final = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)


def truncate_middle(text: str, head: int = TOOL_RESULT_HEAD_CHARS, tail: int = TOOL_RESULT_TAIL_CHARS) -> str:
    """``text`` with everything between the first ``head`` and last ``tail`` characters elided."""
    if len(text) <= head + tail:
        return text
    dropped = len(text) - head - tail
    return f"{text[:head]}\n\n[... {dropped} characters truncated ...]\n\n{text[len(text) - tail :]}"


def _pi_truncate(text: str, limit: int = TOOL_RESULT_HEAD_CHARS) -> str:
    # pi counts and slices JavaScript strings: UTF-16 code units, possibly splitting a surrogate pair.
    length = js_length(text)
    if length <= limit:
        return text
    head = (
        text[:limit]
        if text.isascii()
        else text.encode("utf-16-le", "surrogatepass")[: 2 * limit].decode("utf-16-le", "surrogatepass")
    )
    return f"{head}\n\n[... {length - limit} more characters truncated]"


def _arguments(args: Any) -> str:
    if not isinstance(args, Mapping):
        return "" if args is None else js_json(args)
    return ", ".join(f"{k}={js_json(v)}" for k, v in js_ordered_items(args))


def serialize_conversation(messages: Iterable[Mapping[str, Any]], *, mode: SerializationMode = "ours") -> str:
    """Agent or provider messages as labelled text blocks separated by blank lines."""
    if mode not in ("ours", "pi"):
        raise ValueError(f"unknown serialization mode {mode!r}; expected 'ours' or 'pi'")
    pi = mode == "pi"
    parts: list[str] = []
    numbers: dict[str, int] = {}
    counter = 0
    for raw in messages:
        if pi and raw.get("role") == "branchSummary":
            text = _PI_BRANCH_PREFIX + str(raw.get("summary", "")) + "</summary>"
            message: JSON | None = {"role": "user", "content": [{"type": "text", "text": text}]}
        else:
            message = to_llm(raw, summary_prefix=_PI_SUMMARY_PREFIX) if pi else to_llm(raw)
        if message is None:
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            text = text_of_content(content, joiner="")
            if text:
                parts.append(f"[User]: {text}")
        elif role == "system" and not pi:
            text = text_of_content(content, joiner="")
            if text:
                parts.append(f"[System]: {text}")
        elif role == "assistant":
            thinking: list[str] = []
            texts: list[str] = []
            calls: list[str] = []
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, Mapping):
                    continue
                kind = block.get("type")
                if kind == "text" and isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif kind == "thinking" and isinstance(block.get("thinking"), str):
                    thinking.append(block["thinking"])
                elif kind == "toolCall":
                    call = f"{block.get('name', '')}({_arguments(block.get('arguments'))})"
                    if not pi:
                        counter += 1
                        call_id = block.get("id")
                        if isinstance(call_id, str):
                            numbers[call_id] = counter
                        call = f"#{counter} {call}"
                    calls.append(call)
            if thinking:
                parts.append("[Assistant thinking]: " + "\n".join(thinking))
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif role == "toolResult":
            text = text_of_content(content, joiner="")
            if not text:
                continue
            if pi:
                parts.append(f"[Tool result]: {_pi_truncate(text)}")
                continue
            name = str(message.get("toolName") or "tool")
            label = f"{name}, error" if message.get("isError") else name
            number = numbers.get(str(message.get("toolCallId")))
            ref = f" #{number}" if number is not None else ""
            parts.append(f"[Tool result ({label})]{ref}: {truncate_middle(text)}")
    return "\n\n".join(parts)
