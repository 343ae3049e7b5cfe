"""The snapshot store of one session: generations, manifests, pruning, save and restore.

Layout under one directory (``paths.snapshots_dir() / <session slug>``, mode 0700): ``blobs/``
(payloads, see ``blobs.py``) and ``manifest-<generation>.json`` — the signed list of names →
payload references, skip reasons and the Python version that wrote them. A few generations are
kept; payloads no kept manifest references are deleted.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import dill

from ipython_compact.namespace.snapshot.blobs import BlobFiles, ref_file
from ipython_compact.namespace.snapshot.codec import Deadline, deserialize
from ipython_compact.namespace.snapshot.decide import Cached, Decision, SaveRun
from ipython_compact.namespace.snapshot.reports import (
    RestoreReport,
    Skipped,
    SnapshotError,
    SnapshotReport,
    python_tag,
)
from ipython_compact.namespace.snapshot.signing import sign_text

MANIFEST_VERSION = 1
VERIFY_MODES = ("sampled", "full")  # how a large array that looks unchanged is proven so (see the package doc)


class SnapshotStore:
    """Snapshots of one session's namespace in ``directory``; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        key: bytes,
        *,
        max_name_bytes: int = 512 << 20,
        max_total_bytes: int = 2 << 30,
        generations: int = 3,
        durable: bool = True,
        python: str | None = None,
        name_timeout: float | None = 5.0,
    ) -> None:
        if len(key) < 16:
            raise SnapshotError("signing key must be at least 16 bytes")
        if generations < 1:
            raise SnapshotError(f"generations must be at least 1, got {generations}")
        self.directory = Path(directory)
        self.blobs = self.directory / "blobs"
        self._key = key
        self.max_name_bytes = max_name_bytes
        self.max_total_bytes = max_total_bytes
        self.generations = generations
        self.durable = durable
        self.python = python or python_tag()
        self.name_timeout = name_timeout
        self._cache: dict[str, Cached] = {}
        self._small_index: dict[str, dict[str, Any]] | None = None
        self._last_full: dict[str, Any] | None = None  # newest fully verified generation (from the manifests)
        self._sampled_since_full = 0  # sampled generations written since then
        self._refs_by_gen: dict[int, set[str]] = {}
        self._files = BlobFiles(self.blobs, key, durable=durable)
        self._lock = threading.Lock()
        for d in (self.directory, self.blobs):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(d, 0o700)

    # ------------------------------------------------------------------ manifests
    def manifests(self) -> list[int]:
        """Generations on disk, oldest first."""
        gens = []
        for p in self.directory.glob("manifest-*.json"):
            with contextlib.suppress(ValueError):
                gens.append(int(p.stem.split("-", 1)[1]))
        return sorted(gens)

    def _manifest_path(self, generation: int) -> Path:
        return self.directory / f"manifest-{generation:08d}.json"

    def read_manifest(self, generation: int) -> dict[str, Any]:
        """The verified manifest of one generation; SnapshotError if it is unreadable or altered."""
        path = self._manifest_path(generation)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SnapshotError(f"manifest {path.name} cannot be read: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("manifest"), dict) or not isinstance(doc.get("hmac"), str):
            raise SnapshotError(f"manifest {path.name} is malformed")
        text = json.dumps(doc["manifest"], sort_keys=True, separators=(",", ":"))
        if not hmac.compare_digest(sign_text(self._key, text), doc["hmac"]):
            raise SnapshotError(f"manifest {path.name} failed its signature check; refusing to use it")
        manifest: dict[str, Any] = doc["manifest"]
        return manifest

    def latest_manifest(self) -> dict[str, Any] | None:
        for gen in reversed(self.manifests()):
            with contextlib.suppress(SnapshotError):
                return self.read_manifest(gen)
        return None

    # ------------------------------------------------------------------ save
    def save(self, items: Iterable[tuple[str, Any]], *, full: bool = False, skip: Mapping[str, str] | None = None,
             timestamp: str | None = None, verify: str = "full") -> SnapshotReport:
        """Snapshot ``(name, value)`` pairs as a new generation; ``skip`` adds names with fixed reasons.

        ``full`` serializes and writes every value again. ``verify`` says how a large array that
        looks unchanged (same object, same samples) is treated: ``"full"`` (the default, and what
        every explicit snapshot must use) re-hashes it to prove it; ``"sampled"`` trusts the
        samples, which can miss an in-place edit until the next ``"full"`` save (module docstring).
        """
        if verify not in VERIFY_MODES:
            raise SnapshotError(f"verify must be one of {', '.join(map(repr, VERIFY_MODES))}, got {verify!r}")
        with self._lock:
            return self._save(list(items), full=full, skip=dict(skip or {}), timestamp=timestamp, verify=verify)

    def automatic_verification(self, mode: str, every: int) -> str:
        """The ``verify`` mode for the next automatic snapshot under ``mode`` and ``full_verify_every``.

        ``"full"`` when ``mode`` is ``"full"``, or when ``every - 1`` sampled generations have been
        written since the newest fully verified one (so at least every ``every``-th automatic
        snapshot verifies fully; ``every == 1`` means always). The count is read from the newest
        manifest once, so it carries over a kernel restart.
        """
        if mode not in VERIFY_MODES:
            raise SnapshotError(f"verification mode must be one of {', '.join(map(repr, VERIFY_MODES))}, got {mode!r}")
        if every < 1:
            raise SnapshotError(f"full_verify_every must be at least 1, got {every}")
        if mode == "full":
            return "full"
        with self._lock:
            self._known_small()
            return "full" if self._sampled_since_full + 1 >= every else "sampled"

    @property
    def last_full_verification(self) -> dict[str, Any] | None:
        """``{"generation", "timestamp"}`` of the newest fully verified generation, or None if none is known."""
        with self._lock:
            self._known_small()
            return None if self._last_full is None else dict(self._last_full)

    def _known_small(self) -> dict[str, dict[str, Any]]:
        """Packed bodies of the newest manifest by their mac, so an identical small value is not rewritten.

        The first call also reads the verification history from that manifest (newest full
        verification, sampled generations since); a manifest without it counts as not verified.
        """
        if self._small_index is None:
            self._small_index = {}
            manifest = self.latest_manifest() or {}
            for entry in manifest.get("names", {}).values():
                ref = entry.get("ref", {})
                if "pack" in ref and isinstance(ref.get("mac"), str):
                    self._small_index[ref["mac"]] = dict(ref)
            last = manifest.get("last_full_verification")
            self._last_full = dict(last) if isinstance(last, dict) else None
            since = manifest.get("sampled_since_full")
            self._sampled_since_full = since if type(since) is int and since >= 0 else 0
        return self._small_index

    def _save(self, items: list[tuple[str, Any]], *, full: bool, skip: dict[str, str],
              timestamp: str | None, verify: str) -> SnapshotReport:
        start = time.perf_counter()
        known_small = self._known_small()
        self._files.refresh()
        self._files.unsynced = []
        entries: dict[str, dict[str, Any]] = {}
        saved: list[str] = []
        unchanged: list[str] = []
        skipped = [Skipped(n, r) for n, r in sorted(skip.items())]
        trusted: list[str] = []  # large values taken as unchanged on their samples (verify="sampled")
        new_cache: dict[str, Cached] = {}
        small: list[Decision] = []
        written = verified = 0
        with Deadline(self.name_timeout) as deadline:
            run = SaveRun(key=self._key, blobs=self._files, cache=self._cache, known_small=known_small, full=full,
                          verify=verify, max_name_bytes=self.max_name_bytes, max_total_bytes=self.max_total_bytes,
                          name_timeout=self.name_timeout, deadline=deadline)
            for name, value in items:
                d = run.decide(name, value)
                if d.skipped is not None:
                    skipped.append(d.skipped)
                    continue
                assert d.entry is not None
                entries[d.name] = d.entry
                saved.append(d.name)
                written += d.written
                verified += d.verified
                if d.unchanged:
                    unchanged.append(d.name)
                if d.trusted:
                    trusted.append(d.name)
                if d.cache is not None:
                    new_cache[d.name] = d.cache
                if d.small is not None:
                    small.append(d)
        if small:
            pack_id = self._files.store_pack([d.small[0] for d in small if d.small is not None])
            offset = 0
            for d in small:
                assert d.small is not None and d.entry is not None
                body, digest, fp = d.small
                ref = {"pack": pack_id, "offset": offset, "length": len(body), "mac": digest}
                offset += len(body)
                d.entry["ref"] = ref
                known_small[digest] = ref
                written += len(body)
                if fp is not None:
                    new_cache[d.name] = Cached(fp, ref, len(body), d.entry["format"], d.entry["code"])
        self._files.sync_new()
        gens = self.manifests()
        generation = (gens[-1] + 1) if gens else 1
        # A generation is fully verified unless it trusted a value on samples (nothing else can be stale).
        verification = "sampled" if trusted else "full"
        if verification == "full":
            last_full: dict[str, Any] | None = {"generation": generation, "timestamp": timestamp}
            since = 0
        else:
            last_full, since = self._last_full, self._sampled_since_full + 1
        manifest = {
            "version": MANIFEST_VERSION,
            "generation": generation,
            "timestamp": timestamp,
            "python": self.python,
            "dill": str(getattr(dill, "__version__", "?")),
            "names": entries,
            "skipped": [s.to_json() for s in skipped],
            "bytes": run.total,
            "verification": verification,
            "sampled": sorted(trusted),
            "last_full_verification": last_full,
            "sampled_since_full": since,
        }
        text = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
        signature = sign_text(self._key, text)
        doc = ('{"hmac":"' + signature + '","manifest":' + text + "}").encode()
        self._refs_by_gen[generation] = {ref_file(e["ref"]) for e in entries.values()}
        final = self._manifest_path(generation)
        tmp, _ = self._files.write_temp(self.directory, [doc], False)
        os.replace(tmp, final)
        self._files.fsync_dir(self.blobs)
        self._files.fsync_dir(self.directory)
        self._cache = new_cache
        self._last_full, self._sampled_since_full = last_full, since
        self._prune()
        return SnapshotReport(generation, saved, unchanged, skipped, run.total, written, str(final),
                              (time.perf_counter() - start) * 1000.0, verified, verification, sorted(trusted),
                              None if last_full is None else dict(last_full))

    def _prune(self) -> None:
        gens = self.manifests()
        for gen in gens[: -self.generations]:
            with contextlib.suppress(OSError):
                self._manifest_path(gen).unlink()
        keep: set[str] = set()
        kept = self.manifests()
        self._refs_by_gen = {g: r for g, r in self._refs_by_gen.items() if g in kept}
        for gen in kept:
            if gen not in self._refs_by_gen:  # written by another process: read it once
                try:
                    self._refs_by_gen[gen] = {ref_file(e["ref"]) for e in self.read_manifest(gen)["names"].values()}
                except (SnapshotError, KeyError, TypeError):
                    return  # an unreadable manifest: keep every file rather than guess
            keep |= self._refs_by_gen[gen]
        if self._small_index is not None:
            self._small_index = {m: r for m, r in self._small_index.items() if f"{r['pack']}.pack" in keep}
        self._files.remove_except(keep)

    # ------------------------------------------------------------------ restore
    def load(self, *, generation: int | None = None, names: Iterable[str] | None = None) -> tuple[dict[str, Any], RestoreReport]:
        """Verified values of the newest valid generation (or ``generation``), with a report."""
        report = RestoreReport(generation=None)
        candidates = [generation] if generation is not None else list(reversed(self.manifests()))
        manifest: dict[str, Any] | None = None
        for gen in candidates:
            try:
                manifest = self.read_manifest(gen)
                report.generation = gen
                break
            except SnapshotError as exc:
                report.refused.append(str(exc))
        values: dict[str, Any] = {}
        if manifest is None:
            return values, report
        wanted = None if names is None else set(names)
        packs: dict[str, bytes] = {}
        same_python = manifest.get("python") == python_tag()
        for name, entry in manifest.get("names", {}).items():
            if wanted is not None and name not in wanted:
                continue
            if entry.get("code") and not same_python:
                report.quarantined.append(Skipped(
                    name, f"code written by Python {manifest.get('python')} is not loaded in Python {python_tag()}"))
                continue
            try:
                body = self._files.read_ref(entry.get("ref"), packs)
                values[name] = deserialize(body)
            except SnapshotError as exc:
                report.failed.append(Skipped(name, str(exc)))
                continue
            except Exception as exc:
                report.failed.append(Skipped(name, f"{type(exc).__name__}: {str(exc)[:200]}"))
                continue
            report.restored.append(name)
        return values, report

    def restore_into(self, namespace: dict[str, Any], *, generation: int | None = None,
                     names: Iterable[str] | None = None) -> RestoreReport:
        """Load and bind values into ``namespace``; nothing is bound for names that failed."""
        values, report = self.load(generation=generation, names=names)
        namespace.update(values)
        return report
