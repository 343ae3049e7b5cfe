"""Which files cells open for reading and writing, and who ran the cell (feeds the compaction ledger).

Why: the compaction summary lists files read and modified, the way pi tracks its read/write/edit
tools. In a kernel, files are touched by arbitrary code (``open``, pandas, numpy), so we listen to
Python's ``open`` audit event, which every file open in the interpreter raises.

What must hold:
- Only opens made on the main thread while a cell runs are recorded (not the extension's own
  files, not the interpreter's imports, not subshell traffic).
- Each open is attributed to who ran the code: ``"agent"`` for an agent's tool call (a cell run
  inside an ``agent_turn()``, or every cell when ``cells_by="agent"`` — a kernel a host agent
  drives), ``"user"`` for a person's cell. The agent machinery between tool calls (the model
  client reading ``/etc/os-release``, certificates, …) is nobody's file activity: it is paused.
- The hook is installed once per process (audit hooks cannot be removed); when the extension is
  unloaded it becomes inert. It never raises and does only a few dict operations per event.
- Paths under the interpreter's prefixes, ``/proc``, ``/dev`` and our data directory are ignored,
  and so are the places libraries read on their own (``MACHINERY``: system configuration, shared
  data such as time zones and certificates, per-user caches and settings). A path a cell names
  literally still reaches the ledger through its code (``core.ledger.code_file_ops``).
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


USER = "user"
AGENT = "agent"


#: Where libraries open files nobody asked for: ``/etc/os-release`` (the model client's platform
#: headers), ``/usr/share/zoneinfo`` (pandas), certificates, fonts, per-user caches and settings.
MACHINERY: tuple[str, ...] = (
    "/etc",
    "/usr",
    "/lib",
    "/lib64",
    "/var/lib",
    "/var/cache",
    "/run",
    "/snap",
    *(
        os.path.join(os.path.expanduser("~"), d)
        for d in (".cache", ".config", ".ipython", ".jupyter", ".matplotlib", ".keras", ".nv")
    ),
)


class FileOpsRecorder:
    """Collects ``(path, read|write)`` per actor while a cell runs; ``take()`` hands them over once."""

    def __init__(self, ignore_prefixes: tuple[str, ...] = (), *, cells_by: str = USER) -> None:
        prefixes = {
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            "/proc",
            "/dev",
            "/sys",
            *MACHINERY,
            *ignore_prefixes,
        }
        self.ignore = tuple(os.path.join(os.path.abspath(p), "") for p in prefixes if p)
        self.in_cell = False
        self.cells_by = cells_by
        self.actor = cells_by
        self.in_agent_turn = False
        self.read: dict[str, dict[str, None]] = {}
        self.written: dict[str, dict[str, None]] = {}
        self._lock = threading.Lock()

    def begin_cell(self) -> None:
        """A cell starts: inside an agent turn it is the agent's tool call, else ``cells_by``'s."""
        self.actor = AGENT if self.in_agent_turn else self.cells_by
        self.in_cell = True

    def end_cell(self) -> None:
        """A cell ended; inside an agent turn, recording pauses again until the next tool call."""
        self.in_cell = False
        self.actor = self.cells_by

    @contextlib.contextmanager
    def agent_turn(self) -> Iterator[None]:
        """An agent turn runs inside this (a ``%%agent`` cell): only its tool calls are recorded,
        as the agent's; the turn's own machinery is not."""
        previous = (self.in_cell, self.in_agent_turn, self.actor)
        self.in_cell, self.in_agent_turn = False, True
        try:
            yield
        finally:
            self.in_cell, self.in_agent_turn, self.actor = previous

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
            mode is None and isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
        )
        with self._lock:
            (self.written if write else self.read).setdefault(self.actor, {})[full] = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The extension's own work inside a cell (``%compact export FILE``) is not the user's file
        activity."""
        previous = self.in_cell
        self.in_cell = False
        try:
            yield
        finally:
            self.in_cell = previous

    def take(self) -> dict[str, tuple[list[str], list[str]]]:
        """``{actor: (read, modified)}`` since the last take; a file both read and written by the same
        actor counts as modified."""
        with self._lock:
            taken = {
                actor: (
                    [p for p in self.read.get(actor, {}) if p not in self.written.get(actor, {})],
                    list(self.written.get(actor, {})),
                )
                for actor in {*self.read, *self.written}
            }
            self.read, self.written = {}, {}
        return {actor: ops for actor, ops in taken.items() if ops[0] or ops[1]}


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
