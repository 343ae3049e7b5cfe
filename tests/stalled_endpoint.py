"""A TCP endpoint that stalls: it accepts connections and never answers, or relays to a real server
until told to stall (``StallingProxy``). For the tests of what happens when object storage hangs.

Why real sockets: a stalled bucket is a TCP peer that stops talking; botocore, aiohttp and s3fs
must meet exactly that, with their own timeouts and retries, for the tests to mean anything.

``accepted`` is an event the tests wait on ("a client is now stuck on us"), so nothing waits for
the clock. ``close`` drops every connection and stops listening.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from typing import TypeVar

_L = TypeVar("_L", bound="_Listener")


class _Listener:
    """A listening socket on 127.0.0.1 (a free port) whose accept loop runs on a daemon thread and
    hands each connection to ``_accepted``; ``close`` stops listening and drops every socket it
    kept in ``_socks``. One loop for both endpoints below: they differ only in what they do with a
    connection."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._socks: list[socket.socket] = []
        self._closed = False

    def _start(self, name: str) -> None:
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._socks.append(conn)
            self._accepted(conn)

    def _accepted(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.close()

    def __enter__(self: _L) -> _L:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StalledEndpoint(_Listener):
    """Listens on 127.0.0.1 (a free port), accepts, reads whatever comes, and never answers."""

    def __init__(self) -> None:
        super().__init__()
        self.accepted = threading.Event()
        self._start("stalled-endpoint")

    def _accepted(self, conn: socket.socket) -> None:
        self.accepted.set()  # held in _socks, never answered


class StallingProxy(_Listener):
    """Relays 127.0.0.1:``port`` to ``target`` until ``stall()``: from then on nothing more is relayed
    either way on any connection (old or new), as when a bucket's endpoint hangs mid-transfer;
    ``stalled_traffic`` is set once a client sent something that was held back."""

    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__()
        self._target = target
        self.stalled = threading.Event()
        self.stalled_traffic = threading.Event()
        self._budget: int | None = None
        self._count_lock = threading.Lock()
        self._start("stalling-proxy")

    def _spend(self, n: int) -> bool:
        """False once the budget of ``stall_after`` is spent (then everything stalls)."""
        with self._count_lock:
            if self._budget is None:
                return True
            self._budget -= n
            if self._budget < 0:
                self.stalled.set()
                return False
            return True

    def stall(self) -> None:
        self.stalled.set()

    def stall_after(self, sent: int) -> None:
        """Stall once clients have sent ``sent`` more bytes (mid-upload: small calls still pass)."""
        with self._count_lock:
            self._budget = sent

    def _accepted(self, conn: socket.socket) -> None:
        if self.stalled.is_set():
            return  # accepted and never answered
        try:
            upstream = socket.create_connection(self._target)
        except OSError:
            conn.close()
            return
        self._socks.append(upstream)
        threading.Thread(target=self._relay, args=(conn, upstream), daemon=True).start()

    def _relay(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        while not self._closed:
            try:
                ready, _, _ = select.select([a, b], [], [], 0.2)
            except (OSError, ValueError):
                return
            if self.stalled.is_set():
                if ready:
                    self.stalled_traffic.set()
                if a in ready or b in ready:
                    # hold what came: read nothing more, so the sender's buffers fill and it blocks
                    select.select([], [], [], 0.2)
                continue
            for s in ready:
                try:
                    data = s.recv(1 << 16)
                except OSError:
                    data = b""
                if data and s is a and not self._spend(len(data)):
                    self.stalled_traffic.set()
                    break  # held back: the stall starts here
                if not data:
                    for x in (a, b):
                        with contextlib.suppress(OSError):
                            x.close()
                    return
                try:
                    peers[s].sendall(data)
                except OSError:
                    return
