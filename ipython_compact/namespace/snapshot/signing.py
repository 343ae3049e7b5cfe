"""File and manifest signatures: the file one in two interleaved lanes, keyed BLAKE3 or HMAC-SHA256.

Why lanes: signing costs about as much CPU as writing, so it overlaps with the write. The body is
cut into ``PIECE``-sized pieces at fixed offsets; even pieces feed lane 0, odd ones lane 1; the
file signature is ``MAC(key, "final" || lane0 || lane1 || length)``. Each lane is a plain MAC
over a defined byte sequence, so this is as strong as the MAC itself. Each lane hashes a slice and
then ``pwrite``s it while it is still in the cache, straight from the value's own buffer (pickle
protocol 5, out of band, no copy), one lane on a helper thread for large bodies.

Two schemes, told apart by the file's first bytes (``SCHEMES``): ``IPCBLOB1`` files are signed
with HMAC-SHA256 lanes (every snapshot written before BLAKE3 came, still read and verified);
``IPCBLOB3`` files with keyed BLAKE3 lanes, what the folder writes now where the ``blake3`` package
is importable. Why BLAKE3: restoring a 400 MB array spent as long in HMAC-SHA256 (~1.7 GB/s a core
here) as in reading the file; keyed BLAKE3 runs at ~4 GB/s a core. Its key is derived from the
session key by HMAC-SHA256 with its own label, so no MAC input of one scheme is one of the other.
A reader takes the scheme the file names, and a file of either scheme is accepted only with a
valid MAC under the session key: naming the other scheme buys a forger nothing.

What must hold: ``PIECE``, the magics and the init strings are part of the file format; changing
them makes every existing blob fail its check (refused, never unpickled).
"""

from __future__ import annotations

import hmac
import os
import queue
import threading
from dataclasses import dataclass
from typing import Any

try:
    import blake3 as _blake3
except ImportError:  # pragma: no cover - a declared dependency; HMAC-SHA256 files then
    _blake3 = None  # type: ignore[assignment]

MAGIC = b"IPCBLOB1"  # HMAC-SHA256 lanes (``HMAC_LANES``)
BLAKE3_MAGIC = b"IPCBLOB3"  # keyed BLAKE3 lanes (``BLAKE3_LANES``); the same length
DIGEST = "sha256"
MAC_LEN = 32
PIECE = 4 << 20  # read unit; also the lane width of the file signature (part of the file format)
_SUB = 1 << 19  # a lane hashes then writes this much at a time, while it is still in the CPU cache
THREADED_ABOVE = 16 << 20  # bodies larger than this run their two lanes on two threads
_MANIFEST_INIT = b"ipython-compact manifest v1\0"
_SMALL_INIT = b"ipython-compact blob v1\0"


def small_mac(key: bytes) -> Any:
    """The HMAC of one small body inside a pack file (its ``mac`` in the manifest)."""
    return hmac.new(key, _SMALL_INIT, DIGEST)


def sign_text(key: bytes, text: str) -> str:
    """The hex signature of a manifest's canonical JSON text."""
    return hmac.new(key, _MANIFEST_INIT + text.encode(), DIGEST).hexdigest()


_LANE_INIT = b"ipython-compact lane v2\0"
_FINAL_INIT = b"ipython-compact blob v2\0"


_BLAKE3_KEY_LABEL = b"ipython-compact blake3 key v3\0"
_BLAKE3_LANE_INIT = b"ipython-compact blake3 lane v3\0"
_BLAKE3_FINAL_INIT = b"ipython-compact blake3 blob v3\0"


@dataclass(frozen=True)
class Scheme:
    """How a payload file is signed: its magic, its lanes' hashers and their final MAC."""

    magic: bytes
    name: str

    def lanes(self, key: bytes) -> list[Any]:
        if self.magic == BLAKE3_MAGIC:
            k3 = _blake3_key(key)
            return [_blake3.blake3(_BLAKE3_LANE_INIT + bytes([i]), key=k3) for i in range(2)]
        return [hmac.new(key, _LANE_INIT + bytes([i]), DIGEST) for i in range(2)]

    def final(self, key: bytes, lanes: list[Any], length: int) -> bytes:
        digests = b"".join(lane.digest() for lane in lanes) + length.to_bytes(8, "little")
        if self.magic == BLAKE3_MAGIC:
            return bytes(_blake3.blake3(_BLAKE3_FINAL_INIT + digests, key=_blake3_key(key)).digest())
        return hmac.new(key, _FINAL_INIT + digests, DIGEST).digest()


def _blake3_key(key: bytes) -> bytes:
    return hmac.new(key, _BLAKE3_KEY_LABEL, DIGEST).digest()


HMAC_LANES = Scheme(MAGIC, "hmac-sha256")
BLAKE3_LANES = Scheme(BLAKE3_MAGIC, "blake3") if _blake3 is not None else None
SCHEMES: dict[bytes, Scheme] = {s.magic: s for s in (HMAC_LANES, BLAKE3_LANES) if s is not None}
WRITE_SCHEME = BLAKE3_LANES or HMAC_LANES  # what the snapshot folder writes


def scheme_of(head: bytes | memoryview) -> Scheme | None:
    """The scheme a payload file's first bytes name, or None (not a payload this code can verify)."""
    return SCHEMES.get(bytes(head[: len(MAGIC)]))


def unverifiable(head: bytes | memoryview) -> str:
    """Why a payload whose first bytes name no scheme of ``SCHEMES`` cannot be verified."""
    if bytes(head[: len(MAGIC)]) == BLAKE3_MAGIC:
        return "is signed with keyed BLAKE3 and the blake3 package is not installed here"
    return "is not a snapshot payload"


def pwrite_all(fd: int, data: memoryview | bytes, offset: int) -> None:
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


def _lane_pass(
    lane: int, hasher: Any, segments: list[tuple[int, memoryview]], fd: int | None, base: int
) -> None:
    """Feed lane ``lane``'s pieces to ``hasher`` in body order; with ``fd``, write each right after.

    A lane owns the ``PIECE``-sized pieces at even (lane 0) or odd (lane 1) body offsets. Each
    ``_SUB`` slice is hashed and then written with ``pwrite`` at ``base`` + its body offset, so
    the write copies bytes the hash has just pulled into the cache, and the two lanes never wait
    for each other.
    """
    for off, view in segments:
        end = off + len(view)
        piece = off // PIECE
        while piece * PIECE < end:
            if piece % 2 == lane:
                lo, hi = max(off, piece * PIECE), min(end, (piece + 1) * PIECE)
                for start in range(lo, hi, _SUB):
                    sub = view[start - off : min(hi, start + _SUB) - off]
                    hasher.update(sub)
                    if fd is not None:
                        pwrite_all(fd, sub, base + start)
            piece += 1


def sign_chunks(
    key: bytes,
    chunks: list[memoryview | bytes],
    fd: int | None = None,
    base: int = 0,
    scheme: Scheme = HMAC_LANES,
) -> bytes:
    """The file signature of the body ``chunks`` (see ``LaneMac``); with ``fd``, also write the body.

    Bodies above ``THREADED_ABOVE`` run lane 1 on a helper thread while this thread runs lane 0
    (both release the GIL while hashing and writing): the signature then costs little more wall
    time than the write alone on a machine with a free second core.
    """
    segments, length = _segments(chunks)
    lanes = scheme.lanes(key)
    if length <= THREADED_ABOVE:
        for lane in (0, 1):
            _lane_pass(lane, lanes[lane], segments, fd, base)
        return scheme.final(key, lanes, length)
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
    return scheme.final(key, lanes, length)


class LaneMac:
    """The file signature: a MAC (``scheme``) in two interleaved lanes, combined by a final MAC.

    The body is cut into ``PIECE``-sized pieces at fixed offsets; even pieces feed lane 0, odd
    pieces lane 1; the signature is ``HMAC(key, "final" || lane0 || lane1 || length)``. Each lane
    is a plain HMAC over a defined byte sequence, so this is as strong as HMAC-SHA256, and the two
    lanes can be hashed on two threads while the main thread writes — SHA-256 over 400 MB costs
    about as much as writing it, so one lane would double the snapshot time.
    """

    def __init__(self, key: bytes, *, threaded: bool, scheme: Scheme = HMAC_LANES) -> None:
        self._key = key
        self._scheme = scheme
        self._lanes = scheme.lanes(key)
        self._pos = 0
        self._queues: list[queue.SimpleQueue[memoryview | None]] = []
        self._threads: list[threading.Thread] = []
        if threaded:
            for lane in self._lanes:
                q: queue.SimpleQueue[memoryview | None] = queue.SimpleQueue()
                t = threading.Thread(
                    target=self._drain, args=(lane, q), daemon=True, name="ipc-snapshot-hash"
                )
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
            lane = (self._pos // PIECE) % 2
            piece = view[: PIECE - self._pos % PIECE]
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
        return self._scheme.final(self._key, self._lanes, self._pos)
