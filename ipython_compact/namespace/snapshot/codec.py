"""Turning one value into payload bytes and back, bounded in size and time.

Formats (the first body byte): ``n`` numpy arrays as pickle protocol 5 with out-of-band buffers at
64-byte file offsets (restored zero-copy from the read buffer), ``p`` builtin values through the C
pickler, ``d`` everything else through dill (functions, classes and instances of session classes
travel by value).

What must hold: a value larger than its cap stops serializing as soon as it passes the cap
(``CapExceeded``); Python-level serialization code that hangs is interrupted (``Deadline``, main
thread only); ``deserialize`` is called only on bodies whose signature verified.

A forked snapshot child is stopped (SIGSTOP) by its kernel while the user's cells run; its per-value
timer counts only the time it was let run (``count_stops``). Why: the timer counted the stop too,
so a value that takes 2 s was left out of a generation whenever a cell ran past the 5 s mark.
"""

from __future__ import annotations

import io
import pickle
import signal
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import dill

from ipython_compact.namespace.snapshot.fingerprints import ndarray_type, pandas_types
from ipython_compact.namespace.snapshot.reports import SnapshotError
from ipython_compact.namespace.snapshot.signing import MAGIC

FMT_DILL = b"d"
FMT_OOB = b"n"
FMT_PICKLE = b"p"
FILE_TYPES: tuple[type, ...] = (
    io.FileIO,
    io.BufferedReader,
    io.BufferedWriter,
    io.BufferedRandom,
    io.TextIOWrapper,
)


class CapExceeded(Exception):
    pass


class SerializeTimeout(BaseException):  # BaseException: user __reduce__ code must not swallow it
    pass


_stopped: Callable[[], float] | None = None


def count_stops(stopped: Callable[[], float] | None) -> None:
    """From now on ``Deadline`` leaves out the time this process spent stopped: ``stopped()`` is the
    total seconds it was stopped so far (on the ``time.monotonic`` clock); None counts all time."""
    global _stopped
    _stopped = stopped


class Deadline:
    """Interrupt Python-level serialization code (a hostile ``__reduce__``) after ``seconds``.

    Uses SIGALRM, so only on the main thread of a POSIX process; elsewhere it does nothing.
    A C-level loop that never returns to the interpreter cannot be interrupted this way. The
    handler is installed once per save (``with``) and each name arms its own timer (``limit``):
    installing a handler costs far more than arming a timer, and a save may hold 10,000 names.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.active = (
            bool(seconds)
            and threading.current_thread() is threading.main_thread()
            and hasattr(signal, "setitimer")
        )
        self._previous: Any = None
        self._armed = _Armed(seconds if self.active else None)

    def _fire(self, signum: int, frame: Any) -> None:
        armed, stopped = self._armed, _stopped
        if stopped is not None and armed.started is not None and armed.seconds:
            ran = time.monotonic() - armed.started - (stopped() - armed.stopped)
            if armed.seconds - ran > 0.01:  # part of the time went by while stopped: the rest
                signal.setitimer(signal.ITIMER_REAL, armed.seconds - ran)
                return
        raise SerializeTimeout

    def __enter__(self) -> Deadline:
        if self.active:
            self._previous = signal.signal(signal.SIGALRM, self._fire)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)

    def limit(self) -> _Armed:
        """Arm the timer for one name's work (a plain object, not a generator: a save of 100,000
        names enters this 100,000 times, and ``contextlib`` cost ~5 µs each)."""
        return self._armed


class _Armed:
    __slots__ = ("seconds", "started", "stopped")

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.started: float | None = None
        self.stopped = 0.0

    def __enter__(self) -> None:
        if self.seconds:
            if _stopped is not None:  # a forked child: remember where the clocks stood
                self.started, self.stopped = time.monotonic(), _stopped()
            signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc: object) -> None:
        if self.seconds:
            signal.setitimer(signal.ITIMER_REAL, 0)


class CappedBuffer(io.RawIOBase):
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
            raise CapExceeded
        self.parts.append(bytes(data))
        return n


def serialize(value: Any, cap: int, plain: bytes | None) -> tuple[str, list[memoryview | bytes]]:
    """``(format, body chunks)``; ``plain`` is ``plain_pickle(value)`` already made for a builtin value."""
    nd = ndarray_type()
    arr: Any = value
    meta: bytes | None = None
    buffers: list[pickle.PickleBuffer] = []
    if nd is not None and type(arr) is nd and not arr.dtype.hasobject:
        if arr.nbytes > cap:
            raise CapExceeded
        meta = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    elif type(value) in pandas_types():  # by reference to pandas' classes, arrays out of band
        try:
            meta = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
        except Exception:
            meta = None
        if meta is not None and b"__main__" in meta:  # holds a session object: dill carries it by value
            meta = None
        if meta is not None and len(meta) + sum(b.raw().nbytes for b in buffers) > cap:
            raise CapExceeded
    if meta is not None:
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
        head = FMT_OOB + struct.pack("<II", len(meta), len(views)) + meta + b"".join(table)
        return "oob", [head, *parts]
    if plain is not None:  # builtin values: the C pickler is exact and far faster than dill
        if len(plain) + 1 > cap:
            raise CapExceeded
        return "pickle", [FMT_PICKLE + plain]
    sink = CappedBuffer(cap)
    dill.dump(value, sink, protocol=pickle.HIGHEST_PROTOCOL)
    return "dill", [FMT_DILL + b"".join(sink.parts)]


def deserialize(body: bytes | memoryview) -> Any:
    """The value of a verified body (see ``serialize`` for the formats)."""
    fmt, rest = bytes(body[:1]), memoryview(body)[1:]
    if fmt == FMT_DILL:
        return dill.loads(rest)
    if fmt == FMT_PICKLE:
        return pickle.loads(rest)
    if fmt == FMT_OOB:
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
