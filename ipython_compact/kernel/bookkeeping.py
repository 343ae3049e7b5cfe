"""The kernel's bookkeeping writes (snapshot records and digests, a cell's file operations): never
lost, never holding up the user's next cell.

Why a journal and a thread: these writes run after every cell on the kernel's main thread. While
another process holds the database's write lock (a long import, another kernel), retrying in place
would freeze the notebook; a queue in memory died with the kernel (the third red team saw 0 of 4
queued entries written at shutdown, and 5 of 8 dropped after a 15 s retry budget). So a write that
finds the database locked goes to the database's pending journal (``store/pending.py``: on disk,
fsynced) and one daemon thread replays the journal with backoff; the cell returns after at most
one busy timeout. What the thread could not land stays in the journal and is replayed by the next
write of this kernel, or by the next kernel on the same database.

What must hold:
- Entries land in the order they were made, each with the session, timestamp and entry id of its
  making (a later ``%compact session NAME`` does not move an entry queued before it).
- While anything waits in the journal, new writes queue behind it (no overtaking).
- A write is either landed, waiting in the journal (``pending``, shown by ``%compact status``), or
  counted in ``failure`` (refused for a reason other than the lock, logged once), never neither.
- A failure never spins (the fourth red team saw 100,000+ replays a second past the budget): every
  round that leaves something waiting sleeps, backing off, and none starts past the budget. A
  journal that cannot be replayed (``JournalError``: its replay lock a folder, say) stops the
  thread, is said once in the log and in ``status``, and is kept; new writes still queue in it.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ipython_compact.store.errors import DatabaseLockedError, JournalError
from ipython_compact.store.pending import PendingJournal

LOG = logging.getLogger("ipython_compact")

#: How long the retry thread keeps replaying while the database stays locked, in seconds; what is
#: left then waits in the journal for the next write.
RETRY_SECONDS = 15.0


def new_entry_id() -> str:
    """An id fixed when the write is made, so a replay that runs twice never appends twice."""
    return secrets.token_hex(4)


class BookkeepingLog:
    """Writes through ``apply(record)``; see the module docstring.

    A record is ``{"op": "append", "session", "kind", "data", "timestamp", "entry_id"}`` or
    ``{"op": "merge_status", "session", "key", "values"}``; ``apply`` writes one to the database and
    raises ``DatabaseLockedError`` while it is locked. ``journal`` gives the journal of the
    database in use (it follows the store when the data directory changes).
    """

    def __init__(
        self,
        apply: Callable[[dict[str, Any]], Any],
        journal: Callable[[], PendingJournal],
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        self._apply = apply
        self._journal = journal
        self.retry_seconds = retry_seconds
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self.failures = 0
        self.failure: str | None = None
        self.stuck: str | None = None
        """Why the journal cannot be replayed (``JournalError``'s words), while that lasts."""

    @property
    def pending(self) -> int:
        """Records waiting in the journal (this kernel's and any earlier one's on this database)."""
        try:
            return self._journal().count()
        except Exception:
            return 0

    def waiting_text(self) -> str | None:
        """The status line while records wait, else None."""
        count = self.pending
        if not count:
            return None
        noun = "entry waits" if count == 1 else "entries wait"
        if self.stuck:
            return f"{count:,} log {noun} in {self._journal().path}: {self.stuck}"
        return (
            f"{count:,} log {noun} in {self._journal().path} because the database was locked; they are "
            "written, in order, as soon as it is free (nothing is lost)"
        )

    def append(self, session: str, kind: str, data: Mapping[str, Any], timestamp: str) -> Any:
        """Write an entry now and return it, or journal it (database locked) and return None."""
        return self.add(
            {
                "op": "append",
                "session": session,
                "kind": kind,
                "data": dict(data),
                "timestamp": timestamp,
                "entry_id": new_entry_id(),
            }
        )

    def add(self, record: dict[str, Any]) -> Any:
        """Apply ``record`` now (its result), or journal it behind what waits (None)."""
        if self._journal().waiting():  # one stat; behind what waits, never ahead of it
            return self._journal_and_retry(record)
        try:
            return self._apply(record)
        except DatabaseLockedError:
            return self._journal_and_retry(record)
        except Exception as exc:
            self._gave_up(record, exc)
            return None

    def _journal_and_retry(self, record: dict[str, Any]) -> None:
        try:
            self._journal().add(record)
        except Exception as exc:  # the journal itself cannot be written (full disk, special file)
            self._gave_up(record, exc)
            return None
        self.start()
        return None

    def start(self) -> None:
        """Start the replay thread when something waits and none runs (also at kernel start)."""
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(
                    target=self._retry, name="ipython-compact-bookkeeping", daemon=True
                )
                self._worker.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the replay thread (tests, unload); True when nothing waits any more."""
        with self._lock:
            worker = self._worker
        if worker is not None:
            worker.join(timeout)
        return self.pending == 0

    def _retry(self) -> None:
        """Replay until nothing waits, the budget runs out while the database stays locked, or
        the journal cannot be used. Every round that leaves something waiting sleeps (backing
        off) before the next, and none starts past the deadline: a failure never spins."""
        deadline = time.monotonic() + self.retry_seconds
        delay = 0.05
        while True:
            journal = self._journal()  # follows the store when the data directory changes
            stuck = False
            try:
                journal.replay(self._apply, on_refused=self._gave_up)
            except JournalError as exc:  # cannot proceed: say so once, keep the journal for later
                stuck = True
                self._stuck(str(exc))
            except Exception as exc:  # anything else unforeseen: reported, and backed off below
                self._gave_up({"op": "replay"}, exc)
            else:
                self._stuck(None)
            with (
                self._lock
            ):  # `start` looks under this lock: a record journaled now is seen here or starts a thread
                if stuck or not journal.waiting() or time.monotonic() + delay >= deadline:
                    self._worker = None
                    break
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        if not stuck:
            text = self.waiting_text()
            if text:
                LOG.warning("ipython_compact: %s", text)

    def _stuck(self, reason: str | None) -> None:
        """Remember why the replay cannot proceed (None: it can); logged once per reason."""
        if reason is not None and reason != self.stuck:
            LOG.warning("ipython_compact: %s", reason)
        self.stuck = reason

    def _gave_up(self, record: Mapping[str, Any], failure: Exception) -> None:
        self.failures += 1
        noun = "entry" if self.failures == 1 else "entries"
        what = f"a {record.get('kind')} entry" if record.get("op") == "append" else "a log record"
        where = f" to session {record.get('session')!r}" if record.get("session") else ""
        self.failure = f"{self.failures} log {noun} could not be written{where} (last: {what}: {failure})"
        LOG.warning("ipython_compact: %s", self.failure)
