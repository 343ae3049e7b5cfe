"""Reading, authenticating and describing manifests.

A manifest is ``{"hmac": sig, "manifest": {...}}`` where ``sig`` signs the canonical JSON of the
inner object. Version 2 binds inside the signed payload: the session name, the generation, the
writing kernel process, whether it was automatic and provisional, and which earlier processes
this one took over (``supersedes``).

What must hold:
- A manifest is used only when its signature verifies, its session and generation match the
  folder and file name it was found under (version 1, written before manifests named their
  session, is accepted on its signature and generation and flagged ``legacy``: an upgrade keeps
  the last snapshot taken before it), its digest matches the one the session log recorded
  for that generation (when one is recorded), and its shape is what the store writes. Every
  other case is an ``Invalid`` with one sentence saying why — never an exception that escapes
  (deep nesting, FIFOs, bad UTF-8 and the like all become reasons).
- Parsing is cached by file identity (inode, size, mtime), so a save does not re-verify every
  kept manifest each time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ipython_compact.namespace.snapshot.blobs import open_regular
from ipython_compact.namespace.snapshot.reports import SnapshotError
from ipython_compact.namespace.snapshot.signing import sign_text

MANIFEST_VERSION = 2
LEGACY_PROCESS = "(older version)"  # the process of a version-1 manifest, which did not record one
PREFIX = "manifest-"
#: A manifest larger than this is refused before it is read: 100,000 names take about 30 MB, and a
#: planted 300 MB file once made the first ``%compact status`` take 65 s.
MAX_MANIFEST_BYTES = 64 << 20


def manifest_name(generation: int) -> str:
    return f"{PREFIX}{generation:08d}.json"


def generations_on_disk(directory: Path) -> list[int]:
    """Generation numbers of every file named like a manifest (valid or not), oldest first."""
    return generations_named(os.listdir(directory))


def generations_named(names: list[str]) -> list[int]:
    """Generation numbers of the names that look like manifests, oldest first."""
    gens = []
    for name in names:
        if name.startswith(PREFIX) and name.endswith(".json"):
            try:
                gens.append(int(name[len(PREFIX) : -5]))
            except ValueError:
                continue
    return sorted(gens)


@dataclass
class Manifest:
    """A verified manifest and the digest of its file (what the session log records)."""

    generation: int
    data: dict[str, Any]
    digest: str

    @property
    def process(self) -> str:
        return str(self.data.get("process", LEGACY_PROCESS))

    @property
    def legacy(self) -> bool:
        """Written by version 1, before manifests named their session (restored with a warning)."""
        return bool(self.data.get("version") == 1)

    @property
    def names(self) -> dict[str, dict[str, Any]]:
        names: dict[str, dict[str, Any]] = self.data["names"]
        return names

    @property
    def supersedes(self) -> set[str]:
        return set(self.data.get("supersedes", []))

    @property
    def provisional(self) -> bool:
        return bool(self.data.get("provisional"))

    @property
    def candidate(self) -> bool:
        """Holds the user's work: not empty, not a fresh kernel's provisional automatic snapshot."""
        return bool(self.names) and not self.provisional


@dataclass
class Invalid:
    generation: int
    reason: str


@dataclass
class Scan:
    """Every generation on disk: the verified ones and the refused ones with reasons."""

    valid: list[Manifest] = field(default_factory=list)  # oldest first
    invalid: list[Invalid] = field(default_factory=list)

    def superseded(self) -> set[str]:
        out: set[str] = set()
        for m in self.valid:
            out |= m.supersedes
        return out

    def by_generation(self) -> dict[int, Manifest]:
        return {m.generation: m for m in self.valid}


def _check_shape(m: dict[str, Any]) -> str | None:
    names = m.get("names")
    if not isinstance(names, dict):
        return "has no name table"
    for name, entry in names.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("ref"), dict):
            return f"has a malformed entry for {name!r}"
        ref = entry["ref"]
        if not (isinstance(ref.get("blob"), str) or isinstance(ref.get("pack"), str)):
            return f"has a malformed payload reference for {name!r}"
    if not isinstance(m.get("supersedes", []), list) or not isinstance(m.get("process", ""), str):
        return "has a malformed process record"
    return None


class ManifestReader:
    """Verified manifests of one folder, bound to one session and key."""

    def __init__(self, directory: Path, key: bytes, session: str) -> None:
        self.directory = directory
        self._key = key
        self.session = session
        self._cache: dict[int, tuple[tuple[int, int, int], Manifest | Invalid]] = {}

    def generations(self) -> list[int]:
        """Generation numbers of every manifest present (valid or not), oldest first."""
        return generations_on_disk(self.directory)

    def read(self, generation: int) -> Manifest:
        """The verified manifest of ``generation``; SnapshotError saying why it cannot be used."""
        got = self._read_cached(generation)
        if isinstance(got, Invalid):
            raise SnapshotError(got.reason)
        return got

    def _read_cached(self, generation: int) -> Manifest | Invalid:
        path = self.directory / manifest_name(generation)
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            return Invalid(generation, f"manifest {path.name} does not exist")
        except SnapshotError as exc:
            return Invalid(generation, f"manifest {exc}")
        try:
            st = os.fstat(fd)
            ident = (st.st_ino, st.st_size, st.st_mtime_ns)
            hit = self._cache.get(generation)
            if hit is not None and hit[0] == ident:
                return hit[1]
            if st.st_size > MAX_MANIFEST_BYTES:
                got: Manifest | Invalid = Invalid(
                    generation,
                    f"manifest {path.name} is {st.st_size:,} bytes, more than the "
                    f"{MAX_MANIFEST_BYTES:,} a "
                    f"manifest can be; not read",
                )
                self._cache[generation] = (ident, got)
                return got
            with os.fdopen(fd, "rb", closefd=False) as f:
                raw = f.read()
        finally:
            os.close(fd)
        got = self._parse(generation, path.name, raw)
        self._cache[generation] = (ident, got)
        return got

    def _parse(self, generation: int, file: str, raw: bytes) -> Manifest | Invalid:
        try:
            doc = json.loads(raw.decode("utf-8"))
        except RecursionError:
            return Invalid(generation, f"manifest {file} is nested too deeply to be a manifest; not used")
        except (ValueError, UnicodeDecodeError) as exc:
            return Invalid(generation, f"manifest {file} cannot be read: {str(exc)[:120]}")
        if (
            not isinstance(doc, dict)
            or not isinstance(doc.get("manifest"), dict)
            or not isinstance(doc.get("hmac"), str)
        ):
            return Invalid(generation, f"manifest {file} is malformed")
        m: dict[str, Any] = doc["manifest"]
        text = json.dumps(m, sort_keys=True, separators=(",", ":"))
        if not hmac.compare_digest(sign_text(self._key, text), doc["hmac"]):
            return Invalid(generation, f"manifest {file} failed its signature check; refusing to use it")
        if m.get("version") not in (1, MANIFEST_VERSION):
            return Invalid(generation, f"manifest {file} has unknown version {m.get('version')!r}; not used")
        if m.get("version") == MANIFEST_VERSION and m.get("session") != self.session:
            return Invalid(
                generation,
                f"manifest {file} belongs to session {m.get('session')!r}, not {self.session!r}; refusing it",
            )
        if m.get("generation") != generation:
            return Invalid(
                generation,
                f"manifest {file} holds generation {m.get('generation')} (signed), "
                f"not "
                f"{generation}; refusing a renamed or copied manifest",
            )
        problem = _check_shape(m)
        if problem is not None:
            return Invalid(generation, f"manifest {file} {problem}")
        return Manifest(generation, m, hashlib.sha256(raw).hexdigest())

    def scan(self, recorded: dict[int, str] | None = None) -> Scan:
        """Every manifest on disk; with ``recorded`` (the session log's digests) also the substitution
        check."""
        out = Scan()
        gens = self.generations()
        self._cache = {g: v for g, v in self._cache.items() if g in gens}
        for gen in gens:
            got = self._read_cached(gen)
            if isinstance(got, Manifest) and recorded and gen in recorded and recorded[gen] != got.digest:
                got = Invalid(
                    gen,
                    f"manifest {manifest_name(gen)} does not match the digest recorded in the "
                    f"session "
                    "log for that generation (replaced by another file); refusing it",
                )
            (out.valid if isinstance(got, Manifest) else out.invalid).append(got)  # type: ignore[arg-type]
        return out


@dataclass(frozen=True)
class GenerationInfo:
    """One line of ``%compact snapshots``."""

    generation: int
    timestamp: str | None
    process: str | None
    pid: int | None
    origin: str | None  # "explicit" | "automatic"
    provisional: bool
    names: list[str]
    bytes: int
    verified: bool
    problem: str | None  # why it is not verified, or which payloads are missing
    own: bool  # written by this kernel process

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "timestamp": self.timestamp,
            "process": self.process,
            "pid": self.pid,
            "origin": self.origin,
            "provisional": self.provisional,
            "names": list(self.names),
            "bytes": self.bytes,
            "verified": self.verified,
            "problem": self.problem,
            "own": self.own,
        }
