"""``ipython-compact import`` with several files, and with a directory.

Found by trying the CLI as a new user: ``import A B`` said "unrecognized arguments", and
``import DIR`` said "3: Is a directory" (the descriptor, not the path).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "ipython-compact"
BEFORE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"


def run(data: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(data)}
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == code, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done


def test_several_files_are_imported_in_order(tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    shutil.copy(BEFORE, other)
    out = run(tmp_path / "data", "import", str(BEFORE), str(other)).stdout.splitlines()
    assert out[0].startswith("imported 1,002 entries (pi) into new session 'before-compaction'")
    assert out[1].startswith("imported 1,002 entries (pi) into new session 'other'")


def test_a_missing_file_among_several_imports_nothing(tmp_path: Path) -> None:
    err = run(tmp_path / "data", "import", str(BEFORE), str(tmp_path / "nope.jsonl"), code=2).stderr
    assert f"{tmp_path / 'nope.jsonl'}: no such file; nothing was imported" in err
    assert "no sessions yet" in run(tmp_path / "data", "sessions").stdout


def test_a_directory_is_named_by_its_path(tmp_path: Path) -> None:
    err = run(tmp_path / "data", "import", str(tmp_path), code=2).stderr
    assert err.startswith(f"ipython-compact: error: {tmp_path}: is a directory, expected a .jsonl file\n")
    assert f"try: name a file in it: ls {tmp_path}" in err


def test_context_tail_shows_the_last_messages_only(tmp_path: Path) -> None:
    run(tmp_path / "data", "import", str(BEFORE))
    whole = run(tmp_path / "data", "context").stdout
    tail = run(tmp_path / "data", "context", "-n", "2").stdout
    total = int(whole.split(": ", 1)[1].split(" messages")[0].replace(",", ""))
    assert tail.splitlines()[0] == whole.splitlines()[0]  # the header still counts them all
    assert f"(the last 2; {total - 2:,} earlier messages not shown: drop -n to see them)" in tail
    assert tail.endswith(whole[-200:]) and len(tail) < len(whole)
    assert f"── {total} · " in tail and f"── {total - 1} · " in tail and f"── {total - 2} · " not in tail
