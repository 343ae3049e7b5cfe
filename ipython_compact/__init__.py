"""ipython-compact: context compaction for LLM agents that live in a Python kernel.

The library API is short::

    from ipython_compact import Agent

    with Agent(model="my-model", base_url="http://127.0.0.1:8000/v1") as agent:
        print(agent.ask("How many rows mention Lisbon?", context=big_text).text)

``Agent``, ``AgentEvent``, ``TurnResult``, ``TurnFailed`` (what ``ask`` raises when a turn
fails), ``CompactionSettings``, ``Compactor``, ``SessionStore``,
``JupyterKernel``, ``KernelClient`` and ``make_summarizer`` are importable from here.

``%load_ext ipython_compact`` registers the ``%compact`` magics, the ``ipython_compact`` comm
target and the ``compact`` helper object; ``%unload_ext ipython_compact`` removes them all.
The heavy kernel-side modules are imported only when the extension is loaded, so importing the
package (for the CLI or the library API) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ipython_compact.version import __version__

if TYPE_CHECKING:
    from ipython_compact.agent.events import AgentEvent, TurnFailed, TurnResult
    from ipython_compact.agent.kernel_tool import JupyterKernel
    from ipython_compact.agent.loop import Agent
    from ipython_compact.compaction.compactor import Compactor
    from ipython_compact.core.settings import CompactionSettings
    from ipython_compact.host.kernel_client import KernelClient
    from ipython_compact.store import SessionStore
    from ipython_compact.summarizers import make_summarizer

_PUBLIC = {
    "Agent": "ipython_compact.agent.loop",
    "AgentEvent": "ipython_compact.agent.events",
    "TurnResult": "ipython_compact.agent.events",
    "TurnFailed": "ipython_compact.agent.events",
    "JupyterKernel": "ipython_compact.agent.kernel_tool",
    "KernelClient": "ipython_compact.host.kernel_client",
    "Compactor": "ipython_compact.compaction.compactor",
    "CompactionSettings": "ipython_compact.core.settings",
    "SessionStore": "ipython_compact.store",
    "make_summarizer": "ipython_compact.summarizers",
}

__all__ = [
    "Agent",
    "AgentEvent",
    "CompactionSettings",
    "Compactor",
    "JupyterKernel",
    "KernelClient",
    "SessionStore",
    "TurnFailed",
    "TurnResult",
    "__version__",
    "load_ipython_extension",
    "make_summarizer",
    "unload_ipython_extension",
]


def __getattr__(name: str) -> Any:
    """The public names, imported on first use: deferred for start-up time, so ``import
    ipython_compact`` (the CLI, the kernel extension) does not load the agent, openai or sqlite."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'ipython_compact' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def load_ipython_extension(ipython: Any) -> None:
    # deferred for start-up: importing the package (CLI, library API) must not pull in IPython
    from ipython_compact.kernel.extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    # deferred for start-up, as above
    from ipython_compact.kernel.extension import unload

    unload(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "ipython-compact"}]
