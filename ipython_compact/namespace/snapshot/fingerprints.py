"""Fingerprints: cheap keys that say "this value is unchanged since the last save".

What must hold: equal keys mean equal content, except for the sampled kinds (``SAMPLED_KINDS``:
large numpy arrays and pandas objects built on them), whose key is the object's identity plus a
digest of spread samples. Unequal means surely changed (written at once); an equal sampled key
means only "same object, maybe unchanged" — a ``"full"`` save then re-hashes every byte against
the signature of the blob written last time, a ``"sampled"`` save trusts it (see the package doc
for the bound on what that can miss). No user code runs here except a builtin container's items'
``__reduce__`` (the C pickler), which the caller bounds with a timer.
"""

from __future__ import annotations

import hashlib
import pickle
import sys
import types
from typing import Any

SMALL = 1 << 20  # bodies up to this size share a pack file; arrays up to it are digested in full
_SAMPLES = 64
_SAMPLE_BLOCK = 4096
SAMPLED_KINDS = frozenset({"ndv"})  # keys that cover samples, not every byte

def ndarray_type() -> Any:
    np = sys.modules.get("numpy")
    return None if np is None else np.ndarray


def _sampled_digest(view: memoryview) -> bytes:
    """64 spread 4 KiB blocks and the length: a quick "surely changed" test, never "unchanged"."""
    h = hashlib.blake2b(digest_size=16)
    n = len(view)
    step = max(1, (n - _SAMPLE_BLOCK) // (_SAMPLES - 1))
    for i in range(_SAMPLES):
        h.update(view[i * step : i * step + _SAMPLE_BLOCK])
    h.update(n.to_bytes(8, "little"))
    return h.digest()


def _content_digest(view: memoryview | bytes) -> bytes:
    """A digest of every byte (SHA-256: with CPU SHA extensions the fastest stdlib hash, ~2 GB/s)."""
    return hashlib.sha256(view).digest()


CONTAINERS: frozenset[type] = frozenset({list, dict, tuple, set, frozenset})
PLAIN: frozenset[type] = CONTAINERS | {int, float, complex, bool, type(None)}


def plain_pickle(value: Any) -> bytes | None:
    """The C pickler's bytes for a builtin value (``PLAIN``), or None when dill must take it.

    These bytes are both the value's fingerprint source and its payload: ``_save`` pickles once.
    None also when the bytes name ``__main__``: the C pickler stores a function, class or instance
    defined in the session by reference, which a restarted kernel cannot resolve; dill carries it
    by value. (A string that merely contains ``__main__`` takes the dill path too; still exact.)
    """
    try:
        data = pickle.dumps(value, protocol=5)
    except Exception:
        return None
    return None if b"__main__" in data else data


def plain_key(data: bytes) -> tuple[Any, ...]:
    # builtin containers and scalars: the C pickler's bytes are a cheap, exact content key
    # (a few microseconds for small values, far below dill's pure-Python pickler)
    return ("p", hashlib.blake2b(data, digest_size=16).digest())


def fingerprint(value: Any) -> tuple[Any, ...] | None:
    """A key that is equal only when the value's content is equal, computed without dill.

    None means "no such key": the value is serialized and compared by its bytes. Every key covers
    the full content except the one for large arrays, ``("ndv", ...)``: identity, address, shape,
    dtype and a digest of spread samples. Unequal means surely changed (written at once, no
    verification pass); equal means only "same array object, maybe unchanged" — a ``"full"``
    save then verifies every byte against the signature of the blob it wrote last time, a
    ``"sampled"`` save trusts it (see the module docstring for the bound on what that can miss).
    """
    cls = type(value)
    nd = ndarray_type()
    if nd is not None and cls is nd:
        if value.dtype.hasobject or not value.flags.c_contiguous:
            return None
        ident = (id(value), value.__array_interface__["data"][0], value.shape, value.dtype.str)
        view = memoryview(value).cast("B") if value.nbytes else memoryview(b"")
        if value.nbytes > SMALL:
            return ("ndv", *ident, _sampled_digest(view))
        return ("nd", *ident, _content_digest(view))
    if cls is bytes:
        return ("b", len(value), _content_digest(value))
    if cls in PLAIN:
        data = plain_pickle(value)
        return None if data is None else plain_key(data)
    if cls is str:  # hashed in full at any size: an id can be reused by a different string
        return ("s", len(value), _content_digest(value.encode("utf-8", "surrogatepass")))
    return None


def carries_code(value: Any) -> bool:
    """True when the value is pickled by value with bytecode (functions, classes, __main__ instances)."""
    cls = type(value)
    if issubclass(cls, (types.FunctionType, types.MethodType)):
        return True
    if issubclass(cls, type):
        return bool(type.__dict__["__module__"].__get__(value) == "__main__")
    return bool(type.__dict__["__module__"].__get__(cls) == "__main__")
