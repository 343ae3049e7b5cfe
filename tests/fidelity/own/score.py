#!/usr/bin/env python3
"""Scorer of our own stories: the held-out set's rules, loaded from its frozen ``score.py``.

Why one rule set: figures on our stories and on the held-out sets must mean the same thing, so
this file adds nothing of its own (R0-R5 are documented in ``../heldout/score.py``).
CLI as there: ``python3 score.py STORY.json CHECKPOINT.md [TAIL.txt | --tail-turns N]``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "heldout_score", Path(__file__).resolve().parent.parent / "heldout" / "score.py"
)
assert _spec is not None and _spec.loader is not None
_frozen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_frozen)

score = _frozen.score
render_turns = _frozen.render_turns
marks_history = _frozen.marks_history

if __name__ == "__main__":
    sys.exit(_frozen.main(sys.argv))
