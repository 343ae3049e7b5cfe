"""The real model for the tests marked ``realmodel``: one llama.cpp server per test run.

``make realmodel`` (part of ``make test``) builds llama-cpp-python and fetches SmolLM2's GGUF into
``~/.cache/ipython-compact`` and exports their paths; ``ipython_compact.testing.llama_server``
starts the server. Without them a test is skipped with a message saying to run ``make
realmodel``; with ``CI`` set it fails instead, so CI cannot pass by skipping (as
``postgres_server.py``).
"""

from __future__ import annotations

import atexit
import os

import pytest

from ipython_compact.testing.llama_server import LlamaServer, LlamaServerError

#: The window the tests' server is started with: small, so compaction is needed soon.
TEST_N_CTX = 4096

_servers: dict[int, LlamaServer] = {}
_failure: str | None = None


def llama_server(n_ctx: int = TEST_N_CTX) -> LlamaServer:
    """The test run's server with an ``n_ctx`` window (started on first use), or a skip (a failure
    under CI)."""
    global _failure
    if n_ctx not in _servers and _failure is None:
        try:
            # a fixed seed: the same requests get the same replies, run after run
            server = LlamaServer.from_environment(n_ctx=n_ctx, extra_args=("--seed", "1234")).start()
        except LlamaServerError as exc:
            _failure = str(exc)
        else:
            _servers[n_ctx] = server
            atexit.register(server.stop)
    if n_ctx not in _servers:
        message = f"real-model tests need llama.cpp's server: {_failure}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return _servers[n_ctx]


@pytest.fixture()
def llama() -> LlamaServer:
    """The real model's server (SmolLM2-135M-Instruct, a 4,096-token window)."""
    return llama_server()
