"""The "did you mean" rule of the CLI and the magics, in a module of its own.

Why alone: ``ipython-compact --help`` and a mistyped command answer without importing the rest of
the package (start-up time), so this imports nothing but ``difflib``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice a mistyped ``word`` most likely meant, or None when none is close.

    One rule for the CLI's and the magics' "did you mean" hints, so both suggest the same spelling.
    """
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None
