"""The timeline's compactions (moved to ``compaction/timeline.py``, which the CLI shares; this name
stays for the kernel's callers)."""

from __future__ import annotations

from ipython_compact.compaction.timeline import KEPT_KINDS, summaries_of

__all__ = ["KEPT_KINDS", "summaries_of"]
