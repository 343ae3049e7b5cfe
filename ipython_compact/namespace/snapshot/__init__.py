"""Signed, incremental, per-name snapshots of the kernel namespace (the only module importing dill).

Why: the kernel outlives compactions but not crashes or restarts. A snapshot lets a restarted
kernel get its data back, and lets the ``<ipython_state>`` notice say truthfully which names would
not survive a restart.

Layout under one directory (``<data dir>/snapshots/<session slug>``, mode 0700):
- ``blobs/<id>.blob`` — one serialized value: ``magic + body + MAC``; ``id`` is the hex MAC of
  the body, so identical values share a blob across generations (``blobs.py``). The magic names
  the MAC: ``IPCBLOB3`` keyed BLAKE3 (what the folder writes), ``IPCBLOB1`` HMAC-SHA256 (older
  snapshots, still verified and restored; object storage writes these), see ``signing.py``.
- ``manifest-<generation>.json`` — the signed list of names → blob ids, skip reasons, the Python
  version that wrote them, and the session, generation and kernel process it belongs to
  (``manifests.py``). Which generations are kept and which one a restore picks: ``store.py`` and
  ``restore.py``; the threat model: ``docs/snapshots.md``.

What must hold:
- One value per blob: an unpicklable value is skipped with its reason and never sinks the rest.
- Nothing is unpickled before both the manifest signature and the blob's MAC verify: a tampered
  or truncated file is refused, not loaded. The key is per-user (``paths.key_path()``, 0600).
- Writes are atomic (temp file, rename; every new payload fsynced once after all are written,
  then the manifest written, fsynced and renamed last), files are 0600. On object storage
  (``s3://``, ``gs://``, ``az://``, ``file://``; ``places.py``, ``objects.py``) there is no rename:
  payloads are put first and the manifest last with put-if-absent, the writer lock lives in the
  session store, and the key is never created (every host is given the same one).
- Incremental: a value whose fingerprint matches the previous snapshot is not serialized again.
  Fingerprints cover the full content — a digest of every byte for ``bytes``, ``str`` and arrays
  up to 1 MiB, the C pickler's bytes for builtin containers — except for numpy arrays over 1 MiB
  (and pandas frames and series built on such arrays), whose fingerprint is the object's identity
  plus 64 sampled 4 KiB blocks per array. A large array whose
  samples differ is written at once. One that is the same object with the same samples is handled
  by the save's ``verify`` mode:
  - ``"full"`` (explicit snapshots: ``%compact snapshot``, the comm ``snapshot`` op, the snapshot
    before a compaction notice): the array is re-hashed in full and compared with the signature of
    the blob written for it last time (hashing only, no write), so an in-place edit of one element
    anywhere is seen. Costs a hash pass over the array (~2 GB/s per core).
  - ``"sampled"`` (automatic snapshots after cells, the debounced hot path): the sample match is
    trusted and the array is not read further — nearly free. An in-place edit that touches none
    of the sampled blocks is then MISSED: the generation keeps the array's previous content.
  Bound on a missed edit: the kernel verifies fully at every explicit snapshot and at least at
  every ``full_verify_every``-th automatic one (``automatic_verification``), so an edit missed by
  a sampled generation is caught by the next full verification — at most ``full_verify_every``
  automatic snapshots after the edit (10 by default), sooner if anything snapshots explicitly.
  Until then, a restore brings back the array as it was before the edit. Each manifest and report
  records ``verification`` ("sampled" only when at least one array was trusted on its samples,
  listed in ``sampled``) and ``last_full_verification`` (generation and timestamp).
  Values with no fingerprint are serialized each time, and a new payload is kept only when its
  bytes changed (same signature, same file).
- Signing costs about as much CPU as writing, so it overlaps with the write: the body is split
  into two lanes of alternating 4 MiB pieces (see ``signing.py``); each lane hashes a slice and
  then ``pwrite``s it while it is still in the cache, straight from the array's own buffer
  (pickle protocol 5, out-of-band, no copy), one lane on a helper thread.
- Functions, classes and instances of ``__main__`` classes travel by value; restored under another
  Python major.minor they are quarantined (not unpickled); data still returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ipython_compact.namespace.snapshot.keys import load_or_create_key
from ipython_compact.namespace.snapshot.reports import (
    RestoreReport,
    Skipped,
    SnapshotError,
    SnapshotReport,
    python_tag,
)

if TYPE_CHECKING:
    from ipython_compact.namespace.snapshot.fingerprints import carries_code, fingerprint
    from ipython_compact.namespace.snapshot.folder import (
        PROCESS_ID,
        VERIFY_MODES,
        SnapshotLedger,
        SnapshotStore,
    )
    from ipython_compact.namespace.snapshot.manifests import MANIFEST_VERSION, GenerationInfo
    from ipython_compact.namespace.snapshot.signing import MAGIC

# Loaded on first use (PEP 562), not with the package: `%load_ext` needs the errors and reports
# only; the store, dill and the pickling machinery load with the first snapshot or restore.
_LAZY = {
    "carries_code": "fingerprints",
    "fingerprint": "fingerprints",
    "PROCESS_ID": "folder",
    "VERIFY_MODES": "folder",
    "SnapshotLedger": "folder",
    "SnapshotStore": "folder",
    "MANIFEST_VERSION": "manifests",
    "GenerationInfo": "manifests",
    "MAGIC": "signing",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # start-up: see _LAZY

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "MAGIC",
    "MANIFEST_VERSION",
    "PROCESS_ID",
    "VERIFY_MODES",
    "GenerationInfo",
    "RestoreReport",
    "Skipped",
    "SnapshotError",
    "SnapshotLedger",
    "SnapshotReport",
    "SnapshotStore",
    "carries_code",
    "fingerprint",
    "load_or_create_key",
    "python_tag",
]
