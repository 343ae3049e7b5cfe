"""What an agent's own kernel leaves in the data directory (issue 17, minor): the agent keeps its
snapshots under ``agent-snapshots/``; its kernel must not keep a second copy under ``snapshots/``
nor open a session of its own (``kernel:tmp…``, left empty). The kernel is bound to the agent's
session instead, so the files its cells read reach the agent's log (the ledger's file lists).

Real kernel started by ``Agent`` itself, the local model server, the test's own data directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ipython_compact import Agent
from ipython_compact.core.entries import KERNEL_FILE_OPS
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

pytestmark = pytest.mark.slow


def test_an_agent_run_leaves_one_session_and_one_snapshot_copy(compact_dir: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")

    def pick(req: RecordedRequest) -> Reply | str:
        done = sum(1 for m in req.messages if m.get("role") == "tool")
        cell = f"n = len(context) + len(open({str(notes)!r}).read())\nprint(n)"
        return Reply(tool_calls=(ToolCall("python", {"code": cell}),)) if done == 0 else "done"

    with (
        ModelServer(pick, context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url) as agent,
    ):
        assert agent.ask("count", context="a" * 50_000).stopped == "final"
        agent.kernel.execute("pass")  # a second cell: the first one's file list is surely written by now
        sessions = [s.name for s in agent.store.sessions()]
        ops = [
            e.data for e in agent.store.entries(agent.session) if e.data.get("custom_type") == KERNEL_FILE_OPS
        ]
        session = agent.session
    assert sessions == [session]
    assert not (compact_dir / "snapshots").exists() or not any((compact_dir / "snapshots").iterdir())
    assert any((compact_dir / "agent-snapshots").iterdir())
    assert any(str(notes) in op["data"]["read"] for op in ops)
