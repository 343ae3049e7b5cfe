"""ipython-compact: context compaction for LLM agents that live in a Python kernel.

``%load_ext ipython_compact`` registers the ``%compact`` magics, the ``ipython_compact`` comm
target and the ``compact`` helper object; ``%unload_ext ipython_compact`` removes them all.
The heavy kernel-side modules are imported only when the extension is loaded, so importing the
package (for the CLI or the library API) stays cheap.
"""

from __future__ import annotations

from typing import Any

from ipython_compact.version import __version__

__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension"]


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
