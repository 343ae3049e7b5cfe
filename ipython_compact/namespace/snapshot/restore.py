"""Which generation a restore uses, and binding its values in an order that works.

Choice (no ``generation`` named): refuse everything when the folder is older than the session log
says (the newest recorded generation is missing: the folder was replaced by an older copy or
rolled back); otherwise the newest verified generation that holds user work (``candidate``:
not empty, not a fresh kernel's provisional automatic snapshot), falling back to provisional
ones only when nothing else exists. Every payload of the chosen generation is read and verified
before anything is unpickled; when one fails, the whole generation is refused with its reason and
the next older one is tried.

Binding (two-phase): values are deserialized in passes — plain data first, then dill values,
then code — and each is bound into the namespace as soon as it loads; a value whose
``__setstate__`` or ``__reduce__`` failed (typically a NameError for a global not yet bound) is
retried in the next pass, until a pass makes no progress. Nothing is bound for a name that
failed in the end.

Names already defined (never clobbered): a name the namespace already holds is compared with the
snapshot's payload by serializing the current value the same way (bounded by the payload's size).
Equal: nothing to do, it counts as restored. Different, or not comparable: it is left as it is and
listed in ``report.kept`` — unless ``overwrite`` is set or the caller named it in ``names`` (the
user asked for that name). The snapshot's value of a kept name is never unpickled.

What must hold: nothing is unpickled from a generation whose manifest or payloads did not verify;
a named ``generation`` older than the log's newest record is restored only with a warning saying so;
a restore never replaces a value the user defined since unless asked to.
"""

from __future__ import annotations

from typing import Any

from ipython_compact.namespace.snapshot.blobs import BlobFiles
from ipython_compact.namespace.snapshot.codec import CapExceeded, deserialize, serialize
from ipython_compact.namespace.snapshot.fingerprints import PLAIN, plain_pickle
from ipython_compact.namespace.snapshot.manifests import Manifest, Scan
from ipython_compact.namespace.snapshot.reports import RestoreReport, Skipped, SnapshotError, python_tag

_FORMAT_ORDER = {"pickle": 0, "oob": 0, "dill": 1}


def _rollback(scan: Scan, recorded: dict[int, str]) -> str | None:
    """Why the folder cannot be trusted to be as new as the session log says, or None.

    The newest generation the log recorded must be here and verified. Whatever else lies at its
    file name (junk, a directory, a FIFO, a file signed for another generation) is no evidence the
    folder is current: an attacker who rolled the folder back could plant it in a second, so it
    refuses the automatic choice as surely as a missing file does (red team 3, item 1).
    """
    if not recorded:
        return None
    newest = max(recorded)
    have = scan.valid[-1].generation if scan.valid else None
    if have is not None and have >= newest:
        return None
    bad = next((b.reason for b in scan.invalid if b.generation == newest), None)
    found = f" ({bad})" if bad else ""
    return (
        f"the snapshot folder is older than the session log: the log recorded generation {newest}, the "
        f"newest "
        f"valid one here is {have if have is not None else 'none'}{found}; the folder may have been "
        f"replaced by "
        "an older copy, so nothing was restored. If you trust these files, name one: "
        "%compact restore --generation N (`%compact snapshots` lists them)"
    )


def _read_bodies(m: Manifest, files: BlobFiles, wanted: list[str]) -> dict[str, bytes | memoryview]:
    """Every wanted payload of ``m``, verified; SnapshotError on the first that is not."""
    packs: dict[str, bytes] = {}
    return {name: files.read_ref(m.names[name].get("ref"), packs) for name in wanted}


def _order(m: Manifest, names: list[str]) -> list[str]:
    def key(name: str) -> tuple[int, int]:
        entry = m.names[name]
        return (_FORMAT_ORDER.get(str(entry.get("format")), 1), 1 if entry.get("code") else 0)

    return sorted(names, key=key)


def same_as_payload(value: Any, body: bytes | memoryview) -> bool:
    """True when ``value`` serializes to exactly ``body``; False when it differs, is larger, or cannot
    be serialized (then it is treated as different: kept, never overwritten)."""
    try:
        # Serialized as a save would: the C pickler for builtin values (PLAIN), dill for the rest
        # (a str is saved by dill; compared as a plain pickle it never matched, and a re-sent
        # context string was kept as "different" instead of restored).
        _, parts = serialize(value, len(body), plain_pickle(value) if type(value) in PLAIN else None)
    except CapExceeded:
        return False
    except Exception:  # user __reduce__ code may raise anything: not comparable, so "different"
        return False
    joined = b"".join(bytes(p) for p in parts)
    return joined == bytes(body)


def _split_defined(
    bodies: dict[str, bytes | memoryview], namespace: dict[str, Any] | None, take: set[str] | None
) -> tuple[list[str], list[str]]:
    """``(same, kept)``: names already holding the snapshot's value, and names defined with another
    value that must not be overwritten (``take``: the names the caller may overwrite; None: all)."""
    same: list[str] = []
    kept: list[str] = []
    if namespace is None:
        return same, kept
    for name, body in bodies.items():
        if name not in namespace:
            continue
        if same_as_payload(namespace[name], body):
            same.append(name)
        elif take is not None and name not in take:
            kept.append(name)
    return same, kept


def _bind(
    m: Manifest,
    bodies: dict[str, bytes | memoryview],
    report: RestoreReport,
    namespace: dict[str, Any] | None,
    take: set[str] | None = None,
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    same, kept = _split_defined(bodies, namespace, take)
    report.kept += sorted(kept)
    if namespace is not None:
        values.update({name: namespace[name] for name in same})
    pending = _order(m, [n for n in bodies if n not in same and n not in kept])
    errors: dict[str, Exception] = {}
    while pending:
        retry = []
        for name in pending:
            try:
                value = deserialize(bodies[name])
            except Exception as exc:  # user code in __setstate__/__reduce__ may raise anything
                errors[name] = exc
                retry.append(name)
                continue
            values[name] = value
            errors.pop(name, None)
            if namespace is not None:
                namespace[name] = value
        if len(retry) == len(pending):
            break
        pending = retry
    for name in m.names:
        if name in values:
            report.restored.append(name)
        elif name in errors:
            error = errors[name]
            report.failed.append(
                Skipped(
                    name,
                    str(error)
                    if isinstance(error, SnapshotError)
                    else f"{type(error).__name__}: {str(error)[:200]}",
                )
            )
    return values


def choose_and_load(
    scan: Scan,
    recorded: dict[int, str],
    files: BlobFiles,
    *,
    generation: int | None,
    names: list[str] | None,
    namespace: dict[str, Any] | None,
    own: str = "",
    overwrite: bool = False,
) -> tuple[dict[str, Any], RestoreReport, Manifest | None]:
    """``(values, report, chosen manifest)``; see the module doc for the rules. Names the namespace
    already holds with another value are overwritten only with ``overwrite`` or when named in ``names``."""
    report = RestoreReport(generation=None)
    rollback = _rollback(scan, recorded)
    valid = scan.by_generation()
    invalid = {bad.generation: bad.reason for bad in scan.invalid}
    if generation is not None:
        if generation not in valid:
            report.refused.append(invalid.get(generation, f"there is no snapshot generation {generation}"))
            return {}, report, None
        if rollback is not None:
            report.warnings.append(
                f"generation {generation} is older than the session log's newest recorded "
                f"snapshot (generation {max(recorded)}); restored because you named it"
            )
        order = [valid[generation]]
    else:
        if rollback is not None:
            report.refused.append(rollback)
            return {}, report, None
        newest_first = list(reversed(scan.valid))
        order = [m for m in newest_first if m.candidate] or [m for m in newest_first if m.names]
        top = order[0].generation if order else 0
        report.refused += [reason for gen, reason in sorted(invalid.items(), reverse=True) if gen > top]
    for m in order:
        wanted = [n for n in m.names if names is None or n in names]
        same_python = m.data.get("python") == python_tag()
        quarantined = [n for n in wanted if m.names[n].get("code") and not same_python]
        try:
            bodies = _read_bodies(m, files, [n for n in wanted if n not in quarantined])
        except SnapshotError as exc:
            report.refused.append(
                f"generation {m.generation}: {exc}"
                + ("" if generation is not None else "; trying an older generation")
            )
            continue
        report.generation, report.process, report.available = m.generation, m.process, sorted(m.names)
        report.not_saved = [  # names the snapshot could not hold (a generator, an open file), with why
            Skipped(str(s.get("name")), str(s.get("reason")))
            for s in m.data.get("skipped") or []
            if isinstance(s, dict) and s.get("name")
        ]
        report.quarantined += [
            Skipped(
                n, f"code written by Python {m.data.get('python')} is not loaded in Python {python_tag()}"
            )
            for n in quarantined
        ]
        if generation is None and recorded and max(recorded) not in valid:
            report.warnings.append(
                f"the newest snapshot the session log recorded (generation "
                f"{max(recorded)}) is not "
                f"usable here; restored the older generation {m.generation}"
            )
        newer = [
            p
            for p in scan.valid
            if p.generation > m.generation
            and p.provisional
            and p.names
            and p.process != own
            and p.process != m.process
        ]
        if generation is None and newer:  # an earlier kernel worked without restoring, then ended
            last = newer[-1]
            report.warnings.append(
                f"a newer provisional snapshot exists: generation {last.generation} (names: "
                f"{', '.join(sorted(last.names)[:8])}) from a kernel that never restored this one; "
                f"`%compact restore --generation {last.generation}` brings it back instead"
            )
        if m.legacy:
            report.warnings.append(
                f"generation {m.generation} was written by an older version that did not "
                f"bind "
                "snapshots to their session; it was restored on its signature alone"
            )
        if not m.candidate and generation is None:
            report.warnings.append(
                f"generation {m.generation} is a provisional automatic snapshot (taken "
                f"before this "
                "session's earlier work was restored); no other snapshot holds user work"
            )
        take = None if overwrite else set(names or ())
        return _bind(m, bodies, report, namespace, take), report, m
    return {}, report, None
