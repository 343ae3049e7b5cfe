"""What one session's snapshot folder holds and what the session log recorded about it: the
manifests present, the ledger's digests (read once per locked operation), the newest manifest,
whether an earlier kernel's work waits to be restored, and the listing of generations.

Split from ``namespace/snapshot/folder.py`` by role; ``SnapshotStore`` inherits it (through
``retention.Retention``), so its callers do not change.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any, Protocol

from ipython_compact.namespace.snapshot.listing import committed_generations
from ipython_compact.namespace.snapshot.manifests import GenerationInfo, ManifestReader, Scan
from ipython_compact.namespace.snapshot.places import Place

DISCARDED = "discarded"  # what the ledger records for a generation the user discarded (not a rollback)


class SnapshotLedger(Protocol):
    """Where manifest digests are recorded outside the snapshot folder (the session log)."""

    def record(self, generation: int, digest: str) -> None: ...

    def recorded(self) -> dict[int, str]: ...


class FolderState:
    """The reading side of ``SnapshotStore``: manifests, recorded digests, pending work, listing."""

    process: str
    ledger: SnapshotLedger | None
    _recorded_cache: dict[int, str] | None
    _in_operation: bool
    _high: int
    _pending: bool | None
    _supersedes: set[str]
    _lock: threading.Lock
    _listing_lock: threading.Lock
    _listing: ManifestReader | None
    _place: Place
    _manifests: ManifestReader

    def manifests(self) -> list[int]:
        """Generation numbers of the manifests present (valid or not), oldest first."""
        return self._place.generations()

    def _manifest_path(self, generation: int) -> str:
        return self._place.manifest_location(generation)

    def read_manifest(self, generation: int) -> dict[str, Any]:
        """The verified manifest of one generation; SnapshotError saying why it cannot be used."""
        return self._manifests.read(generation).data

    def _recorded(self) -> dict[int, str]:
        """The ledger's digests, read once per locked operation (``_fresh`` forgets them)."""
        if self.ledger is None:
            return {}
        if self._recorded_cache is not None:
            return self._recorded_cache
        recorded = self._ledger_digests()
        if self._in_operation:
            self._recorded_cache = recorded
        return recorded

    def _ledger_digests(self) -> dict[int, str]:
        if self.ledger is None:
            return {}
        try:
            return {int(g): str(d) for g, d in self.ledger.recorded().items() if d != DISCARDED}
        except Exception:  # an unreadable log: no record to compare with
            return {}

    def recorded_digests(self) -> dict[int, str]:
        """The ledger's digests now (a background save's child works from this copy)."""
        return dict(self._recorded())

    @contextlib.contextmanager
    def state_lock(self) -> Iterator[None]:
        """Held while a background save's outcome is adopted (no save or restore runs meanwhile)."""
        with self._lock:
            yield

    def forget_recorded(self) -> None:
        self._recorded_cache = None

    @contextlib.contextmanager
    def _fresh(self) -> Iterator[None]:
        """Inside a locked operation: the ledger is read at most once, and again by the next operation."""
        self._recorded_cache, self._in_operation = None, True
        try:
            yield
        finally:
            self._recorded_cache, self._in_operation = None, False

    def _scan(self) -> Scan:
        scan = self._manifests.scan(self._recorded())
        if scan.valid:
            self._high = max(self._high, scan.valid[-1].generation)
        return scan

    def latest_manifest(self) -> dict[str, Any] | None:
        """The newest verified manifest of any process, or None."""
        scan = self._scan()
        return scan.valid[-1].data if scan.valid else None

    def _start(self, scan: Scan) -> None:
        """Once per store: is an earlier kernel process's work waiting to be restored?"""
        if self._pending is None:
            superseded = scan.superseded() | self._supersedes
            self._pending = any(
                m.candidate and m.process != self.process and m.process not in superseded for m in scan.valid
            )

    @property
    def pending(self) -> bool:
        """True while an earlier kernel's snapshot waits to be restored or discarded by this process.

        Takes no lock: ``status`` asks from a subshell while a save may be running, and must not wait.
        """
        if self._pending is None:
            self._start(self._scan())
        return bool(self._pending)

    def generations_info(self) -> list[GenerationInfo]:
        """Every committed generation, oldest first, verified or not (``%compact snapshots``); read
        without the writer lock, by a reader of its own (``listing.py`` says why)."""
        with self._listing_lock:
            if self._listing is None:
                self._listing = self._place.reader()
            return committed_generations(self._listing, self._place, self._ledger_digests(), self.process)
