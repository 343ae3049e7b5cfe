"""The jupyter_server extension that keeps comm/subshell statuses out of the kernel's busy/idle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipython_compact.jupyter.server_extension import (
    STATUS_UNTRACKED,
    _jupyter_server_extension_points,
    with_untracked,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("current", "expected_head"),
    [
        ([], []),
        (["stream", "status"], ["stream", "status"]),
        (["comm_msg", "stream"], ["comm_msg", "stream"]),  # already there: not added twice
    ],
)
def test_with_untracked_keeps_what_was_there_and_adds_each_type_once(
    current: list[str], expected_head: list[str]
) -> None:
    merged = with_untracked(current)
    assert merged[: len(expected_head)] == expected_head
    assert sorted(merged) == sorted(set(current) | set(STATUS_UNTRACKED))
    assert len(merged) == len(set(merged))
    assert with_untracked(merged) == merged


def test_the_comm_and_subshell_requests_are_covered() -> None:
    for t in ("comm_open", "comm_msg", "comm_close", "create_subshell_request", "delete_subshell_request"):
        assert t in STATUS_UNTRACKED


def test_jupyter_defaults_survive() -> None:
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager

    defaults = list(MappingKernelManager().untracked_message_types)
    assert set(defaults) <= set(with_untracked(defaults))


def test_the_shipped_config_enables_the_extension_module() -> None:
    config = json.loads((REPO / "jupyter-config/jupyter_server_config.d/ipython_compact.json").read_text())
    module = _jupyter_server_extension_points()[0]["module"]
    assert config == {"ServerApp": {"jpserver_extensions": {module: True}}}
