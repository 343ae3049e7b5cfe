"""Kernel side of an engine's host tools: plain functions in the kernel that call the host.

Why: an RLM engine's tools (``llm_query``, user tools, ``SUBMIT``) run in the host process, but
the model's code runs in the kernel. Each tool bound here calls the host tool of its name over
the loopback bridge (``loopback_client`` to the host's ``subcall_broker``), and ``SUBMIT``
reports the answer to the host and ends the cell.

What must hold:
- A host tool's failure is raised in the kernel as ``HostCallError`` with the host's
  ``Type: message``; a broken bridge raises ``BridgeError``. Nothing received is ever executed.
- The bound names are hidden (``user_ns_hidden``): plumbing, not the user's state.
- The standard library and ``loopback_client`` only: this module is imported inside the user's kernel.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ipython_compact.agent.loopback_client import call


class Submitted(BaseException):
    """Raised by ``SUBMIT`` after the host recorded the answer: it ends the cell at once.

    A BaseException, so ``except Exception`` in the model's own code does not swallow it.
    """


def tool_function(url: str, token: str, name: str) -> Callable[..., Any]:
    """A kernel-side function named ``name`` that calls the host tool of that name."""

    def tool(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        return call(url, token, name, args, kwargs)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = f"Host tool {name!r}, called over the ipython-compact loopback bridge."
    return tool


def install(
    shell: Any,
    url: str,
    token: str,
    tool_names: list[str],
    *,
    submit_fields: list[str] | None = None,
    submit_tool: str = "__submit__",
) -> str:
    """Bind a function per host tool in ``shell.user_ns`` and a ``SUBMIT`` that reports to the host.

    The bound functions are also put in ``shell.user_ns_hidden``, so ``%who``, the probe and
    snapshots leave them out. ``submit_fields`` None means one positional value (stored as
    ``{"output": value}``); otherwise SUBMIT takes exactly those fields, positionally or by keyword.
    Returns ``"ok"`` (the host reads it back to tell success from a failed expression).
    """
    bound: dict[str, Any] = {name: tool_function(url, token, name) for name in tool_names}
    fields = list(submit_fields) if submit_fields is not None else None

    def SUBMIT(*args: Any, **kwargs: Any) -> None:
        __tracebackhide__ = True
        if fields is None:
            if len(args) != 1 or kwargs:
                raise TypeError("SUBMIT takes exactly one value")
            values: dict[str, Any] = {"output": args[0]}
        else:
            if args and kwargs:
                raise TypeError("SUBMIT takes its values positionally or by keyword, not both")
            values = dict(zip(fields, args, strict=False)) if args else dict(kwargs)
            if len(args) > len(fields) or set(values) != set(fields):
                raise TypeError(f"SUBMIT needs exactly these fields: {', '.join(fields)}")
        call(url, token, submit_tool, (), {"values": _jsonable(values)})
        raise Submitted("the answer was submitted")

    bound["SUBMIT"] = SUBMIT
    shell.user_ns.update(bound)
    shell.user_ns_hidden.update(bound)
    return "ok"


# The values last injected per name: ``rebind_inputs`` puts them back when code rebound the name.
_INPUTS: dict[str, Any] = {}


def load_inputs(shell: Any, url: str, token: str, names: list[str], fetch_tool: str = "__fetch__") -> str:
    """Fetch input values from the host (one call per name) and bind them in the namespace.

    Returns ``"ok"`` (the host reads it back to tell success from a failed expression)."""
    for name in names:
        value = call(url, token, fetch_tool, (name,))
        _INPUTS[name] = value
        shell.user_ns[name] = value
    return "ok"


def rebind_inputs(shell: Any, names: list[str]) -> str:
    """Give each input name its injected value again, as if injected anew (cheap: no transfer).

    The engines pass the inputs again before every step; only a rebound name needs repair.
    """
    for name in names:
        if name in _INPUTS and shell.user_ns.get(name) is not _INPUTS[name]:
            shell.user_ns[name] = _INPUTS[name]
    return "ok"


def _jsonable(value: Any) -> Any:
    """Values as JSON can carry them; anything else becomes its ``repr`` (said, not dropped)."""
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        if isinstance(value, dict):
            return {str(k): _jsonable(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_jsonable(v) for v in value]
        return repr(value)
