"""``export -o`` writes through a private temporary file: created exclusively (never through a
symlink planted at a guessable name), owner-only, removed on failure, and a full disk names the
path. ``verify`` says what it proves and no more. Real subprocesses, real SQLite files."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BEFORE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
SCRIPT = Path(sys.executable).parent / "ipython-compact"


def run(data: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(data), **(env or {})}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs: a real full disk (ENOSPC). Mounting needs root; skipped without it."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
    ):
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("cli-export") / "data"
    assert run(data, "import", str(BEFORE), "--session", "work").returncode == 0
    return data


def test_export_never_writes_through_a_planted_symlink(stored: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out" / "work.jsonl"
    out.parent.mkdir()
    os.symlink(victim, out.parent / "work.jsonl.partial")
    done = run(stored, "export", "-s", "work", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "precious"
    assert out.read_text().count("\n") == 1003
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert sorted(p.name for p in out.parent.iterdir()) == ["work.jsonl", "work.jsonl.partial"]


def test_a_full_disk_names_the_path_and_leaves_nothing_behind(stored: Path, small_disk: Path) -> None:
    out = small_disk / "work.jsonl"
    done = run(stored, "export", "-s", "work", "-o", str(out))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"cannot write {out}: No space left on device" in done.stderr, done.stderr
    assert list(small_disk.iterdir()) == []


def test_an_existing_export_is_replaced_only_when_the_new_one_is_whole(
    stored: Path, small_disk: Path
) -> None:
    out = small_disk / "work.jsonl"
    out.write_text("the previous export\n")
    assert run(stored, "export", "-s", "work", "-o", str(out), "--force").returncode == 2
    assert out.read_text() == "the previous export\n"
    assert [p.name for p in small_disk.iterdir()] == ["work.jsonl"]


def test_an_existing_file_is_kept_unless_force(stored: Path, tmp_path: Path) -> None:
    out = tmp_path / "work.jsonl"
    out.write_text("mine\n")
    done = run(stored, "export", "-s", "work", "-o", str(out))
    assert done.returncode == 2
    assert f"{out} already exists (5 bytes); nothing was written" in done.stderr, done.stderr
    assert f"-o {out} --force" in done.stderr and out.read_text() == "mine\n"
    assert run(stored, "export", "-s", "work", "-o", str(out), "--force").returncode == 0
    assert out.read_text().count("\n") == 1003


def test_log_fits_the_terminal_and_n_is_named_as_typed(stored: Path) -> None:
    env = {"COLUMNS": "80"}
    done = run(stored, "log", "-s", "work", "-n", "6", env=env)
    lines = done.stdout.splitlines()
    rows = [line for line in lines if line[:1] in ("│", "·")]
    assert len(rows) == 6 and all(len(line) <= 80 for line in lines), done.stdout
    assert "20272f99   bashExecution" in done.stdout
    wide = run(stored, "log", "-s", "work", "-n", "2", env={"COLUMNS": "140"}).stdout.splitlines()[1]
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", wide), wide  # the time where there is room
    bad = run(stored, "log", "-s", "work", "-n", "-5")
    assert bad.returncode == 2 and "error: -n must be 0 or more, got -5" in bad.stderr, bad.stderr


def test_verify_says_what_it_proves_and_what_it_does_not(stored: Path) -> None:
    done = run(stored, "verify")
    assert done.returncode == 0, done.stderr
    assert "nothing lost or altered" not in done.stdout
    assert "no accidental damage" in done.stdout
    assert "does not prove that nobody with write access rewrote it" in done.stdout
    help_text = run(stored, "verify", "--help").stdout
    assert "accidental" in help_text and "not deliberate tampering" in help_text


def test_imported_pi_compactions_are_listed_as_imported_with_their_tokens_before(stored: Path) -> None:
    listed = run(stored, "show", "-s", "work", "--list").stdout.splitlines()
    assert len(listed) == 2, listed
    for line in listed:
        # pi records no tokens after: the figure is read off the log, as the panel's timeline reads it
        assert re.search(r"  imported +1\d\d,\d{3} -> +\d\d,\d{3} in context$", line), line
        assert len(line) <= 80
