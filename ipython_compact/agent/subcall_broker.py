"""The host end of the one loopback bridge: a small HTTP server on 127.0.0.1 that code running in a
kernel calls while a cell runs (the RLM sub-calls of ``rlm_kernel``, the host tools and ``SUBMIT``
of ``host_tools``); the kernel end is ``loopback_client``.

Why HTTP on loopback: the model's code runs in a kernel process (or the notebook's own), and a
call must be answered by the host while that code waits; a thread serving JSON over a local
socket works the same for both kernels and needs only the standard library on the kernel side.
Every call is its own request and gets its own response on its own connection, so calls made at
once from several kernel threads cannot receive each other's results (the kernel's stdin channel,
which has no request ids, crossed them: see the reference notes on dspy).

The wire (one format for every caller): ``POST /call`` with ``Authorization: Bearer <token>`` and
the body ``{"op": str, "args": list, "kwargs": object}``; the reply is ``{"ok": true, "value": v}``
or ``{"ok": false, "error": str}``, with the HTTP status saying who was wrong (401 token, 413 size,
400 request, 404 op, 200 the handler ran).

What must hold:
- Binds 127.0.0.1 only, on an ephemeral port; every request must carry the token (a random
  secret per broker, compared in constant time) or gets 401 without calling anything; a body
  over ``max_body`` bytes gets 413 before it is read. ``MAX_BODY`` is the one size limit of the
  bridge, both ways (the kernel end refuses a larger reply).
- A request is data: ``op`` names a handler (``handlers[op]``, or ``resolve(op)`` looked up at
  call time so a tool table updated between runs is honoured), called with the JSON ``args`` and
  ``kwargs``; nothing in it is ever executed. An unknown op gets one clear error.
- A handler's exception becomes ``{"ok": false, "error": "Type: message"}`` (just the message for
  an exception marked ``one_line``, already worded for the model); a value JSON cannot carry is
  an error naming the op and the type, never a silent ``str()``. The server goes on.
- Each call runs in a copy of the ``contextvars`` context set with ``use_context`` (the caller's,
  e.g. dspy's ``dspy.context(lm=...)``), or a fresh one.
- ``stop`` closes the socket and joins the thread.
- Nobody without the token can exhaust the host (``_LoopbackServer``): a connection has
  ``HEADER_TIMEOUT`` seconds in all to send its request line and headers, at most
  ``MAX_UNAUTHENTICATED`` connections at once may be waiting to show the token (a new one beyond
  that drops the oldest waiting one, so an idle crowd cannot lock the real caller out), and the
  token is checked before the body is read. Why: one thread per connection with no header
  timeout and no cap, before the token was checked, let 1,100 idle token-less connections make
  the real caller fail with EMFILE (once the host aborted at its descriptor limit). A connection
  that hangs up is closed quietly (one debug line), never a traceback on the host's stderr.
"""

from __future__ import annotations

import contextlib
import contextvars
import hmac
import json
import logging
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)

Handler = Callable[..., Any]
Resolver = Callable[[str], "Handler | None"]

MAX_BODY = 256 * 1024 * 1024
"""The bridge's one size limit (bytes), for a request and for a reply: a prompt may carry a large
slice of a context variable, and an engine's input (a 20M-character corpus) is fetched through it."""


HEADER_TIMEOUT = 10.0
"""Seconds a connection has, in all, to send its request line and headers (the real caller, on
loopback, sends them at once)."""
MAX_UNAUTHENTICATED = 64
"""Connections at once that may be waiting to show the token (module doc)."""


class _LoopbackServer(ThreadingHTTPServer):
    """One thread per call, and a listen backlog for a batch's fan-out.

    socketserver's default backlog is 5: sixteen threads of ``llm_query_batched`` connecting at once
    on a loaded machine overflowed it, and the kernel saw "connection reset by peer".

    Connections that have not shown the token yet are tracked (``_waiting``: socket -> accepted at)
    and bounded in number and time (module doc). A dropped connection is only ``shutdown`` here:
    its own thread sees the end of its stream, leaves, and closes it (closing a descriptor another
    thread reads could close an unrelated one that reused the number).
    """

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._waiting: dict[Any, float] = {}
        self._waiting_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._waiting_lock:
            evict = None
            if len(self._waiting) >= MAX_UNAUTHENTICATED:
                evict = next(iter(self._waiting))  # the oldest: insertion order
                del self._waiting[evict]
            self._waiting[request] = time.monotonic()
        if evict is not None:
            log.debug("subcall broker: too many connections without a token; dropped the oldest")
            _hang_up(evict)
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.admitted(request)

    def admitted(self, request: Any) -> None:
        """``request`` showed the token (or ended): it no longer counts as waiting."""
        with self._waiting_lock:
            self._waiting.pop(request, None)

    def service_actions(self) -> None:
        """Between accepts (every poll interval): drop connections past the header deadline."""
        cutoff = time.monotonic() - HEADER_TIMEOUT
        with self._waiting_lock:
            late = [r for r, at in self._waiting.items() if at < cutoff]
            for r in late:
                del self._waiting[r]
        for r in late:
            log.debug("subcall broker: a connection sent no request within %g s; dropped", HEADER_TIMEOUT)
            _hang_up(r)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A caller that hung up (or sent garbage) costs one debug line, not a traceback on stderr."""
        exc = sys.exc_info()[1]
        log.debug("subcall broker: connection from %s ended: %s: %s", client_address, type(exc).__name__, exc)


def _hang_up(request: Any) -> None:
    with contextlib.suppress(OSError):
        request.shutdown(socket.SHUT_RDWR)


class SubcallBroker:
    """Serves ``handlers`` (a mapping, or a resolver called per request) to kernel code; use as a
    context manager or call ``start``/``stop``. ``calls`` counts the calls per op."""

    def __init__(self, handlers: Mapping[str, Handler] | Resolver, *, max_body: int = MAX_BODY) -> None:
        if isinstance(handlers, Mapping):
            table = dict(handlers)
            self._resolve: Resolver = table.get
            self._known: Callable[[], list[str]] = lambda: sorted(table)
        else:
            self._resolve = handlers
            self._known = list
        self.max_body = max_body
        self.token = secrets.token_hex(16)
        self.calls: dict[str, int] = {}
        self._context: contextvars.Context | None = None
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the broker is not running")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/call"

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) the server listens on (raises when it is not running)."""
        if self._httpd is None:
            raise RuntimeError("the broker is not running")
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    def start(self) -> SubcallBroker:
        if self._httpd is None:
            httpd = _LoopbackServer(("127.0.0.1", 0), _handler_class(self))
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

    def use_context(self, context: contextvars.Context | None) -> None:
        """Run later calls in copies of ``context`` (None: a fresh context per call)."""
        self._context = context

    def dispatch(self, request: Any) -> tuple[int, dict[str, Any]]:
        """(HTTP status, reply) for one decoded request body."""
        if not isinstance(request, dict) or not isinstance(request.get("op"), str):
            return 400, {"ok": False, "error": "a request is a JSON object with a string 'op'"}
        op = request["op"]
        args, kwargs = request.get("args", []), request.get("kwargs", {})
        if (
            not isinstance(args, list)
            or not isinstance(kwargs, dict)
            or set(request) - {"op", "args", "kwargs"}
        ):
            return 400, {"ok": False, "error": "a request is {'op': str, 'args': list, 'kwargs': object}"}
        handler = self._resolve(op)
        if handler is None:
            known = self._known()
            return 404, {
                "ok": False,
                "error": f"unknown op {op!r}" + (f"; known: {', '.join(known)}" if known else ""),
            }
        with self._lock:
            self.calls[op] = self.calls.get(op, 0) + 1
        context = self._context.copy() if self._context is not None else contextvars.Context()
        try:
            value = context.run(handler, *args, **kwargs)
        except Exception as exc:  # arguments that do not fit are the handler's TypeError, like any other
            # A failure already worded for the model (``one_line``) travels as it is.
            text = str(exc) if getattr(exc, "one_line", False) else f"{type(exc).__name__}: {exc}"
            return 200, {"ok": False, "error": text}
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return 200, {
                "ok": False,
                "error": f"TypeError: {op} returned a value JSON cannot carry "
                f"({type(value).__name__}): {exc}",
            }
        return 200, {"ok": True, "value": value}


def _handler_class(broker: SubcallBroker) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        timeout = HEADER_TIMEOUT  # per read until the token is shown (the server bounds the total)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the agent reports sub-calls itself
            pass

        def _reply(self, status: int, payload: Mapping[str, Any]) -> None:
            body = json.dumps(payload, allow_nan=False).encode()
            if len(body) > broker.max_body:
                too_big = f"the reply is {len(body):,} bytes, over the bridge's limit of {broker.max_body:,}"
                status, body = 413, json.dumps({"ok": False, "error": too_big}).encode()
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
            server = self.server
            if isinstance(server, _LoopbackServer):
                server.admitted(self.request)
            self.connection.settimeout(None)  # the real caller: its body and its wait are its own
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
