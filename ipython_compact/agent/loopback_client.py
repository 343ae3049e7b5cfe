"""The kernel end of the one loopback bridge: call a host handler of ``subcall_broker`` by name.

Why one client: the RLM sub-calls (``rlm_kernel``) and the engines' host tools (``host_tools``)
both need "call this on the host and wait for the answer" from inside the kernel; one wire
format, one size limit and one error shape keep them from drifting apart.

What must hold:
- Standard library only: this module is imported inside user kernels.
- Arguments must be JSON (a value JSON cannot carry is refused here, naming the op, before any
  request); the reply is read only up to ``MAX_BODY`` bytes (the broker's one limit).
- The host's refusal of a call (``{"ok": false, "error"}``, any HTTP status) raises
  ``HostCallError`` with the host's words; a host that cannot be reached or answers something
  that is not the bridge's reply raises ``BridgeError``. Both show in a cell as their one line
  (``_render_traceback_``), without this module's frames. Nothing received is ever executed.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

MAX_BODY = 256 * 1024 * 1024  # subcall_broker.MAX_BODY (this module may not import the host side)
TIMEOUT = 3600.0  # a sub-agent may work for a long time; the host bounds its own steps


class BridgeError(RuntimeError):
    """The bridge itself failed: the host is unreachable, or its answer is not a bridge reply."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class HostCallError(BridgeError):
    """The host refused or failed the call; the message is the host's (``Type: message``)."""


def call(
    url: str,
    token: str,
    op: str,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    timeout: float = TIMEOUT,
) -> Any:
    """Run host handler ``op`` with ``args``/``kwargs`` and return its JSON-decoded value."""
    __tracebackhide__ = True  # IPython leaves the bridge's frames out of the model's traceback
    try:
        body = json.dumps(
            {"op": op, "args": list(args), "kwargs": dict(kwargs or {})}, allow_nan=False
        ).encode()
    except (TypeError, ValueError) as exc:
        raise HostCallError(f"the arguments of {op}() must be JSON values: {exc}") from None
    req = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read(MAX_BODY + 1)
    except urllib.error.HTTPError as exc:
        raw = exc.read(MAX_BODY + 1)
        if not _is_reply(raw):
            raise BridgeError(f"the host answered HTTP {exc.code} to {op}()") from None
    except OSError as exc:
        raise BridgeError(f"the host did not answer ({exc})") from None
    if len(raw) > MAX_BODY:
        raise BridgeError(f"the host's reply to {op}() is over the bridge's limit of {MAX_BODY:,} bytes")
    try:
        reply = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise BridgeError(f"the host's reply to {op}() is not JSON: {raw[:200]!r}") from None
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise BridgeError(f"the host's reply to {op}() is not a bridge reply: {raw[:200]!r}")
    if not reply["ok"]:
        raise HostCallError(str(reply.get("error")))
    return reply.get("value")


def _is_reply(raw: bytes) -> bool:
    try:
        reply = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(reply, dict) and reply.get("ok") is False
