"""The window gauge shows one number for one thing: the model's window, as the session's agent
last reported it, until someone states another (issue 35, item 6).

Before the extension loads, the panel draws the gauge from the figures the log keeps (the live
agent's 8,192-token window); after ``%load_ext`` the kernel has no live agent yet, and it must not
swap in ``CompactConfig``'s default 128,000 for the same model."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from traitlets.config import Config

from ipython_compact.kernel.config import CompactConfig
from ipython_compact.kernel.service import FIGURES_KEY, KernelService


def _service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: CompactConfig) -> KernelService:
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    shell: Any = SimpleNamespace(user_ns={}, user_ns_hidden={}, kernel=None)
    return KernelService(shell, config)


def _agent_figures(service: KernelService, window: int) -> None:
    """What the kernel stored while a live ``%%agent`` with this window answered ``status``."""
    service.store.status_set(
        service.session,
        FIGURES_KEY,
        {"window": window, "blocking_line": window - 1000, "background_line": window // 2, "source": "agent"},
    )


def test_without_a_live_agent_the_window_is_the_agents_last_not_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _service(tmp_path, monkeypatch, CompactConfig(session="gauge"))
    try:
        _agent_figures(service, 8192)
        first = service.status()
        assert first["window"] == 8192
        again = service.status()  # the figures it wrote back must not turn into the default
        assert again["window"] == 8192
        assert first["blocking_line"] is not None and first["blocking_line"] < 8192
        stored = service.store.status_get(service.session, FIGURES_KEY, {})
        assert stored["window"] == 8192
    finally:
        service.close()


def test_a_window_the_user_set_wins_over_the_remembered_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Config()
    config.CompactConfig.context_window = 32_000
    service = _service(tmp_path, monkeypatch, CompactConfig(session="gauge", config=config))
    try:
        _agent_figures(service, 8192)
        assert service.status()["window"] == 32_000
    finally:
        service.close()


def test_a_window_set_by_percent_config_wins_over_the_remembered_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = CompactConfig(session="gauge")
    service = _service(tmp_path, monkeypatch, config)
    try:
        _agent_figures(service, 8192)
        assert service.status()["window"] == 8192
        stated = Config()  # what `%config CompactConfig.context_window = 128000` hands the instance
        stated.CompactConfig.context_window = 128_000  # the default's value, but said by the user
        config.update_config(stated)
        assert service.status()["window"] == 128_000
    finally:
        service.close()


def test_a_fresh_session_reports_the_configured_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _service(tmp_path, monkeypatch, CompactConfig(session="fresh"))
    try:
        assert service.status()["window"] == 128_000
    finally:
        service.close()
