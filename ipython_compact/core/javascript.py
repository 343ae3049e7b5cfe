"""Strings and JSON the way JavaScript measures and prints them (pi's estimates depend on both).

pi sizes text with ``string.length`` and tool-call arguments with ``JSON.stringify(arguments)``;
reproducing its numbers from Python needs JavaScript's rules, which differ from Python's in
four places that real session files reach:

- Length counts UTF-16 code units: an emoji is 2, a lone surrogate (which JavaScript writes when
  it splits an emoji) is 1.
- Numbers: JSON text is parsed to IEEE doubles and printed by ``Number.prototype.toString``:
  the shortest round-trip digits, in plain notation for 1e-7 <= |x| < 1e21 (``0.00001``, not
  Python's ``1e-05``; ``100`` for ``100.0``; ``1e+21``), ``0`` for -0, integers beyond 2**53
  rounded to a double (``12345678901234567000``), and ``null`` for what overflows a double.
- Object keys: integer-like keys ("0", "7", "42"; canonical, below 2**32 - 1) come first in
  ascending numeric order, then the others in insertion order.
- Strings: like ``json.dumps(ensure_ascii=False)``, except that a lone surrogate is escaped
  (``"\\ud800"``, six characters), as ``JSON.stringify`` has done since ES2019.

``js_json`` is iterative, so arguments nested as deep as the JSON parser accepts never raise
``RecursionError``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = ["js_json", "js_length", "js_number", "js_ordered_items", "js_string"]

_MAX_INDEX: Final = 2**32 - 2  # the largest array index; integer-like keys above it keep insertion order
_SAFE_INT: Final = 2**53
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def js_length(text: str) -> int:
    """``text.length`` as JavaScript counts it (UTF-16 code units; lone surrogates count 1)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def js_string(text: str) -> str:
    """``JSON.stringify(text)``."""
    out = json.dumps(text, ensure_ascii=False)
    if text.isascii():
        return out
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)


def _digits_and_point(value: float) -> tuple[str, int]:
    """Shortest round-trip digits ``d`` and ``n`` with ``value == 0.d × 10**n`` (value > 0)."""
    text = repr(value)
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    return stripped.rstrip("0") or "0", point


def js_number(value: float | int) -> str:
    """``JSON.stringify(value)`` for a number (``null`` for NaN, infinities and overflow)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if -_SAFE_INT <= value <= _SAFE_INT:
            return str(value)
        try:
            value = float(value)  # JSON.parse rounds to the nearest double, as float() does
        except OverflowError:
            return "null"
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits, n = _digits_and_point(abs(value))
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        body = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + body


def _is_index(key: str) -> bool:
    return key.isdigit() and key.isascii() and (key == "0" or key[0] != "0") and int(key) <= _MAX_INDEX


def js_ordered_items(obj: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    """``Object.entries(obj)`` order: integer-like keys ascending, then the rest as inserted."""
    items = list(obj.items())
    if not any(_is_index(str(k)) for k, _ in items):
        return items
    indexed = sorted((kv for kv in items if _is_index(str(kv[0]))), key=lambda kv: int(kv[0]))
    return [*indexed, *(kv for kv in items if not _is_index(str(kv[0])))]


class _Literal(str):
    """Already-printed JSON text on the work stack (distinct from string values)."""

    __slots__ = ()


def js_json(value: Any) -> str:
    """``JSON.stringify(value)`` for JSON-shaped data (compact, non-ASCII kept, JS number forms)."""
    out: list[str] = []
    work: list[Any] = [value]
    while work:
        item = work.pop()
        if isinstance(item, _Literal):
            out.append(item)
        elif item is None:
            out.append("null")
        elif isinstance(item, str):
            out.append(js_string(item))
        elif isinstance(item, (bool, int, float)):
            out.append(js_number(item))
        elif isinstance(item, Mapping):
            pending: list[Any] = [_Literal("}")]
            for i, (key, val) in enumerate(reversed(list(js_ordered_items(item)))):
                pending.append(val)
                pending.append(_Literal(("{" if i == len(item) - 1 else ",") + js_string(str(key)) + ":"))
            if len(pending) == 1:
                pending.append(_Literal("{"))
            work.extend(pending)
        elif isinstance(item, (list, tuple)):
            pending = [_Literal("]")]
            for i, val in enumerate(reversed(item)):
                pending.append(val)
                pending.append(_Literal("[" if i == len(item) - 1 else ","))
            if len(pending) == 1:
                pending.append(_Literal("["))
            work.extend(pending)
        else:
            out.append("null")  # not JSON-shaped; JSON.stringify has no better answer
    return "".join(out)
