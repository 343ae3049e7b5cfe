"""Who owns a row that stands for work in progress: host, process id and process start time.

Why: a live compaction (``live_compactions``), an inbox item handed out at a turn boundary and
an import spread over several transactions are each recorded by one process and finished by the
same process. When that process is killed, nobody finishes them; a later process must be able to
tell "still running" from "its owner is gone" without guessing from timestamps.

What must hold:
- ``ended`` is True only when we know: the owner is on this host and its pid is not running, or
  the pid now belongs to a process that started at another time (the pid was reused).
- An owner on another host, or one recorded without a pid, is never judged ended here (that
  process may be alive; only its own host can tell).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any


def _hostname() -> str:
    """``socket.gethostname()``, which is the kernel's node name where ``os.uname`` exists (so
    the socket module, 4 ms of every command's start-up, is imported only elsewhere)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket  # optional: only where os.uname is missing (Windows)

    return socket.gethostname()


@dataclass(frozen=True)
class Owner:
    """A process: ``started`` is its start time as the OS reports it (Linux: clock ticks since
    boot, from ``/proc/PID/stat``; None where that cannot be read)."""

    host: str
    pid: int
    started: str | None

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "pid": self.pid, "started": self.started}

    @staticmethod
    def from_json(obj: Any) -> Owner | None:
        """The owner recorded in ``obj`` (None when ``obj`` records none, or not in this shape)."""
        if (
            not isinstance(obj, dict)
            or not isinstance(obj.get("host"), str)
            or type(obj.get("pid")) is not int
        ):
            return None
        started = obj.get("started")
        return Owner(obj["host"], obj["pid"], started if isinstance(started, str) else None)

    def describe(self) -> str:
        return f"process {self.pid} on {self.host.split('/')[0]}"  # the PID namespace is for matching only


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (None: no such process, or no
    ``/proc``). Field 2, the command name, is in parentheses and may hold spaces, so the split
    starts after its last ')': index 0 is then the state, index 19 the start time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (None: not running, or unknown on this system)."""
    fields = _stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def host_id() -> str:
    """This machine as process ids see it: the host name, plus the PID namespace when it can be
    read. Two containers often share a host name while their pids mean different processes; a
    live compaction owned by another namespace was once settled as abandoned because its pid was
    not running here."""
    host = _hostname()
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return host
    return f"{host}/{namespace}"


def current() -> Owner:
    """This process."""
    return Owner(host_id(), os.getpid(), start_time(os.getpid()))


def writer_label() -> str:
    """Who writes entries from this process, as recorded with each entry: the role (``kernel``
    inside an IPython kernel, else the program's name), the pid and the host. Kernel code runs as
    the user and can write anything; recording the writer makes what it wrote distinguishable."""
    return f"{_role()} pid {os.getpid()} on {_hostname()}"


def _role() -> str:
    app = sys.modules.get("ipykernel.kernelapp")
    try:
        if app is not None and app.IPKernelApp.initialized():
            return "kernel"
    except Exception:  # pragma: no cover - a broken ipykernel is not a kernel
        pass
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name or "python"


def pid_running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, belongs to another user
        return True
    except OSError:
        return False
    fields = _stat_fields(pid)
    # A zombie (killed, not yet reaped by its parent) has ended: it runs no code.
    return fields is None or fields[:1] != ["Z"]


def ended(owner: Owner, *, host: str | None = None) -> bool:
    """True when ``owner`` has certainly ended (see the module rules); False when it runs or
    when this process cannot tell."""
    if owner.host != (host if host is not None else host_id()):
        return False  # another machine, or another PID namespace on a machine of the same name
    if not pid_running(owner.pid):
        return True
    if owner.started is None:
        return False
    now = start_time(owner.pid)
    return now is not None and now != owner.started
