"""The storage layer under a session's snapshots on object storage: named objects, put, get, list,
delete and put-if-absent.

Why: a pod that is rescheduled takes its local disk with it, so snapshots can live in a bucket
(``s3://``, ``gs://``, ``az://`` through fsspec). Object stores have no rename and no ``flock``: a
generation becomes visible when its manifest object appears (payloads are put first, the manifest
last, with put-if-absent), and the writer lock lives in the session store (``WriterLocks``).

Two implementations of ``Objects``:
- ``LocalObjects``: a folder (``file://`` URLs). Keeps the file hardening of the default folder:
  private folders created without following links, files 0600 written to an ``O_EXCL`` temp file
  and renamed into place (``put``) or hard-linked (``put_if_absent``: atomic, fails if present),
  only regular files opened for reading (``open_regular``).
- ``FsspecObjects``: any fsspec filesystem. ``put_if_absent`` passes ``mode="create"`` (s3fs sends
  ``If-None-Match: *``); a filesystem that cannot is reported by ``conditional = False`` and the
  writer lock alone keeps two writers apart.

What must hold: an object appears complete or not at all to readers (S3, GCS and Azure PUTs are
atomic); a missing object is ``MissingObject``; names are relative to the root, ``/``-separated.

Every remote call has a deadline: ``IPYTHON_COMPACT_OBJECT_TIMEOUT`` seconds (default 30) plus one
second per MiB it sends or reads, after which it fails with ``SnapshotError`` saying so (the save
then ends, its writer lock is released, and nothing it put is visible: the manifest comes last).
Why: with the endpoint stalled mid-save an 8 MB save still hung after 90 s (500 s in another run),
holding the writer lock throughout. On an async filesystem (s3fs, gcsfs, adlfs) the call itself is
cancelled at its deadline (fsspec's ``timeout``); on S3 botocore's own connect and read timeouts
are set to the same value, so a stalled socket is given up at the transport too.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ipython_compact.namespace.snapshot.blobs import TEMP_SUFFIX, open_regular
from ipython_compact.namespace.snapshot.locking import make_private_dirs
from ipython_compact.namespace.snapshot.reports import SnapshotError

ENV_TIMEOUT = "IPYTHON_COMPACT_OBJECT_TIMEOUT"
DEFAULT_TIMEOUT = 30.0
"""Seconds one call to object storage may take, plus ``SECONDS_PER_MIB`` for each MiB it moves."""
SECONDS_PER_MIB = 1.0


def object_timeout() -> float:
    """``$IPYTHON_COMPACT_OBJECT_TIMEOUT`` when it is a positive number, else the default."""
    try:
        value = float(os.environ.get(ENV_TIMEOUT, "").strip() or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if 0 < value < float("inf") else DEFAULT_TIMEOUT


OBJECT_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "file", "memory")
"""URL schemes taken as object storage (``file://`` goes through the object layer too)."""


class MissingObject(SnapshotError):
    """The named object does not exist."""


class Objects(Protocol):
    """Named objects under one root (a bucket prefix or a folder)."""

    location: str  # where, for messages (no credentials)
    conditional: bool  # put_if_absent is enforced by the store itself

    def list(self, prefix: str) -> list[str]: ...

    def tags(self, prefix: str) -> dict[str, str]:
        """The names under ``prefix`` with a tag that changes whenever the object is written
        (size, time and ETag or inode): what a reader may cache a parse by."""
        ...

    def get(self, name: str, limit: int | None = None) -> bytes: ...

    def put(self, name: str, data: bytes | memoryview) -> None: ...

    def put_if_absent(self, name: str, data: bytes | memoryview) -> bool: ...

    def delete(self, name: str) -> None: ...


def object_scheme(location: str | Path) -> str | None:
    """The scheme of an object-storage URL (``s3``, ``gs``, ...), None for a plain path."""
    if isinstance(location, Path) or "://" not in location:
        return None
    found, rest = location.split("://", 1)
    found = found.lower()
    if found not in OBJECT_SCHEMES:
        raise SnapshotError(
            f"{location}: unknown snapshot location scheme {found!r}; use a folder or one of "
            f"{', '.join(s + '://' for s in OBJECT_SCHEMES)}"
        )
    if found == "file" and not rest.startswith("/"):
        raise SnapshotError(f"{location}: a file:// location needs an absolute path (file:///folder)")
    if found != "file" and rest.startswith("/"):
        raise SnapshotError(f"{location}: the bucket comes right after {found}:// ({found}://bucket/prefix)")
    parts = rest.strip("/").split("/")
    if parts == [""]:
        raise SnapshotError(f"{location}: no bucket or folder after {found}:// ({found}://bucket/prefix)")
    if any(p in ("", ".", "..") for p in parts):
        raise SnapshotError(f"{location}: a snapshot location may not hold empty, '.' or '..' parts")
    return found


def open_objects(url: str, *, root: Path | None = None) -> Objects:
    """The objects at ``url``: ``LocalObjects`` for ``file://``, else ``FsspecObjects``."""
    found = object_scheme(url)
    if found == "file":
        return LocalObjects(Path(url[len("file://") :]), root=root)
    return FsspecObjects(url)


class LocalObjects:
    """Objects as files in a private folder (see the module doc)."""

    conditional = True

    def __init__(self, directory: Path, *, root: Path | None = None, durable: bool = True) -> None:
        self.directory = Path(directory)
        self.location = f"file://{self.directory}"
        self.durable = durable
        make_private_dirs(self.directory, root)

    def _path(self, name: str) -> Path:
        parts = name.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise SnapshotError(f"{name!r} is not a valid object name")
        return self.directory.joinpath(*parts)

    def list(self, prefix: str) -> list[str]:
        folder = self._path(prefix.rstrip("/")) if prefix.strip("/") else self.directory
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            return []
        base = prefix if prefix.endswith("/") or not prefix else prefix + "/"
        return sorted(base + n for n in names if not n.startswith("."))

    def tags(self, prefix: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for name in self.list(prefix):
            with contextlib.suppress(OSError):
                st = os.lstat(self._path(name))
                out[name] = f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
        return out

    def get(self, name: str, limit: int | None = None) -> bytes:
        path = self._path(name)
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            raise MissingObject(f"{name} is missing") from None
        with os.fdopen(fd, "rb") as f:
            if limit is not None and os.fstat(f.fileno()).st_size > limit:
                raise SnapshotError(f"{name} is larger than {limit:,} bytes; not read")
            return f.read()

    @contextlib.contextmanager
    def _temp(self, name: str, data: bytes | memoryview) -> Iterator[Path]:
        path = self._path(name)
        make_private_dirs(path.parent, self.directory)
        tmp = path.parent / f".{secrets.token_hex(8)}{TEMP_SUFFIX}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            try:
                view = memoryview(data).cast("B")
                while view:
                    view = view[os.write(fd, view) :]
                if self.durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            yield tmp
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()

    def _sync_dir(self, folder: Path) -> None:
        if self.durable:
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def put(self, name: str, data: bytes | memoryview) -> None:
        with self._temp(name, data) as tmp:
            os.replace(tmp, self._path(name))
        self._sync_dir(self._path(name).parent)

    def put_if_absent(self, name: str, data: bytes | memoryview) -> bool:
        with self._temp(name, data) as tmp:
            try:
                os.link(tmp, self._path(name))  # atomic: fails when the name exists
            except FileExistsError:
                return False
        self._sync_dir(self._path(name).parent)
        return True

    def delete(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(name))

    def remove_temps(self) -> None:
        """Temp files a writer that died left (call under the writer lock)."""
        for folder in (self.directory, self.directory / "blobs"):
            with contextlib.suppress(OSError):
                for n in os.listdir(folder):
                    if n.startswith(".") and n.endswith(TEMP_SUFFIX):
                        with contextlib.suppress(OSError):
                            os.unlink(folder / n)


class FsspecObjects:
    """Objects through an fsspec filesystem (credentials: fsspec's and the SDK's usual config).

    The filesystem is made per process: a forked background child must not use the parent's
    event loop or HTTP connections (``_fs``)."""

    def __init__(self, url: str, *, timeout: float | None = None) -> None:
        self.timeout = object_timeout() if timeout is None else timeout
        try:
            import fsspec  # type: ignore[import-untyped]  # optional: the `objects` extra
        except ImportError:
            raise SnapshotError(
                f"snapshots on {url.split('://')[0]}:// need fsspec: pip install 'ipython-compact[objects]' "
                "(and gcsfs or adlfs for gs:// or az://)"
            ) from None
        self._fsspec = fsspec
        self.url = url.rstrip("/")
        self.location = self.url
        self._pid = -1
        self._fs: Any = None
        self._root = ""
        self.conditional = True
        self._filesystem()

    def _filesystem(self) -> tuple[Any, str]:
        if self._fs is None or self._pid != os.getpid():
            try:
                fs, root = self._fsspec.core.url_to_fs(self.url, **self._transport_options())
            except (ImportError, ValueError) as exc:
                raise SnapshotError(f"{self.url}: cannot open this snapshot location ({exc})") from None
            self._fs, self._root, self._pid = fs, root.rstrip("/"), os.getpid()
        return self._fs, self._root

    def _transport_options(self) -> dict[str, Any]:
        """botocore's connect and read timeouts for S3 (the user's own fsspec config kept where it
        sets them); other filesystems get their deadline from ``_call`` only."""
        if not self.url.lower().startswith(("s3://", "s3a://")):
            return {}
        conf = getattr(getattr(self._fsspec, "config", None), "conf", {}) or {}
        mine = dict((conf.get("s3") or {}).get("config_kwargs") or {})
        mine.setdefault("connect_timeout", self.timeout)
        mine.setdefault("read_timeout", self.timeout)
        return {"config_kwargs": mine}

    def _call(self, what: str, size: int, method: Any, *args: Any, **kwargs: Any) -> Any:
        """``method(*args, **kwargs)`` of the filesystem under this call's deadline (module doc)."""
        deadline = self.timeout + SECONDS_PER_MIB * size / (1 << 20)
        late = SnapshotError(
            f"{self.url}: {what} got no answer within {round(deadline, 1):g} s (the object store is "
            f"stalled or unreachable; the deadline is ${ENV_TIMEOUT}, {self.timeout:g} s plus "
            f"{SECONDS_PER_MIB:g} s per MiB)"
        )
        if getattr(self._filesystem()[0], "async_impl", False):
            from fsspec.exceptions import FSTimeoutError  # type: ignore[import-untyped]  # optional

            try:
                return method(*args, timeout=deadline, **kwargs)
            except FSTimeoutError:
                raise late from None
        # A filesystem that blocks: the call runs on a thread of its own, left behind at the deadline.
        done = threading.Event()
        result: list[Any] = [None, None]

        def run() -> None:
            try:
                result[0] = method(*args, **kwargs)
            except BaseException as exc:
                result[1] = exc
            finally:
                done.set()

        threading.Thread(target=run, name="ipython-compact-object-call", daemon=True).start()
        if not done.wait(deadline):
            raise late
        if result[1] is not None:
            raise result[1]
        return result[0]

    def _path(self, name: str) -> str:
        if any(p in ("", ".", "..") for p in name.split("/")):
            raise SnapshotError(f"{name!r} is not a valid object name")
        return f"{self._filesystem()[1]}/{name}"

    def _fail(self, what: str, exc: Exception) -> SnapshotError:
        return SnapshotError(f"{self.url}: cannot {what} ({type(exc).__name__}: {str(exc)[:200]})")

    def list(self, prefix: str) -> list[str]:
        return sorted(self._listing(prefix))

    def tags(self, prefix: str) -> dict[str, str]:
        return self._listing(prefix)

    def _listing(self, prefix: str) -> dict[str, str]:
        fs, root = self._filesystem()
        folder = f"{root}/{prefix.strip('/')}" if prefix.strip("/") else root
        fs.invalidate_cache(folder)  # listings are cached by some filesystems: always ask the store
        try:
            found = self._call(f"list {prefix or '/'}", 0, fs.ls, folder, detail=True)
        except FileNotFoundError:
            return {}
        except SnapshotError:
            raise
        except Exception as exc:
            raise self._fail(f"list {prefix or '/'}", exc) from None
        base = prefix if prefix.endswith("/") or not prefix else prefix + "/"
        out: dict[str, str] = {}
        for info in found:
            name = str(info.get("name", "")).rstrip("/").rsplit("/", 1)[-1]
            if not name or name.startswith(".") or info.get("type") == "directory":
                continue  # hidden names and folders (``blobs/``) are no objects of ours
            etag = info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("md5") or ""
            when = (
                info.get("LastModified")
                or info.get("last_modified")
                or info.get("updated")
                or info.get("mtime")
            )
            out[base + name] = f"{info.get('size')}:{when}:{etag}"
        return out

    def get(self, name: str, limit: int | None = None) -> bytes:
        fs, _ = self._filesystem()
        path = self._path(name)
        try:
            size = int(self._call(f"read {name}", 0, fs.size, path))
            if limit is not None and size > limit:
                raise SnapshotError(f"{name} is larger than {limit:,} bytes; not read")
            return bytes(self._call(f"read {name}", size, fs.cat_file, path))
        except FileNotFoundError:
            raise MissingObject(f"{name} is missing") from None
        except SnapshotError:
            raise
        except Exception as exc:
            raise self._fail(f"read {name}", exc) from None

    def put(self, name: str, data: bytes | memoryview) -> None:
        fs, _ = self._filesystem()
        body = bytes(data) if isinstance(data, memoryview) else data
        try:
            self._call(f"write {name}", len(body), fs.pipe_file, self._path(name), body)
        except SnapshotError:
            raise
        except Exception as exc:
            raise self._fail(f"write {name}", exc) from None

    def put_if_absent(self, name: str, data: bytes | memoryview) -> bool:
        fs, _ = self._filesystem()
        path = self._path(name)
        body = bytes(data) if isinstance(data, memoryview) else data
        if self.conditional:
            try:
                self._call(f"write {name}", len(body), fs.pipe_file, path, body, mode="create")
                return True
            except FileExistsError:
                return False
            except SnapshotError:
                raise
            except (TypeError, NotImplementedError):  # this filesystem has no conditional write
                self.conditional = False
            except Exception as exc:
                if "PreconditionFailed" in repr(exc) or "412" in str(exc):
                    return False
                raise self._fail(f"write {name}", exc) from None
        # Without a conditional write: the writer lock (in the session store) is what keeps a second
        # writer from this name; the check narrows the window, it does not close it.
        try:
            if self._call(f"look for {name}", 0, fs.exists, path):
                return False
            self._call(f"write {name}", len(body), fs.pipe_file, path, body)
        except SnapshotError:
            raise
        except Exception as exc:
            raise self._fail(f"write {name}", exc) from None
        return True

    def delete(self, name: str) -> None:
        fs, _ = self._filesystem()
        try:
            self._call(f"delete {name}", 0, fs.rm_file, self._path(name))
        except FileNotFoundError:
            return
        except SnapshotError:
            raise
        except Exception as exc:
            raise self._fail(f"delete {name}", exc) from None


__all__ = [
    "OBJECT_SCHEMES",
    "FsspecObjects",
    "LocalObjects",
    "MissingObject",
    "Objects",
    "object_scheme",
    "open_objects",
]
