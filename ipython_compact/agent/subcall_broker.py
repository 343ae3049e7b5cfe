"""The host end of the kernel's sub-calls: a small HTTP server on 127.0.0.1 that the RLM functions
in the kernel (``rlm_kernel``) call while a cell runs.

Why HTTP on loopback: the model's code runs in a kernel process (or the notebook's own), and a
sub-call must be answered by the host while that code waits; a thread serving JSON over a local
socket works the same for both kernels and needs only the standard library on the kernel side.

What must hold:
- Binds 127.0.0.1 only, on an ephemeral port; every request must carry the token (a random
  secret per broker) or gets 401; bodies over ``max_body`` bytes get 413.
- A request is data: ``{"op": name, ...args}`` is dispatched to ``handlers[op](**args)``; nothing in
  it is ever executed. Unknown ops and bad arguments get one clear error.
- A handler's exception becomes ``{"ok": false, "error": "Type: message"}`` (just the message for
  an exception marked ``one_line``, already worded for the model); the server goes on.
- ``stop`` closes the socket and joins the thread.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Handler = Callable[..., Any]

MAX_BODY = 64 * 1024 * 1024  # a prompt may carry a large slice of a context variable


class SubcallBroker:
    """Serves ``handlers`` to the kernel; use as a context manager or call ``start``/``stop``."""

    def __init__(self, handlers: Mapping[str, Handler], *, max_body: int = MAX_BODY) -> None:
        self.handlers = dict(handlers)
        self.max_body = max_body
        self.token = secrets.token_hex(16)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the broker is not running")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/call"

    def start(self) -> SubcallBroker:
        if self._httpd is None:
            httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(self))
            httpd.daemon_threads = True
            self._httpd = httpd
            self._thread = threading.Thread(target=httpd.serve_forever, name="subcall-broker", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join(5.0)

    def __enter__(self) -> SubcallBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def dispatch(self, request: Any) -> tuple[int, dict[str, Any]]:
        """(HTTP status, reply) for one decoded request body."""
        if not isinstance(request, dict) or not isinstance(request.get("op"), str):
            return 400, {"ok": False, "error": "a request is a JSON object with a string 'op'"}
        op = request["op"]
        handler = self.handlers.get(op)
        if handler is None:
            return 404, {"ok": False, "error": f"unknown op {op!r}; known: {', '.join(sorted(self.handlers))}"}
        args = {k: v for k, v in request.items() if k != "op"}
        try:
            value = handler(**args)
        except TypeError as exc:
            return 400, {"ok": False, "error": f"bad arguments for {op}: {exc}"}
        except Exception as exc:
            # A failure already worded for the model (``one_line``) travels as it is.
            text = str(exc) if getattr(exc, "one_line", False) else f"{type(exc).__name__}: {exc}"
            return 200, {"ok": False, "error": text}
        return 200, {"ok": True, "value": value}


def _handler_class(broker: SubcallBroker) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet: the agent reports sub-calls itself
            pass

        def _reply(self, status: int, payload: Mapping[str, Any]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            auth = self.headers.get("Authorization", "")
            if not hmac.compare_digest(auth.encode(), f"Bearer {broker.token}".encode()):
                self._reply(401, {"ok": False, "error": "bad or missing token"})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > broker.max_body:
                self._reply(413, {"ok": False, "error": f"request body must be 0..{broker.max_body} bytes"})
                return
            try:
                request = json.loads(self.rfile.read(length).decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                self._reply(400, {"ok": False, "error": f"the body is not JSON: {exc}"})
                return
            status, reply = broker.dispatch(request)
            self._reply(status, reply)

    return _Handler
