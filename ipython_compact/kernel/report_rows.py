"""What ``%compact status``, ``snapshot`` and ``names`` say, as labelled rows a person can read.

Why: these three were dumps of their JSON payloads (``field value`` tables with cut cells). Here
each is written for a reader: one number format (``core.readable``), every value in full, the
session named once, a problem stated when there is one, and names that will not survive a restart
marked with the reason — the same words the ``<ipython_state>`` notice and the snapshot's skip
reasons use. The payloads themselves (``data``, ``display.REPORT_MIME``) are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ipython_compact.core.readable import cell_text, fmt_bytes
from ipython_compact.kernel.display import NAMESPACE_MIME, Rendered, fields_bundle, grid_bundle
from ipython_compact.kernel.plain_text import KEEP

BINDING_SOURCES = {
    "config": "CompactConfig.session",
    "env": "$IPYTHON_COMPACT_SESSION",
    "switched": "`%compact session NAME` (remembered across restarts)",
    "moved": "the notebook's earlier path (it was renamed or moved; its session followed it)",
    "notebook": "the notebook's path",
    "connection": "the kernel's connection file",
    "process": "this process",
}


def when(timestamp: Any) -> str:
    """``2026-12-01T11:06:49.502Z`` as ``2026-12-01 11:06:49 UTC``; other values as they are."""
    if not isinstance(timestamp, str) or "T" not in timestamp:
        return cell_text(timestamp)
    day, _, clock = timestamp.partition("T")
    utc = clock.endswith("Z")
    clock = clock.rstrip("Z").split(".")[0]
    return f"{day} {clock}" + (" UTC" if utc else "")


def counted(n: Any, one: str, many: str | None = None) -> str:
    """``1 entry``, ``1,003 entries``."""
    return f"{cell_text(n)} {one if n == 1 else (many or one + 's')}"


def _skipped_lines(skipped: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(f"{s.get('name')}: {s.get('reason')}" for s in skipped)


def status_bundle(status: Mapping[str, Any], *, width: int | None = None) -> Rendered:
    tokens, window = status.get("tokens"), status.get("window")
    source = BINDING_SOURCES.get(str(status.get("binding")), str(status.get("binding")))
    title = f"Session {status.get('session')} (bound by {source})"
    context = f"{cell_text(tokens)} tokens in a {cell_text(window)}-token window"
    if isinstance(tokens, int) and isinstance(window, int) and window > 0:
        context += f" ({tokens * 100 // window}% full)"
    if status.get("estimate"):
        context += f" · estimated by {status['estimate']}"
    rows = [("Context", context)]
    if status.get("problem"):
        rows.append(("Problem", str(status["problem"])))
    if status.get("blocking_line") is not None:
        background = status.get("background_line")
        rows.append(
            (
                "Lines",
                (
                    f"background compaction above {cell_text(background)} · "
                    if background is not None
                    else "background compaction off · "
                )
                + f"blocking compaction above {cell_text(status['blocking_line'])}",
            )
        )
    rows.append(
        (
            "Log",
            f"{counted(status.get('entries'), 'entry', 'entries')} on the current branch · "
            f"{counted(status.get('compactions'), 'compaction')}",
        )
    )
    running = status.get("in_flight") or []
    rows.append(
        (
            "Running",
            "; ".join(
                f"{'blocking' if c.get('blocking') else 'background'} compaction ({c.get('reason')}) since "
                f"{when(c.get('started_at'))}"
                for c in running
            )
            or "no compaction",
        )
    )
    failure = status.get("last_failure")
    if failure:
        rows.append(("Last failure", cell_text(failure)))
    snap = status.get("snapshot")
    if isinstance(snap, Mapping):
        verified = {"full": "verified fully", "sampled": "large arrays checked by sampling"}.get(
            str(snap.get("verification")), "verification not recorded"
        )
        rows.append(
            (
                "Snapshot",
                f"generation {cell_text(snap.get('generation'))} · "
                f"{when(snap.get('timestamp'))} · "
                f"{counted(snap.get('names'), 'name')} · "
                f"{fmt_bytes(snap.get('bytes')) or '?'} · {verified}",
            )
        )
        last_full = snap.get("last_full_verification")
        if snap.get("verification") == "sampled" and isinstance(last_full, Mapping):
            rows.append(
                (
                    "Last full check",
                    f"generation {cell_text(last_full.get('generation'))} · "
                    f"{when(last_full.get('timestamp'))}",
                )
            )
        if snap.get("skipped"):
            rows.append(("Not saved", _skipped_lines(snap["skipped"])))
    else:
        rows.append(
            ("Snapshot", "none yet: a restart would lose every name (`%compact snapshot` writes one)")
        )
    for label, key in (
        ("Snapshot problem", "snapshot_problem"),
        ("Last snapshot failed", "last_snapshot_error"),
    ):
        if status.get(key):
            rows.append((label, cell_text(status[key])))
    rows.append(("Version", cell_text(status.get("version"))))
    return fields_bundle(title, rows, dict(status), width=width)


def snapshot_bundle(report: Mapping[str, Any], *, width: int | None = None) -> Rendered:
    saved = list(report.get("saved") or [])
    unchanged = set(report.get("unchanged") or [])
    written = [n for n in saved if n not in unchanged]
    title = (
        f"Snapshot generation {cell_text(report.get('generation'))} · {counted(len(saved), 'name')} "
        f"saved · {fmt_bytes(report.get('bytes')) or '?'} · {cell_text(report.get('elapsed_ms'))} ms"
    )
    rows = [
        (
            "Written",
            ", ".join(written) if written else "nothing: every value was unchanged since the last snapshot",
        )
    ]
    if unchanged:
        rows.append(
            (
                "Unchanged",
                ", ".join(n for n in saved if n in unchanged) + " (kept from the previous generation)",
            )
        )
    if report.get("skipped"):
        rows.append(("Not saved", _skipped_lines(report["skipped"])))
    sampled = list(report.get("sampled") or [])
    if report.get("verification") == "sampled" and sampled:
        rows.append(
            ("Verified", f"by sampling: {', '.join(sampled)} taken as unchanged from 64 sampled blocks")
        )
    else:
        rows.append(("Verified", "fully: every large array that looked unchanged was re-hashed"))
    rows.append(
        ("Written to", f"{report.get('path')} ({fmt_bytes(report.get('written_bytes')) or '0 B'} written)")
    )
    return fields_bundle(title, rows, dict(report))


def size_text(info: Mapping[str, Any]) -> str:
    """``1,000 × 3 float64 · 23.4 KiB``, ``250 items · ≈ 62.4 KiB``: shape or length, then memory."""
    parts: list[str] = []
    shape, length, kind = info.get("shape"), info.get("length"), info.get("type")
    if isinstance(shape, list) and kind == "DataFrame" and len(shape) == 2:
        parts.append(f"{cell_text(shape[0])} rows × {cell_text(shape[1])} columns")
    elif isinstance(shape, list):
        parts.append(
            " × ".join(cell_text(int(s)) for s in shape) + (f" {info['dtype']}" if info.get("dtype") else "")
        )
    elif isinstance(length, int):
        unit = {"str": "characters", "dict": "keys"}.get(str(kind), "items")
        if kind not in ("bytes", "bytearray"):
            parts.append(f"{cell_text(length)} {unit}")
    if isinstance(info.get("bytes"), int):
        parts.append(("≈ " if info.get("bytes_approx") else "") + fmt_bytes(info["bytes"]))
    return " · ".join(p.replace(" ", KEEP) for p in parts)  # each part stays on one line when wrapped


def names_bundle(
    payload: Mapping[str, Any], *, lost: Mapping[str, str] | None = None, width: int | None = None
) -> Rendered:
    """The namespace table; ``payload`` is the ``names`` op result. ``lost`` (name → reason, from the
    last snapshot's skip list) wins over the probe's type-based ``restart`` reason."""
    names = list(payload.get("names", []))
    lost = dict(lost or {})
    if not names:
        return Rendered(
            {
                NAMESPACE_MIME: dict(payload),
                "text/plain": "No user-defined names.",
                "text/markdown": "*No user-defined names.*",
                "text/html": "<p><em>No user-defined names.</em></p>",
            },
            dict(payload),
        )
    rows: list[list[str]] = []
    gone: list[str] = []
    for n in names:
        notes = []
        if n.get("dtypes"):
            notes.append(f"columns: {n['dtypes']}")
        why = lost.get(n["name"]) or n.get("restart")
        if why:
            gone.append(n["name"])
            notes.append(f"lost on restart: {why}")
        if n.get("preview"):  # the probe's preview (never user code), first in the notes column
            notes.insert(0, f"value: {n['preview']}")
        rows.append([n["name"], n["type"], size_text(n), "; ".join(notes)])
    total = payload.get("total")
    title = counted(len(names), "name")
    if payload.get("truncated") and isinstance(total, int):
        title += (
            f" of {cell_text(total)} · {cell_text(total - len(names))} more: `%compact names --limit "
            f"0` lists "
            "all (or the probe's time budget ran out)"
        )
    if gone:
        title += f" · {len(gone)} will not survive a restart: {', '.join(gone)}"
    return grid_bundle(
        title,
        ["name", "type", "size", "notes"],
        rows,
        dict(payload),
        mime=NAMESPACE_MIME,
        width=width,
    )


def restore_bundle(
    report: Mapping[str, Any], *, own_process: str | None = None, width: int | None = None
) -> Rendered:
    """What a restore did, in words: what came back, what was kept because the user defined it
    since (and what to type to take it), what failed and why. No internal words ("quarantined",
    process ids); empty rows are left out. ``report`` is ``RestoreReport.to_json()`` plus
    ``not_in_snapshot`` when names were asked for that the generation lacks."""
    restored = list(report.get("restored") or [])
    kept = list(report.get("kept") or [])
    generation = report.get("generation")
    if restored:
        title = f"Restored from snapshot generation {cell_text(generation)}: {counted(len(restored), 'name')}"
    else:
        title = f"Warning: nothing was restored from generation {cell_text(generation)}"
    as_is = "it is" if len(kept) == 1 else "they are"
    if kept:
        title += f" · {counted(len(kept), 'name')} you defined since kept as {as_is}"
    rows: list[tuple[str, str]] = [("Restored", ", ".join(restored) if restored else "none")]
    if kept:
        rows.append(
            (
                "Not overwritten",
                (
                    f"{', '.join(kept)}: defined since with a different value, so left as {as_is}. To take "
                    f"the "
                    f"snapshot's "
                    f"values: `%compact restore --overwrite` (every name), or `%compact restore --names "
                    f"{','.join(kept)}` "
                    "(only those)."
                ),
            )
        )
    if report.get("not_in_snapshot"):
        rows.append(("Not in snapshot", ", ".join(report["not_in_snapshot"])))
    if report.get("not_saved"):
        rows.append(("Never saved", _skipped_lines(report["not_saved"])))
    if report.get("failed"):
        rows.append(("Could not load", _skipped_lines(report["failed"])))
    if report.get("quarantined"):
        rows.append(("Not loaded", _skipped_lines(report["quarantined"])))
    for warning in report.get("warnings") or []:
        rows.append(("Warning", str(warning)))
    if report.get("refused"):
        rows.append(("Skipped snapshots", "\n".join(str(r) for r in report["refused"])))
    if report.get("process") is not None:
        by = (
            "this kernel"
            if own_process is not None and report.get("process") == own_process
            else "an earlier kernel"
        )
        rows.append(("Written by", by))
    return fields_bundle(title, rows, dict(report), width=width)
