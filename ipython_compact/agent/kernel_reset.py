"""What the agent tells the model when its kernel died, and whether it may restart it again.

Why separate and pure: the wording is what the model relies on to know which names came back,
and the budget decides between "restart" and "stop"; both are plain functions of a few facts,
so they are table-tested without killing kernels.

What must hold:
- The budget counts restarts inside a sliding window (Prime: 3 per hour); past it, stop.
- The notice never claims more than the restore reported: restored names, failed names (with
  reasons), or that no snapshot was configured, and always that newer work must be redone.
"""

from __future__ import annotations

from collections.abc import Sequence

OPEN_TAG = "<ipython_kernel_reset>"
CLOSE_TAG = "</ipython_kernel_reset>"


def restart_budget(
    times: Sequence[float], now: float, max_restarts: int, window_seconds: float
) -> tuple[bool, list[float]]:
    """(may restart now, the restart times still inside the window)."""
    recent = [t for t in times if now - t < window_seconds]
    return len(recent) < max_restarts, recent


def budget_exhausted(why: str, max_restarts: int, window_seconds: float) -> str:
    """The stop message once the restart budget is used up."""
    return (
        f"The Python kernel stopped ({why}) and the restart budget ({max_restarts} restarts per "
        f"{window_seconds:g} s) is used up; stopping. Start a new kernel to continue."
    )


def restart_failed(why: str, error: str) -> str:
    """The stop message when a restart itself failed."""
    return f"The Python kernel stopped ({why}) and could not be restarted ({error}); stopping."


def reset_notice(
    why: str,
    *,
    number: int,
    max_restarts: int,
    window_seconds: float,
    snapshots: bool,
    restored: Sequence[str],
    failed: Sequence[tuple[str, str]],
) -> str:
    """The ``<ipython_kernel_reset>`` message appended for the model after a restart."""
    lines = [
        OPEN_TAG,
        f"The Python kernel stopped ({why}) and was restarted "
        f"(restart {number} of {max_restarts} allowed per {window_seconds:g} s).",
    ]
    if not snapshots:
        lines.append("No snapshot is configured, so every name defined before is gone and must be recreated.")
    elif restored:
        lines.append(f"Restored from the last snapshot: {', '.join(sorted(restored))}.")
    else:
        lines.append("Nothing was restored from a snapshot; recreate what you need.")
    if failed:
        lines.append(f"Could not be restored: {', '.join(f'{n} ({r})' for n, r in sorted(failed))}.")
    lines.append("Anything defined after the last successful cell must be recreated.")
    lines.append(CLOSE_TAG)
    return "\n".join(lines)
