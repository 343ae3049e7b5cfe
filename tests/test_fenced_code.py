"""Models without tool calls: a reply's ```python/```repl blocks run in the kernel (issue 33, item 2).

Why: a model that writes code in its reply instead of calling the tool (SmolLM2 on llama.cpp, many
local models) got its code back as the answer and nothing ran. rlms' convention — code blocks in
the reply, output fed back — works with any model. The parser is pure; the loop runs on a real
kernel against the scripted server over HTTP.
"""

from __future__ import annotations

from typing import Any

import pytest

from ipython_compact import Agent
from ipython_compact.agent.events import AgentEvent
from ipython_compact.agent.fenced_code import reply_blocks
from ipython_compact.core.fenced_code import FencedBlock, fenced_code_blocks
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

FENCE = "```"


def test_python_and_repl_blocks_are_found_in_order_and_other_languages_are_not() -> None:
    text = (
        f"First:\n{FENCE}python\nx = 1\n{FENCE}\nthen\n{FENCE}bash\nls\n{FENCE}\n"
        f"and\n{FENCE}repl\nprint(x + 1)\n{FENCE}\n~~~py\ny = 2\n~~~\n{FENCE}\nplain\n{FENCE}\n"
    )
    assert fenced_code_blocks(text) == [
        FencedBlock("x = 1", "python"),
        FencedBlock("print(x + 1)", "repl"),
        FencedBlock("y = 2", "py"),
    ]


def test_an_unclosed_block_is_not_run_and_an_empty_one_is_skipped() -> None:
    assert fenced_code_blocks(f"{FENCE}python\n\n{FENCE}\n{FENCE}python\nx = [1,\n") == []


def test_an_open_last_block_counts_only_when_asked() -> None:
    text = f"Here:\n{FENCE}python\nprint(17 * 23)\n"
    assert fenced_code_blocks(text, open_end=True) == [FencedBlock("print(17 * 23)", "python")]
    assert fenced_code_blocks(text) == []
    cut = {"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "length"}
    assert reply_blocks(cut) == []


def test_a_longer_fence_holds_a_shorter_one_and_indentation_is_removed() -> None:
    text = f"  ````python\n  s = '''\n  {FENCE}\n  '''\n  ````\n"
    assert fenced_code_blocks(text) == [FencedBlock("s = '''\n```\n'''", "python")]


def script_by_outputs(*replies: str) -> Any:
    """The model's answers, one per request, by how many code outputs it has been shown."""

    def pick(req: RecordedRequest) -> Reply | str:
        seen = sum(1 for m in req.messages if m.get("role") == "user" and "run in the kernel" in str(m))
        return replies[seen] if seen < len(replies) else "no more"

    return pick


@pytest.mark.slow
def test_a_reply_with_a_python_block_and_no_tool_call_runs_it_and_feeds_the_output_back() -> None:
    events: list[AgentEvent] = []
    script = script_by_outputs(
        f"I will compute it.\n{FENCE}python\nanswer = sum(range(10))\nprint(answer * 3)\n{FENCE}",
        "The answer is 135.",
    )
    with (
        ModelServer(script, context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, on_event=events.append) as agent,
    ):
        result = agent.ask("Use Python to compute 3 * sum(range(10)).")
        requests = [r for r in srv.requests if r.messages]
        ran = agent.kernel.evaluate({"a": "answer"})
        logged = [e for e in agent.store.path(agent.session) if e.data.get("custom_type") == "fenced_code"]
    assert result.stopped == "final" and result.text == "The answer is 135."
    assert ran == {"a": 45}  # the code ran in the agent's kernel
    # the second request shows the model its output, as a user-side message after its reply
    last = requests[1].messages
    assert last[-2]["role"] == "assistant" and FENCE + "python" in last[-2]["content"]
    assert last[-1]["role"] == "user" and "135" in last[-1]["content"]
    assert len(logged) == 1 and logged[0].data["details"]["output"].strip() == "135"
    kinds = [(e.kind, e.data.get("fenced")) for e in events if e.kind in ("tool_call", "tool_result")]
    assert kinds == [("tool_call", "python"), ("tool_result", "python")]  # the transcript shows it


@pytest.mark.slow
def test_the_setting_off_returns_the_reply_as_the_answer_and_runs_nothing() -> None:
    reply = f"{FENCE}python\nboom = 1\n{FENCE}"
    with (
        ModelServer([reply], context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url, fenced_code=False) as agent,
    ):
        result = agent.ask("Use Python.")
        defined = agent.kernel.evaluate({"d": "'boom' in globals()"})
    assert result.stopped == "final" and result.text == reply
    assert defined == {"d": False}


@pytest.mark.slow
def test_a_tool_call_wins_over_blocks_in_the_same_reply() -> None:
    both = Reply(
        text=f"{FENCE}python\nfrom_text = 1\n{FENCE}",
        tool_calls=(ToolCall("python", {"code": "from_tool = 2"}),),
    )
    with (
        ModelServer([both, "done"], context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url) as agent,
    ):
        agent.ask("go")
        names = agent.kernel.evaluate({"t": "'from_tool' in globals()", "x": "'from_text' in globals()"})
    assert names == {"t": True, "x": False}


@pytest.mark.slow
def test_a_block_calling_final_ends_the_run_and_later_blocks_are_not_run() -> None:
    reply = f"{FENCE}repl\nFINAL('forty-two')\n{FENCE}\n{FENCE}python\nafter = 1\n{FENCE}"
    with (
        ModelServer([reply], context_window=8000) as srv,
        Agent(model="local-model", base_url=srv.base_url) as agent,
    ):
        result = agent.ask("finish")
        after = agent.kernel.evaluate({"a": "'after' in globals()"})
        outputs = [
            e.data["details"]["output"]
            for e in agent.store.path(agent.session)
            if e.data.get("custom_type") == "fenced_code"
        ]
    assert result.stopped == "final" and result.text == "forty-two"
    assert after == {"a": False}
    assert len(outputs) == 2 and outputs[1].startswith("Not run: the run already ended with FINAL")
