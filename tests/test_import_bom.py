"""A JSONL file that starts with a UTF-8 byte order mark (as Windows editors and PowerShell's
``Out-File`` write it) imports as the same file without it: pi session files and our own JSONL.

Why: the fourth red team's BOM-prefixed export was refused ("invalid JSON … line 1"), though the
mark is no content. Only a mark at the very start is skipped; one anywhere else is still refused.
Real parts: the real CLI in a subprocess, real SQLite files.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ipython_compact.store import ImportFormatError, SessionStore
from ipython_compact.store.exporters import export_text
from ipython_compact.store.importers import import_file, load_transcript

BOM = b"\xef\xbb\xbf"
PI = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
SCRIPT = Path(sys.executable).parent / "ipython-compact"


def our_jsonl(tmp_path: Path) -> Path:
    with SessionStore(tmp_path / "source.db") as store:
        store.create_session("ours")
        store.append("ours", "message", {"message": {"role": "user", "content": "hello ✓"}})
        store.append("ours", "message", {"message": {"role": "assistant", "content": "hi"}})
        path = tmp_path / "ours.jsonl"
        path.write_text(export_text(store, "ours"), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["pi", "jsonl"])
def test_a_file_starting_with_a_bom_imports_as_the_same_file_without_it(tmp_path: Path, kind: str) -> None:
    plain = PI if kind == "pi" else our_jsonl(tmp_path)
    marked = tmp_path / f"marked-{plain.name}"
    marked.write_bytes(BOM + plain.read_bytes())
    expected = load_transcript(plain)
    got = load_transcript(marked)
    assert got.format == expected.format == kind
    assert (got.entries, got.leaf_id, got.name, got.header) == (
        expected.entries,
        expected.leaf_id,
        expected.name,
        expected.header,
    )
    done = subprocess.run(
        [str(SCRIPT), "--db", str(tmp_path / "cli.db"), "import", str(marked), "--session", "s"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path / "data")},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with SessionStore(tmp_path / "cli.db") as store:
        assert [e.data for e in store.entries("s")] == [e.data for e in expected.entries]


def test_a_bom_anywhere_else_is_still_refused_with_its_line(tmp_path: Path) -> None:
    lines = PI.read_bytes().split(b"\n")
    lines[1] = BOM + lines[1]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join(lines))
    with SessionStore(tmp_path / "x.db") as store, pytest.raises(ImportFormatError, match=r"bad\.jsonl:2: "):
        import_file(store, bad)
