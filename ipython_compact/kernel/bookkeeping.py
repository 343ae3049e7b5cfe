"""The kernel's bookkeeping appends (snapshot records, a cell's file operations): never lost
silently, never holding up the user's next cell.

Why a queue and a thread: these appends run after every cell on the kernel's main thread. While
another process holds the database's write lock (a long import, another kernel), retrying in place
would freeze the notebook for as long as the retry budget; giving up at once would drop the entry
without a word. So an append that finds the database locked is queued, and one daemon thread
retries the queue with backoff; the cell returns after at most one busy timeout.

What must hold:
- Entries land in the order they were made, each with the session and timestamp of its making
  (a later ``%compact session NAME`` does not move an entry queued before it).
- While anything is queued, new entries queue behind it (no overtaking).
- An entry is either written or counted in ``failure`` (and logged once per give-up), never both
  and never neither; ``failure`` is what ``%compact status`` shows as a problem line.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ipython_compact.store.errors import DatabaseLockedError

LOG = logging.getLogger("ipython_compact")

#: How long queued entries are retried while the database stays locked, in seconds.
RETRY_SECONDS = 15.0


@dataclass(frozen=True)
class _Pending:
    session: str
    kind: str
    data: dict[str, Any]
    timestamp: str


class BookkeepingLog:
    """Appends through ``append(session, kind, data, timestamp)``; see the module docstring."""

    def __init__(self, append: Callable[[str, str, dict[str, Any], str], Any],
                 retry_seconds: float = RETRY_SECONDS) -> None:
        self._append = append
        self.retry_seconds = retry_seconds
        self._lock = threading.Lock()
        self._queue: collections.deque[_Pending] = collections.deque()
        self._worker: threading.Thread | None = None
        self.failures = 0
        self.failure: str | None = None

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def add(self, session: str, kind: str, data: Mapping[str, Any], timestamp: str) -> Any:
        """Write now and return the entry, or queue it (database locked) and return None."""
        item = _Pending(session, kind, dict(data), timestamp)
        with self._lock:
            if self._queue:
                self._queue.append(item)
                return None
        try:
            return self._append(item.session, item.kind, item.data, item.timestamp)
        except DatabaseLockedError:
            with self._lock:
                self._queue.append(item)
                self._start()
            return None
        except Exception as exc:
            self._gave_up([item], exc)
            return None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the retry thread (tests, unload); True when nothing is queued any more."""
        with self._lock:
            worker = self._worker
        if worker is not None:
            worker.join(timeout)
        return self.pending == 0

    def _start(self) -> None:  # caller holds the lock
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._retry, name="ipython-compact-bookkeeping", daemon=True)
            self._worker.start()

    def _retry(self) -> None:
        deadline = time.monotonic() + self.retry_seconds
        delay = 0.05
        while True:
            with self._lock:
                if not self._queue:
                    self._worker = None
                    return
                item = self._queue[0]
            try:
                self._append(item.session, item.kind, item.data, item.timestamp)
            except DatabaseLockedError as exc:
                if time.monotonic() + delay < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 1.0)
                    continue
                failure: Exception = exc
            except Exception as exc:
                failure = exc
            else:
                with self._lock:
                    self._queue.popleft()
                continue
            with self._lock:
                dropped = list(self._queue)
                self._queue.clear()
                self._worker = None
            self._gave_up(dropped, failure)
            return

    def _gave_up(self, items: list[_Pending], failure: Exception) -> None:
        self.failures += len(items)
        noun = "entry" if self.failures == 1 else "entries"
        self.failure = (f"{self.failures} log {noun} could not be written to session {items[-1].session!r} "
                        f"(last: a {items[-1].kind} entry: {failure})")
        LOG.warning("ipython_compact: %s", self.failure)
