"""A real PostgreSQL server for the store's tests and benchmarks, started by them, on a socket.

As pytest-postgresql does: ``initdb`` into a temporary folder, ``postgres`` listening on a unix
socket in that folder only (no TCP port), stopped at exit. Debian's ``postgresql`` package puts
the binaries under ``/usr/lib/postgresql/*/bin`` (``make system-deps`` installs it). ``initdb``
refuses to run as root, so as root the server runs as the ``postgres`` user.

Each test gets a schema of its own (``fresh_url``): creating one takes milliseconds, where a
database would take a second on a loaded machine.

Without PostgreSQL a test is skipped with a message saying what to install; with ``CI`` set it
fails instead, so CI cannot pass by skipping.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

import pytest
from shared_server import RunServer, Unavailable

_counter = itertools.count()


def bin_dir() -> Path | None:
    """The newest installed PostgreSQL's binaries, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


class Server:
    """One running server; ``url(schema)`` reaches it as the current user (or ``postgres``)."""

    def __init__(self, *, max_connections: int = 200) -> None:
        binaries = bin_dir()
        if binaries is None:
            raise FileNotFoundError("PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb)")
        self.folder = Path(tempfile.mkdtemp(prefix="ipc-pg-"))
        self.data = self.folder / "data"
        self.as_root = os.geteuid() == 0
        prefix: list[str] = []
        if self.as_root:  # initdb and postgres refuse to run as root
            entry = pwd.getpwnam("postgres")
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
            prefix = ["runuser", "-u", "postgres", "--"]
        self.user = "postgres" if self.as_root else pwd.getpwuid(os.geteuid()).pw_name
        self._prefix = prefix
        self._bin = binaries
        subprocess.run(
            [
                *prefix,
                str(binaries / "initdb"),
                "-D",
                str(self.data),
                "-U",
                self.user,
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
            check=True,
            capture_output=True,
        )
        options = (
            f"-k {self.folder} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
            f"-c full_page_writes=off -c max_connections={max_connections}"
        )
        subprocess.run(
            [
                *prefix,
                str(binaries / "pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                options,
                "-w",
                "-t",
                "120",
                "-l",
                str(self.folder / "server.log"),
                "start",
            ],
            check=True,
            capture_output=True,
        )
        atexit.register(self.stop)

    def url(self, schema: str | None = None) -> str:
        url = f"postgresql://{self.user}@/postgres?host={quote(str(self.folder), safe='')}"
        return url + (f"&options={quote(f'-csearch_path={schema}', safe='')}" if schema else "")

    def fresh_url(self) -> str:
        """A URL whose tables go to a new, empty schema."""
        import psycopg  # optional: only the PostgreSQL tests need it

        schema = f"t{os.getpid()}_{next(_counter)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        return self.url(schema)

    def stop(self) -> None:
        if self.data.exists():
            subprocess.run(
                [*self._prefix, str(self._bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
                capture_output=True,
            )
        shutil.rmtree(self.folder, ignore_errors=True)


def _start() -> Server:
    try:
        import psycopg  # noqa: F401  optional: the `postgres` extra
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise Unavailable(
            f"psycopg is not installed ({exc}): pip install 'ipython-compact[postgres]'"
        ) from exc
    try:
        return Server()
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        raise Unavailable(
            f"cannot start PostgreSQL ({exc}; "
            f"{detail.decode(errors='replace').strip()[:300]}): "
            "install it with `apt-get install -y postgresql` (make system-deps)"
        ) from exc


_run = RunServer("PostgreSQL tests need a server", _start)


def server() -> Server:
    """The test run's one server (started on first use), or a skip (a failure under CI)."""
    return _run.get()


ENGINES = ("sqlite", "postgresql")


@pytest.fixture(params=ENGINES)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    """A new, empty session log on each engine: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return tmp_path / "log.db"
    return server().fresh_url()


def raw_sql(location: str | Path, *statements: str, lift_guards: bool = False) -> None:
    """Run ``statements`` on the log's database behind the store's back (what a damaged disk, a
    hand edit or another program would do); ``lift_guards`` first removes the append-only
    triggers, as someone editing the file on purpose would."""
    if isinstance(location, Path):
        import sqlite3

        conn = sqlite3.connect(location)
        try:
            if lift_guards:
                conn.execute("DROP TRIGGER entries_no_update")
                conn.execute("DROP TRIGGER entries_no_delete")
            for statement in statements:
                conn.execute(statement)
            conn.commit()
        finally:
            conn.close()
        return
    import psycopg  # optional: only the PostgreSQL tests need it

    with psycopg.connect(location) as pg:
        if lift_guards:
            pg.execute("ALTER TABLE entries DISABLE TRIGGER USER")
        for statement in statements:
            pg.execute(statement.encode())
