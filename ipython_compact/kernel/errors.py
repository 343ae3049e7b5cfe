"""What the kernel's operations raise when they cannot run, and the timestamp they write with.

Shared by ``kernel/service.py`` and the modules split from it (``snapshot_ops``, ``status_report``);
``kernel.service`` re-exports the exceptions, so callers import them from there as before.
"""

from __future__ import annotations


class NotAName(LookupError):
    """``inspect`` was asked for a name the namespace does not list (the message says which)."""


class Busy(Exception):
    """The operation cannot run now (a cell is running, or the same operation is in progress)."""


class Unavailable(Exception):
    """A part the operation needs is not installed or not configured; the message says which."""


def log_now() -> str:
    """The store's timestamp (``store.database.utc_now``), imported on first use: start-up."""
    from ipython_compact.store.database import utc_now

    return utc_now()
