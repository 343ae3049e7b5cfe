"""Plain text that fits a terminal: labelled fields and tables whose cells wrap instead of running off.

Why: terminal IPython and nbconvert show only ``text/plain``. A long value (a snapshot's skip
reasons, a path, a long name) used to be cut with an ellipsis or wrapped by the terminal into the
next column; here it wraps inside its own column with a hanging indent.

What must hold:
- No line is wider than ``width`` unless a single word is (a path or name is never cut; it may
  stick out alone on its line) — except in a table whose columns cannot all hold their longest
  word within ``width``: there a later column's long word is broken inside its column, the last
  resort (the first column, a name, is never broken).
- Every value is shown in full: nothing is replaced by ``…``.
- Text joined with ``KEEP`` (a no-break space) is never split there, and prints as a plain space.
- ``terminal_width()`` never fails: outside a terminal (a kernel, a pipe) it falls back to 80.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Sequence

MIN_WIDTH = 40
MAX_WIDTH = 160
GAP = "  "
KEEP = "\u00a0"  # a space the wrapper never breaks at ("23.4 KiB" stays on one line); printed as a space


def terminal_width(default: int = 80) -> int:
    """The terminal's columns (``$COLUMNS`` wins), clamped to [40, 160]; ``default`` when unknown."""
    try:
        columns = shutil.get_terminal_size((default, 24)).columns
    except (OSError, ValueError):
        columns = default
    return max(MIN_WIDTH, min(MAX_WIDTH, columns or default))


def wrap(text: str, width: int, *, break_long: bool = False) -> list[str]:
    """``text`` wrapped to ``width`` (its own line breaks kept; a word longer than ``width`` is
    broken only with ``break_long``, the last resort of a table column too narrow for it)."""
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        lines.extend(
            textwrap.wrap(paragraph, max(1, width), break_long_words=break_long, break_on_hyphens=False)
            or [""]
        )
    return lines


_LEAD = re.compile(r"^(\s*(?:[-*•]\s+|\d+[.)]\s+|\[[ x]\]\s+)?)")


def wrap_block(text: str, width: int) -> str:
    """Preformatted ``text`` (a checkpoint, a plan, a recalled entry) fitted to ``width``: a line
    too long wraps at spaces, its continuation indented under its own text (after a list marker
    such as ``- `` or ``2. ``); short lines, blank lines and a word longer than the line (a path)
    are kept as they are, so the text never breaks mid-word."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        lead = _LEAD.match(line).group(1)  # type: ignore[union-attr]  # the pattern matches every line
        hang = " " * len(lead) if len(lead) < width // 2 else ""
        out.extend(
            textwrap.wrap(
                line[len(lead) :],
                max(1, width),
                initial_indent=lead,
                subsequent_indent=hang,
                break_long_words=False,
                break_on_hyphens=False,
            )
            or [line]
        )
    return "\n".join(out)


def fields(rows: Sequence[tuple[str, str]], width: int) -> str:
    """``label  value`` lines; a long value wraps under itself (hanging indent)."""
    if not rows:
        return ""
    label_width = max(len(label) for label, _ in rows)
    room = max(MIN_WIDTH // 2, width - label_width - len(GAP))
    out: list[str] = []
    for label, value in rows:
        for i, line in enumerate(wrap(value, room)):
            head = label.ljust(label_width) if i == 0 else " " * label_width
            if len(line) > room:  # one word longer than the column (a path): a line of its own,
                # moved left just enough to fit, else flush left (the terminal broke it mid-word)
                if i == 0:
                    out.append(label.rstrip())
                out.append(" " * max(0, min(label_width + len(GAP), width - len(line))) + line)
                continue
            out.append((head + GAP + line).rstrip())
    return "\n".join(out).replace(KEEP, " ")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> str:
    """Columns sized to their content; when the total exceeds ``width`` the widest columns give up
    room first and their cells wrap onto extra lines of the same row. The first column (a name)
    takes at most a third of the width: a longer one gets a line of its own, in full, and the rest
    of its row follows on the next line."""
    count = len(headers)
    first_cap = max(len(headers[0]), 12, width // 3)
    longest_word = [
        max([len(headers[i])] + [max((len(w) for w in str(r[i]).split()), default=0) for r in rows])
        for i in range(count)
    ]
    longest_word[0] = min(longest_word[0], first_cap)
    widths = [max([len(headers[i])] + [len(str(r[i])) for r in rows]) for i in range(count)]
    widths[0] = max(
        [len(headers[0])]
        + [  # a one-word cell longer than the cap goes on its own line instead
            len(c) if len(c) <= first_cap else (first_cap if " " in c else 0)
            for c in (str(r[0]) for r in rows)
        ]
    )
    budget = width - len(GAP) * (count - 1)
    for floor in (longest_word, [0] * count):
        # first keep every word whole on a line of its column; if that cannot fit, a column may
        # get narrower than its longest word (that word then sticks out alone on its own line)
        while sum(widths) > budget:
            shrinkable = [i for i in range(count) if widths[i] > max(floor[i], 8)]
            if not shrinkable:
                break
            widths[max(shrinkable, key=lambda i: widths[i])] -= 1
    lines = [GAP.join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        first = str(row[0])
        if len(first) > widths[0] and " " not in first:
            lines.append(first)  # a long name, whole, on its own line
            row = ["", *row[1:]]
        cells = [
            wrap(str(c), w, break_long=i > 0 and w < longest_word[i])
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        for k in range(max(len(c) for c in cells)):
            parts = [(c[k] if k < len(c) else "").ljust(w) for c, w in zip(cells, widths, strict=True)]
            lines.append(GAP.join(parts).rstrip())
    return "\n".join(lines).replace(KEEP, " ")
