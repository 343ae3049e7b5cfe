"""The snapshot store of one session: generations, manifests, pruning, listing, save and restore.
What the folder holds and what the log recorded is read in ``folder_state.py``; which generations
are kept, in ``retention.py``; ``SnapshotStore`` inherits both.

Layout under one directory (``paths.snapshots_dir() / <session slug>``, mode 0700): ``blobs/``
(payloads, see ``blobs.py``), ``manifest-<generation>.json`` (signed, see ``manifests.py``) and
``.lock`` (see ``locking.py``). The same layout as objects under an object-storage URL, with the
lock in the session store: where the files go, how the lock is held and how a manifest is
committed is the place's (``places.py``); everything below holds for both.

What must hold:
- Many writers: a save holds the folder's exclusive lock from listing payloads to pruning, so
  generation numbers are unique and increasing (above every number on disk and every number the
  session log recorded) and no writer deletes a payload a kept manifest needs.
- Which generations are kept: the newest ``generations`` ones, plus the newest snapshot (and the
  newest one holding user work) of every kernel process that no later process took over by
  restoring it, until the user restores or discards it. A fresh kernel's automatic snapshots,
  taken while an earlier process's work is waiting to be restored, are *provisional*: they never
  supersede or prune that work, and a default restore skips them.
- Temporary files left by a writer that died are removed by the next save (any ``*.tmp`` in the
  folder while the writer lock is held belongs to no live writer).
- Every manifest's digest is handed to the ``ledger`` (the session log), and restore compares
  what is on disk with what the ledger recorded (``restore.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import dill

from ipython_compact.namespace.snapshot.blobs import ref_file
from ipython_compact.namespace.snapshot.codec import Deadline
from ipython_compact.namespace.snapshot.decide import QUICK_TYPES, Cached, Decision, SaveRun
from ipython_compact.namespace.snapshot.folder_state import SnapshotLedger
from ipython_compact.namespace.snapshot.locking import WriterLocks
from ipython_compact.namespace.snapshot.manifests import (
    MANIFEST_VERSION,
    GenerationInfo,
    Manifest,
    ManifestReader,
)
from ipython_compact.namespace.snapshot.objects import object_scheme
from ipython_compact.namespace.snapshot.places import FolderPlace, ObjectPlace, Place
from ipython_compact.namespace.snapshot.reports import (
    RestoreReport,
    Skipped,
    SnapshotError,
    SnapshotReport,
    python_tag,
)
from ipython_compact.namespace.snapshot.restore import choose_and_load
from ipython_compact.namespace.snapshot.retention import Retention
from ipython_compact.namespace.snapshot.signing import sign_text
from ipython_compact.namespace.snapshot.unchanged import LaneHit, PortableLane, UnchangedLane

# how a large value that looks unchanged is proven so (see the package doc)
VERIFY_MODES = ("sampled", "full")
PROCESS_ID = f"{os.getpid()}-{secrets.token_hex(4)}"  # this OS process, as manifests name it
PROCESS_STARTED = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class SnapshotStore(Retention):
    """Snapshots of one session's namespace in ``directory``; see the module docstring."""

    def __init__(
        self,
        directory: Path | str,
        key: bytes,
        *,
        session: str | None = None,
        process: str | None = None,
        root: Path | None = None,
        ledger: SnapshotLedger | None = None,
        max_name_bytes: int = 512 << 20,
        max_total_bytes: int = 2 << 30,
        generations: int = 3,
        durable: bool = True,
        python: str | None = None,
        name_timeout: float | None = 5.0,
        lock_timeout: float = 60.0,
        locks: WriterLocks | None = None,
    ) -> None:
        if len(key) < 16:
            raise SnapshotError("signing key must be at least 16 bytes")
        if generations < 1:
            raise SnapshotError(f"generations must be at least 1, got {generations}")
        url = directory if isinstance(directory, str) and object_scheme(directory) else None
        # ``directory``: the local folder; None when the snapshots are objects at ``url``
        self.directory = None if url is not None else Path(directory)
        self.blobs = None if self.directory is None else self.directory / "blobs"
        self.session = session if session is not None else str(directory).rstrip("/").rsplit("/", 1)[-1]
        self.process = process or PROCESS_ID
        self.ledger = ledger
        self._key = key
        self.max_name_bytes = max_name_bytes
        self.max_total_bytes = max_total_bytes
        self.generations = generations
        self.durable = durable
        self.python = python or python_tag()
        self.name_timeout = name_timeout
        self.lock_timeout = lock_timeout
        self._cache: dict[str, Cached] = {}
        # name -> (the very immutable object saved last time, its manifest entry, its cache entry):
        # the same object again is unchanged without looking at it (see ``_save``). Never sent
        # from a forked child (identities do not cross a pipe); ``adopt_seen`` rebuilds it.
        self._seen: dict[str, tuple[Any, dict[str, Any], Cached]] = {}
        self._seen_refs: set[str] = set()  # the payload files the quick lane's entries point at
        self._lane: UnchangedLane | None = None  # what the last per-name save saw (``unchanged.py``)
        self.lane_builds = 0  # how many times a save rebuilt it (a forked child sends only a new one)
        # The entries of the generation this store last wrote or matched (``_names_equal``).
        self._last_entries: dict[str, dict[str, Any]] = {}
        self._last_generation: int | None = None
        self._small_index: dict[str, dict[str, Any]] | None = None
        self._last_full: dict[str, Any] | None = None  # newest fully verified generation (from the manifests)
        self._sampled_since_full = 0  # sampled generations written since then
        # an earlier process's work waits to be restored (None: not yet known)
        self._pending: bool | None = None
        self._supersedes: set[str] = set()  # earlier processes this one took over (restored or discarded)
        self._high = 0  # the highest generation this store has seen or written
        self._recorded_cache: dict[int, str] | None = None
        self._in_operation = False
        self._lock = threading.Lock()
        self._listing_lock = threading.Lock()  # listing has a reader of its own (``generations_info``)
        self._listing: ManifestReader | None = None
        self.pid = os.getpid()
        self._place: Place = (
            ObjectPlace(url, key, self.session, locks=locks)
            if url is not None
            else FolderPlace(Path(directory), key, self.session, root=root, durable=durable)
        )
        self.location = self._place.location  # the folder, or the URL of the objects
        self._files = self._place.files
        self._manifests = self._place.manifests

    # ------------------------------------------------------------------ save
    def save(
        self,
        items: Iterable[tuple[str, Any]],
        *,
        full: bool = False,
        skip: Mapping[str, str] | None = None,
        timestamp: str | None = None,
        verify: str = "full",
        automatic: bool = False,
    ) -> SnapshotReport:
        """Snapshot ``(name, value)`` pairs as a new generation; ``skip`` adds names with fixed reasons.

        ``full`` serializes and writes every value again. ``verify`` says how a large value that
        looks unchanged (same object, same samples) is treated: ``"full"`` (the default, and what
        every explicit snapshot must use) re-hashes it to prove it; ``"sampled"`` trusts the
        samples, which can miss an in-place edit until the next ``"full"`` save (package doc).
        ``automatic`` marks the debounced snapshots after cells: while an earlier process's work
        waits to be restored they are provisional (module doc).
        """
        if verify not in VERIFY_MODES:
            raise SnapshotError(f"verify must be one of {', '.join(map(repr, VERIFY_MODES))}, got {verify!r}")
        with (
            self._lock,
            self._place.lock(shared=False, timeout=0.0 if automatic else self.lock_timeout),
            self._fresh(),
        ):
            self._place.remove_stale()
            return self._save(
                # a list is taken as given (nothing keeps it): copying 100,000 freshly listed
                # pairs costs as much as the whole unchanged check
                items if type(items) is list else list(items),
                full=full,
                skip=dict(skip or {}),
                timestamp=timestamp,
                verify=verify,
                automatic=automatic,
            )

    def automatic_verification(self, mode: str, every: int) -> str:
        """The ``verify`` mode for the next automatic snapshot under ``mode`` and ``full_verify_every``.

        ``"full"`` when ``mode`` is ``"full"``, or when ``every - 1`` sampled generations have been
        written since the newest fully verified one (so at least every ``every``-th automatic
        snapshot verifies fully; ``every == 1`` means always). The count is read from the newest
        manifest once, so it carries over a kernel restart.
        """
        if mode not in VERIFY_MODES:
            raise SnapshotError(
                f"verification mode must be one of {', '.join(map(repr, VERIFY_MODES))}, got {mode!r}"
            )
        if every < 1:
            raise SnapshotError(f"full_verify_every must be at least 1, got {every}")
        if mode == "full":
            return "full"
        with self._lock:
            self._known_small()
            return "full" if self._sampled_since_full + 1 >= every else "sampled"

    @property
    def last_full_verification(self) -> dict[str, Any] | None:
        """``{"generation", "timestamp"}`` of the newest fully verified generation, or None if none is
        known."""
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
            scan = self._scan()
            manifest = scan.valid[-1].data if scan.valid else {}
            for entry in manifest.get("names", {}).values():
                ref = entry.get("ref", {})
                if "pack" in ref and isinstance(ref.get("mac"), str):
                    self._small_index[ref["mac"]] = dict(ref)
            last = manifest.get("last_full_verification")
            self._last_full = dict(last) if isinstance(last, dict) else None
            since = manifest.get("sampled_since_full")
            self._sampled_since_full = since if type(since) is int and since >= 0 else 0
        return self._small_index

    def _next_generation(self) -> int:
        recorded = self._recorded()
        on_disk = self.manifests()
        return max([self._high, *on_disk, *recorded]) + 1

    def _save(
        self,
        items: list[tuple[str, Any]],
        *,
        full: bool,
        skip: dict[str, str],
        timestamp: str | None,
        verify: str,
        automatic: bool,
    ) -> SnapshotReport:
        start = time.perf_counter()
        self._start(self._scan())
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
        # The quick lane: a name bound to the very immutable object (int, float, str, ...) saved
        # last time is unchanged; its entry is reused without fingerprinting. Why: an unchanged
        # namespace of 100,000 small names cost ~20x pickling them once through ``decide``; this
        # lane is a dict lookup and an identity test per name. Its payload files must still exist.
        seen = self._seen if not full and self._seen_refs <= self._files.present else {}
        seen_get = seen.get
        new_seen: dict[str, tuple[Any, dict[str, Any], Cached]] = {}
        fresh: list[tuple[str, Any]] = []  # quick-lane types decided the long way: remembered after the pack
        with Deadline(self.name_timeout) as deadline:
            run = SaveRun(
                key=self._key,
                blobs=self._files,
                cache=self._cache,
                known_small=known_small,
                full=full,
                verify=verify,
                max_name_bytes=self.max_name_bytes,
                max_total_bytes=self.max_total_bytes,
                name_timeout=self.name_timeout,
                deadline=deadline,
            )
            cap = self.max_total_bytes
            hit = (
                None
                if full or self._lane is None
                else self._lane.match(items, skip, self._files.present, deadline)
            )
            if hit is not None:  # the small unchanged names, proved so in a few batched passes
                if hit.others:
                    entries.update(hit.entries)
                    new_cache.update(hit.cache)
                    new_seen.update(hit.seen)
                else:  # nothing else to decide: the lane's own dicts (no save mutates them)
                    entries, new_cache, new_seen = hit.entries, hit.cache, hit.seen
                run.total = hit.total
            for name, value in items if hit is None else hit.others:
                known = seen_get(name) if type(name) is str else None  # decide() skips other names
                if known is not None and known[0] is value and run.total + known[2].size <= cap:
                    entries[name] = known[1]
                    saved.append(name)
                    unchanged.append(name)
                    new_seen[name] = known
                    new_cache[name] = known[2]
                    run.total += known[2].size
                    continue
                if type(value) in QUICK_TYPES and type(name) is str:
                    fresh.append((name, value))
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
        written += self._write_pack(small, known_small, new_cache)
        if hit is not None:  # the report lists names in the namespace's order
            assert self._lane is not None
            if hit.others:
                saved, unchanged = self._lane_order(hit, saved), self._lane_order(hit, unchanged)
            else:  # every name took the lane: one list for both (a copy of 100,000 names: ~0.4 ms)
                saved = unchanged = list(self._lane.names)
        # Files the quick lane's entries need: a superset is only stricter (a pruned one turns the
        # lane off for one save, which then rebuilds the set exactly).
        seen_refs = set(self._seen_refs) if new_seen else set()
        for name, value in fresh:
            if name in new_cache and name in entries:
                new_seen[name] = (value, entries[name], new_cache[name])
                seen_refs.add(ref_file(entries[name]["ref"]))
        wrote_payloads = bool(self._files.unsynced)
        self._files.sync_new()
        if wrote_payloads:
            self._place.payloads_written()
        same = (
            self._same_as_newest(entries, skipped, "sampled" if trusted else "full")
            if automatic and not wrote_payloads
            else None
        )
        if hit is None:
            with Deadline(self.name_timeout) as deadline:
                self._lane = UnchangedLane.build(items, skip, entries, new_cache, new_seen, deadline)
                self.lane_builds += 1
        if same is not None:  # nothing changed since this process's newest snapshot: no new generation
            self._cache, self._seen, self._seen_refs = new_cache, new_seen, seen_refs
            self._last_entries, self._last_generation = entries, same.generation
            if trusted:
                self._sampled_since_full += 1
            return SnapshotReport(
                same.generation,
                saved,
                unchanged,
                skipped,
                run.total,
                0,
                str(self._manifest_path(same.generation)),
                (time.perf_counter() - start) * 1000.0,
                verified,
                "sampled" if trusted else "full",
                sorted(trusted),
                None if self._last_full is None else dict(self._last_full),
                same.digest,
            )
        generation = self._next_generation()
        # A generation is fully verified unless it trusted a value on samples (nothing else can be stale).
        verification = "sampled" if trusted else "full"
        if verification == "full":
            last_full: dict[str, Any] | None = {"generation": generation, "timestamp": timestamp}
            since = 0
        else:
            last_full, since = self._last_full, self._sampled_since_full + 1
        manifest = {
            "version": MANIFEST_VERSION,
            "session": self.session,
            "generation": generation,
            "process": self.process,
            "pid": self.pid,  # the kernel's, also when a forked child writes for it
            "started": PROCESS_STARTED,
            "origin": "automatic" if automatic else "explicit",
            "provisional": bool(automatic and self._pending),
            "supersedes": sorted(self._supersedes),
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
        final, digest = self._write_manifest(generation, manifest)
        self._cache, self._seen, self._seen_refs = new_cache, new_seen, seen_refs
        self._last_entries, self._last_generation = entries, generation
        self._last_full, self._sampled_since_full = last_full, since
        self._prune()
        return SnapshotReport(
            generation,
            saved,
            unchanged,
            skipped,
            run.total,
            written,
            str(final),
            (time.perf_counter() - start) * 1000.0,
            verified,
            verification,
            sorted(trusted),
            None if last_full is None else dict(last_full),
            digest,
        )

    def _lane_order(self, hit: LaneHit, decided: list[str]) -> list[str]:
        """The lane's names and the per-name ``decided`` ones, in the namespace's order."""
        assert self._lane is not None
        also = set(decided)
        return [n for n in self._lane.names if n in hit.entries or n in also]

    def seen_names(self) -> list[str]:
        """The names the quick lane would take (a forked child sends these back to its kernel)."""
        return list(self._seen)

    def portable_lane(self) -> PortableLane | None:
        """The whole-namespace lane without its objects (a forked child sends it to its kernel)."""
        return None if self._lane is None else self._lane.portable()

    def adopt_seen(
        self, objects: Mapping[str, Any], names: Iterable[str], lane: PortableLane | None = None
    ) -> None:
        """Rebuild the quick lane in the kernel after a forked child saved: ``objects`` are the
        kernel's bindings at the fork (the child saw these very objects), ``names`` the child's
        quick-lane names; each entry is rebuilt from the adopted cache (call with the state lock).
        With the child's ``lane`` (``unchanged.py``), the whole-namespace lane too; without it the
        kernel keeps its own (a lane stays correct however old: every match is checked)."""
        seen: dict[str, tuple[Any, dict[str, Any], Cached]] = {}
        for name in names:
            cached = self._cache.get(name)
            if cached is None or name not in objects or type(objects[name]) not in QUICK_TYPES:
                continue
            value = objects[name]
            entry = {
                "ref": cached.ref,
                "bytes": cached.size,
                "format": cached.fmt,
                "code": cached.code,
                "type": type(value).__qualname__,
            }
            seen[name] = (value, entry, cached)
        self._seen, self._seen_refs = seen, {ref_file(cached.ref) for _, _, cached in seen.values()}
        if lane is not None:
            self._lane = UnchangedLane.adopted(lane, objects, self._cache, seen)

    def _names_equal(self, newest: Manifest, entries: dict[str, dict[str, Any]]) -> bool:
        """``newest.names == entries``, where an entry that is the very object this store wrote into
        ``newest`` (the quick lane reuses them) counts as equal without a deep comparison; a JSON
        round trip of an entry is exact, so the shortcut agrees with ``==``."""
        names = newest.names
        if len(names) != len(entries):
            return False
        last = self._last_entries if self._last_generation == newest.generation else None
        if last is None:
            return bool(names == entries)
        if entries is last or entries == last:  # C-level: reused entries are the very objects written
            return True
        last_get, names_get = last.get, names.get
        for name, entry in entries.items():
            if entry is not last_get(name) and entry != names_get(name):
                return False
        return True

    def _same_as_newest(
        self, entries: dict[str, dict[str, Any]], skipped: list[Skipped], verification: str
    ) -> Manifest | None:
        """The newest manifest on disk when this process wrote it and it holds exactly ``entries``.

        An automatic snapshot that would repeat it is not written: an unchanged namespace then
        costs its fingerprints and no fsync, and buries nothing.
        """
        scan = self._scan()
        newest = scan.valid[-1] if scan.valid else None
        if (
            newest is None
            or newest.process != self.process
            or not self._names_equal(newest, entries)
            or newest.provisional != bool(self._pending)
            or newest.supersedes != self._supersedes
            or newest.data.get("skipped") != [s.to_json() for s in skipped]
            or newest.data.get("verification") != verification
            or (scan.invalid and scan.invalid[-1].generation > newest.generation)
        ):
            return None
        return newest

    def _write_pack(
        self, small: list[Decision], known_small: dict[str, dict[str, Any]], new_cache: dict[str, Cached]
    ) -> int:
        """Write the save's small bodies as one pack and fill in their references; bytes written."""
        if not small:
            return 0
        pack_id = self._files.store_pack([d.small[0] for d in small if d.small is not None])
        offset = 0
        for d in small:
            assert d.small is not None and d.entry is not None
            body, digest, fp = d.small
            ref = {"pack": pack_id, "offset": offset, "length": len(body), "mac": digest}
            offset += len(body)
            d.entry["ref"] = ref
            known_small[digest] = ref
            if fp is not None:
                new_cache[d.name] = Cached(fp, ref, len(body), d.entry["format"], d.entry["code"])
        return offset

    def _write_manifest(self, generation: int, manifest: dict[str, Any]) -> tuple[str, str]:
        text = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
        doc = ('{"hmac":"' + sign_text(self._key, text) + '","manifest":' + text + "}").encode()
        final = self._place.commit_manifest(generation, doc)  # the commit: every payload is in place
        self._high = max(self._high, generation)
        digest = hashlib.sha256(doc).hexdigest()
        if self.ledger is not None:
            self.ledger.record(generation, digest)
            if self._recorded_cache is not None:
                self._recorded_cache[generation] = digest
        return final, digest

    # ------------------------------------------------------------------ restore
    def load(
        self,
        *,
        generation: int | None = None,
        names: Iterable[str] | None = None,
        namespace: dict[str, Any] | None = None,
        overwrite: bool = False,
    ) -> tuple[dict[str, Any], RestoreReport]:
        """Verified values of the newest snapshot holding user work (or ``generation``), with a report.

        With ``namespace`` each value is bound as soon as it loads, so later values whose
        ``__setstate__``/``__reduce__`` need a restored global find it (``restore.py``).
        """
        with self._lock, self._place.lock(shared=True, timeout=self.lock_timeout), self._fresh():
            scan = self._scan()
            self._start(scan)
            values, report, chosen = choose_and_load(
                scan,
                self._recorded(),
                self._files,
                generation=generation,
                names=None if names is None else list(names),
                namespace=namespace,
                own=self.process,
                overwrite=overwrite,
            )
            if chosen is not None:  # this process took the chosen snapshot's work over
                if chosen.process != self.process:
                    self._supersedes |= {chosen.process, *chosen.supersedes}
                self._pending = False
            return values, report

    def restore_into(
        self,
        namespace: dict[str, Any],
        *,
        generation: int | None = None,
        names: Iterable[str] | None = None,
        overwrite: bool = False,
    ) -> RestoreReport:
        """Load and bind values into ``namespace``; nothing is bound for names that failed, nor for
        names defined since with another value unless ``overwrite`` or named (``report.kept``)."""
        return self.load(generation=generation, names=names, namespace=namespace, overwrite=overwrite)[1]


__all__ = ["PROCESS_ID", "VERIFY_MODES", "GenerationInfo", "Manifest", "SnapshotLedger", "SnapshotStore"]
