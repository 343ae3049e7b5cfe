"""What a new user still tripped on re-checking issue 35 on the code after its fixes (items 4 and 6).

- ``%compact tree`` cut an entry's text at 80 characters without a mark ("its remaining v"),
  where ``log`` ends a cut with an ellipsis.
- ``%compact export FILE`` replaced an existing file without a word, where the CLI's
  ``export -o FILE`` refuses unless ``--force``.
- The CLI at 80 columns: ``sessions`` printed 87 columns, ``verify`` 158, and ``log`` split its
  legend after "(│".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from ipython_compact.kernel.extension import extension_for

FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
SCRIPT = Path(sys.executable).parent / "ipython-compact"


def test_tree_marks_a_cut_text_with_an_ellipsis(ip: Any) -> None:
    ext = extension_for(ip)
    assert ext is not None
    words = " ".join(f"word{i}" for i in range(60))
    ext.service.store.append(
        ext.service.session, "message", {"message": {"role": "user", "content": words, "timestamp": 1}}
    )
    (tip,) = ext.service.tree()
    assert tip["text"].endswith("…") and len(tip["text"]) == 80, tip["text"]
    assert words.startswith(tip["text"][:-1])


def test_export_in_a_cell_never_replaces_a_file_without_force(ip: Any, tmp_path: Path) -> None:
    ext = extension_for(ip)
    assert ext is not None
    ext.service.store.append(
        ext.service.session, "message", {"message": {"role": "user", "content": "hi", "timestamp": 1}}
    )
    target = tmp_path / "mine.jsonl"
    target.write_text("mine\n", encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        ip.run_line_magic("compact", f"export {target}")
    assert "already exists (5 bytes); nothing was written" in str(caught.value)
    assert "--force" in str(caught.value) and target.read_text(encoding="utf-8") == "mine\n"
    ip.run_line_magic("compact", f"export {target} --force")
    assert target.read_text(encoding="utf-8").count("\n") == 1 and '"hi"' in target.read_text()


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("cli80")
    for name in ("work", "a-session-with-a-rather-long-name"):
        done = _cli(data, "import", str(FIXTURE), "-s", name)
        assert done.returncode == 0, done.stderr
    return data


def _cli(data: Path, *args: str, columns: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(data)}
    env.pop("IPYTHON_COMPACT_DB", None)
    env.pop("COLUMNS", None)
    if columns:
        env["COLUMNS"] = columns
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize(
    "args", [("sessions",), ("verify",), ("log", "-s", "work", "-n", "3"), ("show", "-s", "work", "--list")]
)
def test_the_cli_fits_80_columns(stored: Path, args: tuple[str, ...]) -> None:
    done = _cli(stored, *args, columns="80")
    assert done.returncode == 0, done.stderr
    wide = [line for line in done.stdout.splitlines() if len(line) > 80]
    assert not wide, done.stdout
    assert "(│\n" not in done.stdout  # the log's legend is never split after its mark
    if args == ("sessions",):  # a name too long for its column stands whole on a line of its own
        assert "\na-session-with-a-rather-long-name\n" in done.stdout, done.stdout


def test_a_pipe_still_gets_whole_lines(stored: Path) -> None:
    """Without a terminal or $COLUMNS nothing is wrapped: scripts read whole lines."""
    verify = _cli(stored, "verify").stdout
    assert "does not prove that nobody with write access rewrote it" in verify
    sessions = _cli(stored, "sessions").stdout
    assert "T" in sessions.splitlines()[1].split()[-1]  # the full ISO time
