"""Writes that found the session database locked, kept on disk beside it until they land.

Why: the kernel's bookkeeping (snapshot records, a cell's file operations, the digests that guard
snapshots against rollback) is written after every cell. While another process holds the write
lock, holding the cell would freeze the notebook, and a queue in memory dies with the kernel: the
third red team saw 0 of 4 queued entries written at shutdown and 5 of 8 dropped after the retry
budget, two of them snapshot digests. So such a write is appended to ``<db>.pending`` (JSON lines,
owner-only, fsynced) and replayed, in order, by whoever writes next: the kernel's retry thread,
the next cell, or the next kernel on the same database.

What must hold:
- A record is on disk before ``add`` returns, and leaves the file only after it landed.
- Replay applies records in the order they were added; one replayer at a time (across processes
  and threads); a record applied twice (a replayer killed between landing it and removing it)
  does no harm, because each append carries its entry id and an id already present is skipped.
- Appending never waits for a replay that waits on the database: the file's lock is held only
  to append a line or to drop the landed lines at its head.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ipython_compact.files.safety import UnsafePathError, kind_of, replace_atomically
from ipython_compact.store.errors import DatabaseLockedError

SUFFIX = ".pending"
_MAX_BYTES = 64 << 20


class PendingJournal:
    """The journal of one database file (``<db>.pending``)."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self.path = self.db_path.with_name(self.db_path.name + SUFFIX)
        self._lock_path = self.db_path.with_name(self.db_path.name + SUFFIX + ".lock")
        self._replay_path = self.db_path.with_name(self.db_path.name + SUFFIX + ".replay")

    @contextlib.contextmanager
    def _flock(self, path: Path, *, blocking: bool = True) -> Iterator[bool]:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnsafePathError(f"{path}: is {kind_of(os.fstat(fd).st_mode)}, not a lock file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def add(self, record: dict[str, Any]) -> None:
        """Append one record durably (fsynced before this returns)."""
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._flock(self._lock_path):
            fd = os.open(
                self.path,
                os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                0o600,
            )
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise UnsafePathError(
                        f"{self.path}: the pending-writes journal is {kind_of(info.st_mode)}"
                    )
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)

    def _read(self) -> list[bytes]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return []
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnsafePathError(f"{self.path}: the pending-writes journal is {kind_of(info.st_mode)}")
            if info.st_size > _MAX_BYTES:
                raise UnsafePathError(
                    f"{self.path}: the pending-writes journal is {info.st_size:,} bytes; not read"
                )
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read()
        finally:
            os.close(fd)
        return [line for line in data.split(b"\n") if line.strip()]

    def records(self) -> list[dict[str, Any]]:
        """Every record waiting, oldest first (a line that is not a JSON object is skipped)."""
        with self._flock(self._lock_path):
            lines = self._read()
        out: list[dict[str, Any]] = []
        for line in lines:  # one record per line, so landed records are dropped by position
            try:
                doc = json.loads(line)
            except ValueError:
                doc = None
            out.append(
                doc
                if isinstance(doc, dict)
                else {"op": "unreadable", "line": line[:200].decode("utf-8", "replace")}
            )
        return out

    def count(self) -> int:
        """How many records wait (0 when the journal is absent: one ``stat``, no lock)."""
        try:
            if os.stat(self.path).st_size == 0:
                return 0
        except OSError:
            return 0
        with contextlib.suppress(OSError):
            return len(self.records())
        return 0

    def _drop_head(self, landed: int) -> None:
        with self._flock(self._lock_path):
            lines = self._read()[landed:]
            if lines:
                replace_atomically(self.path, b"".join(line + b"\n" for line in lines), what="the journal")
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)

    def replay(self, apply: Callable[[dict[str, Any]], None]) -> tuple[int, int]:
        """Apply waiting records in order until one finds the database locked: ``(landed, left)``.

        Returns ``(0, count)`` at once when another replayer is at work. A record ``apply`` refuses
        with anything but ``DatabaseLockedError`` is dropped from the journal and re-raised after
        the landed ones are removed, so one bad record never blocks the rest forever.
        """
        with self._flock(self._replay_path, blocking=False) as mine:
            if not mine:
                return 0, self.count()
            records = self.records()
            landed = 0
            failure: Exception | None = None
            for record in records:
                try:
                    apply(record)
                except DatabaseLockedError:
                    break
                except Exception as exc:
                    landed += 1
                    failure = exc
                    break
                landed += 1
            if landed:
                self._drop_head(landed)
            if failure is not None:
                raise failure
            return landed, len(records) - landed


__all__ = ["SUFFIX", "PendingJournal"]
