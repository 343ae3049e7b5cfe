"""Where one session's snapshots live: a local folder (the default) or objects in a bucket.

``SnapshotStore`` (``folder.py``) keeps generations, pruning and the checks; a place gives it the
writer lock, the payload files, the manifest reader, and the one step that differs most: how a
manifest is committed.

- ``FolderPlace``: ``<data dir>/snapshots/<slug>``. Lock: ``flock`` on ``.lock``. Commit: the
  manifest is written to a temp file, fsynced and renamed over its name last (``rename`` is the
  atomic step); the file hardening is ``blobs.py``'s and ``locking.py``'s.
- ``ObjectPlace``: ``<url>/<slug>`` on object storage. Lock: held in the session store
  (``WriterLocks``: an advisory lock on PostgreSQL, a file lock beside a SQLite file), because a
  bucket has none. Commit without rename: every payload is put first; the manifest is put last with
  put-if-absent, so an existing generation is never replaced (S3 ``If-None-Match: *``; where a
  store cannot, the writer lock alone keeps the name unique). A writer that dies before the manifest
  leaves only payloads no manifest names: no generation is visible, and the next save prunes them.
  Right before the commit the writer asks the lock whether it still holds it (a PostgreSQL lock
  goes with its connection); if not, nothing is committed.

What must hold in both: a generation is visible only once its manifest is complete and every payload
it names was written before it; a manifest name is never overwritten by a save.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from ipython_compact.namespace.snapshot.blobs import TEMP_SUFFIX, BlobFiles
from ipython_compact.namespace.snapshot.locking import (
    SnapshotLockBusy,
    WriterLocks,
    folder_lock,
    make_private_dirs,
)
from ipython_compact.namespace.snapshot.manifests import ManifestReader, generations_on_disk, manifest_name
from ipython_compact.namespace.snapshot.object_files import BLOBS, ObjectBlobFiles, ObjectManifestReader
from ipython_compact.namespace.snapshot.objects import Objects, open_objects
from ipython_compact.namespace.snapshot.reports import SnapshotError


class Place(Protocol):
    location: str
    files: BlobFiles
    manifests: ManifestReader

    def lock(self, *, shared: bool, timeout: float) -> AbstractContextManager[None]: ...

    def remove_stale(self) -> None: ...

    def generations(self) -> list[int]: ...

    def manifest_location(self, generation: int) -> str: ...

    def payloads_written(self) -> None: ...

    def commit_manifest(self, generation: int, doc: bytes) -> str: ...

    def delete_manifest(self, generation: int) -> None: ...

    def reader(self) -> ManifestReader: ...

    def payload_names(self) -> set[str]: ...


class FolderPlace:
    """The local folder (module doc)."""

    def __init__(
        self, directory: Path, key: bytes, session: str, *, root: Path | None, durable: bool
    ) -> None:
        self.directory = Path(directory)
        self.location = str(self.directory)
        self.blobs = self.directory / "blobs"
        make_private_dirs(self.directory, root)
        make_private_dirs(self.blobs, self.directory)
        self.files = BlobFiles(self.blobs, key, durable=durable)
        self.manifests = ManifestReader(self.directory, key, session)
        self._key, self._session = key, session

    def lock(self, *, shared: bool, timeout: float) -> AbstractContextManager[None]:
        return folder_lock(self.directory, shared=shared, timeout=timeout)

    def remove_stale(self) -> None:
        for d in (self.directory, self.blobs):
            for name in os.listdir(d):
                if name.startswith(".") and name.endswith(TEMP_SUFFIX):
                    with contextlib.suppress(OSError):
                        os.unlink(d / name)

    def generations(self) -> list[int]:
        return generations_on_disk(self.directory)

    def manifest_location(self, generation: int) -> str:
        return str(self.directory / manifest_name(generation))

    def payloads_written(self) -> None:
        self.files.fsync_dir(self.blobs)

    def commit_manifest(self, generation: int, doc: bytes) -> str:
        final = self.directory / manifest_name(generation)
        tmp, _ = self.files.write_temp(self.directory, [doc], False)
        os.replace(tmp, final)
        self.files.fsync_dir(self.directory)
        return str(final)

    def delete_manifest(self, generation: int) -> None:
        with contextlib.suppress(OSError):
            (self.directory / manifest_name(generation)).unlink()

    def reader(self) -> ManifestReader:
        """A manifest reader of its own, for listing without the writer lock (``generations_info``)."""
        return ManifestReader(self.directory, self._key, self._session)

    def payload_names(self) -> set[str]:
        """The payload files present now (read only; the writer's ``files.present`` is not touched)."""
        try:
            return set(os.listdir(self.blobs))
        except FileNotFoundError:
            return set()


def lock_name(location: str) -> str:
    """The name a session's snapshots on object storage are locked under (no credentials in it)."""
    return "snapshots " + hashlib.sha256(location.encode()).hexdigest()[:32]


class ObjectPlace:
    """Objects under ``<url>`` (module doc); ``locks`` is the session store's ``WriterLocks``."""

    def __init__(
        self, url: str, key: bytes, session: str, *, locks: WriterLocks | None, objects: Objects | None = None
    ) -> None:
        if locks is None:
            raise SnapshotError(
                f"snapshots on {url} need a session store to hold their "
                "writer lock (an object store has none)"
            )
        self.objects = objects if objects is not None else open_objects(url)
        self.location = self.objects.location
        self._locks = locks
        self._still_held: Callable[[], bool] | None = None  # while a writer holds the lock
        self.files: BlobFiles = ObjectBlobFiles(self.objects, key)
        self.manifests: ManifestReader = ObjectManifestReader(self.objects, key, session)
        self._key, self._session = key, session

    @contextlib.contextmanager
    def lock(self, *, shared: bool, timeout: float) -> Iterator[None]:
        """The session store's lock for these objects; its failures said as the folder's are."""
        with contextlib.ExitStack() as stack:
            try:
                check = stack.enter_context(
                    self._locks.hold(lock_name(self.location), shared=shared, timeout=timeout)
                )
            except TimeoutError:
                if timeout <= 0:
                    raise SnapshotLockBusy(
                        f"another process is writing a snapshot of {self.location}; this automatic snapshot "
                        "was skipped rather than wait (the next cell tries again)"
                    ) from None
                raise SnapshotError(
                    f"another kernel has held the snapshot lock of {self.location} for over {timeout:g} s; "
                    "try again when its snapshot finishes"
                ) from None
            except SnapshotError:
                raise
            except Exception as exc:  # the session store cannot be reached: say so, change nothing
                raise SnapshotError(
                    f"cannot take the writer lock of {self.location} in the session store ({exc})"
                ) from None
            previous, self._still_held = self._still_held, None if shared else check
            try:
                yield
            finally:
                self._still_held = previous

    def remove_stale(self) -> None:
        remove = getattr(self.objects, "remove_temps", None)
        if remove is not None:
            remove()

    def generations(self) -> list[int]:
        return self.manifests.generations()

    def manifest_location(self, generation: int) -> str:
        return f"{self.location}/{manifest_name(generation)}"

    def payloads_written(self) -> None:
        return None

    def commit_manifest(self, generation: int, doc: bytes) -> str:
        name = manifest_name(generation)
        if self._still_held is not None and not self._still_held():
            raise SnapshotError(
                f"lost the writer lock of {self.location} before committing generation {generation} (the "
                "connection to the session store dropped); nothing was committed; the next "
                "snapshot tries again"
            )
        if not self.objects.put_if_absent(name, doc):
            raise SnapshotError(
                f"{self.location}/{name} already exists: another writer committed generation {generation}; "
                "nothing was replaced (the next snapshot takes a new number)"
            )
        return f"{self.location}/{name}"

    def delete_manifest(self, generation: int) -> None:
        self.objects.delete(manifest_name(generation))

    def reader(self) -> ManifestReader:
        return ObjectManifestReader(self.objects, self._key, self._session)

    def payload_names(self) -> set[str]:
        return {n[len(BLOBS) :] for n in self.objects.list(BLOBS)}


__all__ = ["FolderPlace", "ObjectPlace", "Place", "lock_name"]
