"""dspy.RLM on a real kernel, offline: KernelInterpreter's protocol and CompactRLM end to end.

Runs in the ``dspy`` extra's venv (``make test`` builds .venv-dspy); skipped where dspy is missing.
The model is ``ipython_compact.testing.ModelServer`` on 127.0.0.1; the ``no_network`` guard fails a
test that tried any other address, here or in a kernel.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

dspy = pytest.importorskip("dspy")

from dspy.primitives.code_interpreter import (  # noqa: E402
    CodeExecutionError,
    CodeInterpreter,
    CodeInterpreterError,
    FinalOutput,
)

from ipython_compact.core.settings import CompactionSettings  # noqa: E402
from ipython_compact.integrations.dspy import CompactRLM, KernelInterpreter  # noqa: E402
from ipython_compact.store import SessionStore  # noqa: E402
from ipython_compact.testing import ModelServer  # noqa: E402
from ipython_compact.testing.model_server import RecordedRequest  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def interp(no_network: list[str], tmp_path: Path) -> Iterator[KernelInterpreter]:
    it = KernelInterpreter(tools={"double": lambda x: 2 * x}, snapshot_dir=str(tmp_path / "snaps"))
    try:
        yield it
    finally:
        it.shutdown()


def test_it_is_a_code_interpreter_and_start_is_idempotent(interp: KernelInterpreter) -> None:
    assert isinstance(interp, CodeInterpreter)
    interp.start()
    interp.start()
    assert interp.execute("a = 20\nprint(double(a) + 2)") == "42"
    assert interp.execute("b = 1") is None  # no output → None


@pytest.mark.parametrize(
    ("code", "error", "match"),
    [
        ("if True print(1)", SyntaxError, "SyntaxError"),
        ("1 / 0", CodeExecutionError, "ZeroDivisionError"),
        ("double()", CodeExecutionError, "HostCallError: TypeError"),
        ("undefined_tool(1)", CodeExecutionError, "NameError"),
    ],
)
def test_errors_are_recoverable_or_syntax_errors(
    interp: KernelInterpreter, code: str, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        interp.execute(code)
    assert interp.execute("print('still alive')") == "still alive"


def test_submit_returns_final_output_with_the_typed_fields(interp: KernelInterpreter) -> None:
    interp.output_fields = [{"name": "answer", "type": "int"}, {"name": "note"}]
    assert interp.execute("SUBMIT(answer=6 * 7, note='ok')") == FinalOutput({"answer": 42, "note": "ok"})
    with pytest.raises(CodeExecutionError, match="SUBMIT needs exactly these fields: answer, note"):
        interp.execute("SUBMIT(answer=1)")


def test_tools_added_later_are_callable_and_inputs_travel_once(interp: KernelInterpreter) -> None:
    big = "z" * 3_000_000
    interp.tools["shout"] = lambda text: text.upper()
    interp._tools_registered = False  # what dspy.RLM does when it injects fresh tools
    for _ in range(3):
        assert interp.execute("print(len(context), shout('hi'))", variables={"context": big}) == "3000000 HI"
    assert interp.runner.stats.transfers == {"context": 1}


def test_a_dead_kernel_raises_terminal_errors_and_is_never_restarted(interp: KernelInterpreter) -> None:
    interp.execute("x = 1")
    with pytest.raises(CodeInterpreterError, match="died"):
        interp.execute("import os; os.kill(os.getpid(), 9)")
    with pytest.raises(CodeInterpreterError, match="died"):
        interp.execute("print(x)")
    assert interp.runner.stats.restarts == 0


def test_restore_after_a_death_is_opt_in_and_the_model_is_told(no_network: list[str], tmp_path: Path) -> None:
    it = KernelInterpreter(snapshot_dir=str(tmp_path / "snaps"), restore_after_death=True)
    try:
        it.execute("kept = {'a': 1}")
        with pytest.raises(
            CodeExecutionError,
            match=r"restarted[\s\S]*Restored from the last snapshot: "
            r"kept\.",
        ):
            it.execute("import os; os.kill(os.getpid(), 9)")
        assert it.execute("print(kept)") == "{'a': 1}"
    finally:
        it.shutdown()


def test_shutdown_is_final(no_network: list[str]) -> None:
    it = KernelInterpreter()
    it.execute("pass")
    it.shutdown()
    it.shutdown()
    with pytest.raises(CodeInterpreterError, match="shut down"):
        it.execute("pass")


# ---- CompactRLM end to end ---------------------------------------------------------------------


def _action(reasoning: str, code: str) -> str:
    return (
        f"[[ ## reasoning ## ]]\n{reasoning}\n\n[[ ## code ## ]]\n```python\n{code}\n```\n\n[[ ## "
        f"completed ## ]]"
    )


def _prompt(req: RecordedRequest) -> str:
    return "\n".join(str(m.get("content", "")) for m in req.messages)


class Scripted:
    """A model that reads a chunk per step (big outputs), asks a sub-question, recalls an early
    step after the compaction, then submits the sum of the names it created."""

    def __init__(self, steps: int, filler: int = 5000) -> None:
        self.steps = steps
        self.step = 0
        self.filler = filler

    def __call__(self, req: RecordedRequest) -> str:
        text = _prompt(req)
        if "[[ ## repl_history ## ]]" not in text:
            return "sub-answer"  # llm_query
        self.step += 1
        if self.step <= self.steps:
            return _action(
                f"read chunk {self.step}",
                f"part{self.step} = {self.step}\nprint('MARK-{self.step}', context[:10], '#' * "
                f"{self.filler})\n"
                f"print(llm_query('what is in chunk {self.step}?'))",
            )
        if self.step == self.steps + 1:
            return _action("look back", "print(recall('MARK-1')[:300])")
        total = " + ".join(f"part{i}" for i in range(1, self.steps + 1))
        return _action("done", f"SUBMIT(answer=str({total}))")


def test_compact_rlm_compacts_logs_and_recalls_end_to_end(no_network: list[str], tmp_path: Path) -> None:
    steps = 10
    script = Scripted(steps)
    with ModelServer(script=script) as srv:
        lm = dspy.LM("openai/scripted", api_base=srv.base_url, api_key="test", cache=False, num_retries=0)
        store = SessionStore(tmp_path / "log.db")
        rlm = CompactRLM(
            "context, query -> answer",
            store=store,
            window_tokens=16_000,
            settings=CompactionSettings(reserve_tokens=4_000, keep_recent_tokens=3_000),
            max_iters=20,
        )
        with dspy.context(lm=lm):
            pred = rlm(context="corpus " * 2000, query="sum the parts")
        requests = list(srv.chat_requests)
    assert pred.answer == str(sum(range(1, steps + 1)))
    log = rlm.log
    assert log is not None and rlm.last_session is not None
    assert log.steps == steps + 2  # every step, the recall and the SUBMIT
    assert len(log.checkpoints) >= 1
    assert log.peak_prompt_tokens <= 16_000 - 4_000
    # Every step is in the session log verbatim, with the compaction and the kernel notice.
    kinds = [e.kind for e in store.entries(rlm.last_session)]
    assert kinds.count("message") == 1 + 2 * log.steps
    assert kinds.count("compaction") == len(log.checkpoints) and kinds.count("kernel_state") == len(
        log.checkpoints
    )
    # After the compaction the model saw the checkpoint and the kernel's real names, and not step 1.
    after = [_prompt(r) for r in requests if "compacted; recall(query)" in _prompt(r)]
    assert after, "no request carried a checkpoint"
    done = max(int(n) for n in re.findall(r"=== Step (\d+) ===", after[0]))  # steps run before this request
    expected = sorted(["context", "query", "dspy", *(f"part{i}" for i in range(1, done + 1))])
    names = re.search(r"These names are still defined: (.*)\.", after[0])
    assert names is not None and names.group(1).split(", ") == expected
    assert "MARK-1 corpus" not in after[0].split("=== Step")[-1]
    # recall, called from the kernel, brought step 1's output back verbatim into the last prompt.
    last = [_prompt(r) for r in requests if "[[ ## repl_history ## ]]" in _prompt(r)][-1]
    assert "MARK-1 corpus cor" in last.split("Reasoning: look back")[-1]


def test_compact_rlm_is_a_drop_in_and_keeps_every_request_inside_a_small_window(
    no_network: list[str], tmp_path: Path
) -> None:
    """Issue 22, item 5: dspy.RLM's arguments only (no store, no window); the 4,000-token window comes
    from the server's card, and the prompt really sent is what is measured: no request overflows."""
    steps = 8
    script = Scripted(steps, filler=1500)
    with ModelServer(script=script, context_window=4000, model="scripted") as srv:
        lm = dspy.LM("openai/scripted", api_base=srv.base_url, api_key="test", cache=False, num_retries=0)
        rlm = CompactRLM("context, query -> answer", max_iters=20)
        with dspy.context(lm=lm):
            pred = rlm(context="corpus " * 200, query="sum the parts")
        sent = [r.prompt_tokens for r in srv.chat_requests]
    assert pred.answer == str(sum(range(1, steps + 1)))
    assert rlm.log is not None and len(rlm.log.checkpoints) >= 1
    assert max(sent) <= 4000 and rlm.log.peak_prompt_tokens <= 4000 - 1000  # under the blocking line
    data = SessionStore(tmp_path / "data" / "sessions.db")  # the default store: the data directory's
    assert [s.name for s in data.sessions()] == [rlm.last_session]  # and no kernel:tmp... session beside it


def test_compact_rlm_says_when_it_cannot_tell_the_window(no_network: list[str]) -> None:
    with ModelServer(script=["unused"]) as srv:
        lm = dspy.LM("openai/scripted", api_base=srv.base_url, api_key="test", cache=False, num_retries=0)
        rlm = CompactRLM("context -> answer")
        with dspy.context(lm=lm), pytest.raises(ValueError) as err:
            rlm(context="x")
    assert str(err.value).startswith(
        "CompactRLM cannot tell the context window of 'openai/scripted': the server at "
    )
    assert str(err.value).endswith(
        "litellm's model table does not know 'openai/scripted'; pass window_tokens=..."
    )


def test_compact_rlm_refuses_a_sub_lm_prompt_over_the_window_before_sending_it(no_network: list[str]) -> None:
    """Issue 22, item 5 (every request inside the window): the model's own llm_query prompts too.
    Found by the fan-out bench: a 625,000-character chunk went to the server as a 156,277-token
    prompt against a 16,384-token window, once per chunk, and counted against max_llm_calls."""
    big = "corpus " * 6000  # ~42,000 characters: ~10,500 tokens, far over a 4,000-token window

    def script(req: RecordedRequest) -> str:
        text = _prompt(req)
        if "[[ ## repl_history ## ]]" not in text:
            return "sub-answer"
        if "=== Step" not in text:
            return _action("ask", "print(llm_query_batched(['a small question', context]))")
        return _action("done", "SUBMIT(answer='ok')")

    with ModelServer(script=script, context_window=4000, model="scripted") as srv:
        lm = dspy.LM("openai/scripted", api_base=srv.base_url, api_key="test", cache=False, num_retries=0)
        rlm = CompactRLM("context, query -> answer", max_iters=5)
        with dspy.context(lm=lm):
            pred = rlm(context=big, query="ask about it")
        sent = [r.prompt_tokens for r in srv.chat_requests]
        step = _prompt(srv.chat_requests[-1])  # the SUBMIT step's prompt carries step 1's output
    assert pred.answer == "ok"
    assert max(sent) <= 4000
    assert (
        """['sub-answer', "[ERROR] llm_query prompt refused before any request: it is 42,000 characters """
        "(~10,500 tokens) and the sub-LM's 4,000-token window leaves room for about 3,000"
    ) in step
    assert "send smaller slices (llm_query_batched over the pieces)" in step
