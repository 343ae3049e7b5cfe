"""``show`` and ``recall`` on an 80-column terminal wrap long lines at words; a pipe gets them whole
(issue 35, item 4).

Why: a compaction's summary paragraph and a recalled entry's text were printed as one line each,
and the terminal broke them mid-word ("a / nd"); ``log``, ``sessions`` and ``verify`` already fit
the terminal. Real parts: the console script on a real pseudo-terminal of 80 columns (its size set
with ``TIOCSWINSZ``, no ``$COLUMNS``), or a pipe, over a real SQLite file.
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
PARAGRAPH = (
    "The user asked for the quarterly figures to be reconciled against the ledger export, and the "
    "agent found that the March totals differ by 1,204.50 because two refunds were booked twice; "
    "the corrected table lives in reconciled_q1.csv and the duplicate rows are listed in "
    "duplicates.csv for the accountant to confirm before anything is posted."
)
SUMMARY = f"## Goal\nReconcile the quarter.\n\n## Progress\n- {PARAGRAPH}\n\n{PARAGRAPH}"
LONG_WORD = "/data/exports/" + "x" * 90 + ".csv"


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "log.db"
    with SessionStore(path) as store:
        store.create_session("s")
        first = store.append("s", "message", {"message": {"role": "user", "content": "hello"}})
        entry = store.append(
            "s", "message", {"message": {"role": "user", "content": f"{PARAGRAPH}\nsee {LONG_WORD} too"}}
        )
        store.append("s", "message", {"message": {"role": "assistant", "content": "done"}})
        store.append(
            "s",
            "compaction",
            {
                "summary": SUMMARY,
                "first_kept_entry_id": first.id,
                "tokens_before": 900,
                "reason": "manual",
                "details": {"tokens_after": 300},
            },
        )
    return path, entry.id


def on_terminal(*args: str, columns: int = 80) -> str:
    """Standard output as a terminal of ``columns`` receives it (CR LF turned back into LF)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}  # the pty's size decides
    return command_on_a_terminal([str(SCRIPT), *args], env, columns=columns)


def into_pipe(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, timeout=60, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode("utf-8")


def _words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize("command", ["show", "recall"])
def test_on_an_80_column_terminal_no_line_runs_past_the_edge(db: tuple[Path, str], command: str) -> None:
    path, entry_id = db
    args = ["--db", str(path), command, *(["-s", "s"] if command == "show" else [entry_id])]
    shown = on_terminal(*args)
    long = [line for line in shown.splitlines() if len(line) > 80 and LONG_WORD not in line]
    assert long == [], shown
    # wrapped at words: every word of the paragraph is whole, in order
    assert " ".join(_words(shown)).count(" ".join(_words(PARAGRAPH))) >= 1, shown
    if command == "show":  # a list item's continuation hangs under its text
        item = next(i for i, line in enumerate(shown.splitlines()) if line.startswith("- The user asked"))
        assert shown.splitlines()[item + 1].startswith("  ") and not shown.splitlines()[item + 1].startswith(
            "   "
        )
    else:  # a word longer than the line (a path) stays whole on its own line
        assert any(line.strip() == LONG_WORD for line in shown.splitlines()), shown


@pytest.mark.parametrize("command", ["show", "recall"])
def test_into_a_pipe_the_text_is_whole(db: tuple[Path, str], command: str) -> None:
    path, entry_id = db
    args = ["--db", str(path), command, *(["-s", "s"] if command == "show" else [entry_id])]
    piped = into_pipe(*args)
    assert PARAGRAPH in piped
    if command == "show":
        assert SUMMARY in piped
    else:
        assert f"{PARAGRAPH}\nsee {LONG_WORD} too" in piped


def test_the_demo_fits_an_80_column_terminal(tmp_path: Path) -> None:
    """`make demo` is the first thing a newcomer runs: its result lines, the checkpoint and the
    suggested commands ran to 237 columns and the terminal broke them mid-word."""
    data = tmp_path / "data"
    data.mkdir()
    shown = on_terminal("--db", str(data / "sessions.db"), "demo", "--compactions", "1")
    assert "[1] compacted:" in shown and "hash chain intact" in shown, shown[-2000:]
    long = [line for line in shown.splitlines() if len(line) > 80 and len(line.split()) > 1]
    assert long == [], "\n".join(long)
    piped = into_pipe("--db", str(tmp_path / "piped.db"), "demo", "--compactions", "1")
    assert any(len(line) > 80 for line in piped.splitlines())  # a pipe gets every line whole
