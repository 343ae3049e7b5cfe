"""Listing a session's snapshot generations (``%compact snapshots``) without the writer lock.

Why no lock: during a forked automatic snapshot the writer is the kernel's own child, which the
kernel keeps stopped (SIGSTOP) while the user's cell runs; ``%compact snapshots`` in that cell
waited for the child's lock for 60 s and then blamed "another kernel". Listing needs none: a
manifest becomes visible only once complete (a rename in a folder, one PUT on object storage) and
every payload it names was written before it, so what is committed can be read while a writer
works.

What must hold: the listing uses a manifest reader of its own and never touches what a save in
this process relies on (its reader's cache, its payload set); payloads are listed after the
manifests, and a generation whose manifest is gone by the time they are (pruned meanwhile) is left
out rather than shown with its payloads missing.
"""

from __future__ import annotations

from typing import Protocol

from ipython_compact.namespace.snapshot.blobs import ref_file
from ipython_compact.namespace.snapshot.manifests import GenerationInfo, ManifestReader


class Listed(Protocol):
    """What the listing needs of a place (``places.py``)."""

    def payload_names(self) -> set[str]: ...


def committed_generations(
    reader: ManifestReader, place: Listed, recorded: dict[int, str], own_process: str
) -> list[GenerationInfo]:
    """The rows of ``%compact snapshots``, oldest first; ``recorded`` are the session log's digests
    (a manifest that does not match is listed as refused), ``own_process`` marks this kernel's."""
    scan = reader.scan(recorded)
    present = place.payload_names()  # after the manifests: a listed manifest's payloads were written
    still = set(reader.generations())
    rows: dict[int, GenerationInfo] = {}
    for m in scan.valid:
        if m.generation not in still:
            continue
        missing = sorted({ref_file(e["ref"]) for e in m.names.values()} - present)
        pid = m.data.get("pid")
        rows[m.generation] = GenerationInfo(
            m.generation,
            m.data.get("timestamp"),
            m.process,
            pid if isinstance(pid, int) else None,
            m.data.get("origin"),
            m.provisional,
            sorted(m.names),
            int(m.data.get("bytes") or 0),
            not missing,
            f"payloads missing: {', '.join(missing[:3])}" if missing else None,
            m.process == own_process,
        )
    for bad in scan.invalid:
        if bad.generation in still:
            rows[bad.generation] = GenerationInfo(
                bad.generation, None, None, None, None, False, [], 0, False, bad.reason, False
            )
    return [rows[g] for g in sorted(rows)]
