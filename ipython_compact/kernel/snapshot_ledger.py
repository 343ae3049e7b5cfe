"""Where the kernel records each snapshot's manifest digest: the session database, outside the
snapshot folder, so a rolled-back folder is noticed on restore (``LogLedger``).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ipython_compact.core.entries import SNAPSHOT
from ipython_compact.store.pending import PendingJournal

if TYPE_CHECKING:
    from ipython_compact.kernel.service import KernelService


class LogLedger:
    """Manifest digests recorded in the session database, outside the snapshot folder.

    Every snapshot's digest goes into the session's status table (``snapshot_digests``: the
    newest 64 generations, so a save costs one small upsert); explicit snapshots also carry it in
    their ``snapshot`` entry of the hash-chained log. ``recorded`` merges both. A database that
    cannot be written must not stop a snapshot: recording is best effort, and restore compares
    against whatever was recorded.
    """

    KEY = "snapshot_digests"
    KEEP = 64

    def __init__(self, service: KernelService) -> None:
        self._service = service

    def record(self, generation: int, digest: str) -> None:
        """Through the bookkeeping log: a locked database journals the digest instead of losing it
        (lost digests once weakened the rollback check)."""
        with contextlib.suppress(Exception):
            self._service.bookkeeping.add(
                {
                    "op": "merge_status",
                    "session": self._service.session,
                    "key": self.KEY,
                    "values": {str(generation): digest},
                }
            )

    def recorded(self) -> dict[int, str]:
        out: dict[int, str] = {}
        with contextlib.suppress(Exception):
            store, session = self._service.store, self._service.session
            for e in store.entries(session, kinds=(SNAPSHOT,)):
                if isinstance(e.data.get("manifest_digest"), str) and type(e.data.get("generation")) is int:
                    out[e.data["generation"]] = e.data["manifest_digest"]
            for g, d in (store.status_get(session, self.KEY, {}) or {}).items():
                out[int(g)] = str(d)
        with contextlib.suppress(Exception):  # digests that wait in the journal count as recorded
            for record in PendingJournal(self._service.store.db_path).records():
                if (
                    record.get("op") == "merge_status"
                    and record.get("key") == self.KEY
                    and record.get("session") == self._service.session
                ):
                    out.update({int(g): str(d) for g, d in dict(record["values"]).items()})
        return out
