"""Where the project keeps its files: one data directory for everything.

``IPYTHON_COMPACT_DIR`` overrides the location (tests and CI set it). The directory holds the
session database, the kernel snapshots and the per-user signing key, and is created owner-only.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_DIR = "IPYTHON_COMPACT_DIR"
ENV_DB = "IPYTHON_COMPACT_DB"
"""A database for the session log other than ``<data dir>/sessions.db``: a file path or a URL
(``postgresql://user@host/dbname``, docs/team.md)."""


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


def snapshots_dir() -> Path:
    path = data_dir() / "snapshots"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def key_path() -> Path:
    return data_dir() / "key"


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
