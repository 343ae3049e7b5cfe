"""Logged text with terminal escapes, printed by the real ``ipython-compact`` command: on a
terminal every control character but newline and tab is shown as an escape (``\\u001b``); into a
pipe or a file the text is exact.

Why: the fourth red team logged ``ESC ] 0 ; title BEL`` and ``ESC [ 2 J`` in a message (a model
repeats what it read, a tool prints what it likes): ``log``, ``context`` and ``recall`` sent them
raw, so showing a log retitled, cleared or rewrote the user's terminal.

Real parts: the console script in a subprocess, on a real pseudo-terminal (``pty``) or a pipe,
over a real SQLite file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from terminal_pty import command_on_a_terminal

from ipython_compact.store import SessionStore

SCRIPT = Path(sys.executable).parent / "ipython-compact"
HOSTILE = "title\x1b]0;pwned\x07 clear\x1b[2J c1\x9b31m cr\rback bidi\u202eevil del\x7f tab\tkept"
SHOWN = (
    "title\\u001b]0;pwned\\u0007 clear\\u001b[2J c1\\u009b31m cr\\u000dback bidi\\u202eevil del\\u007f "
    "tab\tkept"
)
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e", "\x7f")


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "log.db"
    with SessionStore(path) as store:
        store.create_session("s")
        store.append("s", "message", {"message": {"role": "user", "content": "hello"}})
        entry = store.append("s", "message", {"message": {"role": "user", "content": HOSTILE}})
    return path, entry.id


def on_terminal(*args: str) -> str:
    """The command's standard output as a terminal receives it (output newlines become CR LF on a
    pty; they are turned back so a CR of the text's own would show)."""
    return command_on_a_terminal([str(SCRIPT), *args], {**os.environ, "COLUMNS": "200"})


def into_pipe(*args: str) -> str:
    """The command's standard output as bytes, decoded (no newline translation: a CR stays a CR)."""
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode("utf-8")


@pytest.mark.parametrize("command", ["context", "recall"])
def test_a_terminal_sees_escapes_and_a_pipe_the_exact_text(db: tuple[Path, str], command: str) -> None:
    path, entry_id = db
    args = ["--db", str(path), command] + (["-s", "s"] if command == "context" else [entry_id])
    shown = on_terminal(*args)
    assert SHOWN in shown, shown
    assert [c for c in RAW if c in shown] == []
    assert HOSTILE in into_pipe(*args)


def test_the_log_listing_on_a_terminal_sends_no_control_character(db: tuple[Path, str]) -> None:
    path, _ = db
    shown = on_terminal("--db", str(path), "log", "-s", "s")
    assert "title\\u001b]0;pwned\\u0007" in shown, shown
    assert [c for c in RAW if c in shown] == []
    assert "title\x1b]0;pwned\x07" in into_pipe("--db", str(path), "log", "-s", "s")


def test_json_on_a_terminal_stays_valid_json(db: tuple[Path, str]) -> None:
    import json

    path, entry_id = db
    shown = on_terminal("--db", str(path), "recall", entry_id, "--json")
    assert [c for c in RAW if c in shown] == []
    assert json.loads(shown)[0]["text"] == HOSTILE  # the escapes are JSON's own
