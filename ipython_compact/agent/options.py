"""The agent's plain-valued options: every knob of ``Agent(...)`` that is not a collaborator.

Why a dataclass: ``Agent`` takes 34 keyword arguments. The collaborators (client, store, kernel,
compactor, settings, listeners) are built or passed in; the rest are values that must be
checked once, kept together, and handed to a sub-agent as they are (``for_child``), instead of
being listed again in every place that builds an agent.

What must hold:
- The defaults here are ``Agent``'s defaults (a test compares them with ``Agent``'s signature),
  and each field is documented once, on ``Agent``'s docstring, one line per parameter.
- A value that cannot work is a ``ValueError`` naming the parameter and the value, raised before
  anything is started.
- A sub-agent gets the same options with ``token_budget`` left to the tree (a child spends what
  the root's budget has left), ``subcalls`` on, and neither ``autonomous`` (it has no goal of its
  own) nor ``stream`` (nobody watches its deltas).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

FINAL_CHARS = 100_000
"""Default bound of a ``FINAL``/``FINAL_VAR`` answer handed to the host (the rest stays in the kernel)."""

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent working inside a persistent IPython kernel. Use the `python` tool to run code; "
    "variables and imports persist between calls. Without the tool, write the code in a ```python "
    "block: it is run in the kernel and you get its output. Answer plainly when you are done."
)


@dataclass(frozen=True)
class AgentOptions:
    """``Agent``'s plain-valued parameters (see ``Agent``'s docstring for each)."""

    summarizer: str = "offline"
    provider: str = "openai"
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_steps: int = 12
    tool_timeout: float | None = 120.0
    cooldown_seconds: float = 30.0
    max_restarts: int = 3
    restart_window_seconds: float = 3600.0
    autonomous: bool = False
    max_continuations: int = 3
    request_timeout: float = 120.0
    stream: bool = False
    max_compactions: int | None = None
    token_budget: int | None = None
    max_output_chars: int = 8000
    subcalls: bool = True
    max_depth: int = 1
    sub_agent_result_chars: int = 4000
    max_live_sub_agents: int = 4
    sub_agent_wait_seconds: float = 300.0
    final_answer_chars: int = FINAL_CHARS
    max_sub_agents: int | None = 32
    max_concurrent_subcalls: int = 8
    sub_model: str | None = None
    fenced_code: bool = True
    reply_max_tokens: int | str | None = "auto"

    def __post_init__(self) -> None:
        least = {
            "max_output_chars": 200,
            "final_answer_chars": 100,
            "max_concurrent_subcalls": 1,
            "max_steps": 1,
            "max_live_sub_agents": 1,
            "max_depth": 0,
            "max_restarts": 0,
            "max_continuations": 0,
        }
        for name, low in least.items():
            value = getattr(self, name)
            if type(value) is not int or value < low:
                raise ValueError(f"{name} must be an integer of at least {low}, got {value!r}")
        cap = self.reply_max_tokens
        if cap is not None and cap != "auto" and (type(cap) is not int or cap < 1):
            raise ValueError(f"reply_max_tokens must be 'auto', None or a positive integer, got {cap!r}")
        for name in ("token_budget", "max_sub_agents", "max_compactions"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 0):
                raise ValueError(f"{name} must be None or a non-negative integer, got {value!r}")

    def for_child(self) -> AgentOptions:
        """A sub-agent's options: the same policy; its budget is what the tree has left."""
        return dataclasses.replace(self, token_budget=None, subcalls=True, autonomous=False, stream=False)


AUTO_REPLY_CAP_WINDOW = 65_536  # below this window, "auto" caps a reply at the reserve


def reply_limit(cap: int | str | None, window: int, reserve: int) -> int | None:
    """The ``max_tokens`` a request sends for ``Agent(reply_max_tokens=cap)``, or None.

    Why: a server with no limit of its own (llama.cpp) lets a looping small model write until the
    window is full; that one reply then outgrew every later request (SmolLM2, 4,096 window: a
    3,639-token reply, and each following question failed with an overflow). The reserve is what
    compaction leaves for a reply, so a reply never needs more. ``"auto"`` sends it only under 64k:
    above, the reserve (16,384) can exceed what a provider allows one reply."""
    if cap == "auto":
        return reserve if window < AUTO_REPLY_CAP_WINDOW else None
    return cap if isinstance(cap, int) else None
