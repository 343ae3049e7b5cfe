"""One save's per-name decision: skip, reuse the previous payload, verify, pack, or write a blob.

Why a function per name: the rules differ by value kind (builtin containers, large arrays trusted
on samples, values with no fingerprint) and each must be readable and testable on its own; the
store only collects the decisions into a manifest.

What must hold:
- One value per payload: a value that cannot be serialized is skipped with its reason and never
  sinks the rest of the save.
- A value is reused only when its fingerprint matches the previous save's and the payload file
  still exists (``BlobFiles.present``, refreshed under the writer lock).
- A sampled-kind value (``SAMPLED_KINDS``) that looks unchanged is re-hashed in full under
  ``verify="full"`` and compared with the blob it wrote last time; under ``"sampled"`` it is
  trusted and listed as such.
- The size caps hold: per name and in total.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ipython_compact.namespace.snapshot.blobs import BlobFiles
from ipython_compact.namespace.snapshot.codec import (
    FILE_TYPES,
    CapExceeded,
    Deadline,
    SerializeTimeout,
    serialize,
)
from ipython_compact.namespace.snapshot.fingerprints import (
    CONTAINERS,
    PLAIN,
    SAMPLED_KINDS,
    SMALL,
    carries_code,
    fingerprint,
    plain_key,
    plain_pickle,
)
from ipython_compact.namespace.snapshot.reports import Skipped
from ipython_compact.namespace.snapshot.signing import sign_chunks


@dataclass
class Cached:
    """What the previous save wrote for a name, to reuse when its fingerprint still matches."""

    fingerprint: tuple[Any, ...]
    ref: dict[str, Any]  # {"blob": id} or {"pack": id, "offset", "length", "mac"}
    size: int
    fmt: str
    code: bool


@dataclass
class Decision:
    """The outcome for one name; ``entry`` is its manifest entry (ref filled later when packed)."""

    name: str
    entry: dict[str, Any] | None = None
    skipped: Skipped | None = None
    cache: Cached | None = None
    unchanged: bool = False
    trusted: bool = False  # reused on its samples alone (verify="sampled")
    written: int = 0
    verified: int = 0
    small: tuple[bytes, str, tuple[Any, ...] | None] | None = None  # (body, mac, fingerprint) to pack


_SCALARS = frozenset({int, float, bool, type(None)})
QUICK_TYPES: frozenset[type] = frozenset({int, float, bool, type(None), str})  # immutable, keyed by value
_FLAT_ITEMS = frozenset({int, float, bool, type(None), str, bytes, complex})


def _quick_key(value: Any) -> tuple[Any, ...]:
    """``fingerprint(value)`` for a builtin scalar or str (``QUICK_TYPES``), without its general dispatch.

    Why: an unchanged namespace of 100,000 small names spent most of its save in the general
    path (array and pandas checks, code checks), far above pickling them once. Must stay equal to
    ``fingerprints.fingerprint`` for these types (tests/test_snapshot.py checks it)."""
    cls = type(value)
    if cls is str:
        return ("s", len(value), hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest())
    if cls is float:
        return ("v", "float", value.hex())
    return ("v", cls.__name__, value)


def _flat(value: Any) -> bool:
    """A small builtin container of scalars: pickling it runs no user code, so needs no timer
    (arming one costs two system calls per name)."""
    if len(value) > 64:
        return False
    items = value.values() if type(value) is dict else value
    return all(type(v) in _FLAT_ITEMS for v in items) and (
        type(value) is not dict or all(type(k) in _FLAT_ITEMS for k in value)
    )


def flat_container(value: Any) -> bool:
    """A builtin container (``CONTAINERS``) of at most 64 scalars: pickled without user code."""
    return type(value) in CONTAINERS and _flat(value)


def _skip(name: str, reason: str) -> Decision:
    return Decision(name, skipped=Skipped(name, reason))


class SaveRun:
    """The state one save threads through its names: budgets, the previous cache, the timer."""

    def __init__(
        self,
        *,
        key: bytes,
        blobs: BlobFiles,
        cache: dict[str, Cached],
        known_small: dict[str, dict[str, Any]],
        full: bool,
        verify: str,
        max_name_bytes: int,
        max_total_bytes: int,
        name_timeout: float | None,
        deadline: Deadline,
    ) -> None:
        self._key = key
        self.blobs = blobs
        self.cache = cache
        self.known_small = known_small
        self.full = full
        self.verify = verify
        self.max_name_bytes = max_name_bytes
        self.max_total_bytes = max_total_bytes
        self.name_timeout = name_timeout
        self.deadline = deadline
        self.total = 0

    def _timeout(self, name: str) -> Decision:
        return _skip(name, f"took longer than {self.name_timeout:g} s to serialize")

    def _fingerprint(self, value: Any) -> tuple[tuple[Any, ...] | None, bytes | None]:
        """``(fingerprint, C-pickler bytes of a builtin value)``; raises SerializeTimeout."""
        plain: bytes | None = None
        try:
            cls = type(value)
            if cls not in PLAIN or cls is int or cls is float or cls is bool or value is None:
                return fingerprint(value), None  # scalars: their value is the key, pickled only when changed
            if type(value) in CONTAINERS and not _flat(value):  # an item's __reduce__ (user code) may hang
                with self.deadline.limit():
                    plain = plain_pickle(value)
            else:  # a builtin scalar: no user code, so no timer to arm
                plain = plain_pickle(value)
            return (None if plain is None else plain_key(plain)), plain
        except SerializeTimeout:
            raise
        except Exception:
            return None, plain

    def decide(self, name: Any, value: Any) -> Decision:
        """What to do with one ``(name, value)``; writes a blob only for a large changed value."""
        if type(name) is not str:
            return _skip(repr(name), "not a string name")
        cls = type(value)
        if not self.full and (cls in QUICK_TYPES or (cls in CONTAINERS and _flat(value))):
            # the common unchanged scalar or small container of scalars, without the general path
            hit = self.cache.get(name)
            if hit is not None:
                if cls in QUICK_TYPES:
                    key: tuple[Any, ...] | None = _quick_key(value)
                else:
                    plain = plain_pickle(value)
                    key = None if plain is None else plain_key(plain)
                if hit.fingerprint == key and self.blobs.exists(hit.ref):
                    return self._reuse(name, hit, {"code": False, "type": cls.__qualname__}, trusted=False)
        if issubclass(cls, FILE_TYPES):
            return _skip(name, "open file handles are not persisted")
        try:
            fp, plain = self._fingerprint(value)
        except SerializeTimeout:
            return self._timeout(name)
        code = carries_code(value)
        meta: dict[str, Any] = {"code": code, "type": type(value).__qualname__}
        hit = self.cache.get(name)
        cached = (
            hit
            if (
                not self.full
                and fp is not None
                and hit is not None
                and hit.fingerprint == fp
                and self.blobs.exists(hit.ref)
            )
            else None
        )
        if cached is not None and fp is not None and (fp[0] not in SAMPLED_KINDS or self.verify == "sampled"):
            return self._reuse(name, cached, meta, trusted=fp[0] in SAMPLED_KINDS)
        cap = min(self.max_name_bytes, self.max_total_bytes - self.total)
        if plain is None and type(value) in _SCALARS:  # keyed by value, pickled only now: the C pickler
            plain = plain_pickle(value)
        try:
            with self.deadline.limit():
                fmt, chunks = serialize(value, cap, plain)
        except SerializeTimeout:
            return self._timeout(name)
        except CapExceeded:
            return _skip(
                name,
                "exceeds the per-name snapshot size cap"
                if cap == self.max_name_bytes
                else "exceeds the total snapshot size cap",
            )
        except RecursionError:
            return _skip(name, "RecursionError: too deeply nested to serialize")
        except Exception as exc:
            return _skip(name, f"{type(exc).__name__}: {str(exc)[:200]}")
        if fmt == "dill" and type(value) in PLAIN:  # a container dill had to take holds code
            code = meta["code"] = True
        size = sum(len(c) for c in chunks)
        self.total += size
        entry = {"bytes": size, "format": fmt, **meta}
        if cached is not None and "blob" in cached.ref:
            # A large value seen before: check every byte against the blob written last time
            # (hashing only, no write); an in-place edit anywhere changes the signature.
            # (A blob of the older scheme never matches: it is written again, once, in the new one.)
            if sign_chunks(self._key, chunks, scheme=self.blobs.scheme).hex() == cached.ref["blob"]:
                return Decision(
                    name, {**entry, "ref": cached.ref}, cache=cached, unchanged=True, verified=size
                )
            verified = size
        else:
            verified = 0
        if size <= SMALL:  # small values share one pack file per generation
            body = b"".join(bytes(c) for c in chunks)
            digest = self.blobs.small_digest(body)
            ref = self.known_small.get(digest)
            if ref is not None and self.blobs.exists(ref):
                return Decision(
                    name,
                    {**entry, "ref": ref},
                    unchanged=True,
                    verified=verified,
                    cache=None if fp is None else Cached(fp, ref, size, fmt, code),
                )
            return Decision(name, entry, verified=verified, small=(body, digest, fp))
        blob = self.blobs.store_blob(chunks)
        ref = {"blob": blob}
        return Decision(
            name,
            {**entry, "ref": ref},
            written=size,
            verified=verified,
            cache=None if fp is None else Cached(fp, ref, size, fmt, code),
        )

    def _reuse(self, name: str, cached: Cached, meta: dict[str, Any], *, trusted: bool) -> Decision:
        if self.total + cached.size > self.max_total_bytes:
            return _skip(name, "exceeds the total snapshot size cap")
        self.total += cached.size
        entry = {"ref": cached.ref, "bytes": cached.size, "format": cached.fmt, **meta}
        return Decision(name, entry, cache=cached, unchanged=True, trusted=trusted)
