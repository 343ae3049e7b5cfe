"""The CLI's text fitted to the terminal: its width, and long lines wrapped at word boundaries.

Why: ``log`` printed 146 columns with ``COLUMNS=80`` and ``plan``'s reasons ran past the edge, so
the terminal broke words mid-way. The kernel has its own plain-text layout (``kernel/plain_text``);
the CLI and the kernel never import each other.

What must hold: ``width()`` honours ``$COLUMNS`` (as ``shutil.get_terminal_size`` does), falls back
to 80 when no terminal is known, and never returns less than 40; wrapping never breaks a word (a
path or an id longer than the line sticks out alone on its line).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap

MIN_WIDTH = 40
#: A line's indentation and list marker (``- ``, ``2. ``, ``[x] ``): its continuation hangs under it.
_LEAD = re.compile(r"^(\s*(?:[-*•]\s+|\d+[.)]\s+|\[[ x]\]\s+)?)")


def fitted() -> bool:
    """Whether output is fitted to a width: on a terminal, or when ``$COLUMNS`` asks for it; a
    pipe or a file otherwise gets every line whole (what a script reads)."""
    return sys.stdout.isatty() or bool(os.environ.get("COLUMNS"))


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


def wrap_text(text: str, columns: int | None = None) -> str:
    """Preformatted ``text`` (a summary, a recalled entry) fitted to the terminal: a line too long
    wraps at spaces, its continuation indented under its own text (after a list marker); short
    lines, blank lines and a word longer than the line (a path, an id) stay as they are, so no
    word is broken. Lines are split at newlines only and wrapped at spaces only: a carriage return
    or a tab inside the text stays where it was (the terminal guard shows it as an escape)."""
    room = columns or width()
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= room:
            out.append(line)
            continue
        match = _LEAD.match(line)
        lead = match.group(1) if match else ""
        hang = " " * len(lead) if len(lead) < room // 2 else ""
        out.extend(_fill(line[len(lead) :].split(" "), room, lead, hang))
    return "\n".join(out)


def _fill(words: list[str], room: int, lead: str, hang: str) -> list[str]:
    """``words`` greedily on lines of at most ``room`` columns (a longer word alone on its line)."""
    lines: list[str] = []
    current = lead
    bare = True  # nothing after the lead yet
    for word in (w for w in words if w):
        if not bare and len(current) + 1 + len(word) > room:
            lines.append(current)
            current, bare = hang, True
        current = current + word if bare else f"{current} {word}"
        bare = False
    lines.append(current)
    return lines
