"""The per-user signing key: 32 random bytes in an owner-only file, created on first use."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from ipython_compact.namespace.snapshot.reports import SnapshotError


def load_or_create_key(path: Path) -> bytes:
    """The key at ``path``, created when missing; SnapshotError when it is unsafe or damaged."""
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
