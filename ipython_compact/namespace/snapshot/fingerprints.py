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

import ctypes
import hashlib
import pickle
import sys
import types
import zlib
from typing import Any

SMALL = 1 << 20  # bodies up to this size share a pack file; arrays up to it are digested in full
_SAMPLES = 64
_SAMPLE_BLOCK = 4096
SAMPLED_KINDS = frozenset({"ndv", "pdv"})  # keys that cover samples, not every byte


def ndarray_type() -> Any:
    np = sys.modules.get("numpy")
    return None if np is None else np.ndarray


def _sampled_digest(view: memoryview) -> bytes:
    """64 spread 4 KiB blocks and the length: a quick "surely changed" test, never "unchanged".

    CRC-32 per block, not a cryptographic hash: this only decides whether a value must be
    written again or may be trusted until the next full verification (which re-hashes every
    byte with the signing key); it runs after every cell, where it must cost next to nothing.
    """
    n = len(view)
    step = max(1, (n - _SAMPLE_BLOCK) // (_SAMPLES - 1))
    crcs = [zlib.crc32(view[i * step : i * step + _SAMPLE_BLOCK]) for i in range(_SAMPLES)]
    return b"".join(c.to_bytes(4, "little") for c in crcs) + n.to_bytes(8, "little")


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


def pandas_types() -> tuple[type, ...]:
    """``(DataFrame, Series)`` when pandas is imported (never imported here), else ``()``."""
    pd = sys.modules.get("pandas")
    if pd is None:
        return ()
    return (pd.DataFrame, pd.Series)


def _byte_view(arr: Any) -> memoryview:
    """The bytes of a C-contiguous array (any dtype, datetime64 included) without a copy."""
    return memoryview(arr.reshape(-1).view("u1")) if arr.nbytes else memoryview(b"")


_IMMUTABLE_ITEMS = (str, int, float, bool, bytes, type(None))


def _object_array_key(arr: Any) -> tuple[Any, ...] | None:
    """An ``ndv`` (sampled) key for a contiguous array of Python objects (a pandas string column).

    Identity, address and shape, the digest of the array's pointers (which object sits in each
    slot), and a digest of 64 spread items' contents; None unless those items are immutable
    scalars. Sampled, never exact: a slot re-pointed twice may land on the address of the object
    it held before (the allocator reuses freed blocks), so a ``"full"`` save re-serializes and
    compares, as for large numeric arrays. Reads the pointer bytes with ctypes: no user code runs.
    """
    if (
        arr.dtype.kind != "O"
        or not arr.flags.c_contiguous
        or arr.dtype.itemsize != ctypes.sizeof(ctypes.c_void_p)
    ):
        return None
    n = int(arr.size)
    addr = int(arr.__array_interface__["data"][0])
    pointers = (ctypes.c_char * (n * arr.dtype.itemsize)).from_address(addr) if n else b""
    sample = hashlib.blake2b(digest_size=16)
    flat = arr.reshape(-1)
    for i in range(0, n, max(1, n // _SAMPLES)):
        item = flat[i]
        cls = type(item)
        if cls not in _IMMUTABLE_ITEMS:
            return None
        sample.update(
            cls.__name__.encode()
            + b"\0"
            + (
                item.encode("utf-8", "surrogatepass")
                if cls is str
                else item
                if cls is bytes
                else repr(item).encode()
            )
            + b"\0"
        )
    ident = (id(arr.base if arr.base is not None else arr), addr, arr.shape, "O")
    return ("ndv", *ident, hashlib.blake2b(memoryview(pointers), digest_size=16).digest() + sample.digest())


def _array_key(arr: Any) -> tuple[Any, ...] | None:
    """The ``nd``/``ndv`` key of a C- or Fortran-contiguous array (objects: ``_object_array_key``)."""
    if arr.dtype.hasobject:
        return _object_array_key(arr) if arr.dtype.kind == "O" else None
    if not arr.flags.c_contiguous:
        if not arr.flags.f_contiguous:
            return None
        arr = arr.T  # same bytes, C order
    ident = (
        id(arr.base if arr.base is not None else arr),
        arr.__array_interface__["data"][0],
        arr.shape,
        arr.dtype.str,
    )
    view = _byte_view(arr)
    if arr.nbytes > SMALL:
        return ("ndv", *ident, _sampled_digest(view))
    return ("nd", *ident, _content_digest(view))


def _labels_key(labels: Any) -> tuple[Any, ...] | None:
    """A key for a pandas index: its range, its array, or its pickled labels when few."""
    nd = ndarray_type()
    if type(labels).__name__ == "RangeIndex":
        return ("range", labels.start, labels.stop, labels.step, labels.name)
    values: Any = getattr(labels, "_values", None)
    if nd is not None and type(values) is nd and not values.dtype.hasobject:
        key = _array_key(values)
        return None if key is None else ("idx", key, labels.name)
    if len(labels) <= 4096:
        data = plain_pickle([*list(labels), labels.name])
        return None if data is None else plain_key(data)
    return None


def _pandas_key(value: Any) -> tuple[Any, ...] | None:
    """A key for a DataFrame or Series from its blocks' arrays (identity + samples, like arrays).

    None (serialize and compare bytes) when a block holds Python objects or an array type this
    cannot see into; reading pandas internals that changed shape also gives None, never an error.
    """
    try:
        nd = ndarray_type()
        blocks = []
        for block in value._mgr.blocks:
            arr = block.values
            arr = getattr(arr, "_ndarray", arr)  # datetime/timedelta arrays wrap an ndarray
            if nd is None or type(arr) is not nd:
                return None
            key = _array_key(arr)
            if key is None:
                return None
            blocks.append((key, str(block.dtype), block.mgr_locs.as_array.tobytes()))
        axes = [_labels_key(value.index)]
        axes.append(
            _labels_key(value.columns)
            if hasattr(value, "columns")
            else plain_key(plain_pickle([value.name]) or b"?")
        )
        if any(a is None for a in axes):
            return None
        kind = "pdv" if any(b[0][0] == "ndv" for b in blocks) else "pd"
        return (kind, type(value).__name__, id(value), tuple(blocks), tuple(axes))
    except Exception:
        return None


def fingerprint(value: Any) -> tuple[Any, ...] | None:
    """A key that is equal only when the value's content is equal, computed without dill.

    None means "no such key": the value is serialized and compared by its bytes. Every key covers
    the full content except the one for large arrays, ``("ndv", ...)``, and for pandas objects
    holding one, ``("pdv", ...)``: identity, address, shape,
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
        view = _byte_view(value)
        if value.nbytes > SMALL:
            return ("ndv", *ident, _sampled_digest(view))
        return ("nd", *ident, _content_digest(view))
    if cls in pandas_types():
        return _pandas_key(value)
    if cls is bytes:
        return ("b", len(value), _content_digest(value))
    if cls is int or cls is bool or value is None:  # the value is its own key: no pickling
        return ("v", cls.__name__, value)
    if cls is float:  # hex tells -0.0 from 0.0 (== does not)
        return ("v", "float", value.hex())
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
