"""The session log's vocabulary: entries, messages and content blocks.

Every other layer speaks in these types. They are plain frozen data so the pure core can reason
about them without I/O, and so an entry read back from SQLite or JSONL compares equal to the one
that was written.

Messages keep pi's JSON shape (``role``, ``content`` blocks, ``toolCall`` blocks, ``usage``,
``stopReason``) because pi's session files are a first-class input and because that shape carries
everything an OpenAI-compatible request needs. Our own entry kinds use snake_case payload keys.

Invariants:
- ``Entry`` is immutable; the log only ever appends new ones.
- ``Entry.data`` is JSON-serialisable (str keys, JSON scalars, lists, dicts).
- A ``compaction`` entry's ``data["first_kept_entry_id"]`` names an entry on the same path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

JSON = dict[str, Any]

# Entry kinds. The first group comes from pi; the second is ours.
MESSAGE: Final = "message"
COMPACTION: Final = "compaction"
BRANCH_SUMMARY: Final = "branch_summary"
MODEL_CHANGE: Final = "model_change"
THINKING_LEVEL_CHANGE: Final = "thinking_level_change"
CUSTOM: Final = "custom"  # extension state; never in the model's context
CUSTOM_MESSAGE: Final = "custom_message"  # in context as a user message
LABEL: Final = "label"
SESSION_INFO: Final = "session_info"
SYSTEM: Final = "system"  # system baseline (re-emitted after each compaction)
KERNEL_STATE: Final = "kernel_state"  # <ipython_state> notice; in context, hidden from display
SNAPSHOT: Final = "snapshot"  # record of a kernel snapshot; not in context
PIN: Final = "pin"  # pin / unpin of text or an entry; not in context
GOAL: Final = "goal"  # goal / state kept outside the transcript; not in context
COMPACTION_OUTCOME: Final = "compaction_outcome"  # failed / skipped / cancelled compaction

# ``custom`` entries of this ``custom_type`` record the files a kernel cell opened (fed to the ledger)
KERNEL_FILE_OPS: Final = "ipython_file_ops"

PI_KINDS: Final = frozenset(
    {
        MESSAGE,
        COMPACTION,
        BRANCH_SUMMARY,
        MODEL_CHANGE,
        THINKING_LEVEL_CHANGE,
        CUSTOM,
        CUSTOM_MESSAGE,
        LABEL,
        SESSION_INFO,
    }
)
OUR_KINDS: Final = frozenset({SYSTEM, KERNEL_STATE, SNAPSHOT, PIN, GOAL, COMPACTION_OUTCOME})
KINDS: Final = PI_KINDS | OUR_KINDS

Role = Literal[
    "user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary", "compactionSummary"
]
ROLES: Final = frozenset(
    {"user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)

CompactionReason = Literal["manual", "threshold", "background", "overflow", "requested", "emergency"]
COMPACTION_REASONS: Final = frozenset(
    {"manual", "threshold", "background", "overflow", "requested", "emergency"}
)


@dataclass(frozen=True)
class Entry:
    """One node of the append-only session tree.

    ``data`` holds the kind-specific payload:
    - ``message``: ``{"message": {...pi-shaped message...}}``
    - ``compaction``: ``{"summary", "first_kept_entry_id", "tokens_before", "reason", "details"}``
    - ``branch_summary``: ``{"summary", "from_id", "details"}``
    - ``model_change``: ``{"provider", "model_id"}``; ``thinking_level_change``: ``{"thinking_level"}``
    - ``custom_message``: ``{"custom_type", "content", "display"}``; ``kernel_state``: ``{"content"}``
    - ``system``: ``{"content"}``; ``pin``: ``{"action": "pin"|"unpin", "text"?, "entry_id"?, "pin_id"}``
    - ``compaction_outcome``: ``{"reason", "outcome": "failed"|"skipped"|"cancelled", "error"}``
    """

    id: str
    parent_id: str | None
    kind: str
    timestamp: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> JSON:
        return {
            "id": self.id,
            "parent_id": self.parent_id,
            "kind": self.kind,
            "timestamp": self.timestamp,
            "data": dict(self.data),
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> Entry:
        return Entry(
            id=str(obj["id"]),
            parent_id=None if obj.get("parent_id") is None else str(obj["parent_id"]),
            kind=str(obj["kind"]),
            timestamp=str(obj["timestamp"]),
            data=dict(obj.get("data") or {}),
        )

    @property
    def message(self) -> JSON | None:
        """The pi-shaped message of a ``message`` entry, else None."""
        if self.kind != MESSAGE:
            return None
        msg = self.data.get("message")
        return msg if isinstance(msg, dict) else None

    @property
    def role(self) -> str | None:
        msg = self.message
        return None if msg is None else str(msg.get("role"))


def canonical_json(obj: Any) -> str:
    """Stable JSON text used for hashing and byte-exact round trips."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def text_of_content(content: Any, *, joiner: str = "\n") -> str:
    """Concatenate the text blocks of a pi content value (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return joiner.join(parts)


def tool_calls_of(message: Mapping[str, Any]) -> list[JSON]:
    """The ``toolCall`` blocks of an assistant message, in order."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def entry_text(entry: Entry) -> str:
    """All human-readable text an entry carries; feeds full-text search and recall."""
    msg = entry.message
    if msg is not None:
        role = msg.get("role")
        if role == "bashExecution":
            return f"{msg.get('command', '')}\n{msg.get('output', '')}"
        parts = []
        content = msg.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                elif block.get("type") == "thinking":
                    parts.append(str(block.get("thinking", "")))
                elif block.get("type") == "toolCall":
                    parts.append(f"{block.get('name', '')}({canonical_json(block.get('arguments', {}))})")
        if isinstance(msg.get("summary"), str):
            parts.append(msg["summary"])
        return "\n".join(p for p in parts if p)
    for key in ("summary", "content", "text", "error"):
        value = entry.data.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return text_of_content(value)
    return ""


def path_to(entries_by_id: Mapping[str, Entry], leaf_id: str | None) -> list[Entry]:
    """Entries from the root to ``leaf_id`` inclusive, oldest first.

    Raises ValueError naming the missing id when a parent link points nowhere (a broken tree is
    an error to report, never something to guess around).
    """
    path: list[Entry] = []
    seen: set[str] = set()
    current = leaf_id
    while current is not None:
        if current in seen:
            raise ValueError(f"cycle in session tree at entry {current!r}")
        seen.add(current)
        entry = entries_by_id.get(current)
        if entry is None:
            raise ValueError(f"entry {current!r} is referenced as a parent but does not exist")
        path.append(entry)
        current = entry.parent_id
    path.reverse()
    return path


def newest_compaction_index(path: Sequence[Entry]) -> int:
    """Index of the newest compaction entry in ``path``, or -1 (scans from the leaf back)."""
    for i in range(len(path) - 1, -1, -1):
        if path[i].kind == COMPACTION:
            return i
    return -1
