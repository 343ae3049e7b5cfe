"""A context value as JSON data, and back: how a context crosses between host and kernel.

Both sides need it: the host hands ``ask(context=...)`` to the kernel, and kernel code hands
``agent_query(task, context=...)`` back to the host for a sub-agent. One shape for both:
``{"kind": "str" | "bytes" | "json", "value": ...}`` (bytes as hex text). Standard library only,
so the kernel side imports it without the host's machinery.
"""

from __future__ import annotations

import json
from typing import Any


def encode_context(value: Any) -> dict[str, Any]:
    """``value`` as data the other side can read back; ``TypeError`` saying why when it cannot."""
    if isinstance(value, str):
        return {"kind": "str", "value": value}
    if isinstance(value, bytes | bytearray):
        return {"kind": "bytes", "value": bytes(value).hex()}
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"context must be str, bytes or a JSON value (list, dict, number...), got "
            f"{type(value).__name__}: {exc}"
        ) from None
    return {"kind": "json", "value": value}


def decode_context(payload: Any) -> Any:
    """The value ``encode_context`` made; ``ValueError`` for anything not in that shape (kernel
    code sends it, so it is data to check)."""
    if not isinstance(payload, dict) or payload.get("kind") not in ("str", "bytes", "json"):
        raise ValueError("a context must arrive as {'kind': 'str'|'bytes'|'json', 'value': ...}")
    value = payload.get("value")
    if payload["kind"] == "bytes":
        if not isinstance(value, str):
            raise ValueError("a bytes context must arrive as hex text")
        return bytes.fromhex(value)
    if payload["kind"] == "str" and not isinstance(value, str):
        raise ValueError("a str context must arrive as text")
    return value
