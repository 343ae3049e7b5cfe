"""Kernel side of the tool bridge: host tools as plain functions inside the kernel.

Why: an RLM engine's tools (``llm_query``, user tools, ``SUBMIT``) run in the host process, but
the model's code runs in the kernel. Each call here opens its own connection to the host's
``ToolBridge`` on 127.0.0.1, sends one JSON line carrying a fresh request id and the bridge's
token, and reads one JSON line back.

What must hold:
- A reply is accepted only when it carries the id of the request it answers, so calls made
  concurrently from several kernel threads can never receive each other's results.
- A tool's failure is raised in the kernel as ``ToolCallError`` with the host's message; a broken
  connection or a malformed reply raises ``BridgeError``. Nothing received is ever executed.
- Standard library only: this module is imported inside the user's kernel.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Callable
from typing import Any

HOST = "127.0.0.1"
MAX_REPLY_BYTES = 256 * 1024 * 1024


class BridgeError(RuntimeError):
    """The bridge itself failed (connection lost, malformed or mismatched reply)."""


class ToolCallError(RuntimeError):
    """A host tool raised; the message is the host's ``Type: message``."""


class BridgeClient:
    """Calls host tools over the bridge at ``port`` with ``token``."""

    def __init__(self, port: int, token: str) -> None:
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"bridge port must be an int in 1..65535, got {port!r}")
        self.port = port
        self.token = token

    def call(self, name: str, args: list[Any] | tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        """Run host tool ``name`` and return its JSON-decoded result."""
        __tracebackhide__ = True  # IPython leaves the bridge's frames out of the model's traceback
        request_id = uuid.uuid4().hex
        try:
            line = json.dumps(
                {"id": request_id, "token": self.token, "name": name, "args": list(args), "kwargs": dict(kwargs or {})},
                allow_nan=False,
            )
        except (TypeError, ValueError) as exc:
            raise ToolCallError(f"arguments of {name}() must be JSON-compatible: {exc}") from exc
        try:
            with socket.create_connection((HOST, self.port)) as sock:
                sock.sendall(line.encode("utf-8") + b"\n")
                with sock.makefile("rb") as stream:
                    raw = stream.readline(MAX_REPLY_BYTES)
        except OSError as exc:
            raise BridgeError(f"the host tool bridge on {HOST}:{self.port} is unreachable: {exc}") from exc
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            raise BridgeError(f"malformed reply from the tool bridge for {name}(): {raw[:200]!r}") from exc
        if not isinstance(reply, dict) or reply.get("id") != request_id:
            raise BridgeError(f"the tool bridge answered another request than {name}() (id mismatch)")
        if "error" in reply:
            raise ToolCallError(str(reply["error"]))
        return reply.get("value")

    def function(self, name: str) -> Callable[..., Any]:
        """A kernel-side function named ``name`` that calls the host tool of that name."""

        def tool(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            return self.call(name, args, kwargs)

        tool.__name__ = tool.__qualname__ = name
        tool.__doc__ = f"Host tool {name!r}, called over the ipython-compact tool bridge."
        return tool


class Submitted(BaseException):
    """Raised by ``SUBMIT`` after the host recorded the answer: it ends the cell at once.

    A BaseException, so ``except Exception`` in the model's own code does not swallow it.
    """


def install(shell: Any, port: int, token: str, tool_names: list[str], *,
            submit_fields: list[str] | None = None, submit_tool: str = "__submit__") -> str:
    """Bind a function per host tool in ``shell.user_ns`` and a ``SUBMIT`` that reports to the host.

    The bound functions are also put in ``shell.user_ns_hidden``, so ``%who``, the probe and
    snapshots leave them out (they are plumbing, not the user's state). ``submit_fields`` None
    means one positional value (stored as ``{"output": value}``); otherwise SUBMIT takes exactly
    those fields, positionally or by keyword.
    """
    client = BridgeClient(port, token)
    bound: dict[str, Any] = {name: client.function(name) for name in tool_names}
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
        client.call(submit_tool, [], {"values": _jsonable(values)})
        raise Submitted("the answer was submitted")

    bound["SUBMIT"] = SUBMIT
    shell.user_ns.update(bound)
    shell.user_ns_hidden.update(bound)
    return "ok"


# The values last injected per name: ``rebind_inputs`` puts them back when code rebound the name.
_INPUTS: dict[str, Any] = {}


def load_inputs(shell: Any, port: int, token: str, names: list[str], fetch_tool: str = "__fetch__") -> str:
    """Fetch input values from the host (one call per name) and bind them in the namespace.

    Returns ``"ok"`` (the host reads it back to tell success from a failed expression)."""
    client = BridgeClient(port, token)
    for name in names:
        value = client.call(fetch_tool, [name], {})
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
