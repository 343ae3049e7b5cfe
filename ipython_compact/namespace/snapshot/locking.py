"""The writer lock of one session's snapshot folder, and the folder's safe creation.

Why: any number of kernels and processes may snapshot one session (two notebooks bound by
``IPYTHON_COMPACT_SESSION``, the agent's host kernel, a terminal IPython). Numbering a
generation, reusing a payload another process wrote, and pruning are only safe while no one else
does the same, so a save holds an exclusive ``flock`` on ``<folder>/.lock`` from listing the
payloads to pruning; a restore holds a shared one while it reads payloads.

What must hold: the lock file is created owner-only and never followed through a symlink;
waiting is bounded (``SnapshotError`` with what to do after ``timeout`` seconds), and with
``timeout=0`` there is no wait at all: an automatic snapshot runs on the kernel's main thread
between the user's cells, so it skips (``SnapshotLockBusy``) rather than stall every cell behind a
stuck holder (a SIGSTOP'd process once stalled each cell ~60 s); a process that dies releases its lock (the
kernel drops ``flock`` locks of a dead process).
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from ipython_compact.namespace.snapshot.reports import SnapshotError


class SnapshotLockBusy(SnapshotError):
    """Another process holds the folder's lock and the caller chose not to wait (``timeout=0``)."""


class WriterLocks(Protocol):
    """Where the writer lock of snapshots on object storage lives: the session store (an object
    store has no ``flock``). ``hold`` behaves as ``folder_lock``: exclusive or shared, bounded
    waiting (``TimeoutError`` after ``timeout``, at once with 0), released when its holder dies; it
    yields a check that says whether the lock is still held (a dropped connection loses it)."""

    def hold(
        self, name: str, *, shared: bool = False, timeout: float = 60.0
    ) -> AbstractContextManager[Callable[[], bool]]: ...


@contextmanager
def folder_lock(directory: Path, *, shared: bool = False, timeout: float = 60.0) -> Iterator[None]:
    """Hold the folder's lock (exclusive for writers, shared for readers) for the ``with`` body."""
    with file_lock(directory / ".lock", str(directory), shared=shared, timeout=timeout):
        yield


@contextmanager
def file_lock(path: Path, what: str, *, shared: bool = False, timeout: float = 60.0) -> Iterator[None]:
    """``flock`` on ``path`` (created 0600, never through a link); ``what`` names the snapshots it guards."""
    directory = what
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise SnapshotError(
            f"cannot open the snapshot lock {path} ({exc.strerror or exc}); check that the "
            "folder is a writable directory you own"
        ) from None
    try:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if timeout <= 0:
                    raise SnapshotLockBusy(
                        f"another process is writing a snapshot of {directory}; this automatic snapshot was "
                        "skipped rather than wait (the next cell tries again)"
                    ) from None
                if time.monotonic() >= deadline:
                    raise SnapshotError(
                        f"another kernel has held the snapshot lock of {directory} for over {timeout:g} s; "
                        "try again when its snapshot finishes"
                    ) from None
                time.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def make_private_dirs(directory: Path, root: Path | None) -> None:
    """Create ``directory`` (0700) refusing symlinks: every component below ``root`` is checked.

    Without ``root`` only ``directory`` itself is checked. Nothing outside is created or chmodded:
    a symlinked ``snapshots/`` folder is refused before anything is written through it.
    """
    directory = Path(directory)
    if root is not None:
        root = Path(root)
        try:
            parts = directory.relative_to(root).parts
        except ValueError:
            raise SnapshotError(
                f"snapshot folder {directory} is not inside the data directory {root}"
            ) from None
        current = root
        chain = []
        for part in parts:
            current = current / part
            chain.append(current)
    else:
        chain = [directory]
    for path in chain:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            path.mkdir(mode=0o700, parents=root is None, exist_ok=True)
            st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise SnapshotError(
                f"{path} is a symbolic link; snapshots are never written through links. "
                f"Remove the "
                "link (or point IPYTHON_COMPACT_DIR at a real directory) and try again"
            )
        if not stat.S_ISDIR(st.st_mode):
            raise SnapshotError(
                f"{path} is not a directory; move it aside so the snapshot folder can be created"
            )
    os.chmod(directory, 0o700)
