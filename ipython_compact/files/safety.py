"""Opening and replacing the package's own files without being steered by what lies at a path.

Every file the package writes in the data directory (bindings, the database, journals, exports,
snapshots) is created by this process, owner-only, and put in place with a rename. Two ways that
went wrong before (red team 3, items 2 and 7):

- a fixed temporary name (``bindings.tmp``) opened with ``O_CREAT|O_TRUNC`` followed a planted
  symlink and overwrote its target, and made concurrent writers rename each other's file away;
- a FIFO where a file belongs blocked ``open`` forever, and a device (``/dev/null``) was taken for
  a database, so SQLite created ``/dev/null-journal``.

What must hold: a temporary file has a fresh random name and is created exclusively without
following links (``O_EXCL|O_NOFOLLOW``), in the target's own folder so the rename is atomic;
the rename replaces a link at the target, never writes through it; a path that is a FIFO, a
device, a socket, a directory or a dangling symlink is refused with one sentence naming it and
what it is, before anything is opened in a way that could block or create.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

T = TypeVar("T")

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class UnsafePathError(OSError):
    """A path the package must not open as a file; the message says what lies there."""


def kind_of(mode: int) -> str:
    """What a ``st_mode`` describes, in words ("a FIFO (named pipe)", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_regular(path: Path | str, what: str) -> bool:
    """True when ``path`` is a regular file, False when nothing is there; else ``UnsafePathError``.

    ``what`` names the file for the message ("the session database"). A symlink to a regular file
    is followed (users link their databases on purpose); a dangling one is refused, because
    creating the file would create it wherever the link points.
    """
    p = Path(path)
    try:
        info = os.stat(p)
    except FileNotFoundError:
        if os.path.islink(p):
            raise UnsafePathError(
                f"{p}: {what} is a symlink to {os.readlink(p)}, which does not exist; "
                "refusing to create a file through it"
            ) from None
        return False
    except NotADirectoryError:
        raise UnsafePathError(f"{p}: a part of this path is not a directory") from None
    if not stat.S_ISREG(info.st_mode):
        raise UnsafePathError(
            f"{p}: {what} is {kind_of(info.st_mode)}, not a regular file; refusing to use it"
        )
    return True


def read_regular(path: Path | str, what: str, *, max_bytes: int) -> bytes | None:
    """The bytes of a regular file (None when absent), read without ever blocking on a FIFO.

    Opened non-blocking and checked on the descriptor, so a path swapped after a check cannot
    make the read hang; a file over ``max_bytes`` is refused rather than read whole.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        check_regular(path, what)  # a dangling link says so
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(
                f"{path}: {what} is {kind_of(info.st_mode)}, not a regular file; refusing to use it"
            )
        if info.st_size > max_bytes:
            raise UnsafePathError(
                f"{path}: {what} is {info.st_size:,} bytes, more than the {max_bytes:,} allowed; not read"
            )
        os.set_blocking(fd, True)
        chunks = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise UnsafePathError(f"{path}: {what} grew past {max_bytes:,} bytes while it was read; not read")
        return data
    finally:
        os.close(fd)


def create_temp(folder: Path, prefix: str) -> tuple[int, Path]:
    """A new owner-only file with a random name in ``folder``: ``(fd, path)``.

    ``O_EXCL|O_NOFOLLOW`` make the create fail on anything already there, link or not, so no
    planted name can redirect it; the random name lets concurrent writers never collide.
    """
    for _ in range(16):
        tmp = folder / f".{prefix}.{os.urandom(8).hex()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        return fd, tmp
    raise FileExistsError(f"{folder}: could not create a temporary file (16 names taken)")


def _into_place(target: Path, what: str, fill: Callable[[Any], T], *, text: bool, durable: bool = True) -> T:
    """Run ``fill`` into a new owner-only temporary file beside ``target``, then rename it over
    ``target``: a reader never sees half a file, a failure leaves ``target`` as it was and no
    temporary file behind. A FIFO or device at ``target`` is refused (renaming over it would
    silently replace it); a symlink there is replaced, never written through."""
    if not os.path.islink(target):
        check_regular(target, what)
    fd, tmp = create_temp(target.parent, target.name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") if text else os.fdopen(fd, "wb") as out:
            result = fill(out)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return result


def replace_atomically(path: Path, data: bytes, *, what: str, durable: bool = True) -> None:
    """Put ``data`` at ``path`` whole or not at all, owner-only (see ``_into_place``)."""
    _into_place(path, what, lambda out: out.write(data), text=False, durable=durable)


def write_private_file(target: Path, write: Callable[[TextIO], T], *, what: str = "the output file") -> T:
    """Text written by ``write`` put at ``target`` whole or not at all, owner-only (see ``_into_place``)."""
    return _into_place(target, what, write, text=True)


__all__ = [
    "UnsafePathError",
    "check_regular",
    "create_temp",
    "kind_of",
    "read_regular",
    "replace_atomically",
    "write_private_file",
]
