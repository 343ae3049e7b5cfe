"""Where the project keeps its files: one data directory for everything.

``IPYTHON_COMPACT_DIR`` overrides the location (tests and CI set it). The directory holds the
session database, the kernel snapshots and the per-user signing key, and is created owner-only.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_DIR = "IPYTHON_COMPACT_DIR"


def data_dir() -> Path:
    """The data directory; created with mode 0700 when missing."""
    override = os.environ.get(ENV_DIR)
    if override:
        path = Path(override).expanduser()
    else:
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        path = Path(base) / "ipython-compact"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def database_path() -> Path:
    return data_dir() / "sessions.db"


def snapshots_dir() -> Path:
    path = data_dir() / "snapshots"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def key_path() -> Path:
    return data_dir() / "key"
