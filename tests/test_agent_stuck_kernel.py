"""A cell that outlives its timeout and ignores the interrupt (issue 17, minor): the tool result
must not claim it "was interrupted"; the kernel is stopped and restarted, and the model is told.

Real kernel through jupyter_client, the local model server, a real SQLite log.
"""

from __future__ import annotations

from typing import Any

import pytest

from ipython_compact import Agent
from ipython_compact.agent.kernel_tool import JupyterKernel
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

pytestmark = pytest.mark.slow

DEAF = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)"


def code(source: str) -> Reply:
    return Reply(tool_calls=(ToolCall("python", {"code": source}),))


def steps(*replies: Reply | str) -> Any:
    def pick(req: RecordedRequest) -> Reply | str:
        done = sum(1 for m in req.messages if m.get("role") == "tool")
        return replies[done] if done < len(replies) else "done"

    return pick


def test_a_cell_deaf_to_the_interrupt_gets_its_kernel_restarted_and_says_so() -> None:
    with (
        JupyterKernel(interrupt_grace=1.0) as kernel,
        ModelServer(steps(code(DEAF), code("print('alive again')")), context_window=8000) as srv,
        # 8 s: the deaf cell uses all of it, and the next cell must fit it on a restarted kernel, on
        # a loaded machine too
        Agent(model="local-model", base_url=srv.base_url, kernel=kernel, tool_timeout=8.0) as agent,
    ):
        result = agent.ask("hang")
        texts = [
            e.message["content"][0]["text"]
            for e in agent.store.path(agent.session)
            if e.role == "toolResult" and e.message
        ]
        restarts = agent.restarts
    assert result.stopped == "final"
    assert "was interrupted" not in texts[0]
    assert "the interrupt did not stop it within 1s, so the kernel was stopped" in texts[0]
    assert restarts == 1 and texts[1] == "alive again"
