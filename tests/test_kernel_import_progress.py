"""``%compact import`` in a real kernel: a long import shows one display that counts the stored
entries and ends saying how long it took (emptied when the import fails, the error follows),
and a short one shows nothing but its result; in terminal IPython (standard error a terminal)
the same line the CLI writes, cleared at the end."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import pytest
from builders import write_pi_chain
from kernel_fixtures import running_kernel

from ipython_compact.kernel.import_progress import SHOWN_FROM, ImportProgress

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"


def _messages(km: Any, code: str) -> list[tuple[str, str, str]]:
    """(message type, display id, text/plain) of every display the cell sends, in order."""
    seen: list[tuple[str, str, str]] = []

    def hook(msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind in ("display_data", "update_display_data", "execute_result"):
            display_id = (content.get("transient") or {}).get("display_id") or ""
            seen.append((kind, display_id, content["data"].get("text/plain", "")))

    kc = km.client()
    kc.start_channels()
    try:
        reply = kc.execute_interactive(code, timeout=120, output_hook=hook)
    finally:
        kc.stop_channels()
    assert reply["content"]["status"] == "ok", reply["content"]
    return seen


def test_a_long_import_counts_in_one_display_then_leaves_only_the_result(tmp_path: Path) -> None:
    source = write_pi_chain(tmp_path / "long.jsonl", 4500)
    with running_kernel(tmp_path / "data") as km:
        seen = _messages(km, f"%load_ext ipython_compact\n%compact import {source}")
    shown = [m for m in seen if m[1]]
    first = "importing long.jsonl: 2,000 of 4,500 entries stored"
    assert shown[0] == ("display_data", shown[0][1], first)
    assert {m[1] for m in shown} == {shown[0][1]}  # one display, updated in place
    assert (
        "update_display_data",
        shown[0][1],
        "importing long.jsonl: 4,500 of 4,500 entries stored",
    ) in shown
    kind, display_id, text = shown[-1]
    assert (kind, display_id) == ("update_display_data", shown[0][1])
    assert re.fullmatch(r"long\.jsonl: 4,500 entries imported in \d+\.\d s", text), text
    result = [m for m in seen if m[0] == "execute_result"]
    assert len(result) == 1 and "imported  4,500" in result[0][2]


def test_a_long_import_that_fails_empties_its_display_and_says_why(tmp_path: Path) -> None:
    """The same file twice: the second import refuses the duplicates after reading it, so the
    display it opened while reading (the file is made big enough) is emptied before the error."""
    source = write_pi_chain(tmp_path / "long.jsonl", 4500, pad=SHOWN_FROM // 4500 + 1)
    with running_kernel(tmp_path / "data") as km:
        _messages(km, f"%load_ext ipython_compact\n%compact import {source}")
        kc = km.client()
        kc.start_channels()
        seen: list[tuple[str, str]] = []
        try:
            reply = kc.execute_interactive(
                f"%compact import {source}",
                timeout=120,
                output_hook=lambda msg: seen.append(
                    (msg["msg_type"], str(msg["content"].get("data", {}).get("text/plain", "")))
                ),
            )
        finally:
            kc.stop_channels()
    assert reply["content"]["status"] == "error" and "already in session" in reply["content"]["evalue"]
    shown = [m for m in seen if m[0] in ("display_data", "update_display_data")]
    assert shown[0][1].startswith("reading long.jsonl (") and shown[-1] == ("update_display_data", "")


def test_a_short_import_shows_only_its_result(tmp_path: Path) -> None:
    with running_kernel(tmp_path / "data") as km:
        seen = _messages(km, f"%load_ext ipython_compact\n%compact import {FIXTURE}")
    assert [m[0] for m in seen] == ["execute_result"]
    assert "imported  1,002" in seen[0][2]


def test_in_a_terminal_the_line_is_the_clis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Terminal IPython: standard error is a terminal, and the progress is the CLI's line there
    ("reading" only for a file of ``SHOWN_FROM`` bytes or more)."""
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:
        f.truncate(SHOWN_FROM)
    master, slave = os.openpty()
    with open(slave, "w", encoding="utf-8", closefd=True) as terminal:
        monkeypatch.setattr("sys.stderr", terminal)
        progress = ImportProgress(big, in_kernel=False)
        progress.reading()
        progress.stored(4500, 4500)
        progress.done(ok=True)
    # one read may return part of what was written (seen at load ~10): read until the pty is drained
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal side is closed and everything was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    shown = b"".join(chunks).decode()
    os.close(master)
    reading = "\r\x1b[Kreading big.jsonl (8.0 MB) …"
    assert shown == reading + "\r\x1b[Kimporting big.jsonl: 4,500 of 4,500 entries stored\r\x1b[K"


def test_without_a_terminal_or_a_kernel_nothing_is_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    progress = ImportProgress(write_pi_chain(tmp_path / "x.jsonl", 10), in_kernel=False)
    progress.reading()
    progress.stored(5, 10)
    progress.stored(10, 10)
    progress.done(ok=True)
    assert stream.getvalue() == ""
