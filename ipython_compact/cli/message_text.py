"""Messages as terminal text: every text, thinking and tool-call argument in full.

Used by ``ipython-compact context`` to show exactly what the model would read. Nothing is
shortened; only binary content (images) is described instead of printed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

RULE_WIDTH = 78


def _rule(title: str) -> str:
    head = f"── {title} "
    return head + "─" * max(3, RULE_WIDTH - len(head))


def block_text(block: Any) -> str:
    """One content block in full (an unknown block type is shown as its JSON)."""
    if isinstance(block, str):
        return block
    if not isinstance(block, Mapping):
        return json.dumps(block, ensure_ascii=False)
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "thinking":
        return f"[thinking]\n{block.get('thinking', '')}"
    if kind == "toolCall":
        arguments = json.dumps(block.get("arguments", {}), ensure_ascii=False, indent=2, sort_keys=True)
        return f"[tool call {block.get('name', '?')} id={block.get('id', '?')}]\n{arguments}"
    if kind == "image":
        data = block.get("data")
        size = f", {len(data)} base64 characters" if isinstance(data, str) else ""
        return f"[image {block.get('mimeType', '?')}{size}]"
    return json.dumps(dict(block), ensure_ascii=False, sort_keys=True)


def content_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n\n".join(block_text(b) for b in content)
    return block_text(content)


def message_title(index: int, message: Mapping[str, Any]) -> str:
    role = str(message.get("role", "?"))
    facts: list[str] = []
    if role == "toolResult":
        facts.append(f"{message.get('toolName', '?')} id={message.get('toolCallId', '?')}")
        if message.get("isError"):
            facts.append("error")
    if role == "assistant":
        if message.get("model"):
            facts.append(str(message["model"]))
        stop = message.get("stopReason")
        if stop and stop not in ("stop", "toolUse"):
            facts.append(f"stop={stop}")
        usage = message.get("usage")
        if isinstance(usage, Mapping) and usage.get("totalTokens"):
            facts.append(f"usage {usage['totalTokens']} tokens")
    return f"{index} · {role}" + (f" ({', '.join(facts)})" if facts else "")


def message_text(index: int, message: Mapping[str, Any]) -> str:
    """A titled rule followed by the message's whole content."""
    body = content_text(message.get("content", ""))
    return f"{_rule(message_title(index, message))}\n{body}"
