"""The stored JSON text of entry data, written by orjson where it is byte for byte the stdlib's.

Why: an import serializes every entry's data once to store and hash it; with the stdlib's
encoder (sorted keys) that was 2.2 s of a 100,000-entry import, orjson takes a third of it.

What must hold: ``data_text(value)`` is exactly ``json.dumps(value, sort_keys=True,
separators=(",", ":"), ensure_ascii=False, allow_nan=False)`` for the values JSON reading makes
(dicts with string keys, lists, strings, ints, finite floats, booleans, None). Only such values
may be passed: orjson also writes types the stdlib refuses (datetimes, UUIDs, enums) and NaN as
``null``, so data from anywhere else goes through ``stdlib_data_text``. orjson agrees with the
stdlib on strings, key order, ints and most floats; it differs only where Python prints a float
with a negative exponent (``5e-06``; orjson: ``5e-6`` or ``0.00005``). Those floats are
rewritten by Python's ``repr`` where they stand outside strings (told by counting the quotes
before them that are not escaped). Values orjson refuses (integers past 64 bits, lone
surrogates) go to the stdlib.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ipython_compact.core.surrogates import notice, repair_text

LOG = logging.getLogger("ipython_compact")

_NUMBER_BYTES = frozenset(b"0123456789.-+e")
_BEFORE_NUMBER = frozenset(b":,[")
_AFTER_NUMBER = frozenset(b",]}")


def storable_text(text: str, what: str) -> str:
    """``text`` (an entry's data as JSON, non-ASCII kept) with lone UTF-16 surrogates as U+FFFD and
    split pairs joined (``core/surrogates.py``, the importer's rule), with a warning naming ``what``
    when any was replaced: UTF-8, the hash, SQLite and PostgreSQL all refuse half a character."""
    fixed, replaced = repair_text(text)
    if replaced:
        LOG.warning("ipython_compact: %s", notice(replaced, what))
    return fixed


def stdlib_data_text(data: Mapping[str, Any]) -> str:
    """The definition: sorted keys, no spaces, non-ASCII kept, NaN refused."""
    return json.dumps(dict(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _orjson_dumps() -> tuple[Callable[..., bytes], int] | None:
    try:
        import orjson  # optional: a dependency, absent only in odd installs (the stdlib then)
    except ImportError:  # pragma: no cover
        return None
    return orjson.dumps, orjson.OPT_SORT_KEYS


_ORJSON = _orjson_dumps()


def _float_candidates(text: bytes) -> list[int]:
    """Offsets of every ``<digit>e-<digit>`` and ``0.0000`` in ``text``: where orjson's float text
    may differ from Python's (a bare ``e-`` is common in prose and is skipped at once)."""
    found: list[int] = []
    at = text.find(b"e-")
    while at >= 0:
        if 48 <= text[at - 1] <= 57 and at + 2 < len(text) and 48 <= text[at + 2] <= 57:
            found.append(at)
        at = text.find(b"e-", at + 2)
    at = text.find(b"0.0000")
    while at >= 0:
        found.append(at)
        at = text.find(b"0.0000", at + 6)
    return found


def _python_floats(text: bytes) -> bytes:
    """``text`` (orjson's output) with each float outside strings that Python prints otherwise
    in Python's form."""
    spans: list[tuple[int, int]] = []
    for at in sorted(_float_candidates(text)):
        start = at
        while text[start - 1] in _NUMBER_BYTES:
            start -= 1
        end = at
        while end < len(text) and text[end] in _NUMBER_BYTES:
            end += 1
        if text[start - 1] not in _BEFORE_NUMBER or end == len(text) or text[end] not in _AFTER_NUMBER:
            continue  # not shaped like a number token, so inside a string
        if spans and spans[-1][0] == start:
            continue  # the same token found by both needles
        spans.append((start, end))
    if not spans:
        return text
    # Which tokens lie outside strings: count string delimiters up to each, once through the text.
    out: list[bytes] = []
    pos = quotes = 0
    for start, end in spans:
        quotes += _delimiters(text, pos, start)
        out.append(text[pos:start])
        out.append(text[start:end] if quotes % 2 else repr(float(text[start:end])).encode())
        pos = end
    out.append(text[pos:])
    return b"".join(out)


def _delimiters(text: bytes, start: int, end: int) -> int:
    """How many quotes in ``text[start:end]`` open or close a string: those after an even run of
    backslashes (an odd run escapes the quote). ``count(b"\\" * k + b'"')`` counts the quotes after
    at least ``k`` backslashes (each quote ends at most one match), so the escaped ones are
    ``c1 - c2 + c3 - ...``. ``start`` must not fall inside a run of backslashes."""
    total = text.count(b'"', start, end)
    sign, run = -1, b"\\"
    while True:
        found = text.count(run + b'"', start, end)
        if not found:
            return total
        total += sign * found
        sign, run = -sign, run + b"\\"


def sorted_json_bytes(value: Any) -> bytes | None:
    """``value`` printed by orjson with sorted keys (each JSON value one way, no two alike), or
    None where orjson is absent or refuses it (an integer past 64 bits): what outlines digest a
    call's arguments by (``core.triage_facts.args_digest``)."""
    if _ORJSON is None:
        return None
    dumps, sort_keys = _ORJSON
    try:
        return dumps(value, option=sort_keys)
    except TypeError:
        return None


def data_text(data: Mapping[str, Any]) -> str:
    """``stdlib_data_text(data)``, several times faster (see the module rules)."""
    return data_text_utf8(data)[0]


def data_text_utf8(data: Mapping[str, Any]) -> tuple[str, bytes | None]:
    """``data_text(data)`` and, when orjson wrote it, its UTF-8 bytes (hashing them saves encoding
    the text again); None when the stdlib wrote it."""
    if _ORJSON is None or type(data) is not dict:
        return stdlib_data_text(data), None
    dumps, sort_keys = _ORJSON
    try:
        raw = dumps(data, option=sort_keys)
    except TypeError:  # past 64 bits, a lone surrogate, a type JSON has no word for
        return stdlib_data_text(data), None
    fixed = _python_floats(raw)
    return fixed.decode("utf-8"), fixed


__all__ = ["data_text", "data_text_utf8", "sorted_json_bytes", "stdlib_data_text"]
