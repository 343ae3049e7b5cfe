"""A forked child never uses, holds or ends its parent's PostgreSQL connections (``store.fork_safety``).

The background snapshot forks the kernel; before this, the child held the parent's liveness
connection, so a parent killed while a child ran still looked alive to every other host."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

from postgres_server import server

from ipython_compact.store import SessionStore
from ipython_compact.store.errors import StoreError
from ipython_compact.store.postgres import PostgresDatabase


def _backends(url: str) -> set[int]:
    """The server's client backends (process ids), less the connection that asks."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
        return {int(r[0]) for r in rows}


def test_a_forked_child_drops_the_parents_connections_without_ending_them() -> None:
    url = server().fresh_url()
    store = SessionStore(url)
    store.ensure_session("s1")
    db = store.db
    assert isinstance(db, PostgresDatabase)
    liveness_fd = db._liveness.pgconn.socket
    before = _backends(url)
    own = db._liveness.info.backend_pid
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe and leaves
        out: dict[str, object] = {}
        try:
            out["socket"] = stat.S_ISSOCK(os.fstat(liveness_fd).st_mode)
            try:
                store.sessions()
                out["used"] = "read worked"
            except StoreError as exc:
                out["used"] = str(exc)
            store.close()  # must not end the parent's sessions on the server
            import gc

            gc.collect()
            mine = SessionStore(url)  # the child's own store works
            out["own"] = [s.name for s in mine.sessions()]
            mine.close()
        except BaseException as exc:
            out["error"] = repr(exc)
        os.write(write_fd, json.dumps(out).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        out = json.loads(f.read())
    os.waitpid(pid, 0)
    assert out.get("error") is None, out
    assert out["socket"] is False
    assert "this forked process" in str(out["used"]) and "Open a new store" in str(out["used"])
    assert out["own"] == ["s1"]
    # The parent's connections are as they were: its liveness backend is still on the server (other
    # tests' and the child's own backends may come and go meanwhile: not counted), and they work.
    assert own in before and own in _backends(url)
    assert [s.name for s in store.sessions()] == ["s1"]
    assert db._liveness.execute("SELECT 1").fetchone() == (1,)
    store.close()


def test_a_parent_killed_while_its_child_runs_is_seen_gone_by_the_server() -> None:
    url = server().fresh_url()
    code = textwrap.dedent(
        f"""
        import os, sys, json, time
        from ipython_compact.store import SessionStore
        from ipython_compact.store.postgres import owner_key
        store = SessionStore({url!r})
        store.ensure_session("s1")
        child = os.fork()
        if child == 0:
            time.sleep(600)  # a child still running (it closes no socket itself); the test kills it
            os._exit(0)
        print(json.dumps({{"key": owner_key(store.db._here), "child": child}}), flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env={**os.environ}
    )
    child = None
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())
        key, child = int(started["key"]), int(started["child"])
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (False,)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            os.kill(child, 0)  # the child still runs
            # The server drops the killed parent's session once it sees the socket close; wait for it.
            deadline = time.monotonic() + 30
            while not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
                assert time.monotonic() < deadline, "the dead parent still looks alive while its child runs"
                time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
