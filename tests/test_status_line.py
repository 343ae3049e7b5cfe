"""A long import shows one progress line on a terminal's stderr, and nothing anywhere else.

Found by hand: importing a 244 MB pi session took 8–15 s with nothing on the screen. The line
is written only to a terminal (a real pseudo-terminal here), rewritten in place, and cleared
before the result, so piped and scripted output is byte for byte what it was.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from builders import write_pi_chain

from ipython_compact.files.status_line import StatusLine

SCRIPT = Path(sys.executable).parent / "ipython-compact"


def _read_all(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other side closed (Linux: EIO)
            return out
        if not chunk:
            return out
        out += chunk


def test_an_import_on_a_terminal_shows_its_progress_then_only_the_result(tmp_path: Path) -> None:
    source = write_pi_chain(tmp_path / "long.jsonl", 4500)
    master, slave = os.openpty()
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [str(SCRIPT), "import", str(source), "-s", "long"],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        timeout=120,
        check=True,
    )
    os.close(slave)
    shown = _read_all(master).decode()
    os.close(master)
    assert done.stdout.decode() == "imported 4,500 entries (pi) into new session 'long'; leaf 00001193\n"
    assert "reading long.jsonl …" in shown  # its name, not the whole path; under 1 MB: no size
    assert "importing long.jsonl: 4,500 of 4,500 entries stored" in shown
    assert shown.endswith("\r\x1b[K")  # cleared: the terminal is left as it was


def test_an_import_through_pipes_writes_no_progress(tmp_path: Path) -> None:
    source = write_pi_chain(tmp_path / "long.jsonl", 2500)
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [str(SCRIPT), "import", str(source), "-s", "long", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert done.stderr == ""
    assert json.loads(done.stdout)["imported"] == 2500


def test_the_line_is_rewritten_at_most_ten_times_a_second_and_always_at_the_end() -> None:
    master, slave = os.openpty()
    now = [100.0]
    with open(slave, "w", encoding="utf-8", closefd=True) as terminal:
        line = StatusLine(terminal, clock=lambda: now[0])
        assert line.active
        line.show("one")
        now[0] += 0.09
        line.show("two")  # within 0.1 s of "one": skipped
        now[0] += 0.02
        line.show("three")  # 0.11 s after "one"
        line.show("four", final=True)  # at once, but the last figure
        line.clear()
        line.clear()  # nothing shown: nothing written
    shown = _read_all(master).decode()
    os.close(master)
    assert shown == "\r\x1b[Kone\r\x1b[Kthree\r\x1b[Kfour\r\x1b[K"


def test_nothing_is_written_to_a_stream_that_is_not_a_terminal() -> None:
    stream = io.StringIO()
    line = StatusLine(stream)
    line.show("x", final=True)
    line.clear()
    assert not line.active and stream.getvalue() == ""


def test_a_name_with_a_newline_escape_or_bad_byte_stays_on_one_line() -> None:
    master, slave = os.openpty()
    with open(slave, "w", encoding="utf-8", closefd=True) as terminal:
        StatusLine(terminal).show("reading we\udcffird\nname\x1b[2J.jsonl", final=True)
    shown = _read_all(master).decode()
    os.close(master)
    assert shown == "\r\x1b[Kreading we?ird?name?[2J.jsonl"
