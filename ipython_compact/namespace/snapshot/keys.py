"""The per-user signing key: 32 random bytes in an owner-only file, created on first use.

What must hold: the key file appears complete or not at all — it is written to a temporary file
and hard-linked into place, so a second process creating it at the same moment either wins or
reads the winner's complete key (never an empty one). Every problem is one sentence saying what
to do; a symlink or FIFO at the key's path is refused, not followed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from ipython_compact.namespace.snapshot.reports import SnapshotError

KEY_BYTES = 32


def _read_existing(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise SnapshotError(
            f"signing key {path} cannot be opened ({exc.strerror or exc}); if it is a link, "
            f"replace "
            "it with the real file, or move it aside to make a new key"
        ) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise SnapshotError(
                f"signing key {path} is not a regular file; move it aside and a new key is made"
            )
        if st.st_mode & 0o077:
            raise SnapshotError(
                f"signing key {path} is readable by other users (mode "
                f"{oct(st.st_mode & 0o777)}); "
                f"run: chmod 600 {path}"
            )
        key = f.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise SnapshotError(
            f"signing key {path} has {len(key)} bytes, expected {KEY_BYTES}: it is damaged. "
            f"Snapshots "
            f"signed with it cannot be verified any more; move it aside (mv {path} "
            f"{path}.bad) and a "
            "new key is made on the next snapshot"
        )
    return key


def load_shared_key(path: Path, where: str) -> bytes:
    """The key at ``path`` for snapshots at ``where`` (object storage): read, never created.

    Why never created: a host that made its own key would sign snapshots no other host can verify,
    and would refuse every snapshot the others wrote. The key is never stored beside the data."""
    if not os.path.lexists(path):
        raise SnapshotError(
            f"snapshots on {where} need the signing key every host shares, and {path} does not exist. "
            f"Give each host the same 32-byte key file (0600) and point IPYTHON_COMPACT_KEY_FILE at it; "
            f"make one with: head -c 32 /dev/urandom > key && chmod 600 key (docs/team.md)"
        )
    return _read_existing(path)


def load_or_create_key(path: Path) -> bytes:
    """The key at ``path``, created atomically when missing; SnapshotError when it is unsafe or damaged."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if os.path.lexists(path):
        return _read_existing(path)
    key = secrets.token_bytes(KEY_BYTES)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # atomic: fails if another process created the key first
        except FileExistsError:
            return _read_existing(path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return key
