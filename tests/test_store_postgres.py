"""What a shared server adds to the session log: writers on several hosts, choosing the engine by
URL. Real processes against a real PostgreSQL server started by the tests (``postgres_server``);
tests taking ``location`` run on SQLite too, where the same guarantee must hold."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from postgres_server import server

from ipython_compact import Agent
from ipython_compact.core.entries import COMPACTION, COMPACTION_OUTCOME
from ipython_compact.store import SessionStore, StoreError
from ipython_compact.store.location import LocationError, is_postgres, redact, sqlite_path
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

COMPACTOR = textwrap.dedent(
    """
    import sys
    from ipython_compact.store import LeafMovedError, SessionStore
    store = SessionStore(sys.argv[1], busy_timeout=30)
    leaf = store.leaf("s")
    first = store.path("s")[0].id
    print("planned", flush=True)
    sys.stdin.readline()  # both have planned against the same leaf
    try:
        compaction = {"summary": sys.argv[2], "first_kept_entry_id": first}
        store.append("s", "compaction", compaction, expect_leaf=leaf)
        print("landed", flush=True)
    except LeafMovedError:
        print("moved", flush=True)
    store.close()
    """
)


def _spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_of_two_processes_compacting_one_leaf_exactly_one_lands(location: str | Path) -> None:
    with SessionStore(location) as store:
        store.create_session("s")
        for i in range(6):
            store.append("s", "message", {"message": {"role": "user", "content": f"turn {i}"}})
    procs = [_spawn(COMPACTOR, str(location), name) for name in ("one", "two")]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "planned"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(out.strip())
    assert sorted(results) == ["landed", "moved"]
    with SessionStore(location) as store:
        assert len(store.entries("s", kinds=(COMPACTION,))) == 1
        assert store.verify().ok


ELSEWHERE = textwrap.dedent(
    """
    import sys
    from ipython_compact.store import process
    process.host_id = lambda: "another-host/pid:[1]"  # a process on another machine
    from ipython_compact.store import SessionStore
    store = SessionStore(sys.argv[1])
    store.live_begin("s", "far", reason="threshold", blocking=False)
    print("compacting", flush=True)
    sys.stdin.readline()
    """
)


def _settled_within(store: SessionStore, session: str, *, seconds: float) -> bool:
    """True once ``live_status`` shows nothing in flight; False if ``seconds`` pass first."""
    deadline = time.monotonic() + seconds
    while store.live_status(session).in_flight:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_compaction_of_a_killed_process_on_another_host_is_settled_not_one_still_running() -> None:
    url = server().fresh_url()
    with SessionStore(url) as store:
        store.create_session("s")
        store.append("s", "message", {"message": {"role": "user", "content": "hi"}})
        far = _spawn(ELSEWHERE, url)
        assert far.stdout is not None and far.stdout.readline().strip() == "compacting"
        live = store.live_status("s").in_flight
        assert [(c.task_id, c.owner.host if c.owner else None) for c in live] == [
            ("far", "another-host/pid:[1]")
        ]
        assert store.entries("s", kinds=(COMPACTION_OUTCOME,)) == []  # alive: its pid means nothing here
        os.kill(far.pid, signal.SIGKILL)
        far.communicate(timeout=30)
        # Its connections are gone, so its lock is free: the server witnesses the end. The event is
        # the server's backend for the killed client exiting, which follows the kill by a moment:
        # wait for it (bounded), never for a fixed time.
        assert _settled_within(store, "s", seconds=60.0)
        outcomes = store.entries("s", kinds=(COMPACTION_OUTCOME,))
        assert [(e.data["task_id"], e.data["outcome"]) for e in outcomes] == [("far", "failed")]
        assert "abandoned" in outcomes[0].data["error"]
        assert store.verify().ok


def test_a_server_that_cannot_be_reached_is_named_without_its_password(tmp_path: Path) -> None:
    url = f"postgresql://alice:s3cret@/nodb?host={tmp_path}"
    with pytest.raises(StoreError, match=r"cannot connect to the PostgreSQL server") as caught:
        SessionStore(url, busy_timeout=1)
    assert "s3cret" not in str(caught.value)
    assert "alice:***@" in str(caught.value)


def test_an_unknown_url_scheme_is_refused_naming_the_ones_known() -> None:
    with pytest.raises(StoreError, match=r"unknown database URL scheme 'mysql'.*postgresql://"):
        SessionStore("mysql://u:pw@host/db")


@pytest.mark.parametrize(
    ("location", "postgres", "path"),
    [
        ("sessions.db", False, Path("sessions.db")),
        ("/abs/dir/s.db", False, Path("/abs/dir/s.db")),
        ("sqlite:///abs/s.db", False, Path("/abs/s.db")),
        ("sqlite://rel.db", False, Path("rel.db")),
        ("postgresql://u@h/db", True, None),
        ("postgres://u@h/db", True, None),
        ("PostgreSQL://u@h/db", True, None),
        ("./postgresql:x", False, Path("postgresql:x")),
    ],
)
def test_a_location_is_a_path_or_a_url(location: str, postgres: bool, path: Path | None) -> None:
    assert is_postgres(location) is postgres
    if path is not None:
        assert sqlite_path(location) == path


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pw@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql:///db?host=/s&password=pw&x=1", "postgresql:///db?host=/s&password=***&x=1"),
        ("/plain/path.db", "/plain/path.db"),
    ],
)
def test_a_password_is_never_shown(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_a_url_of_no_engine_is_a_location_error() -> None:
    with pytest.raises(LocationError, match="unknown database URL scheme 'ftp'"):
        sqlite_path("ftp://x/y")


FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"


def test_a_notebook_configured_with_a_server_log_compacts_into_it(ip: Any) -> None:
    from ipython_compact.kernel.extension import extension_for

    url = server().fresh_url()
    ip.run_line_magic("config", f"CompactConfig.database = {url!r}")
    try:
        ip.run_line_magic("compact", f"import {FIXTURE}")
        ip.run_line_magic("compact", "now")
        ext = extension_for(ip)
        assert ext is not None and ext.service.store.engine == "postgresql"
        session = ext.service.context_session()
    finally:
        ip.run_line_magic("config", "CompactConfig.database = ''")  # the shell's config outlives the test
    with SessionStore(url) as store:
        assert store.entry_count(session) > 1000
        assert store.entries(session, kinds=(COMPACTION,))[-1].data["reason"] == "manual"
        assert store.verify().ok


@pytest.mark.slow
def test_an_agent_on_a_server_log_hands_it_to_its_kernel() -> None:
    url = server().fresh_url()
    code = (
        "from ipython_compact.store import SessionStore\n"
        "s = SessionStore()\n"  # no location: the kernel's environment names it
        "s.append(SESSION, 'custom', {'custom_type': 'from-kernel', 'data': s.engine})\n"
        "print('kernel wrote')"
    )

    def reply(req: RecordedRequest) -> Reply | str:
        tools = sum(1 for m in req.messages if m.get("role") == "tool")
        return Reply(tool_calls=(ToolCall("python", {"code": code}),)) if tools == 0 else "done"

    with (
        ModelServer(reply, context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, store=url, subcalls=False) as agent,
    ):
        assert agent.store.engine == "postgresql"
        agent.kernel.execute(f"SESSION = {agent.session!r}")
        agent.ask("Write from the kernel")
        session = agent.session
    with SessionStore(url) as store:
        written = [
            e.data
            for e in store.entries(session, kinds=("custom",))
            if e.data.get("custom_type") == "from-kernel"
        ]
        assert written == [{"custom_type": "from-kernel", "data": "postgresql"}]
        assert store.verify().ok
