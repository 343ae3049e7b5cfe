"""The console command ends its process without tearing the interpreter down (``cli.console``):
what a normal exit guarantees must still hold. Real subprocesses of the installed script, real
SQLite files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ipython_compact.store import SessionStore
from ipython_compact.store.exporters import export_lines
from ipython_compact.store.importers import import_file

BEFORE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
SCRIPT = Path(sys.executable).parent / "ipython-compact"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "s.db"
    store = SessionStore(path)
    import_file(store, BEFORE, session="s")
    store.close()
    return path


def test_the_console_script_is_the_fast_exit() -> None:
    """The script pip generates calls ``console`` (else the gain and the checks below are moot)."""
    assert "from ipython_compact.cli import console" in SCRIPT.read_text(encoding="utf-8")


def test_all_output_reaches_a_pipe_and_the_code_is_kept(db: Path) -> None:
    """stdout is a pipe (block-buffered): every byte of a large export must be flushed before the
    process ends; an error keeps exit code 2 and its whole message."""
    done = subprocess.run(
        [str(SCRIPT), "export", "-s", "s", "--db", str(db)], capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    store = SessionStore(db)
    try:
        expected = "".join(line + "\n" for line in export_lines(store, "s")).encode()
    finally:
        store.close()
    assert len(expected) > 1_000_000
    assert done.stdout == expected
    failed = subprocess.run(
        [str(SCRIPT), "log", "-s", "nope", "--db", str(db)], capture_output=True, text=True, timeout=120
    )
    assert failed.returncode == 2
    assert failed.stderr.startswith("ipython-compact: error: ")
    assert failed.stderr.rstrip().splitlines()[-1].startswith("  try: ")


def test_a_pipe_closed_early_ends_quietly(db: Path) -> None:
    """``ipython-compact export | head -c 100``: no traceback when the reader goes away."""
    reader = subprocess.Popen(["head", "-c", "100"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert reader.stdin is not None
    writer = subprocess.run(
        [str(SCRIPT), "export", "-s", "s", "--db", str(db)],
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    reader.stdin.close()
    reader.wait(timeout=60)
    assert "Traceback" not in writer.stderr
    assert writer.returncode in (0, 2)


def test_threads_are_joined_and_exit_handlers_run(db: Path, tmp_path: Path) -> None:
    """What a normal exit does before the interpreter is torn down still happens: a non-daemon
    thread finishes its work, then exit handlers run (a temporary folder's cleanup, logging's
    flush), in that order."""
    marks = tmp_path / "marks"
    code = (
        "import atexit, sys, threading, time\n"
        f"marks = {str(marks)!r}\n"
        "def late():\n"
        "    time.sleep(0.5)  # still running when the command returns\n"
        "    open(marks, 'a').write('thread\\n')\n"
        "threading.Thread(target=late).start()\n"
        "atexit.register(lambda: open(marks, 'a').write('atexit\\n'))\n"
        "from ipython_compact.cli import console\n"
        f"sys.argv = ['ipython-compact', 'sessions', '--db', {str(db)!r}]\n"
        "console()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "s " in done.stdout
    assert marks.read_text().splitlines() == ["thread", "atexit"]
