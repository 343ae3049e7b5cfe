"""Which snapshot generations a session's folder keeps: pruning after each save (the newest
``generations``, plus each unsuperseded kernel process's newest and newest-with-work), and
discarding an earlier kernel's snapshots when the user chooses not to restore them.

Split from ``namespace/snapshot/folder.py`` by role; ``SnapshotStore`` inherits it.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ipython_compact.namespace.snapshot.blobs import BlobFiles, ref_file
from ipython_compact.namespace.snapshot.folder_state import DISCARDED, FolderState
from ipython_compact.namespace.snapshot.reports import SnapshotError


class Retention(FolderState):
    """Pruning and discarding, as methods of ``SnapshotStore`` (module doc)."""

    generations: int
    lock_timeout: float
    _small_index: dict[str, dict[str, Any]] | None
    _files: BlobFiles

    def _prune(self) -> None:
        """Delete manifests nothing keeps (module doc), then payloads no kept manifest references."""
        scan = self._scan()
        superseded = scan.superseded() | self._supersedes
        keep = {m.generation for m in scan.valid[-self.generations :]}
        for process in {m.process for m in scan.valid} - (superseded - {self.process}):
            mine = [m for m in scan.valid if m.process == process]
            keep.add(mine[-1].generation)
            work = [m for m in mine if m.candidate]
            if work and process != self.process:
                keep.add(work[-1].generation)
        for m in scan.valid:
            if m.generation not in keep:
                self._place.delete_manifest(m.generation)
        refs = {ref_file(e["ref"]) for m in scan.valid if m.generation in keep for e in m.names.values()}
        if self._small_index is not None:
            self._small_index = {m: r for m, r in self._small_index.items() if f"{r['pack']}.pack" in refs}
        self._files.remove_except(refs)

    def discard(self, generation: int) -> list[int]:
        """Delete every snapshot of the earlier kernel process that wrote ``generation``; the generations
        removed."""
        with self._lock, self._place.lock(shared=False, timeout=self.lock_timeout), self._fresh():
            scan = self._scan()
            target = scan.by_generation().get(generation)
            if target is None:
                raise SnapshotError(
                    f"there is no valid snapshot generation {generation}; `%compact snapshots` lists them"
                )
            if target.process == self.process:
                raise SnapshotError(
                    f"generation {generation} is this kernel's own snapshot; only an earlier "
                    "kernel's snapshots can be discarded"
                )
            gone = [m.generation for m in scan.valid if m.process == target.process]
            for gen in gone:
                self._place.delete_manifest(gen)
                if self.ledger is not None:  # so their absence is not taken for a rolled-back folder
                    with contextlib.suppress(Exception):
                        self.ledger.record(gen, DISCARDED)
            self._supersedes.add(target.process)
            self._pending = None
            self._start(self._scan())
            self._prune()
            return gone
