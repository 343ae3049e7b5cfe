"""What a snapshot save or restore reports back, and the one error type of the package.

Why separate: the kernel side, the agent glue and the magics read these shapes; they must not
need the store's internals to do so.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any


class SnapshotError(Exception):
    """A snapshot could not be written or read; the message says which file, why, and what to do."""


def python_tag() -> str:
    """The running Python's ``major.minor``: code pickled by value only loads under the same one."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class Skipped:
    name: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "reason": self.reason}


@dataclass
class SnapshotReport:
    """What one ``save`` did. ``saved`` includes ``unchanged`` (names whose blob was reused)."""

    generation: int
    saved: list[str]
    unchanged: list[str]
    skipped: list[Skipped]
    bytes: int
    written_bytes: int
    path: str
    elapsed_ms: float
    verified_bytes: int = 0  # bytes of large values re-hashed in full to prove them unchanged (or not)
    verification: str = "full"  # "sampled" when a value in ``sampled`` was trusted on its samples alone
    sampled: list[str] = field(default_factory=list)  # large values taken as unchanged on samples, unread
    last_full_verification: dict[str, Any] | None = None  # {"generation", "timestamp"} of the newest full one
    manifest_digest: str = ""  # sha256 of the manifest file, as the session log records it

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "saved": list(self.saved),
            "unchanged": list(self.unchanged),
            "skipped": [s.to_json() for s in self.skipped],
            "bytes": self.bytes,
            "written_bytes": self.written_bytes,
            "path": self.path,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "verified_bytes": self.verified_bytes,
            "verification": self.verification,
            "sampled": list(self.sampled),
            "last_full_verification": None
            if self.last_full_verification is None
            else dict(self.last_full_verification),
            "manifest_digest": self.manifest_digest,
        }


@dataclass
class RestoreReport:
    """What a restore brought back; ``refused`` lists manifests rejected before any unpickling."""

    generation: int | None
    restored: list[str] = field(default_factory=list)
    failed: list[Skipped] = field(default_factory=list)
    quarantined: list[Skipped] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # restored, but with something the user must know
    process: str | None = None  # the kernel process that wrote the restored generation
    available: list[str] = field(default_factory=list)  # every name the restored generation holds
    kept: list[str] = field(default_factory=list)  # defined since with another value: not overwritten
    # the snapshot could not hold these, with why; not in ``to_json`` (the comm protocol's RestoreReply
    # and the panel's mirror of it would have to gain the field together): %compact restore shows it
    not_saved: list[Skipped] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "restored": list(self.restored),
            "failed": [f.to_json() for f in self.failed],
            "quarantined": [q.to_json() for q in self.quarantined],
            "refused": list(self.refused),
            "warnings": list(self.warnings),
            "process": self.process,
            "available": list(self.available),
            "kept": list(self.kept),
        }
