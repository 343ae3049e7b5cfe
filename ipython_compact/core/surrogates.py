"""Lone UTF-16 surrogates (half an emoji) made storable: the one rule for every way text comes in.

Why: JSON can spell half a character (``"\\ud83d"``), as JavaScript writes it when it cuts a
string inside an emoji, and so can a model server. Python reads it into a ``str`` that UTF-8
cannot encode: the store's hash, SQLite, PostgreSQL and a terminal all refuse it. The importer
kept such text as U+FFFD with a notice; a model's reply and a direct append crashed instead.

What must hold: a high surrogate followed by a low one (two code points, e.g. a stream cut
between the halves) becomes the one character they spell; every other surrogate becomes U+FFFD
(REPLACEMENT CHARACTER); the count says how many were replaced, so the caller can say so. Text
without surrogates comes back as the same object.
"""

from __future__ import annotations

import re
from typing import Any, Final

LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_PAIR_OR_LONE: Final = re.compile("([\ud800-\udbff][\udc00-\udfff])|[\ud800-\udfff]")
REPLACEMENT: Final = "\ufffd"


def repair_text(text: str) -> tuple[str, int]:
    """``text`` with surrogate pairs joined and lone surrogates replaced, and how many were replaced."""
    if LONE_SURROGATE.search(text) is None:
        return text, 0
    replaced = 0

    def fix(match: re.Match[str]) -> str:
        nonlocal replaced
        pair = match.group(1)
        if pair is not None:
            return pair.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        replaced += 1
        return REPLACEMENT

    return _PAIR_OR_LONE.sub(fix, text), replaced


def repair_value(value: Any) -> tuple[Any, int]:
    """A JSON-like value (str, list, dict, scalars) with ``repair_text`` applied to every string
    and key, and the total replaced. A value with no surrogate in it comes back as the same object;
    nesting is walked with an explicit stack (no recursion limit)."""
    if isinstance(value, str):
        return repair_text(value)
    if not isinstance(value, (list, dict)):
        return value, 0
    total = 0
    changed = False

    def text(item: Any) -> Any:
        nonlocal total, changed
        if not isinstance(item, str):
            return item
        fixed, n = repair_text(item)
        total += n
        changed = changed or fixed is not item
        return fixed

    root: list[Any] = [value]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]  # (container, the copy's parent, its slot)
    while stack:
        source, parent, slot = stack.pop()
        copy: Any = {} if isinstance(source, dict) else [None] * len(source)
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in pairs:
            key = text(key)
            copy[key] = text(item)
            if isinstance(item, (list, dict)):
                stack.append((item, copy, key))
        parent[slot] = copy
    return (root[0], total) if changed else (value, 0)


def notice(count: int, where: str) -> str:
    """The one wording for a repair: ``where`` says what held them (e.g. "the model's reply")."""
    noun = "surrogate" if count == 1 else "surrogates"
    return (
        f"{where} held {count:,} lone UTF-16 {noun} (half an emoji, as JavaScript writes it); "
        "kept as U+FFFD (the replacement character)"
    )


__all__ = ["LONE_SURROGATE", "REPLACEMENT", "notice", "repair_text", "repair_value"]
