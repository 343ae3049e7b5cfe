"""Terminal IPython in a pseudo-terminal (pexpect): without IPYTHON_COMPACT_SESSION a new ``ipython``
in the same directory binds to the same session (working directory + profile), its automatic
snapshots after every cell do not bury the previous process's work, and a restore that finds
nothing says where it looked."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect
import pytest

pytestmark = pytest.mark.slow

PROMPT = r"In \[\d+\]: "


@contextmanager
def ipython(cwd: Path, data_dir: Path, ipython_dir: Path) -> Iterator[pexpect.spawn]:
    env = {k: v for k, v in os.environ.items() if k not in ("IPYTHON_COMPACT_SESSION", "JPY_SESSION_NAME")}
    env.update({"IPYTHON_COMPACT_DIR": str(data_dir), "IPYTHONDIR": str(ipython_dir), "TERM": "dumb"})
    child = pexpect.spawn(
        sys.executable,
        ["-m", "IPython", "--simple-prompt", "--no-banner", "--colors=NoColor"],
        cwd=str(cwd),
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 250),
    )
    try:
        child.expect(PROMPT)
        yield child
    finally:
        if child.isalive():
            child.sendline("exit")
            child.expect(pexpect.EOF)
        child.close()


def run(child: pexpect.spawn, line: str) -> str:
    child.sendline(line)
    child.expect(PROMPT)
    return str(child.before)


def test_a_new_terminal_ipython_in_the_same_directory_restores_the_previous_ones_work(
    tmp_path: Path, compact_dir: Path
) -> None:
    project, ipdir = tmp_path / "project", tmp_path / "ipython"
    project.mkdir()
    with ipython(project, compact_dir, ipdir) as first:
        run(first, "%load_ext ipython_compact")
        run(first, "x = 41")
        assert "saved" in run(first, "%compact snapshot")
    with ipython(project, compact_dir, ipdir) as second:
        run(second, "%load_ext ipython_compact")
        for i in range(4):  # terminal IPython snapshots after cells: these must not bury x
            run(second, f"scratch{i} = {i}")
        status = run(second, "%compact status")
        assert "terminal" in status and str(project) in status
        restored = run(second, "%compact restore")
        assert "Restored from snapshot generation" in restored and "x" in restored
        assert "41" in run(second, "print(x + 0)")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with ipython(elsewhere, compact_dir, ipdir) as third:
        run(third, "%load_ext ipython_compact")
        nothing = run(third, "%compact restore")
        assert "Warning: nothing was restored" in nothing and "looked in" in nothing
        assert "IPYTHON_COMPACT_SESSION" in nothing


def test_names_of_cells_typed_in_quick_succession_are_snapshotted_at_exit(
    tmp_path: Path, compact_dir: Path
) -> None:
    """Terminal IPython throttles its automatic snapshot (no event loop to debounce on): cells run
    within the throttle were only written by a later cell, so quitting right after them lost them."""
    project, ipdir = tmp_path / "project", tmp_path / "ipython"
    project.mkdir()
    with ipython(project, compact_dir, ipdir) as first:
        run(first, "%load_ext ipython_compact")
        run(first, "alpha = 1")  # written now
        run(first, "beta = [2, 3]")  # within the throttle: held back
        run(first, "gamma = {'g': 4}")
    with ipython(project, compact_dir, ipdir) as second:
        run(second, "%load_ext ipython_compact")
        restored = run(second, "%compact restore")
        assert "Restored from snapshot generation" in restored, restored
        assert "{'alpha': 1, 'beta': [2, 3], 'gamma': {'g': 4}}" in run(
            second, "print({'alpha': alpha, 'beta': beta, 'gamma': gamma})"
        )
