"""A real S3-compatible server for the snapshot tests, started by them: moto's standalone server.

moto's server speaks the S3 protocol over HTTP on 127.0.0.1 (a free port), so s3fs talks to it as
to a bucket in the cloud: conditional writes, listings and errors go over the wire. One server per
test run; each test gets a bucket of its own (``fresh_bucket``). Clients reach it through the
environment (``s3_env``: the endpoint and dummy credentials botocore reads), so a kernel or a
second process started with that environment uses the same server.

Without moto a test is skipped with a message saying what to install; with ``CI`` set it fails
instead, so CI cannot pass by skipping (as ``postgres_server.py``).
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
from typing import Any

import pytest
from shared_server import RunServer, Unavailable

_counter = itertools.count()


class Server:
    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer  # optional: the `dev` extra's moto[server]

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self._server: Any = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self._server.start()
        self.endpoint = f"http://127.0.0.1:{port}"

    def env(self) -> dict[str, str]:
        """What a process needs to reach this server through botocore (and so s3fs)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def fresh_bucket(self) -> str:
        import boto3

        name = f"ipc-{os.getpid()}-{next(_counter)}"
        boto3.client("s3", endpoint_url=self.endpoint, **_credentials()).create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        self._server.stop()


def _credentials() -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


def _start() -> Server:
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError as exc:
        raise Unavailable(
            f"moto[server] and s3fs are not installed ({exc}): pip install -e '.[dev]'"
        ) from exc
    try:
        return Server()
    except Exception as exc:  # the server could not start: say why
        raise Unavailable(f"cannot start moto's S3 server ({type(exc).__name__}: {exc})") from exc


_run = RunServer("S3 tests need moto's server", _start)


def server() -> Server:
    """The test run's one server (started on first use), or a skip (a failure under CI)."""
    return _run.get()


@pytest.fixture()
def s3_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process (and what it starts) talks to the test server; fsspec's cached clients are
    dropped so none still points elsewhere."""
    env = server().env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    import fsspec  # type: ignore[import-untyped]

    fsspec.filesystem("s3").clear_instance_cache()
    return env


@pytest.fixture()
def s3_url(s3_env: dict[str, str]) -> str:
    """``s3://<a new bucket>/snapshots``."""
    return f"s3://{server().fresh_bucket()}/snapshots"
