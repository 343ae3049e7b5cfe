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


_server: Server | None = None
_failure: str | None = None


def server() -> Server:
    """The test run's one server (started on first use), or a skip (a failure under CI)."""
    global _server, _failure
    if _server is None and _failure is None:
        try:
            import boto3  # noqa: F401
            import moto.server  # noqa: F401
            import s3fs  # noqa: F401
        except ImportError as exc:
            _failure = f"moto[server] and s3fs are not installed ({exc}): pip install -e '.[dev]'"
        else:
            try:
                _server = Server()
            except Exception as exc:  # the server could not start: say why
                _failure = f"cannot start moto's S3 server ({type(exc).__name__}: {exc})"
    if _server is None:
        message = f"S3 tests need moto's server: {_failure}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return _server


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
