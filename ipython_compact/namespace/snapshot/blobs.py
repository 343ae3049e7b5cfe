"""Payload files: signed blobs (one large value each) and packs (many small values), and the
safe way to read any snapshot file.

Layout: ``blobs/<id>.blob`` = ``magic + body + signature`` where ``id`` is the hex signature, so
identical values share a blob across generations; ``blobs/<id>.pack`` = the bodies of one save's
small values, concatenated and signed as one file, each body also carrying its own HMAC in the
manifest.

What must hold:
- Writes go to a ``.<random>.tmp`` file (0600, ``O_EXCL``) renamed into place; payloads are
  fsynced once each after all are written and before the manifest naming them (``sync_new``).
- Only regular files are ever opened for reading (``open_regular``: ``O_NOFOLLOW | O_NONBLOCK``
  and an ``fstat`` check), so a FIFO, device or symlink named like a snapshot file is refused at
  once instead of hanging or leaving the data directory.
- Nothing is returned for unpickling before its signature verified, under the scheme its magic
  names (``signing.SCHEMES``: files written before keyed BLAKE3 keep their HMAC-SHA256 check).
"""

from __future__ import annotations

import contextlib
import hmac
import mmap
import os
import secrets
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ipython_compact.namespace.snapshot.reports import SnapshotError
from ipython_compact.namespace.snapshot.signing import (
    MAC_LEN,
    MAGIC,
    PIECE,
    THREADED_ABOVE,
    WRITE_SCHEME,
    LaneMac,
    Scheme,
    pwrite_all,
    scheme_of,
    sign_chunks,
    small_mac,
    unverifiable,
)

TEMP_SUFFIX = ".tmp"


def open_regular(path: Path) -> int:
    """A read-only descriptor of ``path`` if it is a regular file (not a FIFO, device or symlink)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP: a symlink; others: permissions and the like
        raise SnapshotError(f"{path.name} cannot be opened ({exc.strerror or exc}); not read") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SnapshotError(f"{path.name} is not a regular file (a FIFO, device or directory); not read")
    return fd


def _private_pages(size: int) -> mmap.mmap:
    """``size`` bytes of private, zeroed, writable memory with its pages already made.

    Not transparent huge pages: they made filling 400 MB ~2x cheaper in the median, but a fault
    that has to compact memory for a huge page stalled single restores for up to 2.6 s here."""
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if populate and size >= PIECE:
        with contextlib.suppress(OSError):
            return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
    return mmap.mmap(-1, size)


def ref_file(ref: Mapping[str, Any]) -> str:
    """The payload file name a manifest reference points at."""
    return f"{ref['blob']}.blob" if "blob" in ref else f"{ref.get('pack')}.pack"


class BlobFiles:
    """The ``blobs/`` folder of one session's snapshots."""

    def __init__(self, directory: Path, key: bytes, *, durable: bool) -> None:
        self.directory = directory
        self._key = key
        self.durable = durable
        self.present: set[str] = set()
        self.unsynced: list[Path] = []
        self.scheme: Scheme = WRITE_SCHEME  # how new payload files are signed (reading takes any)

    def refresh(self) -> None:
        """Re-list the folder (call under the writer lock before reusing references)."""
        self.present = set(os.listdir(self.directory))

    def exists(self, ref: Mapping[str, Any]) -> bool:
        return ref_file(ref) in self.present

    # ------------------------------------------------------------------ writing
    def write_temp(
        self, directory: Path, chunks: list[memoryview | bytes], sign: bool
    ) -> tuple[Path, str | None]:
        """Write ``chunks`` (as ``MAGIC + body + signature`` when ``sign``) to a new temp file.

        A signed body is hashed and written in one pass (``sign_chunks``: two lanes, each slice
        hashed then written while cache-hot, straight from the caller's buffers — no copies). A
        signed file is not fsynced here: the save fsyncs every new payload once, after all of them
        are written and before the manifest that names them (``sync_new``). An unsigned file (the
        manifest) is fsynced at once. Returns the temp path (the caller renames it into place)
        and the signature's hex digest.
        """
        tmp = directory / f".{secrets.token_hex(8)}{TEMP_SUFFIX}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            digest = None
            if sign:
                pwrite_all(fd, self.scheme.magic, 0)
                mac = sign_chunks(self._key, chunks, fd, len(MAGIC), self.scheme)
                pwrite_all(fd, mac, len(MAGIC) + sum(len(memoryview(c).cast("B")) for c in chunks))
                digest = mac.hex()
            else:
                pos = 0
                for c in chunks:
                    pwrite_all(fd, c, pos)
                    pos += len(memoryview(c).cast("B"))
                if self.durable:
                    os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        os.close(fd)
        return tmp, digest

    def store_blob(self, chunks: list[memoryview | bytes]) -> str:
        """Write one large body as its own blob; its id (identical bodies share one file)."""
        tmp, digest = self.write_temp(self.directory, chunks, True)
        assert digest is not None
        final = self.directory / f"{digest}.blob"
        if f"{digest}.blob" in self.present:
            tmp.unlink()
        else:
            os.replace(tmp, final)
            self.present.add(final.name)
            self.unsynced.append(final)
        return digest

    def store_pack(self, bodies: list[bytes]) -> str:
        """Write small bodies as one signed pack file; its id."""
        tmp, pack_id = self.write_temp(self.directory, [b"".join(bodies)], True)
        assert pack_id is not None
        final = self.directory / f"{pack_id}.pack"
        os.replace(tmp, final)
        self.present.add(final.name)
        self.unsynced.append(final)
        return pack_id

    def small_digest(self, body: bytes) -> str:
        mac = small_mac(self._key)
        mac.update(body)
        return str(mac.hexdigest())

    def sync_new(self) -> None:
        """fsync the payload files written by this save (once each, after all writes).

        Must run before the manifest naming them is written: a crash can then leave unreferenced
        or torn payloads (refused by their signature, removed by the next prune) but never a
        manifest that names a payload whose bytes did not reach the disk.
        """
        paths, self.unsynced = self.unsynced, []
        if not self.durable:
            return
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def fsync_dir(self, d: Path) -> None:
        if not self.durable:
            return
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def remove_except(self, keep: Iterable[str]) -> None:
        """Delete every blob and pack not named in ``keep`` (call under the writer lock)."""
        keep = set(keep)
        for name in os.listdir(self.directory):
            if (name.endswith(".blob") or name.endswith(".pack")) and name not in keep:
                with contextlib.suppress(OSError):
                    os.unlink(self.directory / name)
                self.present.discard(name)

    # ------------------------------------------------------------------ reading
    def read_blob(self, blob: str) -> memoryview:
        """The verified body of a blob; raises SnapshotError when missing, truncated or altered.

        Reads into one writable buffer, hashing each piece as it arrives (cache-hot), so restored
        arrays use the buffer directly instead of another copy.
        """
        path = self.directory / f"{blob}.blob"
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            raise SnapshotError(f"payload {path.name} is missing") from None
        with os.fdopen(fd, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            if size < len(MAGIC) + MAC_LEN:
                raise SnapshotError(f"payload {path.name} is truncated or not a snapshot blob; not unpickled")
            # An anonymous mapping, not bytearray(size): bytearray zeroes every byte first (a
            # second pass over 400 MB that pickle.load never makes). Its pages are made in one
            # go (MAP_POPULATE, where there is one), not one fault per 4 KiB page as readinto
            # first touches them: on a 400 MB blob the faults alone cost more than the copy.
            # Writable, so restored arrays use it directly.
            view = memoryview(_private_pages(size))
            mac: LaneMac | None = None  # made once the magic, read first, names the scheme
            end = size - MAC_LEN
            pos = 0
            while pos < size:
                n = f.readinto(view[pos : pos + PIECE] if mac is not None else view[pos : len(MAGIC)])
                if not n:
                    if mac is not None:
                        mac.close()
                    raise SnapshotError(f"payload {path.name} is truncated; not unpickled")
                pos += n
                if mac is None:
                    if pos < len(MAGIC):
                        continue
                    scheme = scheme_of(view[: len(MAGIC)])
                    if scheme is None:
                        why = unverifiable(view[: len(MAGIC)])
                        raise SnapshotError(f"payload {path.name} {why}; not unpickled")
                    mac = LaneMac(self._key, threaded=size > THREADED_ABOVE, scheme=scheme)
                    continue
                lo, hi = max(pos - n, len(MAGIC)), min(pos, end)
                if lo < hi:
                    mac.update(view[lo:hi])
        assert mac is not None  # size > len(MAGIC): the magic was read
        digest = mac.digest()
        if not hmac.compare_digest(digest, bytes(view[end:])) or digest.hex() != blob:
            raise SnapshotError(
                f"payload {path.name} failed its signature check (altered or truncated); not unpickled"
            )
        return view[len(MAGIC) : end]

    def _read_pack(self, pack: str) -> bytes:
        path = self.directory / f"{pack}.pack"
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            raise SnapshotError(f"payload pack {path.name} is missing") from None
        with os.fdopen(fd, "rb") as f:
            raw = f.read()
        scheme = scheme_of(raw)
        if len(raw) < len(MAGIC) + MAC_LEN:
            raise SnapshotError(f"payload pack {path.name} is truncated; not unpickled")
        if scheme is None:
            raise SnapshotError(f"payload pack {path.name} {unverifiable(raw)}; not unpickled")
        whole = LaneMac(self._key, threaded=False, scheme=scheme)
        whole.update(memoryview(raw)[len(MAGIC) : -MAC_LEN])
        digest = whole.digest()
        if not hmac.compare_digest(digest, raw[-MAC_LEN:]) or digest.hex() != pack:
            raise SnapshotError(
                f"payload pack {path.name} failed its signature check (altered or truncated); not unpickled"
            )
        return raw

    def read_ref(self, ref: Any, packs: dict[str, bytes]) -> bytes | memoryview:
        """The verified body a manifest entry points at (a blob, or a slice of a pack)."""
        if not isinstance(ref, dict):
            raise SnapshotError("manifest entry has no payload reference")
        if "blob" in ref:
            return self.read_blob(str(ref["blob"]))
        pack = str(ref.get("pack"))
        if pack not in packs:
            packs[pack] = self._read_pack(pack)
        data = packs[pack]
        try:
            start, length = len(MAGIC) + int(ref["offset"]), int(ref["length"])
        except (KeyError, TypeError, ValueError):
            raise SnapshotError(
                f"manifest entry for pack {pack}.pack has no valid offset and length"
            ) from None
        body = data[start : start + length]
        if len(body) != length or not hmac.compare_digest(self.small_digest(body), str(ref.get("mac"))):
            raise SnapshotError(
                f"payload in pack {pack}.pack failed its signature check (altered or "
                f"truncated); "
                "not unpickled"
            )
        return body
