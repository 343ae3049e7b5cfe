"""How a stored entry is hashed and how its data is kept as text: the per-entry ``hash`` (sha256 of
the parent hash and the entry's canonical JSON), the session's ``chain`` over those hashes, the
stored data text and the content key duplicates are found by.

What must hold: ``integrity.verify`` recomputes exactly these; a hash over the stored text equals
the hash over the entry it reads back to.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from ipython_compact.core.entries import Entry, canonical_json


def entry_hash(parent_hash: str, entry: Entry) -> str:
    """The tree hash: binds an entry's content to its parent's hash."""
    payload = parent_hash + "\n" + canonical_json(entry.to_json())
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _orjson() -> tuple[Callable[[bytes], Any], Callable[[Any], bytes]] | tuple[None, None]:
    try:
        import orjson  # optional at run time: a missing wheel falls back to the stdlib
    except ImportError:  # pragma: no cover - a dependency, absent only in odd installs
        return None, None
    return orjson.loads, orjson.dumps


fast_json_loads, fast_json_dumps = _orjson()
"""orjson's ``loads`` (3-4x the stdlib's speed), or None. It reads an integer past 64 bits as a
float where the stdlib keeps it exact: callers send text with ``has_long_digit_run`` to the stdlib."""
_DIGITS_AS_NINE = bytes(0x39 if 0x30 <= i <= 0x39 else i for i in range(256))
_NINETEEN_NINES = b"9" * 19


def has_long_digit_run(raw: bytes) -> bool:
    """A run of 19+ ASCII digits that is not the fraction of a decimal (translate + ``find``: 4x
    faster than a regex). Fraction digits (after a ``.``) only make a float, which orjson reads
    to the same double as the stdlib; an integer part or an exponent that long it does not."""
    digits = raw.translate(_DIGITS_AS_NINE)
    at = digits.find(_NINETEEN_NINES)
    while at >= 0:  # ``find`` gives the leftmost match, so ``at`` starts a run
        if at == 0 or raw[at - 1] != 0x2E:  # not after "."
            return True
        end = at + len(_NINETEEN_NINES)
        while end < len(digits) and digits[end] == 0x39:
            end += 1
        at = digits.find(_NINETEEN_NINES, end)
    return False


def read_back(data_text: str) -> Any:
    """``json.loads(data_text)`` for a ``stored_data_text``, by orjson where it reads the same
    (several times faster on an import's long texts); a run of 19+ digits, or anything orjson
    refuses (a lone surrogate), takes the stdlib."""
    if fast_json_loads is not None:
        try:
            raw = data_text.encode("utf-8")
            if not has_long_digit_run(raw):
                return fast_json_loads(raw)
        except ValueError:  # UnicodeEncodeError included
            pass
    return json.loads(data_text)


def _json_string(text: str) -> str:
    """``json.dumps(text, ensure_ascii=False)``; ids, kinds and timestamps are plain ASCII, which
    needs no escaping and no encoder call."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return json.dumps(text, ensure_ascii=False)


def stored_entry_hash(parent_hash: str, entry: Entry, data_text: str, data_utf8: bytes | None = None) -> str:
    """``entry_hash(parent_hash, entry)`` from the entry's ``stored_data_text``, which must be the
    canonical JSON of ``entry.data`` (as it is for a stored entry: its data is that text read back).

    Why: an import serialized every entry's data twice, once to store it and once to hash it.
    The five keys of ``Entry.to_json`` in sorted order, so the text is ``canonical_json``'s.
    ``data_utf8``, the text's UTF-8 bytes when the caller has them, is hashed as it is."""
    parent = "null" if entry.parent_id is None else _json_string(entry.parent_id)
    head = f'{parent_hash}\n{{"data":'
    tail = (
        f',"id":{_json_string(entry.id)},"kind":{_json_string(entry.kind)},"parent_id":{parent},'
        f'"timestamp":{_json_string(entry.timestamp)}}}'
    )
    if data_utf8 is None:
        return hashlib.sha256((head + data_text + tail).encode("utf-8")).hexdigest()
    digest = hashlib.sha256(head.encode("utf-8"))
    digest.update(data_utf8)
    digest.update(tail.encode("utf-8"))
    return digest.hexdigest()


def chain_hash(previous_chain: str, hash_: str) -> str:
    """The append-order hash: binds an entry to everything appended to its session before it."""
    return hashlib.sha256((previous_chain + "\n" + hash_).encode("utf-8")).hexdigest()


def stored_data_text(data: Mapping[str, Any]) -> str:
    """The exact text an entry's data is stored as (sorted keys, no spaces, no NaN)."""
    return json.dumps(dict(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_key(kind: str, timestamp: str, data_text: str) -> bytes:
    """What makes two entries the same content whatever their ids and parents: kind, time, data."""
    return hashlib.blake2b(f"{kind}\n{timestamp}\n{data_text}".encode(), digest_size=16).digest()
