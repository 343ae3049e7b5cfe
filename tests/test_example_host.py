"""The host-agent example end to end: a real kernel crashes mid-task and comes back from its snapshot."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "host_agent.py"


@pytest.mark.slow
def test_host_agent_survives_a_kernel_crash(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("host_agent_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["host_agent_example"] = module
    spec.loader.exec_module(module)
    outcome = module.run(tmp_path, echo=False)
    assert outcome["stopped"] == "final" and outcome["restarts"] == 1
    assert "Restored from the last snapshot: sales." in outcome["reset_notice"]
    # used the restored value
    assert outcome["tool_results"][2] == "[('mar', 143), ('jan', 120), ('feb', 95)]"
    assert outcome["compactions"] == ["requested"]
    snapshot_files = [p for p in (tmp_path / "snapshots").rglob("*") if p.is_file()]
    assert snapshot_files and all(p.stat().st_mode & 0o077 == 0 for p in snapshot_files)  # owner-only
