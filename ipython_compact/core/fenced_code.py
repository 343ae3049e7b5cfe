"""The code blocks a model wrote in its reply text, for models that do not call tools.

Why: many models, small local ones above all, answer "use Python to compute ..." with a fenced
```` ```python ```` block in the text and no tool call. rlms' protocol is exactly that (code blocks
in the reply, tagged ``repl``) and works with any model. The agent runs such blocks as it would a
tool call; this module only finds them.

What must hold:
- A block is a CommonMark-style fence: a line that starts (after at most three spaces) with three
  or more backticks or tildes and an info string whose first word is one of ``LANGUAGES``; it ends
  at a line holding only the same character, at least as many times. Blocks are returned in the
  order they appear, their code without the fences, with the fence's indentation removed.
- An unclosed block is returned only with ``open_end`` (the reply ended on its own, ``stop``:
  small models often leave the last fence open); a reply cut by the length limit keeps it out —
  half a program is not run.
- Blocks in other languages (``text``, ``bash``, none) are not code to run.
- Pure: standard library only, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["LANGUAGES", "FencedBlock", "fenced_code_blocks"]

#: Info-string words whose blocks run in the kernel (rlms writes ``repl``).
LANGUAGES: Final = frozenset({"python", "py", "python3", "repl", "ipython"})

_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$")


@dataclass(frozen=True)
class FencedBlock:
    """One runnable block: its code and the info word it was tagged with."""

    code: str
    language: str


def fenced_code_blocks(text: str, *, open_end: bool = False) -> list[FencedBlock]:
    """The runnable fenced blocks of ``text``, in order; ``open_end``: a last block left open counts
    (see the module docstring)."""
    blocks: list[FencedBlock] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if opened is None:
            i += 1
            continue
        indent, fence, info = len(opened.group(1)), opened.group(2), opened.group(3).lower()
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and closing.match(lines[j]) is None:
            body.append(lines[j])
            j += 1
        if j >= len(lines) and not open_end:  # never closed: cut off, not run
            break
        if info in LANGUAGES:
            code = "\n".join(_dedent(line, indent) for line in body).strip("\n")
            if code.strip():
                blocks.append(FencedBlock(code, info))
        i = j + 1
    return blocks


def _dedent(line: str, indent: int) -> str:
    """``line`` without up to ``indent`` leading spaces (the fence's own indentation)."""
    removed = len(line) - len(line.lstrip(" "))
    return line[min(removed, indent) :]
