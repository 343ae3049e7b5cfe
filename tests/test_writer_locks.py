"""The session store's writer locks (what guards snapshots on object storage), on both engines:
a SQLite log (file locks beside it) and a real PostgreSQL server (advisory locks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ipython_compact.store.writer_locks import advisory_key, writer_locks


def test_a_writer_excludes_writers_and_readers(location: str | Path) -> None:
    locks = writer_locks(location)
    with locks.hold("snapshots a", timeout=5):
        with (
            pytest.raises(TimeoutError, match="held by another writer"),
            locks.hold("snapshots a", timeout=0),
        ):
            pass
        with (
            pytest.raises(TimeoutError, match=r"for over 0\.1 s"),
            locks.hold("snapshots a", shared=True, timeout=0.1),
        ):
            pass
        with locks.hold("snapshots b", timeout=0):  # another name is another lock
            pass
    # free again once released; a bounded wait, not at once: on PostgreSQL the timed-out shared
    # attempt's cancellation can still be in the server's queue (a loaded machine: timeout=0 failed)
    with locks.hold("snapshots a", timeout=30):
        pass


def test_readers_share_and_keep_a_writer_out(location: str | Path) -> None:
    locks = writer_locks(location)
    with (
        locks.hold("snapshots a", shared=True, timeout=5),
        locks.hold("snapshots a", shared=True, timeout=0),
        pytest.raises(TimeoutError),
        locks.hold("snapshots a", timeout=0),
    ):
        pass


def test_a_killed_holder_frees_the_lock(location: str | Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys, threading
        from pathlib import Path
        from ipython_compact.store.writer_locks import writer_locks
        location = {str(location)!r}
        locks = writer_locks(Path(location) if {isinstance(location, Path)!r} else location)
        with locks.hold("snapshots a", timeout=5):
            print("held", flush=True)
            threading.Event().wait()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env={**os.environ}
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        locks = writer_locks(location)
        with pytest.raises(TimeoutError), locks.hold("snapshots a", timeout=0):
            pass
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # The server notices the dropped connection on its own schedule: wait for that, bounded.
        with locks.hold("snapshots a", timeout=30):
            pass
    finally:
        proc.kill()
        proc.wait()


def test_lock_keys_differ_per_name() -> None:
    assert advisory_key("snapshots a") != advisory_key("snapshots b")
    assert advisory_key("snapshots a") == advisory_key("snapshots a")


def test_the_file_locks_live_beside_the_sqlite_log(tmp_path: Path) -> None:
    with writer_locks(tmp_path / "log.db").hold("snapshots a", timeout=0):
        folder = tmp_path / "log.db.snapshot-locks"
        assert folder.is_dir() and oct(folder.stat().st_mode & 0o777) == "0o700"
        (lock,) = folder.iterdir()
        assert oct(lock.stat().st_mode & 0o777) == "0o600"
    # timeout=0: a lock still held would be refused at once, so no seconds are measured
    with writer_locks(tmp_path / "log.db").hold("snapshots a", timeout=0) as still_held:
        assert still_held()


def test_the_check_says_when_the_lock_was_lost_with_its_connection(location: str | Path) -> None:
    with writer_locks(location).hold("snapshots a", timeout=5) as still_held:
        assert still_held()
        if isinstance(location, str):  # PostgreSQL: the server ends the lock's connection
            import psycopg

            with psycopg.connect(location, autocommit=True) as admin:
                ended = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_locks "
                    "WHERE locktype = 'advisory' AND pid <> pg_backend_pid()"
                ).fetchone()
            assert ended == (1,)
            assert not still_held()
        else:  # an flock lives as long as its holder: nothing can take it away
            assert still_held()
