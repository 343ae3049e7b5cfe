"""What the command prints on a terminal: logged text shown, never obeyed by the terminal.

Why: a session log holds text from models and tools, and a model repeats what it read. The
fourth red team logged ``ESC ] 0 ; title BEL`` and ``ESC [ 2 J``: ``log``, ``context`` and
``recall`` printed them raw, and showing a log retitled, cleared or rewrote the terminal.

What must hold: while standard output is a terminal, every control character (C0 but newline
and tab, DEL, C1), every bidirectional override or isolate (text that reads in another order than
it runs) and any lone surrogate reach it as a visible escape, ``\\u001b``, which is also how JSON
and Python spell it, so ``--json`` output stays valid JSON. Into a pipe or a file the text is
written exactly as logged. Standard error is left alone: the progress line writes its own escapes
there (``files/status_line.py``) and errors are the command's own words.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any, Final, TextIO

_SHOWN: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def visible_controls(text: str) -> str:
    """``text`` with each character a terminal would obey (not newline or tab) as ``\\uXXXX``."""
    return _SHOWN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class VisibleControls:
    """A text stream that writes ``visible_controls`` of what it is given to ``stream``; every
    other attribute (``flush``, ``isatty``, ``fileno``, ``encoding``) is ``stream``'s."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(visible_controls(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed, or not a real file
        return False


@contextlib.contextmanager
def shown_not_obeyed() -> Iterator[None]:
    """Inside: ``sys.stdout`` shows control characters when it is a terminal (see the module)."""
    stream = sys.stdout
    if isinstance(stream, VisibleControls) or not _is_terminal(stream):
        yield
        return
    sys.stdout = VisibleControls(stream)  # type: ignore[assignment]  # a TextIO in all but name
    try:
        yield
    finally:
        if isinstance(sys.stdout, VisibleControls) and sys.stdout.stream is stream:
            sys.stdout = stream


__all__ = ["VisibleControls", "shown_not_obeyed", "visible_controls"]
