"""Files a span of conversation read and changed, as pi lists them under a summary.

pi appends ``<read-files>`` / ``<modified-files>`` blocks to every compaction and branch summary
and stores the lists in the entry's ``details`` so the next compaction can merge them. Both the
compaction plan (``preparation``) and branch summaries (``context``) collect them the same way.

Rules (pi 0.73.1's):
- Only assistant ``toolCall`` blocks named ``read``, ``write`` or ``edit`` with a non-empty string
  ``arguments.path`` count; ``modified = edited ∪ written``; ``read_only = read − modified``.
- A stored list is merged unless its entry came from a hook (``from_hook``).
- Lists are sorted the way JavaScript's ``Array.prototype.sort`` sorts strings: by UTF-16 code
  units (an astral character such as an emoji sorts before U+E000–U+FFFF, unlike code points).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["file_lists", "format_file_lists", "js_sorted", "merge_details_files", "track_file_ops"]


def js_sorted(items: Iterable[str]) -> tuple[str, ...]:
    """``items`` in JavaScript's default sort order (UTF-16 code units)."""
    return tuple(sorted(items, key=lambda s: s.encode("utf-16-be", "surrogatepass")))


def track_file_ops(message: Mapping[str, Any], read: set[str], written: set[str], edited: set[str]) -> None:
    """Add the file paths an assistant message's ``read``/``write``/``edit`` tool calls touch."""
    if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
        return
    for block in message["content"]:
        if not isinstance(block, Mapping) or block.get("type") != "toolCall":
            continue
        args = block.get("arguments")
        path = args.get("path") if isinstance(args, Mapping) else None
        if not isinstance(path, str) or not path:
            continue
        name = block.get("name")
        if name == "read":
            read.add(path)
        elif name == "write":
            written.add(path)
        elif name == "edit":
            edited.add(path)


def merge_details_files(data: Mapping[str, Any], read: set[str], edited: set[str]) -> None:
    """Merge a compaction's / branch summary's stored file lists (skipped for hook-made ones)."""
    if data.get("from_hook"):
        return
    details = data.get("details")
    if not isinstance(details, Mapping):
        return
    for key, target in (
        ("read_files", read),
        ("readFiles", read),
        ("modified_files", edited),
        ("modifiedFiles", edited),
    ):
        value = details.get(key)
        if isinstance(value, list):
            target.update(v for v in value if isinstance(v, str))


def file_lists(
    read: set[str], written: set[str], edited: set[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(read_only, modified)`` in JavaScript sort order; modified = edited ∪ written, read_only = read −
    modified."""
    modified = edited | written
    return js_sorted(read - modified), js_sorted(modified)


def format_file_lists(read_files: Sequence[str], modified_files: Sequence[str]) -> str:
    """The ``<read-files>`` / ``<modified-files>`` blocks appended to a summary ('' when both empty)."""
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""
