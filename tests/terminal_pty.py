"""Terminal IPython on a real pseudo-terminal of a given size (issue 35): output that goes to a
terminal is laid out for its width, so a pipe cannot show it; a pty can, without tmux."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def ipython_on_a_terminal(script: str, columns: int, data_dir: Path, *, timeout: float = 180) -> str:
    """Run ``script`` (one line per input) in terminal IPython whose stdin/stdout is a pty of
    ``columns`` x 50; returns everything it printed, escapes and carriage returns removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ECHO  # the script is not echoed: only what IPython prints is read back
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}  # the pty's size decides
    env.update(
        {
            "IPYTHON_COMPACT_DIR": str(data_dir),
            "IPYTHON_COMPACT_SESSION": "terminal",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "TERM": "dumb",
        }
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "IPython", "--simple-prompt", "--colors=NoColor", "--no-banner"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=data_dir,
        close_fds=True,
    )
    os.close(slave)
    os.write(master, (script + "exit\n").encode())
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout  # a guard against a hung child, not a synchronization
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if child.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        if child.poll() is None:
            child.kill()
        child.wait(timeout=30)
    return _ESCAPES.sub("", b"".join(chunks).decode("utf-8", "replace"))


def too_wide(text: str, columns: int) -> list[str]:
    """Printed lines wider than ``columns`` (prompts removed: ``In [n]:``, and a cell's
    continuation prompts ``...:``, which the unechoed script leaves in front of the first line of
    output), except a line that is one long word (a path is never cut; it sticks out alone on its
    line)."""
    lines = [re.sub(r"^(In \[\d+\]: |\s*\.\.\.: )+", "", line) for line in text.split("\n")]
    return [line for line in lines if len(line) > columns and len(line.split()) > 1]


def command_on_a_terminal(command: list[str], env: dict[str, str], *, columns: int | None = None) -> str:
    """Standard output of ``command`` as a terminal receives it (a pty of ``columns``, or the pty's
    default size; output newlines become CR LF on a pty and are turned back, so a CR of the text's
    own would still show). The command must exit 0 within 60 s."""
    master, slave = pty.openpty()
    if columns is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the command closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")
