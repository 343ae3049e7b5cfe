"""Payloads and manifests of one session's snapshots kept as objects (``objects.Objects``).

The same formats as the folder (``blobs.py``, ``manifests.py``): ``blobs/<id>.blob`` =
``MAGIC + body + signature``, ``blobs/<id>.pack``, ``manifest-<generation>.json``; the same
checks on reading (signature before anything is returned for unpickling, session and generation
bound into the signed manifest, size cap). Only where the bytes go differs.

What must hold:
- A payload object is put whole (one PUT, atomic on every object store) and named by its
  signature, so two writers of the same value write the same bytes under the same name.
- A payload is "durable" when its put returns: there is nothing to fsync.
- A manifest is read whole and parsed only after the size check; its parse is cached by the tag
  the listing gave it (size, time and ETag: a manifest written again, or replaced, gets a new
  one), so a save lists once instead of reading every kept manifest again.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from pathlib import Path

from ipython_compact.namespace.snapshot.blobs import BlobFiles
from ipython_compact.namespace.snapshot.manifests import (
    MAX_MANIFEST_BYTES,
    Invalid,
    Manifest,
    ManifestReader,
    generations_named,
    manifest_name,
)
from ipython_compact.namespace.snapshot.objects import MissingObject, Objects
from ipython_compact.namespace.snapshot.reports import SnapshotError
from ipython_compact.namespace.snapshot.signing import HMAC_LANES, MAC_LEN, MAGIC, sign_chunks

BLOBS = "blobs/"


class ObjectBlobFiles(BlobFiles):
    """``blobs/`` as objects: the folder's interface, for ``decide.py`` and ``restore.py``."""

    def __init__(self, objects: Objects, key: bytes) -> None:
        super().__init__(Path(BLOBS), key, durable=True)
        self.objects = objects
        self.scheme = HMAC_LANES  # objects are written and checked with HMAC-SHA256 lanes only

    def refresh(self) -> None:
        self.present = {n[len(BLOBS) :] for n in self.objects.list(BLOBS)}

    def write_temp(
        self, directory: Path, chunks: list[memoryview | bytes], sign: bool
    ) -> tuple[Path, str | None]:
        raise SnapshotError("object storage has no temporary files")

    def _put_signed(self, chunks: list[memoryview | bytes], suffix: str, always: bool) -> str:
        mac = sign_chunks(self._key, chunks)
        digest = mac.hex()
        name = f"{digest}{suffix}"
        if always or name not in self.present:
            views = [memoryview(c).cast("B") for c in chunks]
            self.objects.put(BLOBS + name, b"".join([MAGIC, *views, mac]))
            self.present.add(name)
            self.unsynced.append(Path(name))
        return digest

    def store_blob(self, chunks: list[memoryview | bytes]) -> str:
        return self._put_signed(chunks, ".blob", False)

    def store_pack(self, bodies: list[bytes]) -> str:
        return self._put_signed([b"".join(bodies)], ".pack", True)

    def sync_new(self) -> None:
        self.unsynced = []  # each put was complete when it returned

    def fsync_dir(self, d: Path) -> None:
        return None

    def remove_except(self, keep: Iterable[str]) -> None:
        keep = set(keep)
        for full in self.objects.list(BLOBS):
            name = full[len(BLOBS) :]
            if (name.endswith(".blob") or name.endswith(".pack")) and name not in keep:
                self.objects.delete(full)
                self.present.discard(name)

    def _verified(self, name: str, what: str, expect: str) -> bytes:
        try:
            raw = self.objects.get(BLOBS + name)
        except MissingObject:
            raise SnapshotError(f"{what} {name} is missing") from None
        if len(raw) < len(MAGIC) + MAC_LEN or not raw.startswith(MAGIC):
            raise SnapshotError(f"{what} {name} is truncated or not a snapshot blob; not unpickled")
        body = memoryview(raw)[len(MAGIC) : -MAC_LEN]
        digest = sign_chunks(self._key, [body])
        if not hmac.compare_digest(digest, raw[-MAC_LEN:]) or digest.hex() != expect:
            raise SnapshotError(
                f"{what} {name} failed its signature check (altered or truncated); not unpickled"
            )
        return raw

    def read_blob(self, blob: str) -> memoryview:
        raw = self._verified(f"{blob}.blob", "payload", blob)
        # A writable copy: restored arrays use their buffer directly, as from the folder's mapping.
        return memoryview(bytearray(memoryview(raw)[len(MAGIC) : -MAC_LEN]))

    def _read_pack(self, pack: str) -> bytes:
        return self._verified(f"{pack}.pack", "payload pack", pack)


class ObjectManifestReader(ManifestReader):
    """Verified manifests stored as objects (``manifests.ManifestReader``'s checks)."""

    def __init__(self, objects: Objects, key: bytes, session: str) -> None:
        super().__init__(Path("."), key, session)
        self.objects = objects
        self._parsed: dict[int, tuple[str, Manifest | Invalid]] = {}
        self._tags: dict[str, str] = {}  # the newest listing's tags

    def generations(self) -> list[int]:
        self._tags = self.objects.tags("")
        gens = generations_named(list(self._tags))
        self._parsed = {g: v for g, v in self._parsed.items() if g in gens}
        return gens

    def read(self, generation: int) -> Manifest:
        self.generations()  # tags as they are now: a parse is reused only for the same object
        return super().read(generation)

    def _read_cached(self, generation: int) -> Manifest | Invalid:
        name = manifest_name(generation)
        tag = self._tags.get(name)
        hit = self._parsed.get(generation)
        if tag is not None and hit is not None and hit[0] == tag:
            return hit[1]
        try:
            raw = self.objects.get(name, limit=MAX_MANIFEST_BYTES)
        except MissingObject:
            return Invalid(generation, f"manifest {name} does not exist")
        except SnapshotError as exc:
            return Invalid(generation, f"manifest {exc}")
        got = self._parse(generation, name, raw)
        if tag is not None:
            self._parsed[generation] = (tag, got)
        return got


__all__ = ["ObjectBlobFiles", "ObjectManifestReader"]
