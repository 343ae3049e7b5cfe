"""What ``%compact import`` shows while a long import runs (a 244 MB pi session takes 8–15 s on
a 2-core machine, the cell showing nothing meanwhile).

What must hold:
- A short import shows nothing: the line appears only for a file of ``SHOWN_FROM`` bytes or
  more, or once the store reports that batches remain.
- In terminal IPython (standard error is a terminal) it is the CLI's one rewritten line
  (``files.status_line.StatusLine``), cleared at the end; in a Jupyter kernel, one display in the
  cell updated in place (at most four times a second) that ends saying how long the import took
  (the result table does not), or empty when the import failed (the error follows).
- Nothing here can fail the import: a display that cannot be sent is given up on.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ipython_compact.files.status_line import StatusLine, printable, reading_text, stored_text

SHOWN_FROM = 8_000_000
"""Bytes of a file from which "reading FILE" is shown (smaller ones are read in well under a second)."""
_EVERY = 0.25


class ImportProgress:
    """The progress of one import of ``source`` into the cell or the terminal."""

    def __init__(self, source: Path, *, in_kernel: bool) -> None:
        self._name = source.name
        self._line = StatusLine()
        self._in_kernel = in_kernel and not self._line.active
        self._handle: Any = None
        self._last = -_EVERY
        self._started = time.monotonic()
        self._total = 0
        try:
            self._size = source.stat().st_size
        except OSError:
            self._size = 0

    def reading(self) -> None:
        """Say the file is being read, when it is big enough for that to take a while."""
        if self._size >= SHOWN_FROM:
            self._show(reading_text(self._name, self._size), final=True)

    def stored(self, written: int, total: int) -> None:
        """``EntryLog.import_batched``'s progress: ``written`` of ``total`` entries committed."""
        self._total = total
        if written >= total and self._handle is None and not self._line_shown():
            return  # one batch, done at once: nothing to show
        self._show(stored_text(self._name, written, total), final=written >= total)

    def done(self, *, ok: bool) -> None:
        """Take the line away; the display says how long it took (``ok``) or empties (an error
        follows)."""
        self._line.clear()
        if self._handle is not None:
            took = time.monotonic() - self._started
            name = printable(self._name)
            self._update(f"{name}: {self._total:,} entries imported in {took:.1f} s" if ok else "")

    def _line_shown(self) -> bool:
        return self._line.active and self._size >= SHOWN_FROM

    def _show(self, text: str, *, final: bool) -> None:
        if self._line.active:
            self._line.show(text, final=final)
            return
        if not self._in_kernel:
            return
        now = time.monotonic()
        if not final and now - self._last < _EVERY:
            return
        self._last = now
        if self._handle is None:
            try:
                # start-up: IPython's display module is needed only when an import shows progress
                from IPython.display import display

                self._handle = display({"text/plain": text}, raw=True, display_id=True)  # type: ignore[no-untyped-call]
            except Exception:  # no display to send to: the import goes on without one
                self._in_kernel = False
            return
        self._update(text)

    def _update(self, text: str) -> None:
        try:
            self._handle.update({"text/plain": text}, raw=True)
        except Exception:  # the display went away: give up on it, never on the import
            self._in_kernel = False
            self._handle = None


__all__ = ["SHOWN_FROM", "ImportProgress"]
