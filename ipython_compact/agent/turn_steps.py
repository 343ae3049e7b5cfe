"""The steps of one agent turn: requests, tool calls and fenced code until an answer or a stop, and
what follows a placed compaction.

Why a module of its own: ``Agent`` (``agent/loop.py``) grew past what one file should hold; the
turn's inner loop is one role — decide before each request, send it, run what the model asked
for — and reads best in one place. The functions take the ``Agent`` (whose one-line methods call
them) and use its parts (``_scheduler``, ``_caller``, ``_runner``, ``_fenced``, ``_overflow``, ``_caps``).

What must hold (as ``agent/loop.py`` states for the agent): every message is logged before the
next step reads it; before each request the token budget, then at most one compaction; after a
placed compaction a fresh system baseline, then the kernel notice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ipython_compact.agent.events import StopReason, TurnResult
from ipython_compact.agent.fenced_code import reply_blocks
from ipython_compact.agent.rlm import RLM_PROMPT
from ipython_compact.core.entries import CUSTOM, KERNEL_STATE, SYSTEM, text_of_content, tool_calls_of
from ipython_compact.core.overflow import message_is_overflow

if TYPE_CHECKING:  # the agent these functions act for (import cycle otherwise)
    from ipython_compact.agent.loop import Agent


def run_steps(agent: Agent) -> TurnResult:
    steps = 0
    agent._runner.take_final()  # a FINAL left by an earlier, aborted turn does not end this one
    while True:
        if agent._abort.is_set():
            return TurnResult("interrupted", "The turn was interrupted.", steps)
        if steps >= agent.max_steps:
            return TurnResult("step_limit", f"Stopped after {steps} steps (the step limit).", steps)
        over = agent._caps.budget_stop()
        if over is not None:
            return agent._capped("token_budget", over, steps)
        if agent._scheduler.before_request() == "capped":
            return agent._capped("compaction_cap", agent._caps.compaction_stop(), steps)
        outcome = send_request(agent)
        if isinstance(outcome, TurnResult):
            return outcome
        if outcome is None:
            continue  # overflow recovered by compaction: retry the request once
        steps += 1
        calls = tool_calls_of(outcome)
        if not calls:
            # a model that writes code instead of calling the tool (rlms' convention): run it
            blocks = reply_blocks(outcome) if agent.fenced_code else []
            if not blocks:
                return TurnResult("final", text_of_content(outcome.get("content")), steps)
            stop = agent._fenced.run(blocks, steps)
            if stop is not None:
                return TurnResult("error", stop, steps, error=stop)
        for call in calls:
            if agent._abort.is_set() or agent._runner.final is not None:
                why = (
                    ("the run already ended with FINAL")
                    if agent._runner.final is not None
                    else "the turn was interrupted"
                )
                agent._runner.append_result(call, f"Not run: {why} before this call.", True)
                continue
            stop = agent._runner.run(call)
            if stop is not None:
                return TurnResult("error", stop, steps, error=stop)
        final = agent._runner.take_final()
        if final is not None:
            answer = str(final.get("answer", ""))
            agent._log.append(
                CUSTOM,
                {
                    "custom_type": "final_answer",
                    "answer": answer,
                    "source": final.get("source"),
                    "chars": final.get("chars", len(answer)),
                    "cut": bool(final.get("cut")),
                    "name": final.get("name"),
                },
            )
            agent._log.emit("assistant", answer, final=final.get("source"))
            return TurnResult("final", answer, steps)


def capped(agent: Agent, stopped: StopReason, message: str, steps: int) -> TurnResult:
    """End the run at a cap, saying which (an event and a ``custom`` entry in the log)."""
    agent._log.append(CUSTOM, {"custom_type": "run_stopped", "reason": stopped, "message": message})
    agent._log.emit("error", message, stopped=stopped)
    return TurnResult(stopped, message, steps, error=message)


def send_request(agent: Agent) -> dict[str, Any] | TurnResult | None:
    """Send the context; the assistant message, a terminal TurnResult, or None to retry."""
    messages = agent._request_messages()
    agent._log.emit("request", f"{len(messages)} messages", messages=len(messages))
    sent = agent.store.context_view(agent.session)
    answer = agent._caller.call(
        messages,
        model=agent.model,
        provider=agent.provider,
        abort=agent._abort,
        on_delta=lambda d: agent._log.emit("assistant_delta", d),
        max_tokens=agent.reply_limit,
    )
    if answer.message is None and answer.aborted:  # interrupted while the server was answering
        return TurnResult("interrupted", "The turn was interrupted while the model was answering.", 0)
    if answer.message is None:
        return agent._overflow.on_error(answer)
    assistant = answer.message
    usage = assistant.get("usage")
    agent._caps.spend(int(usage.get("totalTokens") or 0) if isinstance(usage, dict) else 0)
    agent._learner.learn_usage(sent.entries, sent.tokens(agent.settings.estimator), usage)
    agent._log.append_message(assistant)
    if answer.aborted:
        return TurnResult("interrupted", "The turn was interrupted while the model was answering.", 0)
    agent._overflow.success()
    agent._scheduler.request_sent()
    text = text_of_content(assistant.get("content"))
    if text:
        agent._log.emit("assistant", text, usage=assistant.get("usage"))
    if message_is_overflow(assistant, agent.context_window):
        stop = agent._overflow.silent()  # the answer went through, but the next request cannot fit as is
        if stop is not None:
            return stop
    return assistant


def baseline_text(agent: Agent) -> str:
    """The system prompt, plus the goal kept outside the transcript when there is one."""
    text = agent.system_prompt
    if agent._bridge is not None:
        text += "\n\n" + RLM_PROMPT
    if agent._goal:
        text += f"\n\nCurrent goal (kept outside the transcript; still in force): {agent._goal}"
    return text


def after_compaction(agent: Agent) -> None:
    """What follows every placed compaction: the system baseline, then the kernel notice."""
    agent._caps.compacted()
    agent._log.append(SYSTEM, {"content": agent._baseline_text()})
    notice = agent._supervisor.notice()
    live = agent._bridge.sub_agents() if agent._bridge is not None else []
    if live:
        listed = "; ".join(
            f"{a['name']} (first task: {str(a['task'])[:80]!r}, {a['tasks']} answered)" for a in live
        )
        notice = (
            (notice or "")
            + ("\n" if notice else "")
            + (
                f"<sub_agents>\nSub-agents still live (compaction did not end them): {listed}. "
                "Ask one again with agent_query(task, name=...); sub_agents() lists them.\n</sub_agents>"
            )
        )
    if notice:
        agent._log.append(KERNEL_STATE, {"content": notice})
