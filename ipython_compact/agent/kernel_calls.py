"""The one table of functions the host calls inside a kernel, and the one way to write such a call.

Why: a host drives its kernel by sending code (a silent ``user_expressions`` entry, or a cell), so
a call into kernel-side code used to be a hand-written string,
``__import__('ipython_compact.agent.kernel_state', fromlist=[...]).snapshot_json(...)``, in each
caller; to grep, mypy and an IDE those targets looked dead, and a rename failed only at run
time, in the kernel. Here every target is a real function object in ``KERNEL_CALLS``, and
``kernel_call(fn, *args)`` renders the code from the function itself.

What must hold:
- Only functions in ``KERNEL_CALLS`` can be rendered (anything else is a ``ValueError`` naming it),
  and the arguments must bind to the function's signature on the host (a ``TypeError`` naming the
  call), before anything is sent.
- Arguments travel as Python literals only: ``None``, ``bool``, ``int``, finite ``float``, ``str``
  and lists, tuples and str-keyed dicts of them, each checked to read back equal
  (``ast.literal_eval``); ``SHELL`` stands for the kernel's own shell (``get_ipython()``). No
  argument is ever pasted in as code, so a caller's data (a path, a session name, a token) cannot
  become code in the kernel.
- Every entry is importable in the kernel by its module and name (a test checks each entry, and
  that every caller's arguments bind).
"""

from __future__ import annotations

import ast
import inspect
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from ipython_compact.agent import host_tools, kernel_history, kernel_state, requests, rlm_kernel


class _Shell:
    """The kernel's own IPython shell, as an argument of a kernel call."""

    def __repr__(self) -> str:
        return "get_ipython()"


SHELL: Final = _Shell()

KERNEL_CALLS: Final[Mapping[str, Callable[..., Any]]] = MappingProxyType(
    {
        # the session binding and the namespace: list, snapshot, restore (agent.kernel_state)
        "bind_session": kernel_state.bind_session,
        "user_names_json": kernel_state.user_names_json,
        "snapshot_json": kernel_state.snapshot_json,
        "restore_json": kernel_state.restore_json,
        "hide_names": kernel_state.hide_names,
        "describe_names": kernel_state.describe_names,
        # compact.run() requests of the model's own code (agent.requests)
        "begin_turn": requests.begin_turn,
        "end_turn": requests.end_turn,
        "take_json": requests.take_json,
        # the RLM functions and their hand-overs (agent.rlm_kernel)
        "install": rlm_kernel.install,
        "take_final_json": rlm_kernel.take_final_json,
        "load_context": rlm_kernel.load_context,
        # an engine's host tools, SUBMIT and inputs (agent.host_tools)
        "install_host_tools": host_tools.install,
        "load_inputs": host_tools.load_inputs,
        "rebind_inputs": host_tools.rebind_inputs,
        # rlms' `history` (agent.kernel_history)
        "install_history": kernel_history.install,
    }
)
"""Every kernel-side function the host may call, by a name for messages and tests."""

_BY_FUNCTION: Final = {id(fn): name for name, fn in KERNEL_CALLS.items()}


def kernel_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The code (one expression) that calls ``fn(*args, **kwargs)`` inside the kernel.

    Raises ValueError for a function not in ``KERNEL_CALLS`` or an argument that is not a plain
    literal, TypeError when the arguments do not fit ``fn``'s signature.
    """
    name = _BY_FUNCTION.get(id(fn))
    if name is None or KERNEL_CALLS[name] is not fn:
        raise ValueError(
            f"{getattr(fn, '__qualname__', fn)!r} is not a kernel call: add it to KERNEL_CALLS "
            f"(known: {', '.join(sorted(KERNEL_CALLS))})"
        )
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"kernel call {name}: {exc}") from None
    parts = [_literal(value, f"{name} argument {i}") for i, value in enumerate(args)]
    parts += [f"{key}={_literal(value, f'{name} argument {key!r}')}" for key, value in kwargs.items()]
    return f"__import__({fn.__module__!r}, fromlist=[{fn.__name__!r}]).{fn.__name__}({', '.join(parts)})"


def _literal(value: Any, where: str) -> str:
    if value is SHELL:
        return repr(SHELL)
    _check(value, where)
    text = repr(value)
    if ast.literal_eval(text) != value:  # what the kernel reads back must be what was meant
        raise ValueError(f"{where}: {type(value).__name__} does not read back as the same literal")
    return text


def _check(value: Any, where: str) -> None:
    if value is None or type(value) in (bool, int, str):
        return
    if type(value) is float:
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value!r} is not a finite number")
        return
    if type(value) in (list, tuple):
        for i, item in enumerate(value):
            _check(item, f"{where}[{i}]")
        return
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise ValueError(f"{where}: dict keys must be str, got {type(key).__name__}")
            _check(item, f"{where}[{key!r}]")
        return
    raise ValueError(
        f"{where}: a kernel call takes plain literals (None, bool, int, float, str, lists, "
        f"tuples, dicts), not {type(value).__name__}"
    )
