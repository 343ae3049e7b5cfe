"""Whether two lists hold the very same objects, position by position, without touching the objects.

Why: proving 100,000 names unchanged means 100,000 identity tests. ``all(map(operator.is_, a, b))``
costs ~30 ns an item (a call and two references per item), a third of pickling the values once.
A CPython list keeps its items as one array of pointers: two lists hold the same objects at the
same positions exactly when those arrays hold the same bytes. ``item_addresses`` copies that array
(one ``memcpy``); comparing two copies is one ``memcmp``.

What must hold: an address names one object only while that object lives, so whoever compares a
copy taken earlier with one taken now must hold the earlier list (and so its objects) in between.
The array is read only on a CPython whose list layout this module recognises, checked once on a
probe list (its length, and its items' addresses against ``id``); anywhere else, and on the
free-threaded build, ``item_addresses`` returns None and callers compare with ``operator.is_``.
The list passed must not change while it is read: callers pass lists of their own.
"""

from __future__ import annotations

import operator
import sys
import sysconfig
from typing import Any

_reader: Any = None  # (read pointer, read ssize, string_at, offset of ob_item), once probed
_probed = False
_MAX_READ = (1 << 31) - 1


def _probe() -> Any:
    """The layout readers if this interpreter's lists look as expected, else None."""
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    import ctypes  # start-up: only this probe, once, on first use
    import struct  # start-up: only this probe, once, on first use

    word = ctypes.sizeof(ctypes.c_void_p)
    if word != ctypes.sizeof(ctypes.c_ssize_t) or list.__basicsize__ != 5 * word:
        return None  # not PyObject_VAR_HEAD (refcount, type, size) + ob_item + allocated
    pointer = ctypes.c_void_p.from_address
    ssize = ctypes.c_ssize_t.from_address
    probe = [object(), object(), object()]
    base = id(probe)
    if ssize(base + 2 * word).value != len(probe) or ssize(base + 4 * word).value < len(probe):
        return None  # the size and allocated fields are not where expected: do not dereference
    items = pointer(base + 3 * word).value
    if not items:
        return None
    if ctypes.string_at(items, len(probe) * word) != struct.pack(f"{len(probe)}P", *map(id, probe)):
        return None
    return pointer, ctypes.string_at, 3 * word, word


def _readers() -> Any:
    global _reader, _probed
    if not _probed:
        try:
            _reader = _probe()
        except Exception:
            _reader = None
        _probed = True
    return _reader


def item_addresses(items: list[Any]) -> bytes | None:
    """The addresses of ``items``'s objects, in order, as bytes; None where lists cannot be read so."""
    readers = _readers()
    if readers is None or type(items) is not list:
        return None
    pointer, string_at, offset, word = readers
    if not items:
        return b""
    if len(items) * word > _MAX_READ:
        return None  # ``ctypes.string_at`` takes its length as a C int

    addresses: bytes = string_at(pointer(id(items) + offset).value, len(items) * word)
    return addresses


def same_objects(now: list[Any], before: list[Any], before_addresses: bytes | None) -> bool:
    """``now[i] is before[i]`` for every ``i`` (and equal lengths); ``before_addresses`` is
    ``item_addresses(before)`` taken while ``before`` was held unchanged, or None."""
    if len(now) != len(before):
        return False
    if before_addresses is not None:
        addresses = item_addresses(now)
        if addresses is not None:
            return addresses == before_addresses
    return all(map(operator.is_, now, before))
