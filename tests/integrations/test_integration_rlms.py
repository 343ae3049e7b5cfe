"""rlms' RLM with CompactIPythonEnv on a real kernel, offline, end to end.

Runs in the ``rlms`` extra's venv (``make test`` builds .venv-rlms); skipped where rlms is missing.
The model is ``ipython_compact.testing.ModelServer``; the ``no_network`` guard fails a test that
tried any address but 127.0.0.1 (tiktoken's encoding download would be one).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("rlm.environments.ipython_repl")

from rlm import RLM

from ipython_compact.integrations.rlms import CompactIPythonEnv, install
from ipython_compact.store import SessionStore
from ipython_compact.testing import ModelServer
from ipython_compact.testing.model_server import RecordedRequest

pytestmark = pytest.mark.slow

WINDOW = 16_000
RLMS_DEFAULT_LIMIT = 128_000  # rlms' table value for a model it does not know


@pytest.fixture(autouse=True)
def routed() -> Iterator[None]:
    undo = install()
    yield
    undo()


def _text(req: RecordedRequest) -> str:
    return "\n".join(str(m.get("content", "")) for m in req.messages)


class Scripted:
    """Reads a chunk per step, asks a sub-question, checks SHOW_VARS after the compaction, answers."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.step = 0
        self.compacted = False

    def __call__(self, req: RecordedRequest) -> str:
        last = str(req.messages[-1].get("content", "")) if req.messages else ""
        if "Summarize your progress" in last:
            self.compacted = True
            return f"Summary: read chunks 1..{self.step}; part1..part{self.step} hold their numbers."
        if len(req.messages) == 1:
            return "sub-answer"  # llm_query
        self.step += 1
        if self.step <= self.steps:
            return (
                f"Reading chunk {self.step}.\n```repl\npart{self.step} = {self.step}\n"
                f"print('MARK-{self.step}', context[:6], '#' * 7000)\nprint(llm_query('chunk "
                f"{self.step}?'))\n```"
            )
        if self.step == self.steps + 1:
            return "```repl\nprint(SHOW_VARS())\n```"
        total = " + ".join(f"part{i}" for i in range(1, self.steps + 1))
        return f"```repl\nanswer['content'] = str({total})\nanswer['ready'] = True\n```"


def test_rlms_compacts_with_the_ipython_environment_and_logs_it(
    no_network: list[str], tmp_path: Path
) -> None:
    assert importlib.util.find_spec("tiktoken") is None, "the rlms venv must not have tiktoken (it downloads)"
    store = SessionStore(tmp_path / "log.db")
    steps = 8
    script = Scripted(steps)
    with ModelServer(script=script) as srv:
        rlm = RLM(
            backend="openai",
            backend_kwargs={
                "base_url": srv.base_url,
                "api_key": "test",
                "model_name": "scripted",
                "max_retries": 0,
            },
            environment="ipython",
            compaction=True,
            compaction_threshold_pct=0.75 * WINDOW / RLMS_DEFAULT_LIMIT,
            max_iterations=20,
            environment_kwargs={
                "ipython_compact": {"store": store, "session": "run", "snapshot_dir": str(tmp_path / "snaps")}
            },
        )
        result = rlm.completion("corpus " * 1000, root_prompt="sum the parts")
        requests = list(srv.chat_requests)
    assert result.response == str(sum(range(1, steps + 1)))
    assert script.compacted
    entries = store.entries("run")
    kinds = [e.kind for e in entries]
    compactions = [e for e in entries if e.kind == "custom" and e.data["custom_type"] == "rlms_compaction"]
    assert len(compactions) >= 1 and kinds.count("kernel_state") == len(compactions)
    assert kinds.count("message") >= 2 * steps  # every iteration: the reply and the REPL output
    notice = next(e for e in entries if e.kind == "kernel_state").data["content"]
    assert "These names are still defined: context, context_0, part1" in notice
    # SHOW_VARS answers from the probe: the user's names, and none of rlms' scaffolding.
    shown = [t for t in (_text(r) for r in requests) if "Available variables:" in t][-1]
    listed = re.search(r"Available variables: ([^\n]*)", shown)
    assert listed is not None
    names = re.findall(r"(\w+) \(", listed.group(1))
    assert names == sorted(["context", "context_0", *(f"part{i}" for i in range(1, steps + 1))])


def test_a_dead_kernel_comes_back_from_the_snapshot_and_the_model_is_told(
    no_network: list[str], tmp_path: Path
) -> None:
    env = CompactIPythonEnv(
        context_payload="the context",
        cell_timeout=5.0,
        ipython_compact={
            "store": SessionStore(tmp_path / "log.db"),
            "session": "crash",
            "snapshot_dir": str(tmp_path / "snaps"),
        },
    )
    try:
        assert env.execute_code("kept = [1, 2]").stderr == ""
        died = env.execute_code("import os; os.kill(os.getpid(), 9)")
        assert "Restored from the last snapshot: context, context_0, kept." in died.stderr
        again = env.execute_code("print(kept, context, SHOW_VARS())")
        assert again.stdout.startswith("[1, 2] the context Available variables: context (str")
        assert env.restarts == 1
    finally:
        env.cleanup()


def test_history_is_backed_by_the_log_and_outlives_the_kernel(no_network: list[str], tmp_path: Path) -> None:
    """rlms' compaction prompt tells the model to "check `history`"; it used to be a NameError here."""
    env = CompactIPythonEnv(
        context_payload="ctx",
        cell_timeout=5.0,
        ipython_compact={
            "store": SessionStore(tmp_path / "log.db"),
            "session": "hist",
            "snapshot_dir": str(tmp_path / "snaps"),
        },
    )
    try:
        env.append_compaction_entry(
            [{"role": "assistant", "content": "step one"}, {"role": "user", "content": "out 1"}]
        )
        env.append_compaction_entry([{"role": "assistant", "content": "step two"}])
        env.append_compaction_entry({"type": "summary", "content": "did two steps"})
        seen = env.execute_code(
            "print(len(history), history[0], history[-1]['content'], 'history' in SHOW_VARS())"
        )
        env.execute_code("import os; os.kill(os.getpid(), 9)")
        again = env.execute_code("print(len(history), history[1][0]['content'])")
    finally:
        env.cleanup()
    assert seen.stderr == ""
    assert seen.stdout.strip() == (
        "3 [{'role': 'assistant', 'content': 'step one'}, {'role': 'user', "
        "'content': "
        "'out 1'}] did two steps False"
    )
    assert again.stdout.strip() == "3 step two"  # read from the log again in the new kernel
    # The kernels' extension wrote to the run's session, never to a "kernel:tmp..." one of its own.
    assert [s.name for s in SessionStore(tmp_path / "data" / "sessions.db").sessions()] == ["hist"]


def test_only_subprocess_kernels_and_known_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kernel_mode='subprocess'"):
        CompactIPythonEnv(
            kernel_mode="in_process", ipython_compact={"store": SessionStore(tmp_path / "a.db")}
        )
    with pytest.raises(ValueError, match=r"unknown ipython_compact options: \['windw'\]"):
        CompactIPythonEnv(ipython_compact={"windw": 1})
