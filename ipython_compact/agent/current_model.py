"""What an agent's collaborators read from it each time they need it: the model in use.

Why a protocol rather than lambdas: ``switch_model`` changes the model, provider and window
between turns, so the overflow episode and the sub-call bridge must read them when they act, not
copy them when they are built. Handing them the agent as a ``CurrentModel`` says exactly what they
read (and mypy checks it), where four lambdas over ``self`` each said it again.
"""

from __future__ import annotations

from typing import Protocol

from ipython_compact.core.settings import CompactionSettings


class CurrentModel(Protocol):
    """The model in use, read live (``Agent`` is one)."""

    @property
    def model(self) -> str: ...

    @property
    def provider(self) -> str: ...

    @property
    def context_window(self) -> int: ...

    @property
    def settings(self) -> CompactionSettings: ...
