"""The host side of the RLM functions for one agent: the bridge to its kernel, the sub-agent
registry, and how a child agent is made under the same policy.

Why a module of its own: wiring sub-calls is a role apart from the turn loop; these functions take
the ``Agent`` (``agent/loop.py``). What must hold: the bridge is attached to the kernel now
and after every restart and stopped first by ``close``; a child shares the model, window, settings,
compactor and the tree's budget.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from ipython_compact.agent.model_caller import ModelCaller
from ipython_compact.agent.rlm import RlmBridge, too_large_for_window
from ipython_compact.agent.sub_agents import SubAgentRegistry, forward_child_events
from ipython_compact.core.entries import CUSTOM, Entry

if TYPE_CHECKING:  # the agent these functions act for (import cycle otherwise)
    from ipython_compact.agent.loop import Agent


def start_bridge(agent: Agent, client: Any, logged: list[Entry]) -> RlmBridge:
    """The RLM functions' host side: its sub-agent registry (below ``max_depth``), started, attached
    to the kernel now and after every restart, and stopped first by ``close``."""
    o = agent.options
    registry = None
    if agent._depth < o.max_depth:
        registry = SubAgentRegistry(
            agent._log,
            functools.partial(make_child, agent),
            max_live=o.max_live_sub_agents,
            result_chars=o.sub_agent_result_chars,
            wait_seconds=o.sub_agent_wait_seconds,
            tree=agent._tree,
        )
        registry.restore(e for e in logged if e.kind == CUSTOM)
    bridge = RlmBridge(
        agent._log,
        ModelCaller(client, request_timeout=o.request_timeout, tools=()),
        current=agent,
        registry=registry,
        budget_left=agent._caps.budget_left,
        spent=functools.partial(spent_on_subcall, agent),
        result_chars=o.sub_agent_result_chars,
        final_chars=o.final_answer_chars,
        max_concurrent=o.max_concurrent_subcalls,
        too_large=agent._too_large,
        sub_model=o.sub_model,
    ).start()
    agent._closers.insert(0, bridge.stop)
    agent._supervisor.after_restart.append(functools.partial(attach_bridge, agent))
    agent._bridge = bridge
    attach_bridge(agent)
    return bridge


def attach_bridge(agent: Agent) -> None:
    if agent._bridge is not None and not agent._bridge.attach(agent._supervisor.kernel):
        agent._log.emit(
            "guard",
            "the kernel did not accept the RLM functions (llm_query, FINAL, ...)",
            guard="subcalls",
        )


def spent_on_subcall(agent: Agent, tokens: int) -> None:
    agent._caps.spend(tokens)
    if tokens:
        agent._log.append(CUSTOM, {"custom_type": "subcall_usage", "usage": {"totalTokens": tokens}})


def make_child(agent: Agent, name: str, session: str) -> Agent:
    """A sub-agent under the same policy: model, window, settings, compactor, options, kernel kind;
    its token budget is what the tree has left."""
    o = dataclasses.replace(
        agent.options.for_child(),
        provider=agent.provider,
        system_prompt=agent.system_prompt,
        max_steps=agent.max_steps,
        tool_timeout=agent._supervisor.tool_timeout,
    )
    return type(agent)(
        model=agent.model,
        client=agent.client,
        store=agent.store,
        session=session,
        context_window=agent.context_window,
        compactor=agent.compactor,
        settings=agent._base_settings,
        on_event=forward_child_events(agent._log, name),
        _tree=agent._tree,
        _depth=agent._depth + 1,
        **{f.name: getattr(o, f.name) for f in dataclasses.fields(o)},
    )


def too_large(agent: Agent, text: str, what: str) -> str | None:
    """Why ``text`` cannot fit this agent's window as a sub-call (see ``rlm.too_large_for_window``)."""
    return too_large_for_window(
        text, what, settings=agent.settings, window=agent.context_window, system_text=agent._baseline_text()
    )
