"""Agent's parameters are documented one per line and its plain values have one set of defaults
(issue 19.6): the docstring, the signature and ``AgentOptions`` cannot drift apart."""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

import pytest

from ipython_compact import Agent
from ipython_compact.agent.options import AgentOptions

PARAMETERS = {
    name: p
    for name, p in inspect.signature(Agent.__init__).parameters.items()
    if name != "self" and not name.startswith("_")
}


def _documented() -> list[str]:
    doc = inspect.getdoc(Agent) or ""
    args = doc.split("Args:\n", 1)[1]
    return re.findall(r"^    (\w+): \S", args, flags=re.MULTILINE)


def test_every_parameter_is_documented_once_in_signature_order() -> None:
    assert _documented() == list(PARAMETERS)


def test_the_options_defaults_are_the_signatures() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(AgentOptions)}
    assert set(fields) <= set(PARAMETERS)
    assert {name: PARAMETERS[name].default for name in fields} == fields


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_output_chars": 199}, "max_output_chars must be an integer of at least 200, got 199"),
        ({"final_answer_chars": 99}, "final_answer_chars must be an integer of at least 100, got 99"),
        ({"max_concurrent_subcalls": 0}, "max_concurrent_subcalls must be an integer of at least 1, got 0"),
        ({"max_steps": 2.5}, "max_steps must be an integer of at least 1, got 2.5"),
        ({"token_budget": -1}, "token_budget must be None or a non-negative integer, got -1"),
        ({"max_sub_agents": True}, "max_sub_agents must be None or a non-negative integer, got True"),
    ],
)
def test_a_value_that_cannot_work_is_refused_naming_it(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        AgentOptions(**change)
    assert str(info.value) == message


def test_a_bad_value_stops_the_agent_before_anything_starts() -> None:
    """No client, server or kernel is needed to be told: the options are checked first."""
    with pytest.raises(ValueError, match="max_output_chars must be an integer of at least 200"):
        Agent(model="m", base_url="http://127.0.0.1:9/v1", context_window=8000, max_output_chars=10)


def test_a_child_keeps_the_policy_but_not_the_budget_nor_autonomy() -> None:
    root = AgentOptions(
        token_budget=5000, autonomous=True, stream=True, max_steps=7, subcalls=False, sub_model="s"
    )
    child = root.for_child()
    assert (child.token_budget, child.autonomous, child.stream, child.subcalls) == (None, False, False, True)
    assert (child.max_steps, child.sub_model) == (7, "s")
