"""Host side of the tool bridge: serve host tools to code running in a kernel.

Why not the kernel's stdin channel: stdin requests carry no ids, and concurrent tool calls from
kernel threads came back out of order (see the reference notes on dspy). Here every call is its own
connection with its own request id (``bridge_client``), so concurrent calls cannot cross.

What must hold:
- Binds 127.0.0.1 only, on an ephemeral port; every request must carry the bridge's random token
  (compared in constant time) or it is refused without calling anything.
- A request names a tool; ``resolve(name)`` decides what that is at call time (so a ``tools`` dict
  updated between runs is honoured). Nothing in a request is executed: only the named, registered
  callable is called with the JSON arguments.
- Each call runs in a copy of the ``contextvars`` context set with ``use_context`` (the caller's,
  e.g. dspy's ``dspy.context(lm=...)``), on its own thread.
- A tool that raises answers ``{"id", "error": "Type: message"}``; a result that JSON cannot carry
  is an error naming the tool and the type, never a silent ``str()``.
- ``close()`` stops the server and its threads.
"""

from __future__ import annotations

import contextvars
import hmac
import json
import secrets
import socketserver
import threading
from collections.abc import Callable
from typing import Any

from ipython_compact.integrations.bridge_client import HOST

MAX_REQUEST_BYTES = 256 * 1024 * 1024

Resolver = Callable[[str], "Callable[..., Any] | None"]


class ToolBridge:
    """A threaded JSON-lines server on 127.0.0.1 that calls host tools by name."""

    def __init__(self, resolve: Resolver) -> None:
        self._resolve = resolve
        self.token = secrets.token_hex(16)
        self._context: contextvars.Context | None = None
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        bridge = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                raw = self.rfile.readline(MAX_REQUEST_BYTES)
                if not raw:
                    return
                reply = bridge._answer(raw)
                self.wfile.write(reply.encode("utf-8") + b"\n")

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((HOST, 0), Handler)
        self.port: int = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="tool-bridge", daemon=True)
        self._thread.start()

    def use_context(self, context: contextvars.Context | None) -> None:
        """Run later calls in copies of ``context`` (None: a fresh context per call)."""
        self._context = context

    def _answer(self, raw: bytes) -> str:
        try:
            request = json.loads(raw)
        except ValueError:
            return json.dumps({"id": None, "error": "BridgeError: the request is not JSON"})
        if not isinstance(request, dict):
            return json.dumps({"id": None, "error": "BridgeError: the request is not a JSON object"})
        request_id = request.get("id")
        token = request.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token, self.token):
            return json.dumps({"id": request_id, "error": "BridgeError: wrong bridge token"})
        name = request.get("name")
        args = request.get("args") or []
        kwargs = request.get("kwargs") or {}
        if not isinstance(name, str) or not isinstance(args, list) or not isinstance(kwargs, dict):
            return json.dumps({"id": request_id, "error": "BridgeError: a request needs name (str), args (list), kwargs (object)"})
        tool = self._resolve(name)
        if tool is None:
            return json.dumps({"id": request_id, "error": f"NameError: no host tool named {name!r}"})
        with self._lock:
            self.calls[name] = self.calls.get(name, 0) + 1
        context = self._context.copy() if self._context is not None else contextvars.Context()
        try:
            value = context.run(tool, *args, **kwargs)
        except Exception as exc:
            return json.dumps({"id": request_id, "error": f"{type(exc).__name__}: {exc}"})
        try:
            return json.dumps({"id": request_id, "value": value}, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return json.dumps({"id": request_id, "error": f"TypeError: host tool {name!r} returned a value JSON cannot "
                                                            f"carry ({type(value).__name__}): {exc}"})

    def close(self) -> None:
        """Stop serving; idempotent."""
        server, self._server = self._server, None  # type: ignore[assignment]
        if server is not None:
            server.shutdown()
            server.server_close()
            self._thread.join(timeout=5)

    def __enter__(self) -> ToolBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
