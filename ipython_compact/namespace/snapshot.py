"""Signed, incremental, per-name snapshots of the kernel namespace (the only module importing dill).

Why: the kernel outlives compactions but not crashes or restarts. A snapshot lets a restarted
kernel get its data back, and lets the ``<ipython_state>`` notice say truthfully which names would
not survive a restart.

Layout under one directory (``paths.snapshots_dir() / <session>``, mode 0700):
- ``blobs/<id>.blob`` — one serialized value: ``MAGIC + body + HMAC``; ``id`` is the hex HMAC of
  the body, so identical values share a blob across generations.
- ``manifest-<generation>.json`` — the signed list of names → blob ids, skip reasons and the
  Python version that wrote them. A few generations are kept; unreferenced blobs are deleted.

What must hold:
- One value per blob: an unpicklable value is skipped with its reason and never sinks the rest.
- Nothing is unpickled before both the manifest signature and the blob's HMAC verify: a tampered
  or truncated file is refused, not loaded. The key is per-user (``paths.key_path()``, 0600).
- Writes are atomic (temp file, rename; every new payload fsynced once after all are written,
  then the manifest written, fsynced and renamed last), files are 0600.
- Incremental: a value whose fingerprint matches the previous snapshot is not serialized again.
  Fingerprints cover the full content — a digest of every byte for ``bytes``, ``str`` and arrays
  up to 1 MiB, the C pickler's bytes for builtin containers — except for numpy arrays over 1 MiB,
  whose fingerprint is the array's identity plus 64 sampled 4 KiB blocks. A large array whose
  samples differ is written at once. One that is the same object with the same samples is handled
  by the save's ``verify`` mode:
  - ``"full"`` (explicit snapshots: ``%compact snapshot``, the comm ``snapshot`` op, the snapshot
    before a compaction notice): the array is re-hashed in full and compared with the signature of
    the blob written for it last time (hashing only, no write), so an in-place edit of one element
    anywhere is seen. Costs a hash pass over the array (~2 GB/s per core).
  - ``"sampled"`` (automatic snapshots after cells, the debounced hot path): the sample match is
    trusted and the array is not read further — nearly free. An in-place edit that touches none
    of the sampled blocks is then MISSED: the generation keeps the array's previous content.
  Bound on a missed edit: the kernel verifies fully at every explicit snapshot and at least at
  every ``full_verify_every``-th automatic one (``automatic_verification``), so an edit missed by
  a sampled generation is caught by the next full verification — at most ``full_verify_every``
  automatic snapshots after the edit (10 by default), sooner if anything snapshots explicitly.
  Until then, a restore brings back the array as it was before the edit. Each manifest and report
  records ``verification`` ("sampled" only when at least one array was trusted on its samples,
  listed in ``sampled``) and ``last_full_verification`` (generation and timestamp).
  Values with no fingerprint are serialized each time, and a new payload is kept only when its
  bytes changed (same signature, same file).
- Signing costs about as much CPU as writing, so it overlaps with the write: the body is split
  into two lanes of alternating 4 MiB pieces (see ``_LaneMac``); each lane hashes a slice and
  then ``pwrite``s it while it is still in the cache, straight from the array's own buffer
  (pickle protocol 5, out-of-band, no copy), one lane on a helper thread.
- Functions, classes and instances of ``__main__`` classes travel by value; restored under another
  Python major.minor they are quarantined (not unpickled); data still returns.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import json
import os
import pickle
import queue
import secrets
import signal
import struct
import sys
import threading
import time
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dill

MAGIC = b"IPCBLOB1"
MANIFEST_VERSION = 1
_DIGEST = "sha256"
_MAC_LEN = 32
_FMT_DILL = b"d"
_FMT_OOB = b"n"
_FMT_PICKLE = b"p"
_SMALL = 1 << 20  # bodies up to this size share a pack file; arrays up to it are digested in full
_SAMPLES = 64
_SAMPLE_BLOCK = 4096
_PIECE = 4 << 20  # read unit; also the lane width of the file signature (part of the file format)
_SUB = 1 << 19  # a lane hashes then writes this much at a time, while it is still in the CPU cache
_THREADED_ABOVE = 16 << 20  # bodies larger than this run their two lanes on two threads
VERIFY_MODES = ("sampled", "full")  # how a large array that looks unchanged is proven so (see the module doc)

_FILE_TYPES: tuple[type, ...] = (io.FileIO, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.TextIOWrapper)


class SnapshotError(Exception):
    """A snapshot could not be written or read; the message says which file and why."""


def python_tag() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def load_or_create_key(path: Path) -> bytes:
    """The per-user signing key: 32 random bytes in an owner-only file, created on first use."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        st = path.stat()
        if st.st_mode & 0o077:
            raise SnapshotError(
                f"signing key {path} is readable by other users (mode {oct(st.st_mode & 0o777)}); "
                f"run: chmod 600 {path}"
            ) from None
        key = path.read_bytes()
        if len(key) != 32:
            raise SnapshotError(
                f"signing key {path} has {len(key)} bytes, expected 32; delete it to make a new one"
            ) from None
        return key
    key = secrets.token_bytes(32)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


@dataclass(frozen=True)
class Skipped:
    name: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "reason": self.reason}


@dataclass
class SnapshotReport:
    """What one ``save`` did. ``saved`` includes ``unchanged`` (names whose blob was reused)."""

    generation: int
    saved: list[str]
    unchanged: list[str]
    skipped: list[Skipped]
    bytes: int
    written_bytes: int
    path: str
    elapsed_ms: float
    verified_bytes: int = 0  # bytes of large arrays re-hashed in full to prove them unchanged (or not)
    verification: str = "full"  # "sampled" when an array in ``sampled`` was trusted on its samples alone
    sampled: list[str] = field(default_factory=list)  # large arrays taken as unchanged on samples, unread
    last_full_verification: dict[str, Any] | None = None  # {"generation", "timestamp"} of the newest full one

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "saved": list(self.saved),
            "unchanged": list(self.unchanged),
            "skipped": [s.to_json() for s in self.skipped],
            "bytes": self.bytes,
            "written_bytes": self.written_bytes,
            "path": self.path,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "verified_bytes": self.verified_bytes,
            "verification": self.verification,
            "sampled": list(self.sampled),
            "last_full_verification": None if self.last_full_verification is None else dict(self.last_full_verification),
        }


@dataclass
class RestoreReport:
    """What a restore brought back; ``refused`` lists manifests rejected before any unpickling."""

    generation: int | None
    restored: list[str] = field(default_factory=list)
    failed: list[Skipped] = field(default_factory=list)
    quarantined: list[Skipped] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "restored": list(self.restored),
            "failed": [f.to_json() for f in self.failed],
            "quarantined": [q.to_json() for q in self.quarantined],
            "refused": list(self.refused),
        }


class _CapExceeded(Exception):
    pass


class _SerializeTimeout(BaseException):  # BaseException: user __reduce__ code must not swallow it
    pass


class _Deadline:
    """Interrupt Python-level serialization code (a hostile ``__reduce__``) after ``seconds``.

    Uses SIGALRM, so only on the main thread of a POSIX process; elsewhere it does nothing.
    A C-level loop that never returns to the interpreter cannot be interrupted this way. The
    handler is installed once per save (``with``) and each name arms its own timer (``limit``):
    installing a handler costs far more than arming a timer, and a save may hold 10,000 names.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.active = bool(seconds) and threading.current_thread() is threading.main_thread() and hasattr(
            signal, "setitimer")
        self._previous: Any = None

    @staticmethod
    def _fire(signum: int, frame: Any) -> None:
        raise _SerializeTimeout

    def __enter__(self) -> _Deadline:
        if self.active:
            self._previous = signal.signal(signal.SIGALRM, self._fire)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)

    @contextlib.contextmanager
    def limit(self) -> Iterator[None]:
        if not self.active:
            yield
            return
        assert self.seconds is not None
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)


class _CappedBuffer(io.RawIOBase):
    """A write target that stops serialization as soon as it passes ``cap`` bytes."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        n = len(memoryview(data).cast("B")) if not isinstance(data, bytes) else len(data)
        self.size += n
        if self.size > self.cap:
            raise _CapExceeded
        self.parts.append(bytes(data))
        return n


def _ndarray_type() -> Any:
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


_CONTAINERS: frozenset[type] = frozenset({list, dict, tuple, set, frozenset})
_PLAIN: frozenset[type] = _CONTAINERS | {int, float, complex, bool, type(None)}


def _plain_pickle(value: Any) -> bytes | None:
    """The C pickler's bytes for a builtin value (``_PLAIN``), or None when dill must take it.

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


def _plain_key(data: bytes) -> tuple[Any, ...]:
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
    nd = _ndarray_type()
    if nd is not None and cls is nd:
        if value.dtype.hasobject or not value.flags.c_contiguous:
            return None
        ident = (id(value), value.__array_interface__["data"][0], value.shape, value.dtype.str)
        view = memoryview(value).cast("B") if value.nbytes else memoryview(b"")
        if value.nbytes > _SMALL:
            return ("ndv", *ident, _sampled_digest(view))
        return ("nd", *ident, _content_digest(view))
    if cls is bytes:
        return ("b", len(value), _content_digest(value))
    if cls in _PLAIN:
        data = _plain_pickle(value)
        return None if data is None else _plain_key(data)
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


@dataclass
class _Cached:
    fingerprint: tuple[Any, ...]
    ref: dict[str, Any]  # {"blob": id} or {"pack": id, "offset", "length", "mac"}
    size: int
    fmt: str
    code: bool


_LANE_INIT = b"ipython-compact lane v2\0"
_FINAL_INIT = b"ipython-compact blob v2\0"


def _lane_hashers(key: bytes) -> list[Any]:
    return [hmac.new(key, _LANE_INIT + bytes([i]), _DIGEST) for i in range(2)]


def _lane_final(key: bytes, lanes: list[Any], length: int) -> bytes:
    final = _FINAL_INIT + b"".join(lane.digest() for lane in lanes) + length.to_bytes(8, "little")
    return hmac.new(key, final, _DIGEST).digest()


def _pwrite_all(fd: int, data: memoryview | bytes, offset: int) -> None:
    view = memoryview(data)
    while len(view):
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _segments(chunks: list[memoryview | bytes]) -> tuple[list[tuple[int, memoryview]], int]:
    """``chunks`` as (body offset, byte view) pairs, and the body length (no bytes are copied)."""
    out: list[tuple[int, memoryview]] = []
    pos = 0
    for c in chunks:
        view = memoryview(c).cast("B") if not isinstance(c, bytes) else memoryview(c)
        if len(view):
            out.append((pos, view))
            pos += len(view)
    return out, pos


def _lane_pass(lane: int, hasher: Any, segments: list[tuple[int, memoryview]], fd: int | None, base: int) -> None:
    """Feed lane ``lane``'s pieces to ``hasher`` in body order; with ``fd``, write each right after.

    A lane owns the ``_PIECE``-sized pieces at even (lane 0) or odd (lane 1) body offsets. Each
    ``_SUB`` slice is hashed and then written with ``pwrite`` at ``base`` + its body offset, so
    the write copies bytes the hash has just pulled into the cache, and the two lanes never wait
    for each other.
    """
    for off, view in segments:
        end = off + len(view)
        piece = off // _PIECE
        while piece * _PIECE < end:
            if piece % 2 == lane:
                lo, hi = max(off, piece * _PIECE), min(end, (piece + 1) * _PIECE)
                for start in range(lo, hi, _SUB):
                    sub = view[start - off : min(hi, start + _SUB) - off]
                    hasher.update(sub)
                    if fd is not None:
                        _pwrite_all(fd, sub, base + start)
            piece += 1


def _sign_chunks(key: bytes, chunks: list[memoryview | bytes], fd: int | None = None, base: int = 0) -> bytes:
    """The file signature of the body ``chunks`` (see ``_LaneMac``); with ``fd``, also write the body.

    Bodies above ``_THREADED_ABOVE`` run lane 1 on a helper thread while this thread runs lane 0
    (both release the GIL while hashing and writing): the signature then costs little more wall
    time than the write alone on a machine with a free second core.
    """
    segments, length = _segments(chunks)
    lanes = _lane_hashers(key)
    if length <= _THREADED_ABOVE:
        for lane in (0, 1):
            _lane_pass(lane, lanes[lane], segments, fd, base)
        return _lane_final(key, lanes, length)
    failure: list[BaseException] = []

    def helper() -> None:
        try:
            _lane_pass(1, lanes[1], segments, fd, base)
        except BaseException as exc:  # re-raised on the calling thread
            failure.append(exc)

    t = threading.Thread(target=helper, daemon=True, name="ipc-snapshot-lane")
    t.start()
    try:
        _lane_pass(0, lanes[0], segments, fd, base)
    finally:
        t.join()
    if failure:
        raise failure[0]
    return _lane_final(key, lanes, length)


class _LaneMac:
    """The file signature: HMAC-SHA256 in two interleaved lanes, combined by a final HMAC.

    The body is cut into ``_PIECE``-sized pieces at fixed offsets; even pieces feed lane 0, odd
    pieces lane 1; the signature is ``HMAC(key, "final" || lane0 || lane1 || length)``. Each lane
    is a plain HMAC over a defined byte sequence, so this is as strong as HMAC-SHA256, and the two
    lanes can be hashed on two threads while the main thread writes — SHA-256 over 400 MB costs
    about as much as writing it, so one lane would double the snapshot time.
    """

    def __init__(self, key: bytes, *, threaded: bool) -> None:
        self._key = key
        self._lanes = _lane_hashers(key)
        self._pos = 0
        self._queues: list[queue.SimpleQueue[memoryview | None]] = []
        self._threads: list[threading.Thread] = []
        if threaded:
            for lane in self._lanes:
                q: queue.SimpleQueue[memoryview | None] = queue.SimpleQueue()
                t = threading.Thread(target=self._drain, args=(lane, q), daemon=True, name="ipc-snapshot-hash")
                t.start()
                self._queues.append(q)
                self._threads.append(t)

    @staticmethod
    def _drain(lane: Any, q: queue.SimpleQueue[memoryview | None]) -> None:
        while (piece := q.get()) is not None:
            lane.update(piece)

    def update(self, data: bytes | memoryview) -> None:
        view = memoryview(data).cast("B")
        while len(view):
            lane = (self._pos // _PIECE) % 2
            piece = view[: _PIECE - self._pos % _PIECE]
            if self._queues:
                self._queues[lane].put(piece)
            else:
                self._lanes[lane].update(piece)
            self._pos += len(piece)
            view = view[len(piece) :]

    def close(self) -> None:
        for q in self._queues:
            q.put(None)
        for t in self._threads:
            t.join()
        self._queues, self._threads = [], []

    def digest(self) -> bytes:
        self.close()
        return _lane_final(self._key, self._lanes, self._pos)


class SnapshotStore:
    """Snapshots of one session's namespace in ``directory``; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        key: bytes,
        *,
        max_name_bytes: int = 512 << 20,
        max_total_bytes: int = 2 << 30,
        generations: int = 3,
        durable: bool = True,
        python: str | None = None,
        name_timeout: float | None = 5.0,
    ) -> None:
        if len(key) < 16:
            raise SnapshotError("signing key must be at least 16 bytes")
        if generations < 1:
            raise SnapshotError(f"generations must be at least 1, got {generations}")
        self.directory = Path(directory)
        self.blobs = self.directory / "blobs"
        self._key = key
        self.max_name_bytes = max_name_bytes
        self.max_total_bytes = max_total_bytes
        self.generations = generations
        self.durable = durable
        self.python = python or python_tag()
        self.name_timeout = name_timeout
        self._cache: dict[str, _Cached] = {}
        self._small_index: dict[str, dict[str, Any]] | None = None
        self._last_full: dict[str, Any] | None = None  # newest fully verified generation (from the manifests)
        self._sampled_since_full = 0  # sampled generations written since then
        self._present: set[str] = set()
        self._refs_by_gen: dict[int, set[str]] = {}
        self._unsynced: list[Path] = []
        self._lock = threading.Lock()
        for d in (self.directory, self.blobs):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(d, 0o700)

    # ------------------------------------------------------------------ signing
    def _mac(self) -> Any:
        return hmac.new(self._key, b"ipython-compact blob v1\0", _DIGEST)

    def _sign_manifest(self, manifest: Mapping[str, Any]) -> str:
        return self._sign_text(json.dumps(manifest, sort_keys=True, separators=(",", ":")))

    def _sign_text(self, text: str) -> str:
        return hmac.new(self._key, b"ipython-compact manifest v1\0" + text.encode(), _DIGEST).hexdigest()

    # ------------------------------------------------------------------ files
    def _fsync_dir(self, d: Path) -> None:
        if not self.durable:
            return
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _write_temp(self, directory: Path, chunks: list[memoryview | bytes], sign: bool) -> tuple[Path, str | None]:
        """Write ``chunks`` (as ``MAGIC + body + signature`` when ``sign``) to a new temp file.

        A signed body is hashed and written in one pass (``_sign_chunks``: two lanes, each slice
        hashed then written while cache-hot, straight from the caller's buffers — no copies). A
        signed file is not fsynced here: the save fsyncs every new payload once, after all of them
        are written and before the manifest that names them (``_sync_new_files``). An unsigned
        file (the manifest) is fsynced at once. Returns the temp path (the caller renames it into
        place) and the signature's hex digest.
        """
        tmp = directory / f".{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            digest = None
            if sign:
                _pwrite_all(fd, MAGIC, 0)
                mac = _sign_chunks(self._key, chunks, fd, len(MAGIC))
                _pwrite_all(fd, mac, len(MAGIC) + sum(len(memoryview(c).cast("B")) for c in chunks))
                digest = mac.hex()
            else:
                pos = 0
                for c in chunks:
                    _pwrite_all(fd, c, pos)
                    pos += len(memoryview(c).cast("B"))
                if self.durable:
                    os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        os.close(fd)
        return tmp, digest

    def _sync_new_files(self) -> None:
        """fsync the payload files written by this save (once each, after all writes).

        Must run before the manifest naming them is written: a crash can then leave unreferenced
        or torn payloads (refused by their signature, removed by the next prune) but never a
        manifest that names a payload whose bytes did not reach the disk.
        """
        paths, self._unsynced = self._unsynced, []
        if not self.durable:
            return
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def _store_blob(self, chunks: list[memoryview | bytes]) -> tuple[str, int]:
        tmp, digest = self._write_temp(self.blobs, chunks, True)
        assert digest is not None
        final = self.blobs / f"{digest}.blob"
        if final.exists():
            tmp.unlink()
        else:
            os.replace(tmp, final)
            self._unsynced.append(final)
        return digest, sum(len(memoryview(c).cast("B")) for c in chunks)

    def _read_blob(self, blob: str) -> memoryview:
        """The verified body of a blob; raises SnapshotError when missing, truncated or altered.

        Reads into one writable buffer, hashing each piece as it arrives (cache-hot), so restored
        arrays use the buffer directly instead of another copy.
        """
        path = self.blobs / f"{blob}.blob"
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise SnapshotError(f"payload {path.name} is missing") from None
        with os.fdopen(fd, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            if size < len(MAGIC) + _MAC_LEN:
                raise SnapshotError(f"payload {path.name} is truncated or not a snapshot blob; not unpickled")
            buf = bytearray(size)
            view = memoryview(buf)
            mac = _LaneMac(self._key, threaded=size > _THREADED_ABOVE)
            end = size - _MAC_LEN
            pos = 0
            while pos < size:
                n = f.readinto(view[pos : pos + _PIECE])
                if not n:
                    mac.close()
                    raise SnapshotError(f"payload {path.name} is truncated; not unpickled")
                lo, hi = max(pos, len(MAGIC)), min(pos + n, end)
                if lo < hi:
                    mac.update(view[lo:hi])
                pos += n
        if not buf.startswith(MAGIC):
            raise SnapshotError(f"payload {path.name} is not a snapshot blob; not unpickled")
        digest = mac.digest()
        if not hmac.compare_digest(digest, bytes(view[end:])) or digest.hex() != blob:
            raise SnapshotError(f"payload {path.name} failed its signature check (altered or truncated); not unpickled")
        return view[len(MAGIC) : end]

    def _read_ref(self, ref: Any, packs: dict[str, bytes]) -> bytes | memoryview:
        """The verified body a manifest entry points at (a blob, or a slice of a pack)."""
        if not isinstance(ref, dict):
            raise SnapshotError("manifest entry has no payload reference")
        if "blob" in ref:
            return self._read_blob(str(ref["blob"]))
        pack = str(ref.get("pack"))
        if pack not in packs:
            path = self.blobs / f"{pack}.pack"
            try:
                raw = path.read_bytes()
            except FileNotFoundError:
                raise SnapshotError(f"payload pack {path.name} is missing") from None
            whole = _LaneMac(self._key, threaded=False)
            whole.update(memoryview(raw)[len(MAGIC) : -_MAC_LEN])
            digest = whole.digest()
            if (len(raw) < len(MAGIC) + _MAC_LEN or not raw.startswith(MAGIC)
                    or not hmac.compare_digest(digest, raw[-_MAC_LEN:]) or digest.hex() != pack):
                raise SnapshotError(f"payload pack {path.name} failed its signature check (altered or truncated); "
                                    "not unpickled")
            packs[pack] = raw
        data = packs[pack]
        start = len(MAGIC) + int(ref["offset"])
        body = data[start : start + int(ref["length"])]
        mac = self._mac()
        mac.update(body)
        if (not data.startswith(MAGIC) or len(body) != int(ref["length"])
                or not hmac.compare_digest(mac.hexdigest(), str(ref.get("mac")))):
            raise SnapshotError(f"payload in pack {pack}.pack failed its signature check (altered or truncated); "
                                "not unpickled")
        return body

    # ------------------------------------------------------------------ serialization
    def _serialize(self, value: Any, cap: int, plain: bytes | None) -> tuple[str, list[memoryview | bytes]]:
        """``(format, body chunks)``; ``plain`` is ``_plain_pickle(value)`` already made for a builtin value."""
        nd = _ndarray_type()
        arr: Any = value
        if nd is not None and type(arr) is nd and not arr.dtype.hasobject:
            if arr.nbytes > cap:
                raise _CapExceeded
            buffers: list[pickle.PickleBuffer] = []
            meta = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
            views = [b.raw() for b in buffers]
            # Buffers start on 64-byte file offsets so restored arrays are aligned in memory.
            pos = 1 + 8 + len(meta) + 16 * len(views)
            table: list[bytes] = []
            parts: list[memoryview | bytes] = []
            for v in views:
                start = -(-(pos + len(MAGIC)) // 64) * 64 - len(MAGIC)
                table.append(struct.pack("<QQ", start, len(v)))
                parts += [b"\0" * (start - pos), v]
                pos = start + len(v)
            head = _FMT_OOB + struct.pack("<II", len(meta), len(views)) + meta + b"".join(table)
            return "oob", [head, *parts]
        if plain is not None:  # builtin values: the C pickler is exact and far faster than dill
            if len(plain) + 1 > cap:
                raise _CapExceeded
            return "pickle", [_FMT_PICKLE + plain]
        sink = _CappedBuffer(cap)
        dill.dump(value, sink, protocol=pickle.HIGHEST_PROTOCOL)
        return "dill", [_FMT_DILL + b"".join(sink.parts)]

    @staticmethod
    def _deserialize(body: bytes | memoryview) -> Any:
        fmt, rest = bytes(body[:1]), memoryview(body)[1:]
        if fmt == _FMT_DILL:
            return dill.loads(rest)
        if fmt == _FMT_PICKLE:
            return pickle.loads(rest)
        if fmt == _FMT_OOB:
            whole = memoryview(body)
            meta_len, count = struct.unpack_from("<II", whole, 1)
            meta = whole[9 : 9 + meta_len]
            bufs = []
            for i in range(count):
                start, n = struct.unpack_from("<QQ", whole, 9 + meta_len + 16 * i)
                piece = whole[start : start + n]
                if len(piece) != n:
                    raise SnapshotError("array payload is shorter than its header says")
                bufs.append(piece if not piece.readonly else bytearray(piece))  # zero-copy from a blob read
            return pickle.loads(meta, buffers=bufs)
        raise SnapshotError(f"unknown payload format {fmt!r}")

    # ------------------------------------------------------------------ manifests
    def manifests(self) -> list[int]:
        """Generations on disk, oldest first."""
        gens = []
        for p in self.directory.glob("manifest-*.json"):
            with contextlib.suppress(ValueError):
                gens.append(int(p.stem.split("-", 1)[1]))
        return sorted(gens)

    def _manifest_path(self, generation: int) -> Path:
        return self.directory / f"manifest-{generation:08d}.json"

    def read_manifest(self, generation: int) -> dict[str, Any]:
        """The verified manifest of one generation; SnapshotError if it is unreadable or altered."""
        path = self._manifest_path(generation)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SnapshotError(f"manifest {path.name} cannot be read: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("manifest"), dict) or not isinstance(doc.get("hmac"), str):
            raise SnapshotError(f"manifest {path.name} is malformed")
        if not hmac.compare_digest(self._sign_manifest(doc["manifest"]), doc["hmac"]):
            raise SnapshotError(f"manifest {path.name} failed its signature check; refusing to use it")
        manifest: dict[str, Any] = doc["manifest"]
        return manifest

    def latest_manifest(self) -> dict[str, Any] | None:
        for gen in reversed(self.manifests()):
            with contextlib.suppress(SnapshotError):
                return self.read_manifest(gen)
        return None

    # ------------------------------------------------------------------ save
    def save(self, items: Iterable[tuple[str, Any]], *, full: bool = False, skip: Mapping[str, str] | None = None,
             timestamp: str | None = None, verify: str = "full") -> SnapshotReport:
        """Snapshot ``(name, value)`` pairs as a new generation; ``skip`` adds names with fixed reasons.

        ``full`` serializes and writes every value again. ``verify`` says how a large array that
        looks unchanged (same object, same samples) is treated: ``"full"`` (the default, and what
        every explicit snapshot must use) re-hashes it to prove it; ``"sampled"`` trusts the
        samples, which can miss an in-place edit until the next ``"full"`` save (module docstring).
        """
        if verify not in VERIFY_MODES:
            raise SnapshotError(f"verify must be one of {', '.join(map(repr, VERIFY_MODES))}, got {verify!r}")
        with self._lock:
            return self._save(list(items), full=full, skip=dict(skip or {}), timestamp=timestamp, verify=verify)

    def automatic_verification(self, mode: str, every: int) -> str:
        """The ``verify`` mode for the next automatic snapshot under ``mode`` and ``full_verify_every``.

        ``"full"`` when ``mode`` is ``"full"``, or when ``every - 1`` sampled generations have been
        written since the newest fully verified one (so at least every ``every``-th automatic
        snapshot verifies fully; ``every == 1`` means always). The count is read from the newest
        manifest once, so it carries over a kernel restart.
        """
        if mode not in VERIFY_MODES:
            raise SnapshotError(f"verification mode must be one of {', '.join(map(repr, VERIFY_MODES))}, got {mode!r}")
        if every < 1:
            raise SnapshotError(f"full_verify_every must be at least 1, got {every}")
        if mode == "full":
            return "full"
        with self._lock:
            self._known_small()
            return "full" if self._sampled_since_full + 1 >= every else "sampled"

    @property
    def last_full_verification(self) -> dict[str, Any] | None:
        """``{"generation", "timestamp"}`` of the newest fully verified generation, or None if none is known."""
        with self._lock:
            self._known_small()
            return None if self._last_full is None else dict(self._last_full)

    @staticmethod
    def _ref_file(ref: Mapping[str, Any]) -> str:
        return f"{ref['blob']}.blob" if "blob" in ref else f"{ref.get('pack')}.pack"

    def _ref_exists(self, ref: Mapping[str, Any]) -> bool:
        return self._ref_file(ref) in self._present

    def _known_small(self) -> dict[str, dict[str, Any]]:
        """Packed bodies of the newest manifest by their mac, so an identical small value is not rewritten.

        The first call also reads the verification history from that manifest (newest full
        verification, sampled generations since); a manifest without it counts as not verified.
        """
        if self._small_index is None:
            self._small_index = {}
            manifest = self.latest_manifest() or {}
            for entry in manifest.get("names", {}).values():
                ref = entry.get("ref", {})
                if "pack" in ref and isinstance(ref.get("mac"), str):
                    self._small_index[ref["mac"]] = dict(ref)
            last = manifest.get("last_full_verification")
            self._last_full = dict(last) if isinstance(last, dict) else None
            since = manifest.get("sampled_since_full")
            self._sampled_since_full = since if type(since) is int and since >= 0 else 0
        return self._small_index

    def _save(self, items: list[tuple[str, Any]], *, full: bool, skip: dict[str, str],
              timestamp: str | None, verify: str) -> SnapshotReport:
        start = time.perf_counter()
        entries: dict[str, dict[str, Any]] = {}
        saved: list[str] = []
        unchanged: list[str] = []
        skipped = [Skipped(n, r) for n, r in sorted(skip.items())]
        total = 0
        written = 0
        verified = 0
        trusted: list[str] = []  # large arrays taken as unchanged on their samples (verify="sampled")
        new_cache: dict[str, _Cached] = {}
        known_small = self._known_small()
        self._present = set(os.listdir(self.blobs))
        pending: list[tuple[str, bytes, str, tuple[Any, ...] | None]] = []  # name, body, mac, fingerprint
        self._unsynced = []
        with _Deadline(self.name_timeout) as deadline:
            for name, value in items:
                if type(name) is not str:
                    skipped.append(Skipped(repr(name), "not a string name"))
                    continue
                if issubclass(type(value), _FILE_TYPES):
                    skipped.append(Skipped(name, "open file handles are not persisted"))
                    continue
                plain: bytes | None = None
                try:
                    if type(value) not in _PLAIN:
                        fp = fingerprint(value)
                    else:
                        if type(value) in _CONTAINERS:  # an item's __reduce__ (user code) runs here and may hang
                            with deadline.limit():
                                plain = _plain_pickle(value)
                        else:  # a builtin scalar: no user code, so no timer to arm
                            plain = _plain_pickle(value)
                        fp = None if plain is None else _plain_key(plain)
                except _SerializeTimeout:
                    skipped.append(Skipped(name, f"took longer than {self.name_timeout:g} s to serialize"))
                    continue
                except Exception:
                    fp = None
                code = carries_code(value)
                meta = {"code": code, "type": type(value).__qualname__}
                hit = self._cache.get(name)
                cached = hit if (not full and fp is not None and hit is not None and hit.fingerprint == fp
                                 and self._ref_exists(hit.ref)) else None
                if cached is not None and fp is not None and (fp[0] != "ndv" or verify == "sampled"):
                    if total + cached.size > self.max_total_bytes:
                        skipped.append(Skipped(name, "exceeds the total snapshot size cap"))
                        continue
                    total += cached.size
                    entries[name] = {"ref": cached.ref, "bytes": cached.size, "format": cached.fmt, **meta}
                    new_cache[name] = cached
                    saved.append(name)
                    unchanged.append(name)
                    if fp[0] == "ndv":  # trusted on samples: an edit between them is missed until a full save
                        trusted.append(name)
                    continue
                cap = min(self.max_name_bytes, self.max_total_bytes - total)
                try:
                    with deadline.limit():
                        fmt, chunks = self._serialize(value, cap, plain)
                    if fmt == "dill" and type(value) in _PLAIN:  # a container dill had to take holds code
                        code = meta["code"] = True
                except _SerializeTimeout:
                    skipped.append(Skipped(name, f"took longer than {self.name_timeout:g} s to serialize"))
                    continue
                except _CapExceeded:
                    reason = ("exceeds the per-name snapshot size cap" if cap == self.max_name_bytes
                              else "exceeds the total snapshot size cap")
                    skipped.append(Skipped(name, reason))
                    continue
                except RecursionError:
                    skipped.append(Skipped(name, "RecursionError: too deeply nested to serialize"))
                    continue
                except Exception as exc:
                    skipped.append(Skipped(name, f"{type(exc).__name__}: {str(exc)[:200]}"))
                    continue
                size = sum(len(c) for c in chunks)
                total += size
                entries[name] = {"bytes": size, "format": fmt, **meta}
                saved.append(name)
                if cached is not None and "blob" in cached.ref:
                    # A large array seen before: check every byte against the blob written last time
                    # (hashing only, no write); an in-place edit anywhere changes the signature.
                    verified += size
                    if _sign_chunks(self._key, chunks).hex() == cached.ref["blob"]:
                        entries[name]["ref"] = cached.ref
                        new_cache[name] = cached
                        unchanged.append(name)
                        continue
                if size <= _SMALL:  # small values share one pack file per generation
                    body = b"".join(bytes(c) for c in chunks)
                    mac = self._mac()
                    mac.update(body)
                    digest = mac.hexdigest()
                    ref = known_small.get(digest)
                    if ref is not None and self._ref_exists(ref):
                        entries[name]["ref"] = ref
                        unchanged.append(name)
                        if fp is not None:
                            new_cache[name] = _Cached(fp, ref, size, fmt, code)
                    else:
                        pending.append((name, body, digest, fp))
                    continue
                blob, _ = self._store_blob(chunks)
                written += size
                entries[name]["ref"] = {"blob": blob}
                if fp is not None:
                    new_cache[name] = _Cached(fp, {"blob": blob}, size, fmt, code)
        if pending:
            bodies = [body for _, body, _, _ in pending]
            tmp, pack_id = self._write_temp(self.blobs, [b"".join(bodies)], True)
            os.replace(tmp, self.blobs / f"{pack_id}.pack")
            self._unsynced.append(self.blobs / f"{pack_id}.pack")
            offset = 0
            for name, body, digest, fp in pending:
                ref = {"pack": pack_id, "offset": offset, "length": len(body), "mac": digest}
                offset += len(body)
                entries[name]["ref"] = ref
                known_small[digest] = ref
                written += len(body)
                if fp is not None:
                    new_cache[name] = _Cached(fp, ref, len(body), entries[name]["format"], entries[name]["code"])
        self._sync_new_files()
        gens = self.manifests()
        generation = (gens[-1] + 1) if gens else 1
        # A generation is fully verified unless it trusted an array on samples (nothing else can be stale).
        verification = "sampled" if trusted else "full"
        if verification == "full":
            last_full: dict[str, Any] | None = {"generation": generation, "timestamp": timestamp}
            since = 0
        else:
            last_full, since = self._last_full, self._sampled_since_full + 1
        manifest = {
            "version": MANIFEST_VERSION,
            "generation": generation,
            "timestamp": timestamp,
            "python": self.python,
            "dill": str(getattr(dill, "__version__", "?")),
            "names": entries,
            "skipped": [s.to_json() for s in skipped],
            "bytes": total,
            "verification": verification,
            "sampled": sorted(trusted),
            "last_full_verification": last_full,
            "sampled_since_full": since,
        }
        text = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
        signature = self._sign_text(text)
        doc = ('{"hmac":"' + signature + '","manifest":' + text + "}").encode()
        self._refs_by_gen[generation] = {self._ref_file(e["ref"]) for e in entries.values()}
        final = self._manifest_path(generation)
        tmp, _ = self._write_temp(self.directory, [doc], False)
        os.replace(tmp, final)
        self._fsync_dir(self.blobs)
        self._fsync_dir(self.directory)
        self._cache = new_cache
        self._last_full, self._sampled_since_full = last_full, since
        self._prune()
        return SnapshotReport(generation, saved, unchanged, skipped, total, written, str(final),
                              (time.perf_counter() - start) * 1000.0, verified, verification, sorted(trusted),
                              None if last_full is None else dict(last_full))

    def _prune(self) -> None:
        gens = self.manifests()
        for gen in gens[: -self.generations]:
            with contextlib.suppress(OSError):
                self._manifest_path(gen).unlink()
        keep: set[str] = set()
        kept = self.manifests()
        self._refs_by_gen = {g: r for g, r in self._refs_by_gen.items() if g in kept}
        for gen in kept:
            if gen not in self._refs_by_gen:  # written by another process: read it once
                try:
                    self._refs_by_gen[gen] = {self._ref_file(e["ref"]) for e in self.read_manifest(gen)["names"].values()}
                except (SnapshotError, KeyError, TypeError):
                    return  # an unreadable manifest: keep every file rather than guess
            keep |= self._refs_by_gen[gen]
        if self._small_index is not None:
            self._small_index = {m: r for m, r in self._small_index.items() if f"{r['pack']}.pack" in keep}
        for p in [*self.blobs.glob("*.blob"), *self.blobs.glob("*.pack")]:
            if p.name not in keep:
                with contextlib.suppress(OSError):
                    p.unlink()

    # ------------------------------------------------------------------ restore
    def load(self, *, generation: int | None = None, names: Iterable[str] | None = None) -> tuple[dict[str, Any], RestoreReport]:
        """Verified values of the newest valid generation (or ``generation``), with a report."""
        report = RestoreReport(generation=None)
        candidates = [generation] if generation is not None else list(reversed(self.manifests()))
        manifest: dict[str, Any] | None = None
        for gen in candidates:
            try:
                manifest = self.read_manifest(gen)
                report.generation = gen
                break
            except SnapshotError as exc:
                report.refused.append(str(exc))
        values: dict[str, Any] = {}
        if manifest is None:
            return values, report
        wanted = None if names is None else set(names)
        packs: dict[str, bytes] = {}
        same_python = manifest.get("python") == python_tag()
        for name, entry in manifest.get("names", {}).items():
            if wanted is not None and name not in wanted:
                continue
            if entry.get("code") and not same_python:
                report.quarantined.append(Skipped(
                    name, f"code written by Python {manifest.get('python')} is not loaded in Python {python_tag()}"))
                continue
            try:
                body = self._read_ref(entry.get("ref"), packs)
                values[name] = self._deserialize(body)
            except SnapshotError as exc:
                report.failed.append(Skipped(name, str(exc)))
                continue
            except Exception as exc:
                report.failed.append(Skipped(name, f"{type(exc).__name__}: {str(exc)[:200]}"))
                continue
            report.restored.append(name)
        return values, report

    def restore_into(self, namespace: dict[str, Any], *, generation: int | None = None,
                     names: Iterable[str] | None = None) -> RestoreReport:
        """Load and bind values into ``namespace``; nothing is bound for names that failed."""
        values, report = self.load(generation=generation, names=names)
        namespace.update(values)
        return report
