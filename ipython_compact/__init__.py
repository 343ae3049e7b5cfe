"""ipython-compact: context compaction for LLM agents that live in a Python kernel.

``%load_ext ipython_compact`` registers the ``%compact`` magics, the ``ipython_compact`` comm
target and the ``compact`` helper object; ``%unload_ext ipython_compact`` removes them all.
The heavy kernel-side modules are imported only when the extension is loaded, so importing the
package (for the CLI or the library API) stays cheap.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:
    from ipython_compact.kernel.extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from ipython_compact.kernel.extension import unload

    unload(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "ipython-compact"}]
