"""The CLI's text fitted to the terminal: its width, and long lines wrapped at word boundaries.

Why: ``log`` printed 146 columns with ``COLUMNS=80`` and ``plan``'s reasons ran past the edge, so
the terminal broke words mid-way. The kernel has its own plain-text layout (``kernel/plain_text``);
the CLI and the kernel never import each other.

What must hold: ``width()`` honours ``$COLUMNS`` (as ``shutil.get_terminal_size`` does), falls back
to 80 when no terminal is known, and never returns less than 40; wrapping never breaks a word (a
path or an id longer than the line sticks out alone on its line).
"""

from __future__ import annotations

import shutil
import textwrap

MIN_WIDTH = 40


def width(default: int = 80) -> int:
    """The terminal's columns (``$COLUMNS`` wins), at least 40; ``default`` when unknown."""
    try:
        columns = shutil.get_terminal_size((default, 24)).columns
    except (OSError, ValueError):
        columns = default
    return max(MIN_WIDTH, columns or default)


def hanging(lead: str, text: str, columns: int | None = None) -> str:
    """``lead`` then ``text`` wrapped to the terminal, later lines indented under the text."""
    room = columns or width()
    return textwrap.fill(
        " ".join(text.split()),
        room,
        initial_indent=lead,
        subsequent_indent=" " * len(lead),
        break_long_words=False,
        break_on_hyphens=False,
    )
