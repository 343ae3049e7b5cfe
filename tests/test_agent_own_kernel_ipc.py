"""The kernel an ``Agent`` starts for itself: IPC, quiet, and owner-only files.

Found by trying the agent API: every run printed ipykernel's "Kernel is running over TCP without
encryption" (the agent's own kernel listened on localhost TCP), and ``agent-snapshots/`` was
created 0755 while the rest of the data directory is owner-only.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
from ipython_compact.agent.loop import Agent
from ipython_compact.testing import ModelServer
with ModelServer(default="hi", context_window=8000) as srv:
    with Agent(model="local-model", base_url=srv.base_url, subcalls=False) as agent:
        print(agent.ask("hello").text)
        print(agent.kernel.execute("import os; print(os.environ.get('JPY_PARENT_PID', 'none'))").text)
        km = agent.kernel._km
        print(km.transport, km.ip)
"""


@pytest.mark.slow
def test_the_agents_own_kernel_uses_ipc_prints_no_tcp_warning_and_keeps_files_private(tmp_path: Path) -> None:
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path / "data"), "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "hi"
    transport, ip = lines[-1].split(" ", 1)
    assert transport == "ipc" and ip.startswith(str(tmp_path / "ipython-compact-ipc-"))
    assert "without encryption" not in done.stderr + done.stdout
    assert stat.S_IMODE((tmp_path / "data" / "agent-snapshots").stat().st_mode) == 0o700
    assert not list(tmp_path.glob("ipython-compact-ipc-*"))  # the socket directory is gone after close()
