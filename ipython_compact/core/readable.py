"""Values and log entries as a person reads them, for every surface that prints them.

Why here: the ``%compact`` magics (kernel side), the ``ipython-compact`` command and the comm's
plain-text fallbacks all show the same numbers and entry descriptions. Kept in the core (pure,
stdlib only) so none of those surfaces imports another to share them.

What must hold: one number format everywhere — integers with thousands separators (``1,234``),
byte sizes in binary units (``1.5 MiB``); ``None`` is ``-``; lists and mappings read as text
(``a, b`` / ``key value; key value``), never as raw JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ipython_compact.core.entries import KERNEL_FILE_OPS


def cell_text(value: Any) -> str:
    """A value as a person reads it: ``1,234`` not ``1234``, ``-`` not ``null``, lists and mappings
    as ``a, b`` / ``key value; key value`` instead of raw JSON. Strings are returned unchanged."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "; ".join(f"{k} {cell_text(v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(cell_text(v) for v in value) or "none"
    return str(value)


def fmt_bytes(n: Any) -> str:
    """``512 B``, ``1.5 KiB``, ``3.0 MiB``; ``""`` for anything that is not an int."""
    if not isinstance(n, int) or isinstance(n, bool):
        return ""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)  # pragma: no cover


def entry_gist(entry: Mapping[str, Any]) -> str:
    """A one-line description of an entry that carries no text (``Entry.to_json()`` shape), so a log
    row says what happened instead of staying blank."""
    kind, data = str(entry.get("kind", "")), entry.get("data") or {}
    if not isinstance(data, Mapping):
        return ""
    if kind == "model_change":
        return f"{data.get('provider', '?')}/{data.get('model_id', '?')}"
    if kind == "thinking_level_change":
        return f"thinking level {data.get('thinking_level', '?')}"
    if kind == "snapshot":
        return (
            f"snapshot generation {cell_text(data.get('generation'))}: {cell_text(data.get('saved'))} "
            f"names, "
            f"{fmt_bytes(data.get('bytes')) or '?'}"
        )
    if kind == "pin":
        target = f"entry {data['entry_id']}" if data.get("entry_id") else repr(data.get("text", ""))
        return (
            f"unpin {data.get('pin_id', '?')}"
            if data.get("action") == "unpin"
            else f"{data.get('pin_id', '?')}: {target}"
        )
    if (
        kind == "custom"
        and data.get("custom_type") == KERNEL_FILE_OPS
        and isinstance(data.get("data"), Mapping)
    ):
        ops = data["data"]
        who = {"agent": " by the agent", "user": " by your cell"}.get(str(ops.get("by")), "")
        return f"files read{who}: {cell_text(ops.get('read'))}; modified: {cell_text(ops.get('modified'))}"
    if kind == "custom":
        return str(data.get("custom_type", ""))
    return ""


def one_line(text: str, limit: int) -> str:
    """``text`` with its whitespace runs collapsed to single spaces, cut to ``limit`` characters
    (the last one an ellipsis when anything was cut)."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"
