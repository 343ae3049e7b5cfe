"""Automatic snapshots written by a forked child, so the user's next cell never waits for them.

Why fork: serializing the namespace takes as long as the namespace is large (a 400 MB array, 100,000
names: seconds), and an automatic snapshot ran on the kernel's main thread, where every cell sent
meanwhile waited for it. A thread would not help (pickling holds the GIL). Redis answers the same
problem by forking: the child gets a copy-on-write image of memory as it was at the fork, writes
it out and exits, while the parent goes on at once. The parent's cost is the fork itself (page
tables: milliseconds) and listing the names.

What must hold:
- The child touches nothing it shares with the parent but the snapshot folder: no SQLite
  connection (forked connections corrupt databases), no ZMQ socket, no output stream. It reads
  the session log's digests from a copy the parent took before the fork, writes the generation
  under the folder's own lock (every guarantee of a foreground save: signed, atomic, two writers,
  crash-safe), sends back what the parent must learn (the report, the store's incremental cache,
  the digest to record) and leaves with ``os._exit``.
- The parent learns the outcome on a thread that waits for the child: it adopts the child's
  store state, records the digest through the session log, and reports; a child that dies or
  hangs (``timeout``) is a failed snapshot with its reason, never a silent one.
- One background save at a time per store; a foreground save waits for it first.
- The child never competes with the user's cell: the kernel pauses it (SIGSTOP) while a cell runs
  and lets it go on between cells (``pause``/``resume``). Why: a kernel's IOPub socket drops
  messages past ZMQ's high-water mark when its reader falls behind, and under an output flood the
  dropped one can be the cell's ``idle`` status (the panel then never learns the cell ended). That
  happens without this extension too (a 20,000-line flood on a loaded 2-core machine lost lines in
  6 of 9 runs and the ``idle`` in 1), but any CPU the child takes meanwhile made it likelier: with
  the child running through the flood, a browser test lost the ``idle`` in 3 of 4 full runs. The
  ``timeout`` counts only the time the child was let run, and so does the child's per-value timer:
  the parent keeps the time it held the child stopped in a page both share (``_stops``), which the
  child's ``codec.Deadline`` reads.
- The child closes every socket it inherited (the kernel's ZMQ sockets, the server's connections):
  it must never write them, and an orphaned child must not keep the kernel's ports bound.
- The pipe carries our own child's pickle, written to a descriptor no other process holds; nothing
  read from a file is unpickled here.
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
import pickle
import queue
import select
import signal
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ipython_compact.namespace.snapshot.reports import SnapshotError, SnapshotReport

#: Attributes of ``SnapshotStore`` a save changes that the parent must adopt from the child.
STATE = ("_cache", "_last_full", "_sampled_since_full", "_pending", "_supersedes", "_high")


def fork_available() -> bool:
    return hasattr(os, "fork") and hasattr(os, "register_at_fork")


def history_writing(shell: Any) -> bool:
    """True while IPython's history thread is writing (or about to write) its database.

    Why: IPython registers a before-fork handler that stops and joins that thread, so a fork
    while it waits on a history database another kernel has locked blocks the kernel's main
    thread up to SQLite's busy timeout (measured: a 3 s lock held fork() for 4.9 s; a 6.9 s
    outlier in bench/bench_cell_wait.py). Checked without taking its locks (taking them could
    deadlock against that join); a write that starts right after the check is still waited for."""
    hm = getattr(shell, "history_manager", None)
    if hm is None or getattr(hm, "save_thread", None) is None:
        return False
    flag = getattr(hm, "save_flag", None)
    locks = (getattr(hm, "db_input_cache_lock", None), getattr(hm, "db_output_cache_lock", None))
    return bool(
        (flag is not None and flag.is_set()) or any(lock is not None and lock.locked() for lock in locks)
    )


def _open_descriptors() -> list[int]:
    for folder in ("/proc/self/fd", "/dev/fd"):
        with contextlib.suppress(OSError):
            return sorted(int(name) for name in os.listdir(folder) if name.isdigit())
    return []


def close_sockets(keep: int = -1) -> int:
    """Close every socket this process holds (in the child: the kernel's ZMQ sockets, the
    server's connections); returns how many were closed.

    Why: the child's copies would keep the kernel's ports bound after the kernel exits (a
    restarted kernel reuses them from its connection file and could not bind), and nothing in
    the child may ever read or write them. Closing a copy sends nothing to the peer while the
    parent holds the socket."""
    closed = 0
    for fd in _open_descriptors():
        if fd <= 2 or fd == keep:
            continue
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.close(fd)
                closed += 1
        except OSError:
            continue
    return closed


def _leave_with(parent: int) -> None:  # pragma: no cover - child process
    """A child whose kernel died leaves at once (it is reparented): its work has no reader."""

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.5)

    threading.Thread(target=watch, name="ipython-compact-snapshot-parent", daemon=True).start()


class _CopiedLedger:
    """The session log's digests as the parent read them before the fork; records are collected
    for the parent to write (the child never opens the database)."""

    def __init__(self, recorded: dict[int, str]) -> None:
        self._recorded = dict(recorded)
        self.records: list[tuple[int, str]] = []

    def record(self, generation: int, digest: str) -> None:
        self._recorded[generation] = digest
        self.records.append((generation, digest))

    def recorded(self) -> dict[int, str]:
        return dict(self._recorded)


_QUEUE: queue.SimpleQueue[tuple[BackgroundSave, int]] | None = None
_QUEUE_LOCK = threading.Lock()


def _collector() -> queue.SimpleQueue[tuple[BackgroundSave, int]]:
    """The one thread that waits for children: started once, so a save costs the main thread no
    thread start (starting one waits for it to run, ~10 ms on a busy machine)."""
    global _QUEUE
    with _QUEUE_LOCK:
        if _QUEUE is None:
            jobs: queue.SimpleQueue[tuple[BackgroundSave, int]] = queue.SimpleQueue()

            def serve() -> None:
                while True:
                    job, fd = jobs.get()
                    job._collect(fd)

            threading.Thread(target=serve, name="ipython-compact-snapshot-children", daemon=True).start()
            _QUEUE = jobs
        return _QUEUE


class _Empty(Exception):
    """The child found no user name to save."""


class BackgroundSave:
    """One automatic save in a forked child; ``wait`` for its outcome (``report``, ``error`` or ``empty``).

    ``items`` lists the ``(name, value)`` pairs; it is called in the child, on the copy, so the
    parent pays only for the fork."""

    def __init__(
        self,
        store: Any,
        items: Callable[[], list[tuple[str, Any]]],
        *,
        verify: str,
        timestamp: str | None,
        on_done: Callable[[BackgroundSave], None] | None = None,
        timeout: float = 600.0,
        objects: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.store = store
        self.report: SnapshotReport | None = None
        self.error: str | None = None
        self.pid: int | None = None
        self.empty = False  # the namespace held no user name: nothing was written
        self.told = False  # its failure was said to the user
        self._on_done = on_done
        self._timeout = timeout
        self._done = threading.Event()
        # Guards the child's pid against signals once it may be reaped (a reaped pid can be reused
        # by an unrelated process): pause/resume/kill only before ``_closing``.
        self._signal_lock = threading.Lock()
        self._closing = False
        self._paused_at: float | None = None
        self._paused_for = 0.0
        # Shared with the child (an anonymous shared mapping survives the fork): the seconds it was
        # stopped before, and since when it is stopped now (0: running); see ``_stopped_so_far``.
        self._stops = mmap.mmap(-1, 16)
        # The bindings at the fork (a C-level dict copy: milliseconds for 100,000 names): the child
        # saved these very objects, so the store's quick lane can name them once it adopts.
        self._objects: dict[str, Any] = {} if objects is None else dict(objects())
        self._start(items, verify, timestamp)

    # ------------------------------------------------------------------ pausing
    def pause(self) -> bool:
        """Stop the child while the user's cell runs (SIGSTOP): it then takes no CPU from the cell,
        from the kernel's output thread or from the server relaying that output. True if paused.

        Why: a kernel's IOPub socket drops messages past ZMQ's high-water mark (1,000) when its
        reader falls behind, the cell's final ``idle`` status included; any extra CPU load during an
        output flood makes that likelier (measured without this extension too)."""
        with self._signal_lock:
            if self._closing or self._paused_at is not None or self.pid is None:
                return False
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGSTOP)
                self._paused_at = time.monotonic()
                self._share_stops()
                return True
            return False

    def resume(self) -> None:
        """Let a paused child go on (SIGCONT); its paused time does not count against ``timeout``."""
        with self._signal_lock:
            self._resume_locked()

    def _resume_locked(self) -> None:
        if self._paused_at is None or self.pid is None:
            return
        self._paused_for += time.monotonic() - self._paused_at
        self._paused_at = None
        self._share_stops()  # before the child runs again: it must see the stop counted
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGCONT)

    def _share_stops(self) -> None:
        with contextlib.suppress(ValueError):  # closed: the child is gone
            struct.pack_into("<dd", self._stops, 0, self._paused_for, self._paused_at or 0.0)

    def _stopped_so_far(self) -> float:  # pragma: no cover - called in the child
        before, since = struct.unpack_from("<dd", self._stops, 0)
        return float(before + (time.monotonic() - since if since else 0.0))

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    def _running_for(self, started: float) -> float:
        paused = self._paused_for + (
            time.monotonic() - self._paused_at if self._paused_at is not None else 0.0
        )
        return time.monotonic() - started - paused

    # ------------------------------------------------------------------ parent
    def _start(self, items: Callable[[], list[tuple[str, Any]]], verify: str, timestamp: str | None) -> None:
        recorded = self.store.recorded_digests()  # read in the parent: the child never opens the database
        parent = os.getpid()
        read_fd, write_fd = os.pipe()
        # Frozen until the child is done: a collection in either process would write to every
        # object's header and copy every page of the image (a full collection in the parent once
        # held the next cell for seconds while the child wrote a 1M-row frame).
        gc.freeze()
        try:
            pid = os.fork()
        except OSError:
            gc.unfreeze()
            self._stops.close()
            os.close(read_fd)
            os.close(write_fd)
            raise
        if pid == 0:  # pragma: no cover - runs in the child, which leaves through os._exit
            os.close(read_fd)
            self._child(items, verify, timestamp, recorded, write_fd, parent)
        os.close(write_fd)
        self.pid = pid
        _collector().put((self, read_fd))

    def _collect(self, read_fd: int) -> None:
        chunks: list[bytes] = []
        started = time.monotonic()
        killed = False
        try:
            while True:
                ready, _, _ = select.select([read_fd], [], [], 0.25)
                if not ready:
                    if not killed and self._running_for(started) > self._timeout:
                        killed = self._kill()
                    continue
                chunk = os.read(read_fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            with self._signal_lock:  # from here on the pid may be reaped: no more signals to it
                self._resume_locked()  # a child paused after its last write must run to exit
                self._closing = True
            gc.unfreeze()  # the child has its image: the parent's objects are collected again
            self._stops.close()
        status = 0
        with contextlib.suppress(ChildProcessError):
            _, status = os.waitpid(self.pid or -1, 0)
        try:
            self._adopt(b"".join(chunks), status)
        except Exception as exc:  # never silent
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._objects = {}  # the fork's bindings are not kept alive past the save
            self._done.set()
            if self._on_done is not None:
                with contextlib.suppress(Exception):
                    self._on_done(self)

    def _kill(self) -> bool:
        with self._signal_lock:
            if self._closing or not self.pid:
                return False
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)  # works on a stopped child too
            return True

    def _adopt(self, raw: bytes, status: int) -> None:
        if not raw:
            how = (
                f"was killed by signal {os.WTERMSIG(status)}"
                if os.WIFSIGNALED(status)
                else f"exited with status {os.waitstatus_to_exitcode(status)}"
            )
            hint = (
                (f" after {self._timeout:g} s of work")
                if os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9
                else ""
            )
            raise SnapshotError(
                f"the background snapshot process {how}{hint} before it finished; nothing "
                "was written (the next cell tries again)"
            )
        outcome = pickle.loads(raw)  # our own child's bytes through a private pipe (module doc)
        if outcome[0] == "empty":  # no user name yet: nothing written, nothing to report
            self.empty = True
            return
        if outcome[0] != "ok":
            self.error = str(outcome[1])
            return
        _, report, state, records, seen, lane = outcome
        with self.store.state_lock():
            for name in STATE:
                setattr(self.store, name, state[name])
            self.store.forget_recorded()
            self.store.adopt_seen(self._objects, seen, lane)
        ledger = self.store.ledger
        if ledger is not None:
            for generation, digest in records:
                ledger.record(generation, digest)
        self.report = report

    def wait(self, timeout: float | None = None) -> bool:
        """True once the outcome is known."""
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    # ------------------------------------------------------------------ child
    def _child(
        self,
        items: Callable[[], list[tuple[str, Any]]],
        verify: str,
        timestamp: str | None,
        recorded: dict[int, str],
        write_fd: int,
        parent: int,
    ) -> None:  # pragma: no cover - child
        code = 0
        try:
            os.nice(19)  # the user's cells, the server and the browser come first on a busy machine
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            close_sockets(keep=write_fd)
            _leave_with(parent)
            sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the child exits, never closes
            # Another thread of the parent (a comm request listing generations) may have held the
            # store's lock at the fork; that thread does not exist here, so the lock would never open.
            self.store._lock = threading.Lock()
            ledger = _CopiedLedger(recorded)
            self.store.ledger = ledger
            # deferred (start-up): the codec imports dill; loading the extension must not
            from ipython_compact.namespace.snapshot import codec

            codec.count_stops(self._stopped_so_far)  # the per-value timer skips the stops
            try:
                listed = items()  # listed here, on the copy: 100,000 names took the parent ~0.5 s
                if not listed:
                    raise _Empty
                builds = self.store.lane_builds
                report = self.store.save(listed, automatic=True, verify=verify, timestamp=timestamp)
                state = {name: getattr(self.store, name) for name in STATE}
                # a lane this save built (None: the kernel keeps its own, still correct)
                lane = self.store.portable_lane() if self.store.lane_builds != builds else None
                payload = pickle.dumps(
                    (
                        "ok",
                        report,
                        state,
                        ledger.records,
                        self.store.seen_names(),
                        lane,
                    ),
                    protocol=pickle.HIGHEST_PROTOCOL,
                )
            except _Empty:
                payload = pickle.dumps(("empty",))
            except BaseException as exc:  # reported to the parent, which says it to the user
                payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
            view = memoryview(payload)
            while view:
                view = view[os.write(write_fd, view) :]
        except BaseException:
            code = 1
        finally:
            os._exit(code)


__all__ = ["STATE", "BackgroundSave", "close_sockets", "fork_available", "history_writing"]
