"""Fixtures for the integration tests: the network guard in this process and in the kernels."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import net_guard
import pytest

HERE = Path(__file__).parent


@pytest.fixture
def no_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Refuse and record every non-127.0.0.1 connection or lookup, here and in kernels started
    during the test; the test fails at teardown if anything was attempted."""
    log = tmp_path / "net_guard.log"
    monkeypatch.setenv("NET_GUARD_LOG", str(log))
    monkeypatch.setenv("PYTHONSTARTUP", str(HERE / "kernel_startup.py"))
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    seen: list[str] = []
    undo = net_guard.install(seen.append)
    try:
        yield seen
    finally:
        undo()
    kernel_seen = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    assert seen + kernel_seen == [], f"network attempts other than 127.0.0.1: {seen + kernel_seen}"
