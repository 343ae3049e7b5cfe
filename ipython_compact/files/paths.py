"""Where the project keeps its files: one data directory for everything.

``IPYTHON_COMPACT_DIR`` overrides the location (tests and CI set it). The directory holds the
session database, the kernel snapshots and the per-user signing key, and is created owner-only.
Each of the three can be moved out of it: the log to a server (``IPYTHON_COMPACT_DB``), the
snapshots to object storage (``IPYTHON_COMPACT_SNAPSHOTS``), and the key to a file every host of a
team is given (``IPYTHON_COMPACT_KEY_FILE``), docs/team.md.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_DIR = "IPYTHON_COMPACT_DIR"
ENV_DB = "IPYTHON_COMPACT_DB"
"""A database for the session log other than ``<data dir>/sessions.db``: a file path or a URL
(``postgresql://user@host/dbname``, docs/team.md)."""
ENV_SNAPSHOTS = "IPYTHON_COMPACT_SNAPSHOTS"
"""Where snapshots go instead of ``<data dir>/snapshots``: a folder, or an fsspec URL
(``s3://bucket/prefix``, ``gs://``, ``az://``, ``file://``), docs/team.md."""
ENV_KEY_FILE = "IPYTHON_COMPACT_KEY_FILE"
"""The snapshot signing key's file instead of ``<data dir>/key`` (snapshots on object storage
need the same key on every host that restores them)."""


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


def database_location() -> str | Path:
    """The session log to open when none is named: ``$IPYTHON_COMPACT_DB`` (a path or a URL),
    else ``database_path()``."""
    chosen = os.environ.get(ENV_DB, "").strip()
    return chosen if chosen else database_path()


def snapshot_location() -> str | Path:
    """Where snapshots go when nothing is configured: ``$IPYTHON_COMPACT_SNAPSHOTS`` (a folder or a
    URL), else ``<data dir>/snapshots``."""
    chosen = os.environ.get(ENV_SNAPSHOTS, "").strip()
    if not chosen:
        return data_dir() / "snapshots"
    return chosen if "://" in chosen else Path(chosen).expanduser()


def snapshots_dir() -> Path:
    path = data_dir() / "snapshots"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def key_path() -> Path:
    """The signing key's file: ``$IPYTHON_COMPACT_KEY_FILE``, else ``<data dir>/key``."""
    chosen = os.environ.get(ENV_KEY_FILE, "").strip()
    return Path(chosen).expanduser() if chosen else data_dir() / "key"


def read_only_reason(db: Path) -> str | None:
    """Why SQLite cannot open ``db`` when the cause is a read-only place, else None.

    SQLite in WAL mode writes ``-wal``/``-shm`` files beside the database even to read it, so a
    read-only directory makes every command fail with SQLite's terse "unable to open database file"."""
    folder = db.parent if str(db.parent) else Path(".")
    if folder.is_dir() and not os.access(folder, os.W_OK):
        return (
            f"{db}: the directory {folder} is read-only; SQLite needs to write its journal files "
            "beside the database, even to read it"
        )
    if db.is_file() and not os.access(db, os.W_OK):
        return f"{db}: the database file is read-only"
    return None
