"""A forked child never uses, holds or closes its parent's PostgreSQL connections.

Why: ``fork`` copies every descriptor, so a child (the kernel's background snapshot, or any
``multiprocessing`` fork) holds the sockets of its parent's connections. While it runs, the server
keeps the parent's session open even after the parent died: the liveness advisory lock
(``postgres.py``) stays taken and the dead owner looks alive to every other host. And a child that
used such a connection, or let libpq finish it (``PQfinish`` sends a Terminate message), would
talk on the parent's session: interleaved protocol bytes, or the parent's session ended under it.

What is done, in the child, right after ``fork`` (``os.register_at_fork``): each tracked
connection's socket descriptor is replaced by ``/dev/null`` (``dup2``): the child's copy of the
socket is dropped without a byte sent (the parent's session on the server is untouched), and
anything libpq might still write goes nowhere. The connection objects (and their stores) are kept
referenced for the child's life, so no finalizer of theirs ever runs; the stores refuse to be used
(``forked``), saying to open a new one.

What must hold: nothing here runs in the parent; the child's new connections are not affected.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from typing import Any

_CONNECTIONS: weakref.WeakSet[Any] = weakref.WeakSet()
_OWNERS: weakref.WeakSet[Any] = weakref.WeakSet()
_INHERITED: list[Any] = []  # in a child: the parent's objects, kept so no finalizer runs


def track(connection: Any) -> None:
    """A psycopg connection this process opened (blinded in a forked child)."""
    _CONNECTIONS.add(connection)


def track_owner(owner: Any) -> None:
    """An object holding connections (a database, a pool): kept alive, never finalized, in a child."""
    _OWNERS.add(owner)


def _blind_in_child() -> None:
    inherited = [*_CONNECTIONS, *_OWNERS]
    _CONNECTIONS.clear()
    _OWNERS.clear()
    if not inherited:
        return
    _INHERITED.extend(inherited)
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    try:
        for conn in inherited:
            with contextlib.suppress(Exception):
                fd = conn.pgconn.socket  # raises on a closed connection: nothing to blind
                if fd >= 0 and fd != devnull:
                    os.dup2(devnull, fd)
    finally:
        os.close(devnull)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_blind_in_child)

__all__ = ["track", "track_owner"]
