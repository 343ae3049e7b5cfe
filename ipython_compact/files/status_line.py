"""One line of progress on a terminal, for a command that runs for seconds (an import of a long
session: 244 MB took 8–15 s here, with nothing on the screen). Shared by the CLI and terminal
IPython's ``%compact import``, which never import each other: a terminal is one more file.

What must hold: nothing at all is written unless the stream is a terminal, so pipes, scripts,
CI logs and ``--json`` output stay exactly as they were. On a terminal the line is rewritten in
place at most ten times a second (the last figure always), one line never wider than the
terminal (characters that are not printable, such as a newline in a file name, shown as ``?``), and
cleared before the command prints its own result, so the result reads as it did without it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

_EVERY = 0.1
"""Seconds between two rewrites of the line (the final one is always written)."""


def printable(text: str) -> str:
    """``text`` on one line: characters that are not printable (a newline or a terminal escape
    in a file's name, a lone surrogate) as ``?``."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def reading_text(name: str, size: int) -> str:
    """What an import says while it reads ``name`` (``size`` bytes; 0: unknown, stdin)."""
    return f"reading {printable(name)}{f' ({size / 1e6:,.1f} MB)' if size >= 1e6 else ''} …"


def stored_text(name: str, written: int, total: int) -> str:
    """What an import says after each batch it stored."""
    return f"importing {printable(name)}: {written:,} of {total:,} entries stored"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed, or not a real file
        return False


class StatusLine:
    """The progress line on ``stream`` (default: standard error)."""

    def __init__(self, stream: TextIO | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        chosen = sys.stderr if stream is None else stream
        self._stream: TextIO | None = chosen if _is_terminal(chosen) else None
        self._last = -_EVERY
        self._shown = False

    @property
    def active(self) -> bool:
        """Whether anything will be shown (the stream is a terminal)."""
        return self._stream is not None

    def show(self, text: str, *, final: bool = False) -> None:
        """Replace the line with ``text`` (skipped when the last rewrite was under 0.1 s ago,
        unless ``final``)."""
        if self._stream is None:
            return
        now = self._clock()
        if not final and now - self._last < _EVERY:
            return
        self._last = now
        try:
            width = os.get_terminal_size(self._stream.fileno()).columns
        except (OSError, ValueError):
            width = 0
        if width < 20:  # unknown (a terminal nobody sized says 0) or too narrow to mean anything
            width = 80
        # One line, whatever the text holds: a newline or a terminal escape in a file's name
        # would break the line apart or drive the terminal; a lone surrogate could not be written.
        self._write("\r\x1b[K" + printable(text)[: max(1, width - 1)])
        self._shown = True

    def clear(self) -> None:
        """Remove the line, leaving the cursor where the command's own output starts."""
        if self._stream is not None and self._shown:
            self._write("\r\x1b[K")
            self._shown = False

    def _write(self, text: str) -> None:
        stream = self._stream
        if stream is None:
            return
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):  # the terminal went away: the command goes on without it
            self._stream = None


__all__ = ["StatusLine", "printable", "reading_text", "stored_text"]
