"""A socket guard: any connection or name lookup for an address other than 127.0.0.1 is refused
and recorded. Installed in the test process by the ``no_network`` fixture and, through
``PYTHONSTARTUP``, in every kernel the tests start (violations there are appended to the file named
by ``NET_GUARD_LOG``), so a test can prove its engine contacted nothing but the local model server.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

ALLOWED_HOSTS = frozenset({"127.0.0.1", "localhost"})


def _host_of(address: Any) -> str | None:
    """The host of an AF_INET/AF_INET6 address tuple; None for Unix sockets (paths)."""
    if isinstance(address, tuple) and address:
        return str(address[0])
    return None


def install(record: Callable[[str], None]) -> Callable[[], None]:
    """Patch ``socket`` so non-loopback connects and lookups raise; returns the undo function."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(host: str | None, what: str) -> None:
        if host is not None and host not in ALLOWED_HOSTS:
            record(f"{what} {host}")
            raise OSError(f"network guard: {what} {host} refused (only 127.0.0.1 is allowed in tests)")

    def connect(self: socket.socket, address: Any) -> None:
        check(_host_of(address), "connect")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(_host_of(address), "connect")
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        check(None if host is None else (host.decode() if isinstance(host, bytes) else str(host)), "lookup")
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo

    def undo() -> None:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = real_connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = real_getaddrinfo

    return undo


def install_from_env() -> None:
    """For ``PYTHONSTARTUP`` in kernels: record violations in ``$NET_GUARD_LOG``."""
    path = os.environ.get("NET_GUARD_LOG")
    if not path:
        return

    def record(what: str) -> None:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"kernel {os.getpid()}: {what}\n")

    install(record)
