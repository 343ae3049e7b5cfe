"""Which files the user's cells open for reading and writing (feeds the compaction ledger).

Why: the compaction summary lists files read and modified, the way pi tracks its read/write/edit
tools. In a kernel, files are touched by arbitrary code (``open``, pandas, numpy), so we listen to
Python's ``open`` audit event, which every file open in the interpreter raises.

What must hold:
- Only opens made on the main thread while a user cell runs are recorded (not the extension's own
  files, not the interpreter's imports, not subshell traffic).
- The hook is installed once per process (audit hooks cannot be removed); when the extension is
  unloaded it becomes inert. It never raises and does only a few dict operations per event.
- Paths under the interpreter's prefixes, ``/proc``, ``/dev`` and our data directory are ignored.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

_installed = False
_active: FileOpsRecorder | None = None
_MAIN = threading.main_thread()
_CODE_SUFFIXES = (".py", ".pyc", ".so", ".pth", ".pyd")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


class FileOpsRecorder:
    """Collects ``(path, read|write)`` while a cell runs; ``take()`` hands them over once."""

    def __init__(self, ignore_prefixes: tuple[str, ...] = ()) -> None:
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/proc", "/dev", "/sys", *ignore_prefixes}
        self.ignore = tuple(os.path.join(os.path.abspath(p), "") for p in prefixes if p)
        self.in_cell = False
        self.read: dict[str, None] = {}
        self.written: dict[str, None] = {}
        self._lock = threading.Lock()

    def record(self, path: Any, mode: Any, flags: Any) -> None:
        if not self.in_cell or threading.current_thread() is not _MAIN:
            return
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str) or not path:
            return
        full = os.path.abspath(path)
        if full.startswith(self.ignore) or full.endswith(_CODE_SUFFIXES):
            return  # interpreter files and module imports (``io.open_code`` raises the same event)
        write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            mode is None and isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
        with self._lock:
            (self.written if write else self.read)[full] = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The extension's own work inside a cell (``%compact export FILE``) is not the user's file activity."""
        previous = self.in_cell
        self.in_cell = False
        try:
            yield
        finally:
            self.in_cell = previous

    def take(self) -> tuple[list[str], list[str]]:
        """``(read, modified)`` since the last take; a file both read and written counts as modified."""
        with self._lock:
            written = list(self.written)
            read = [p for p in self.read if p not in self.written]
            self.read, self.written = {}, {}
        return read, written


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "open":
        return
    rec = _active
    if rec is None:
        return
    with contextlib.suppress(Exception):  # an audit hook must never break the code that opened the file
        rec.record(args[0], args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else None)


def activate(recorder: FileOpsRecorder) -> None:
    global _installed, _active
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    _active = recorder


def deactivate() -> None:
    global _active
    _active = None
