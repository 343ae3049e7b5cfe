"""Writes that found the session database locked, kept on disk beside it until they land.

Why: the kernel's bookkeeping (snapshot records, a cell's file operations, the digests that guard
snapshots against rollback) is written after every cell. While another process holds the write
lock, holding the cell would freeze the notebook, and a queue in memory dies with the kernel: the
third red team saw 0 of 4 queued entries written at shutdown and 5 of 8 dropped after the retry
budget, two of them snapshot digests. So such a write is appended to ``<db>.pending`` (JSON lines,
owner-only, fsynced) and replayed, in order, by whoever writes next: the kernel's retry thread,
the next cell, or the next kernel on the same database.

What must hold:
- A record is on disk before ``add`` returns, and leaves the file only after it landed (or was
  refused by ``apply`` and reported). Any size is replayed: the file is read a piece at a time
  (the fourth red team's 64 MiB journal was refused whole, and its records never landed).
- Replay applies records in the order they were added, including records added while it runs;
  one replayer at a time (across processes and threads); a record applied twice (a replayer
  killed between landing it and removing it) does no harm, because each append carries its entry
  id and an id already present is skipped.
- A line cut short by a crash never swallows the record written after it: ``add`` ends such a
  line first, and replay reports it (``on_refused``) and drops it.
- A journal that cannot be read or rewritten, or a replay lock that cannot be taken (a folder
  or a FIFO where the file should be), raises ``JournalError`` saying so, and the journal is kept.
- Appending never waits for a replay that waits on the database: the file's lock is held only
  to append a line, to read a piece, or to drop the landed lines at its head.
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

from ipython_compact.files.safety import UnsafePathError, create_temp, kind_of
from ipython_compact.store.errors import DatabaseLockedError, JournalError

SUFFIX = ".pending"
_PIECE = 1 << 20
"""Bytes read per step (and records read per replay round, at least one line)."""
_DROP_EVERY = 8 << 20
"""Landed bytes after which a long replay drops them from the journal before it goes on."""
_MAX_LINE = 64 << 20
"""A line longer than this is not a record ``add`` wrote: it is reported and skipped unread."""

Refused = Callable[[dict[str, Any], Exception], None]


class _Line:
    """One non-blank line of the journal: its bytes (None when longer than ``_MAX_LINE``) and
    the offset just past it."""

    __slots__ = ("data", "end")

    def __init__(self, data: bytes | None, end: int) -> None:
        self.data, self.end = data, end


def _lines(fd: int, *, start: int = 0, limit: int | None = None) -> Iterator[_Line]:
    """The non-blank lines of the open file ``fd`` from offset ``start``, read a piece at a time;
    stops after the line that reaches ``limit`` bytes past ``start``. A last line without its
    newline is yielded too; a line longer than ``_MAX_LINE`` is yielded without its bytes."""
    offset = start  # the file offset of ``buf``'s first byte
    buf = b""
    skipping = False  # inside a line longer than _MAX_LINE
    while True:
        piece = os.pread(fd, _PIECE, offset + len(buf))
        if not piece:
            if skipping or buf.strip():
                yield _Line(None if skipping else buf, offset + len(buf))
            return
        buf += piece
        if b"\n" in piece:
            *complete, rest = buf.split(b"\n")
            for part in complete:
                offset += len(part) + 1
                if skipping or part.strip():
                    yield _Line(None if skipping else part, offset)
                    skipping = False
                if limit is not None and offset - start >= limit:
                    return
            buf = rest
        if len(buf) > _MAX_LINE:
            skipping, offset, buf = True, offset + len(buf), b""


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

    def _open(self, flags: int) -> int:
        """The journal opened with ``flags``; ``UnsafePathError`` when it is not a regular file."""
        fd = os.open(self.path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise UnsafePathError(f"{self.path}: the pending-writes journal is {kind_of(info.st_mode)}")
        return fd

    def add(self, record: dict[str, Any]) -> None:
        """Append one record durably (fsynced before this returns). A last line a crash cut short
        is ended first, so it stays a line of its own and this record stays whole."""
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._flock(self._lock_path):
            fd = self._open(os.O_RDWR | os.O_APPEND | os.O_CREAT)  # read: to see a last line cut short
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)

    def _read(self, start: int = 0, limit: int | None = None) -> list[_Line]:
        """The lines waiting from offset ``start`` (up to the one that reaches ``limit`` bytes past
        it), read under the file's lock."""
        with self._flock(self._lock_path):
            try:
                fd = self._open(os.O_RDONLY)
            except FileNotFoundError:
                return []
            try:
                return list(_lines(fd, start=start, limit=limit))
            finally:
                os.close(fd)

    @staticmethod
    def _parsed(line: _Line) -> dict[str, Any] | None:
        if line.data is None:
            return None
        try:
            doc = json.loads(line.data)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def records(self) -> list[dict[str, Any]]:
        """Every record waiting, oldest first (a line that is not a JSON object is shown as
        ``{"op": "unreadable", "line": …}``)."""
        out: list[dict[str, Any]] = []
        for line in self._read():
            doc = self._parsed(line)
            out.append(doc if doc is not None else {"op": "unreadable", "line": _shown(line)})
        return out

    def waiting(self) -> bool:
        """Whether records may wait: the journal is a non-empty regular file (one ``stat``; a
        folder or FIFO in its place holds none, and ``add`` refuses to write there)."""
        try:
            info = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        return stat.S_ISREG(info.st_mode) and info.st_size > 0

    def count(self) -> int:
        """How many records wait (0 when the journal is absent or cannot be read)."""
        try:
            if os.stat(self.path).st_size == 0:
                return 0
        except OSError:
            return 0
        with contextlib.suppress(OSError), self._flock(self._lock_path):
            fd = self._open(os.O_RDONLY)
            try:
                return sum(1 for _ in _lines(fd))
            finally:
                os.close(fd)
        return 0

    def _drop_head(self, offset: int) -> None:
        """Remove the journal's first ``offset`` bytes (landed lines): the rest is copied into a
        new file that replaces it, so a crash leaves either the old journal or the new one."""
        with self._flock(self._lock_path):
            fd = self._open(os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                if offset >= size:
                    os.unlink(self.path)
                    return
                out, tmp = create_temp(self.path.parent, self.path.name)
                try:
                    at = offset
                    while at < size:
                        piece = os.pread(fd, _PIECE, at)
                        if not piece:
                            break
                        view = memoryview(piece)
                        while view:
                            view = view[os.write(out, view) :]
                        at += len(piece)
                    os.fsync(out)
                    os.close(out)
                    out = -1
                    os.replace(tmp, self.path)
                except BaseException:
                    if out >= 0:
                        os.close(out)
                    tmp.unlink(missing_ok=True)
                    raise
            finally:
                os.close(fd)

    def replay(
        self, apply: Callable[[dict[str, Any]], None], on_refused: Refused | None = None
    ) -> tuple[int, int]:
        """Apply waiting records in order until none is left or one finds the database locked:
        ``(landed, left)``. Records added while this runs are replayed by it too.

        Returns ``(0, count)`` at once when another replayer is at work. A record ``apply``
        refuses with anything but ``DatabaseLockedError``, and a line that is no record (cut short
        by a crash), is dropped and given to ``on_refused`` (without one, the first is raised at
        the end), so one bad record never blocks the rest. ``JournalError`` when the journal or
        its replay lock cannot be used: nothing is dropped then."""
        refused: list[Exception] = []

        def refuse(record: dict[str, Any], exc: Exception) -> None:
            if on_refused is not None:
                on_refused(record, exc)
            else:
                refused.append(exc)

        try:
            with self._flock(self._replay_path, blocking=False) as mine:
                if not mine:
                    return 0, self.count()
                landed = self._replay_rounds(apply, refuse)
        except OSError as exc:
            raise JournalError(
                f"{self.path}: the pending writes cannot be replayed ({exc}); they stay in the journal "
                "and are replayed once that is fixed",
                path=self.path,
            ) from exc
        if refused:
            raise refused[0]
        return landed, self.count()

    def _replay_rounds(self, apply: Callable[[dict[str, Any]], None], refuse: Refused) -> int:
        """Replay a piece at a time from the head; the lines dealt with are dropped every
        ``_DROP_EVERY`` bytes and at the end (only this replayer drops lines, so the offsets of
        the lines not yet dropped stay put while adders append)."""
        landed = 0
        done = 0  # offset past the last line dealt with (landed, or refused and reported)
        try:
            while True:
                lines = self._read(start=done, limit=_PIECE)
                if not lines:
                    return landed
                for line in lines:
                    record = self._parsed(line)
                    if record is None:
                        problem = f"a line is no record (cut short by a crash?): {_shown(line)}"
                        refuse({"op": "unreadable"}, ValueError(f"{self.path}: {problem}"))
                    else:
                        try:
                            apply(record)
                        except DatabaseLockedError:
                            return landed
                        except Exception as exc:
                            refuse(record, exc)
                        else:
                            landed += 1
                    done = line.end
                if done >= _DROP_EVERY:
                    self._drop_head(done)
                    done = 0
        finally:
            if done:
                self._drop_head(done)


def _shown(line: _Line) -> str:
    if line.data is None:
        return f"(a line longer than {_MAX_LINE:,} bytes)"
    return repr(line.data[:200].decode("utf-8", "replace"))


__all__ = ["SUFFIX", "JournalError", "PendingJournal"]
