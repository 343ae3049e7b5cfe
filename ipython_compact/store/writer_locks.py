"""Named writer locks kept by the session store, for what has no lock of its own: snapshots on
object storage (a bucket has no ``flock`` and no rename; ``namespace.snapshot.places``).

Why in the session store: every process that snapshots a session already reaches its session log,
on this host or another; the log's engine is the one thing they share that can keep a lock.

- PostgreSQL (``AdvisoryLocks``): a session-level advisory lock (exclusive for writers, shared for
  readers) on a connection of the lock's own, opened for the hold and closed after it. The server
  releases it when that connection ends, so a writer killed on any host frees it at once; no lease
  to expire, no clock to trust. A connection that drops mid-save loses the lock: the check sees
  that and the save commits nothing (its payloads are pruned by the next writer).
- SQLite (``FileLocks``): the log is a file on one host, and so are all its writers: an ``flock``
  on a file in a private folder beside the database (``<db>.snapshot-locks/``); the kernel drops
  it when the holder dies.

What must hold: ``hold`` waits at most ``timeout`` seconds (none at all with 0) and then raises
``TimeoutError``; it yields a check that says whether the lock is still held (a commit asks it last);
a lock is never held past the ``with`` body; a forked child never uses a
connection of its parent (each hold opens its own, and ``fork_safety`` blinds inherited ones).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ipython_compact.store.errors import StoreError
from ipython_compact.store.location import LocationError, is_postgres, redact, sqlite_path

POLL = 0.02  # seconds between two tries while waiting


def _deadline_error(name: str, timeout: float) -> TimeoutError:
    if timeout <= 0:
        return TimeoutError(f"{name} is held by another writer")
    return TimeoutError(f"{name} has been held by another writer for over {timeout:g} s")


class FileLocks:
    """``flock`` files beside a SQLite session log (module doc)."""

    def __init__(self, db_path: Path) -> None:
        self.directory = db_path.parent / f"{db_path.name}.snapshot-locks"

    def _folder(self) -> Path:
        try:
            st = os.lstat(self.directory)
        except FileNotFoundError:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = os.lstat(self.directory)
        if not stat.S_ISDIR(st.st_mode):  # a link or a file: never followed
            raise StoreError(f"{self.directory} is not a directory; move it aside", path=str(self.directory))
        return self.directory

    @contextmanager
    def hold(self, name: str, *, shared: bool = False, timeout: float = 60.0) -> Iterator[Callable[[], bool]]:
        path = self._folder() / (hashlib.sha256(name.encode()).hexdigest()[:32] + ".lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if timeout <= 0 or time.monotonic() >= deadline:
                        raise _deadline_error(name, timeout) from None
                    time.sleep(POLL)
            try:
                yield lambda: True  # an flock is held until released or its holder dies
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def advisory_key(name: str) -> int:
    """The advisory lock key standing for ``name`` (signed 64 bits, as PostgreSQL takes it)."""
    digest = hashlib.blake2b(f"ipython-compact writer lock\n{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class AdvisoryLocks:
    """Advisory locks on a PostgreSQL server (module doc)."""

    def __init__(self, url: str, *, connect_timeout: float = 10.0) -> None:
        self.url = url
        self.connect_timeout = connect_timeout

    def _connect(self) -> Any:
        import psycopg  # optional: the postgres extra, only for a postgresql:// log

        from ipython_compact.store import fork_safety  # optional: imports psycopg's parts too

        try:
            conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(2, int(self.connect_timeout))
            )
        except psycopg.Error as exc:
            raise StoreError(
                f"{redact(self.url)}: cannot connect to the PostgreSQL server for a writer lock "
                f"({exc})".strip(),
                path=redact(self.url),
            ) from None
        fork_safety.track(conn)
        return conn

    @contextmanager
    def hold(self, name: str, *, shared: bool = False, timeout: float = 60.0) -> Iterator[Callable[[], bool]]:
        conn = self._connect()
        try:
            key = advisory_key(name)
            take = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
            deadline = time.monotonic() + timeout
            while not conn.execute(f"SELECT {take}(%s)", (key,)).fetchone()[0]:
                if timeout <= 0 or time.monotonic() >= deadline:
                    raise _deadline_error(name, timeout)
                time.sleep(POLL)
            yield lambda: _alive(conn)  # released when the connection closes, below
        finally:
            conn.close()


def _alive(conn: Any) -> bool:
    """The lock's connection still stands (a session-level advisory lock lives exactly as long)."""
    try:
        return bool(conn.execute("SELECT 1").fetchone()[0] == 1)
    except Exception:  # a dropped or broken connection: the server has released the lock
        return False


def writer_locks(location: str | Path) -> FileLocks | AdvisoryLocks:
    """The writer locks of the session log at ``location`` (a path or a URL, as ``SessionStore``)."""
    if is_postgres(location):
        return AdvisoryLocks(str(location))
    try:
        return FileLocks(sqlite_path(location))
    except LocationError as exc:
        raise StoreError(str(exc), path=redact(str(location))) from None


__all__ = ["AdvisoryLocks", "FileLocks", "advisory_key", "writer_locks"]
