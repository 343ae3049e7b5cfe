"""The kernel's snapshot operations: the debounced automatic snapshot (in a forked child or on the
main thread), explicit snapshots, restores and what an empty restore says, listing and discarding
generations.

Split from ``kernel/service.py`` by role; ``KernelService`` inherits them, so callers keep calling
``service.snapshot()`` and the rest. What must hold: snapshots and restores run only on the main
thread while no user cell runs (``Busy`` otherwise, nothing changed), and a background child
finishes before a foreground save, restore or unload reads the folder.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipython_compact.core.entries import SNAPSHOT, Entry
from ipython_compact.kernel import binding
from ipython_compact.kernel.errors import Busy, log_now
from ipython_compact.namespace.probe import user_names
from ipython_compact.namespace.snapshot import RestoreReport, SnapshotError, SnapshotReport
from ipython_compact.namespace.snapshot.background import BackgroundSave, fork_available, history_writing

if TYPE_CHECKING:
    from ipython_compact.kernel.config import CompactConfig
    from ipython_compact.namespace.snapshot import SnapshotStore
    from ipython_compact.store import SessionStore

log = logging.getLogger(__name__)


class SnapshotOperations:
    """Snapshot, restore and their background child, as methods of ``KernelService``."""

    shell: Any
    config: CompactConfig
    exclude_ids: set[int]
    last_snapshot: SnapshotReport | None
    last_snapshot_error: str | None
    background_deferred: bool
    binding: binding.Binding
    _background: BackgroundSave | None

    if TYPE_CHECKING:

        @property
        def session(self) -> str: ...
        @property
        def store(self) -> SessionStore: ...
        @property
        def snapshots(self) -> SnapshotStore: ...
        @property
        def snapshot_base(self) -> str | Path: ...
        @property
        def snapshot_dir(self) -> str | Path: ...
        def _lock(self, op: str) -> threading.Lock: ...
        def _main_and_idle(self, op: str) -> None: ...
        def append_or_report(self, kind: str, data: Mapping[str, Any]) -> Entry | None: ...

    def automatic_snapshot(self, *, background: bool = False) -> SnapshotReport | BackgroundSave | None:
        """The debounced snapshot after cells; None (nothing written) while no user name is defined.

        An automatic snapshot of an empty namespace would only bury the previous kernel's work.
        With ``background`` (the kernel's timer) and ``CompactConfig.background_snapshots`` it is
        written by a forked child (``namespace/snapshot/background.py``): the main thread only lists
        the names and forks. Returns the running ``BackgroundSave`` then (None while another one
        runs: the caller tries again later).
        """

        def items() -> list[tuple[str, Any]]:
            return user_names(self.shell.user_ns, self.shell.user_ns_hidden, exclude_ids=self.exclude_ids)

        if background and self.config.background_snapshots and fork_available():
            if self.background_busy:
                return None
            self._main_and_idle("snapshot")
            if history_writing(self.shell):  # a fork now would wait for IPython's history thread
                self.background_deferred = True
                return None
            verify = self.snapshots.automatic_verification(
                self.config.verify_unchanged, self.config.full_verify_every
            )
            try:  # the child lists the names (and finds none: nothing written) on its copy
                self._background = BackgroundSave(
                    self.snapshots,
                    items,
                    verify=verify,
                    timestamp=log_now(),
                    on_done=self._background_done,
                    objects=lambda: self.shell.user_ns,
                )
            except OSError as exc:  # fork refused (memory, process limits): the main thread does it
                log.debug("background snapshot not started (%s); writing it in the foreground", exc)
            else:
                return self._background
        if not items():
            return None
        return self.snapshot(record=False, automatic=True)

    @property
    def last_background(self) -> BackgroundSave | None:
        """The newest background snapshot (running or finished), or None."""
        return self._background

    @property
    def background_busy(self) -> bool:
        """A background snapshot is being written now."""
        return self._background is not None and not self._background.done

    def _background_done(self, job: BackgroundSave) -> None:
        if job.empty:
            return
        if job.report is not None:
            self.last_snapshot, self.last_snapshot_error = job.report, None
        else:
            self.last_snapshot_error = job.error or "the background snapshot ended without a report"

    def settle_background(self, timeout: float | None = None) -> None:
        """Wait for a background snapshot to finish (a foreground save, restore or unload first
        lets it land, so their views of the folder and the store's state agree); a child paused
        for the running cell is let go on first, or this would wait for nothing."""
        job = self._background
        if job is not None:
            job.resume()
            job.wait(timeout if timeout is not None else 600.0)

    def pause_background(self) -> None:
        """While the user's cell runs the snapshot child takes no CPU (``BackgroundSave.pause``)."""
        job = self._background
        if job is not None and not job.done:
            job.pause()

    def resume_background(self) -> None:
        job = self._background
        if job is not None:
            job.resume()

    def snapshot(self, *, full: bool = False, record: bool = True, automatic: bool = False) -> SnapshotReport:
        """Write a snapshot generation; ``record`` adds a ``snapshot`` entry to the session log.

        Explicit snapshots (the default) always verify fully. ``automatic`` (the debounced one after
        cells) follows ``CompactConfig.verify_unchanged`` / ``full_verify_every``: sampled checks,
        with every Nth automatic snapshot verifying fully (``SnapshotStore.automatic_verification``);
        while an earlier kernel's snapshot waits to be restored they are provisional.
        """
        self._main_and_idle("snapshot")
        self.settle_background()
        lock = self._lock("snapshot")
        if not lock.acquire(blocking=False):
            raise Busy("a snapshot is already being written")
        try:
            items = user_names(self.shell.user_ns, self.shell.user_ns_hidden, exclude_ids=self.exclude_ids)
            try:
                verify = (
                    self.snapshots.automatic_verification(
                        self.config.verify_unchanged, self.config.full_verify_every
                    )
                    if automatic and not full
                    else "full"
                )
                report = self.snapshots.save(
                    items, full=full, timestamp=log_now(), verify=verify, automatic=automatic
                )
            except (OSError, SnapshotError) as exc:
                self.last_snapshot_error = f"{type(exc).__name__}: {exc}"
                raise
            self.last_snapshot, self.last_snapshot_error = report, None
            if not record:
                return report
            self.append_or_report(
                SNAPSHOT,
                {
                    "generation": report.generation,
                    "saved": len(report.saved),
                    "skipped": [s.to_json() for s in report.skipped],
                    "bytes": report.bytes,
                    "manifest_digest": report.manifest_digest,
                },
            )
            return report
        finally:
            lock.release()

    def restore(
        self, names: list[str] | None = None, generation: int | None = None, *, overwrite: bool = False
    ) -> RestoreReport:
        """Bind names from the newest snapshot holding user work (or ``generation``) into the namespace.

        A name defined since with another value is not overwritten (``report.kept``) unless
        ``overwrite`` or it is among ``names``. A restore that brings back nothing carries a warning
        saying where it looked, what is available, and how to point it elsewhere — it is never
        reported as a success.
        """
        self._main_and_idle("restore")
        self.settle_background()
        lock = self._lock("snapshot")
        if not lock.acquire(blocking=False):
            raise Busy("a snapshot is being written; restore after it finishes")
        try:
            report = self.snapshots.restore_into(
                self.shell.user_ns, names=names, generation=generation, overwrite=overwrite
            )
            if not report.restored and not report.kept:
                report.warnings.append(self._nothing_restored(report))
            return report
        finally:
            lock.release()

    def _nothing_restored(self, report: RestoreReport) -> str:
        where = (
            f"looked in {self.snapshot_dir} for session {self.session!r} (bound by "
            f"{self.binding.source}: "
            f"{self.binding.key})"
        )
        elsewhere = (
            "to use another session's snapshots, `%compact session NAME` (remembered across "
            "restarts) or "
            "set IPYTHON_COMPACT_SESSION before starting the kernel"
        )
        if report.generation is None:
            listed = [g.generation for g in self.snapshots.generations_info() if g.verified]
            if listed:
                return (
                    f"restored nothing: {where}; no snapshot could be used automatically, but "
                    f"generations "
                    f"{', '.join(map(str, listed))} are listed by `%compact snapshots` — pick one with "
                    f"`%compact restore --generation N`; {elsewhere}"
                )
            found = self._sessions_with_snapshots()
            others = (
                f"sessions with snapshots there: {', '.join(found)}"
                if found
                else "no other session has snapshots there"
            )
            return (
                f"restored nothing: {where} and found no snapshot (take one with `%compact snapshot`); "
                f"{others}; {elsewhere}"
            )
        return (
            f"restored nothing from generation {report.generation}: it holds "
            f"{', '.join(report.available) or 'no names'}; `%compact snapshots` lists the others"
        )

    def _sessions_with_snapshots(self, limit: int = 5) -> list[str]:
        """Other sessions of the log whose snapshot folder exists beside this one's, most recently
        written first (at most ``limit``, then ``+N more``): what an empty restore can point to."""
        base = self.snapshot_base
        if isinstance(base, str):  # object storage: not listed here
            return []
        found = [
            s.name
            for s in reversed(self.store.sessions())
            if s.name != self.session and (base / binding.snapshot_slug(s.name)).is_dir()
        ]
        return found[:limit] + ([f"+{len(found) - limit} more"] if len(found) > limit else [])

    def snapshot_list(self) -> list[dict[str, Any]]:
        """Every generation on disk (number, time, kernel process, names, size, verified or not)."""
        return [g.to_json() for g in self.snapshots.generations_info()]

    def discard_snapshots(self, generation: int) -> list[int]:
        """Delete the snapshots of the earlier kernel that wrote ``generation`` (the user chose not to
        restore it)."""
        self.settle_background()
        return self.snapshots.discard(generation)
