"""A sub-call text too large for the window is refused before any request, with the way out
(issue 22.2): a task must leave room for the child's system prompt, a prompt is sent alone."""

from __future__ import annotations

import pytest

from ipython_compact.agent.rlm import too_large_for_window
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.thresholds import threshold_lines
from ipython_compact.core.tokens import estimate_message_tokens

SETTINGS = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=500, background_tokens=0)
WINDOW = 4000
SYSTEM = "s" * 2000


def _room(what: str) -> int:
    room = threshold_lines(WINDOW, SETTINGS).blocking
    if what != "llm_query prompt":
        room -= estimate_message_tokens({"role": "system", "content": SYSTEM}, SETTINGS.estimator)
    return room


def _text_of(tokens: int) -> str:
    """The longest text whose estimate is at most ``tokens``."""
    low, high = 0, tokens * 8
    while low < high:  # the largest length whose estimate fits
        mid = (low + high + 1) // 2
        if estimate_message_tokens({"role": "user", "content": "x" * mid}, SETTINGS.estimator) <= tokens:
            low = mid
        else:
            high = mid - 1
    return "x" * low


@pytest.mark.parametrize(
    ("what", "over", "fix"),
    [
        ("llm_query prompt", False, None),
        ("llm_query prompt", True, "split it and send the pieces with llm_query_batched"),
        ("sub-agent task", False, None),
        ("sub-agent task", True, "pass the data as agent_query(task, context=data)"),
    ],
)
def test_a_text_over_the_room_is_refused_naming_size_window_and_fix(
    what: str, over: bool, fix: str | None
) -> None:
    text = _text_of(_room(what)) + ("x" * 400 if over else "")
    why = too_large_for_window(text, what, settings=SETTINGS, window=WINDOW, system_text=SYSTEM)
    if fix is None:
        assert why is None
    else:
        assert why is not None
        assert why.startswith(f"{what} refused before any request: it is {len(text):,} characters")
        tokens = estimate_message_tokens({"role": "user", "content": text}, SETTINGS.estimator)
        short = tokens - _room(what)  # by how many tokens it does not fit, said in the message
        room = f"the 4,000-token window leaves room for about {_room(what):,}"
        assert f"{room} ({short:,} tokens too many); {fix}" in why


def test_a_task_has_less_room_than_a_prompt_because_of_the_childs_system_prompt() -> None:
    text = _text_of(_room("llm_query prompt"))
    assert (
        too_large_for_window(text, "llm_query prompt", settings=SETTINGS, window=WINDOW, system_text=SYSTEM)
        is None
    )
    assert (
        too_large_for_window(text, "sub-agent task", settings=SETTINGS, window=WINDOW, system_text=SYSTEM)
        is not None
    )
