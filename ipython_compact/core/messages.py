"""Which message an entry puts in the model's context, in two shapes.

pi keeps two views of a message: the *agent message* (roles ``user``, ``assistant``,
``toolResult``, ``bashExecution``, ``custom``, ``branchSummary``, ``compactionSummary``) that the
session stores and the estimators price, and the *LLM message* (only ``user``, ``assistant``,
``toolResult``, plus our ``system``) that a provider receives. This module is the one place that
decides both, so the cut-point walk, the estimators, the context view and the serializer never
disagree about which entries count.

What must hold:
- ``entry_message`` returns None exactly for entries that contribute nothing to the context
  (model/thinking changes, labels, custom state, snapshots, pins, goals, outcomes).
- A ``compaction`` entry's agent message is its ``compactionSummary``; ``build_context`` places it
  first. Everywhere else (cut points, summarizer input) compaction entries are skipped.
- The wrapper texts are ours; the summary text itself is carried unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ipython_compact.core.entries import (
    BRANCH_SUMMARY,
    COMPACTION,
    CUSTOM_MESSAGE,
    JSON,
    KERNEL_STATE,
    MESSAGE,
    SYSTEM,
    Entry,
)

SUMMARY_PREFIX: Final = (
    "Earlier parts of this conversation were compacted into the checkpoint below. It is a lossy "
    "summary: the messages after it are verbatim and win wherever the two disagree.\n\n<summary>\n"
)
SUMMARY_SUFFIX: Final = "\n</summary>"
BRANCH_SUMMARY_PREFIX: Final = (
    "The conversation returned here from another branch. What happened on that branch, summarized:"
    "\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX: Final = "\n</summary>"

#: Entry kinds that put a message in the model's context (a compaction only as the view's head).
CONTEXT_KINDS: Final = frozenset({MESSAGE, CUSTOM_MESSAGE, BRANCH_SUMMARY, SYSTEM, KERNEL_STATE, COMPACTION})

#: Kinds that sit in the context as user-side text (they may start a turn and be a cut point).
USER_SIDE_KINDS: Final = frozenset({CUSTOM_MESSAGE, BRANCH_SUMMARY, SYSTEM, KERNEL_STATE})


_ALWAYS_IN_CONTEXT: Final = frozenset({CUSTOM_MESSAGE, SYSTEM, KERNEL_STATE, COMPACTION})


def in_context(entry: Entry) -> bool:
    """``entry_message(entry) is not None``, without building the message (hot loops use it)."""
    kind = entry.kind
    if kind == MESSAGE:
        return isinstance(entry.data.get("message"), dict)
    if kind in _ALWAYS_IN_CONTEXT:
        return True
    if kind == BRANCH_SUMMARY:
        summary = entry.data.get("summary")
        return isinstance(summary, str) and bool(summary)
    return False


def _content_value(data: Mapping[str, Any]) -> Any:
    content = data.get("content", "")
    return content if isinstance(content, (str, list)) else str(content)


def entry_message(entry: Entry) -> JSON | None:
    """The agent message ``entry`` contributes to the context, or None.

    ``system`` entries become ``{"role": "system"}`` messages and ``kernel_state`` entries become
    hidden ``custom`` messages of type ``ipython_state`` (Prime's notice shape).
    """
    kind = entry.kind
    data = entry.data
    if kind == MESSAGE:
        return entry.message
    if kind == CUSTOM_MESSAGE:
        return {
            "role": "custom",
            "customType": str(data.get("custom_type", "")),
            "content": _content_value(data),
            "display": bool(data.get("display", True)),
            "details": data.get("details"),
        }
    if kind == KERNEL_STATE:
        return {
            "role": "custom",
            "customType": "ipython_state",
            "content": _content_value(data),
            "display": False,
        }
    if kind == SYSTEM:
        return {"role": "system", "content": _content_value(data)}
    if kind == BRANCH_SUMMARY:
        summary = data.get("summary")
        if not isinstance(summary, str) or not summary:
            return None
        return {"role": "branchSummary", "summary": summary, "fromId": data.get("from_id")}
    if kind == COMPACTION:
        return {
            "role": "compactionSummary",
            "summary": str(data.get("summary", "")),
            "tokensBefore": data.get("tokens_before"),
        }
    return None


def _as_blocks(content: Any) -> list[JSON]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def bash_execution_text(message: Mapping[str, Any]) -> str:
    """How a user-run shell command reads to the model (facts as pi presents them)."""
    text = f"Ran `{message.get('command', '')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif isinstance(exit_code, int) and exit_code != 0:
        text += f"\n\nCommand exited with code {exit_code}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text


def to_llm(message: Mapping[str, Any], *, summary_prefix: str = SUMMARY_PREFIX) -> JSON | None:
    """The provider-facing form of an agent message, or None if it is excluded from context.

    ``custom``, ``bashExecution`` and the two summary roles become user messages; ``system``,
    ``user``, ``assistant`` and ``toolResult`` pass through unchanged.
    """
    role = message.get("role")
    if role in ("user", "assistant", "toolResult", "system"):
        return dict(message)
    if role == "bashExecution":
        if message.get("excludeFromContext"):
            return None
        return {"role": "user", "content": [{"type": "text", "text": bash_execution_text(message)}]}
    if role == "custom":
        return {"role": "user", "content": _as_blocks(message.get("content"))}
    if role == "compactionSummary":
        text = summary_prefix + str(message.get("summary", "")) + SUMMARY_SUFFIX
        return {"role": "user", "content": [{"type": "text", "text": text}]}
    if role == "branchSummary":
        text = BRANCH_SUMMARY_PREFIX + str(message.get("summary", "")) + BRANCH_SUMMARY_SUFFIX
        return {"role": "user", "content": [{"type": "text", "text": text}]}
    return None
