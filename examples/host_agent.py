"""A host program driving an agent whose kernel dies mid-task, and comes back from its snapshot.

The agent's one tool runs Python in a real IPython kernel started through jupyter_client (with the
``ipython_compact`` extension loaded). After every successful cell the agent snapshots the
kernel's names (signed dill files, owner-only). The scripted model (the local OpenAI-compatible
server) builds a small table, then runs code that kills the kernel; the agent restarts the
kernel, restores the snapshot, tells the model what came back, and the model carries on using the
restored variable. Finally it asks for a compaction from its own code (``compact.run()``), which
runs when the turn ends.

Run:  .venv/bin/python examples/host_agent.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import openai

from ipython_compact import Agent, AgentEvent, CompactionSettings, JupyterKernel, SessionStore
from ipython_compact.testing import ModelServer, RecordedRequest, Reply, ToolCall

STEPS = [
    "sales = {'jan': 120, 'feb': 95, 'mar': 143}\nprint(max(sales, key=sales.get))",
    "import os\nos._exit(1)  # the kernel crashes",
    "print(sorted(sales.items(), key=lambda kv: -kv[1]))",
    "compact.run(instructions='keep the monthly sales figures')",
]


def script(req: RecordedRequest) -> Reply:
    """One step per tool result received so far in this turn; then a final answer."""
    done = sum(1 for m in req.messages if m.get("role") == "tool")
    if done < len(STEPS):
        return Reply(text=None, tool_calls=(ToolCall("python", {"code": STEPS[done]}),))
    return Reply(text="March was the best month (143); the table survived the crash.")


def run(workdir: Path, *, echo: bool = True) -> dict[str, Any]:
    """Run the scenario in ``workdir``; returns what happened (for tests)."""
    events: list[AgentEvent] = []

    def on_event(ev: AgentEvent) -> None:
        events.append(ev)
        if echo and ev.kind in (
            "user",
            "tool_call",
            "tool_result",
            "assistant",
            "kernel_restart",
            "compaction_start",
            "compaction_end",
            "compaction_requested",
        ):
            print(f"[{ev.kind}] {ev.text[:300]}", flush=True)

    store = SessionStore(workdir / "sessions.db")
    settings = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=60, background_tokens=0)
    env = {"IPYTHON_COMPACT_DIR": str(workdir)}  # the kernel keeps its key and data here too
    with ModelServer(script) as server, JupyterKernel(env=env) as kernel:
        agent = Agent(
            store=store,
            session="host",
            client=openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0),
            model="local-model",
            provider="local",
            context_window=8000,
            settings=settings,
            kernel=kernel,
            snapshot_dir=str(workdir / "snapshots"),
            on_event=on_event,
        )
        result = agent.ask("Which month had the best sales? Keep the table around.")
        status = agent.status()
    store.close()
    outcome = {
        "stopped": result.stopped,
        "answer": result.text,
        "restarts": status["restarts"],
        "compactions": [c["reason"] for c in status["compactions"] if c["state"] == "placed"],
        "reset_notice": next((ev.text for ev in events if ev.kind == "kernel_restart"), None),
        "tool_results": [ev.text for ev in events if ev.kind == "tool_result"],
    }
    if echo:
        print(json.dumps({k: v for k, v in outcome.items() if k != "tool_results"}, indent=1))
    return outcome


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="host-agent-") as tmp:
        run(Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
