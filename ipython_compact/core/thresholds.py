"""When to compact: the blocking line and the background line below it.

- Blocking line: ``window - reserve_tokens`` (pi), or with Prime's ``trigger_ratio``
  ``floor(min(window * ratio, window - reserve_tokens))``. Above it the next request may not fit,
  so compaction must finish before the model is called again.
- Background line: ``blocking - background_tokens`` (pi-durable); ``background_tokens = 0`` turns it
  off. Above it a summary is prepared off the critical path and placed at a turn boundary.

Both comparisons are strict (``tokens > line``), as in pi's ``shouldCompact``. A window that leaves
no room after the reserve is a configuration error, reported as such rather than silently
compacting on every turn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ipython_compact.core.settings import CompactionSettings

Decision = Literal["none", "background", "blocking"]


@dataclass(frozen=True)
class Lines:
    """Token counts above which compaction is due; ``background`` is None when disabled."""

    blocking: int
    background: int | None


def threshold_lines(window: int, settings: CompactionSettings) -> Lines:
    """The two lines for a model with a ``window``-token context.

    Raises ValueError when ``window`` is not a positive integer or not larger than the reserve.
    """
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ValueError(f"context window must be a positive integer, got {window!r}")
    room = window - settings.reserve_tokens
    if room <= 0:
        raise ValueError(
            f"context window {window} is not larger than reserve_tokens {settings.reserve_tokens}: "
            "no request could ever fit; lower reserve_tokens or fix the window"
        )
    if settings.trigger_ratio is None:
        blocking = room
    else:
        blocking = math.floor(min(window * settings.trigger_ratio, room))
    background = blocking - settings.background_tokens if settings.background_tokens > 0 else None
    if background is not None and background <= 0:
        background = None
    return Lines(blocking=blocking, background=background)


def decide(tokens: int, window: int, settings: CompactionSettings) -> Decision:
    """``"blocking"`` above the blocking line, ``"background"`` above the background line, else ``"none"``.

    Disabled settings always answer ``"none"`` (manual compaction does not ask).
    """
    if not settings.enabled:
        return "none"
    lines = threshold_lines(window, settings)
    if tokens > lines.blocking:
        return "blocking"
    if lines.background is not None and tokens > lines.background:
        return "background"
    return "none"
