"""One test server for the whole run, started on first use; a skip when it cannot start, and a
failure under CI (``$CI`` set), so CI cannot pass by skipping. Shared by ``postgres_server.py`` and
``s3_server.py``: they differ only in how a server starts and what a missing one needs."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Generic, TypeVar

import pytest

T = TypeVar("T")


class Unavailable(Exception):
    """Raised by a ``start`` function: why the server cannot run here (and how to get it)."""


class RunServer(Generic[T]):
    """``get()`` returns the run's server, starting it with ``start`` the first time; a start that
    raised ``Unavailable`` is remembered (tried once per run) and every later ``get`` skips (or,
    under CI, fails) with ``"<needs>: <why>"``."""

    def __init__(self, needs: str, start: Callable[[], T]) -> None:
        self._needs = needs
        self._start = start
        self._server: T | None = None
        self._failure: str | None = None

    def get(self) -> T:
        if self._server is None and self._failure is None:
            try:
                self._server = self._start()
            except Unavailable as exc:
                self._failure = str(exc)
        if self._server is None:
            message = f"{self._needs}: {self._failure}"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        return self._server
