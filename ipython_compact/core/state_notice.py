"""The ``<ipython_state>`` notice appended after a compaction, built from probe results as data.

Why: a transcript summary cannot carry the kernel's state, but the kernel keeps running. After a
compaction the model must be told, truthfully, what is still defined, whether a snapshot was
written, and which names would not survive a restart. Pure: it only formats what the caller
observed, so every wording is table-tested.

What must hold:
- A failed probe (``names is None``) produces the plain statement that the names are unknown;
  never a guess. A kernel that is gone produces no notice at all (``None``).
- Names are listed in sorted order; long lists are cut with a count of what was left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

OPEN_TAG = "<ipython_state>"
CLOSE_TAG = "</ipython_state>"
MAX_LISTED = 200


@dataclass(frozen=True)
class SnapshotOutcome:
    """What the snapshot step reported: ``written`` False with ``error`` when it failed."""

    written: bool
    skipped: Sequence[tuple[str, str]] = ()
    error: str | None = None


def _names_text(names: Sequence[str], limit: int = MAX_LISTED) -> str:
    ordered = sorted(names)
    shown = ", ".join(ordered[:limit])
    if len(ordered) > limit:
        shown += f", and {len(ordered) - limit} more"
    return shown


def state_notice(
    *,
    kernel_alive: bool,
    names: Sequence[str] | None,
    snapshot: SnapshotOutcome | None,
) -> str | None:
    """The notice text, or None when the kernel is gone (nothing true can be said about it).

    ``snapshot`` None means no snapshot target is configured (snapshots are off).
    """
    if not kernel_alive:
        return None
    lines = [
        "Your Python kernel persisted through compaction; its remaining variables, imports, and helpers "
        "are "
        "still available."
    ]
    if snapshot is None:
        lines.append("No state snapshot is configured for this kernel, so a restart would lose every name.")
    elif not snapshot.written:
        why = f" ({snapshot.error})" if snapshot.error else ""
        lines.append(
            "The kernel's state snapshot could not be "
            "written" + why + ", so these names were not saved to "
            "disk: a restart revives only the last successfully written snapshot, and anything "
            "newer must "
            "be recreated."
        )
    else:
        lines.append("A state snapshot was written, so saved names can be restored after a restart.")
        if snapshot.skipped:
            parts = "; ".join(f"{name} ({reason})" for name, reason in sorted(snapshot.skipped)[:MAX_LISTED])
            lines.append(
                "These were live but could not be saved into the snapshot, so they will not survive "
                "a "
                f"restart: {parts}."
            )
    if names is None:
        lines.append(
            "The kernel's namespace could not be listed, so which names are still defined is unknown here."
        )
    elif not names:
        lines.append("You have not defined any names yet.")
    else:
        lines.append(f"These names are still defined: {_names_text(names)}.")
    return "\n".join([OPEN_TAG, *lines, CLOSE_TAG])
