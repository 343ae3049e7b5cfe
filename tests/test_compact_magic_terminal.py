"""``%compact`` as people meet it: terminal IPython at 80 and 120 columns (plain text only) and a
real kernel through jupyter_client (a typo never compacts; help is printed, not an Out value)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_fixtures import running_kernel

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "pi" / "before-compaction.jsonl"
SETUP = """\
%load_ext ipython_compact
import pandas as pd
df = pd.DataFrame({"a": range(1000), "b": [1.5] * 1000})
records = [{"id": i} for i in range(250)]
config = {"alpha": 1, "beta": [1, 2, 3]}
fh = open("notes.txt", "w")
gen = (i for i in range(3))
a_really_long_variable_name_that_is_wider_than_a_third_of_the_terminal_width = 42
%compact import {fixture}
%compact snapshot
%compact names
%compact status
"""


def terminal_ipython(script: str, columns: int, data_dir: Path) -> str:
    """Run ``script`` line by line in terminal IPython (plain-text output only) at ``columns``."""
    env = {
        **os.environ,
        "COLUMNS": str(columns),
        "LINES": "50",
        "IPYTHON_COMPACT_DIR": str(data_dir),
        "IPYTHON_COMPACT_SESSION": "terminal",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "IPython", "--simple-prompt", "--colors=NoColor", "--no-banner"],
        input=script + "exit\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=data_dir,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _outputs(text: str) -> dict[str, str]:
    """The text after each ``Out[n]:`` keyed by its first line (the title)."""
    blocks = re.split(r"In \[\d+\]: (?:Out\[\d+\]: )?", text)
    return {b.strip().splitlines()[0]: b.strip() for b in blocks if b.strip()}


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120])
def test_status_snapshot_and_names_read_well_in_a_terminal(columns: int, tmp_path: Path) -> None:
    out = terminal_ipython(SETUP.replace("{fixture}", str(FIXTURE)), columns, tmp_path)
    blocks = _outputs(out)
    status = next(b for t, b in blocks.items() if t.startswith("Session terminal"))
    snapshot = next(b for t, b in blocks.items() if t.startswith("Snapshot generation"))
    names = next(b for t, b in blocks.items() if re.match(r"\d+ names", t))
    for block in (status, snapshot, names):
        too_wide = [
            ln for ln in block.splitlines() if len(ln) > columns and max(map(len, ln.split())) < columns // 2
        ]
        assert not too_wide, block  # only a single long word (a path, a long name) may stick out
        assert "null" not in block
        if block is not names:  # names show bounded value previews, which may hold "{" and end in "…"
            assert "…" not in block and "{" not in block
    # status: the session once (in the title), and a stated problem when the context exceeds the window
    assert status.count("terminal") == 1
    assert re.search(r"^Problem +[\d,]+ tokens are more than the 128,000-token window", status, re.M), status
    assert re.search(r"^Not saved +fh: open file handles are not persisted$", status, re.M), status
    # snapshot: every name once, skipped reasons in full
    listed = " ".join(snapshot.split())
    for name in ("config", "df", "records"):
        assert listed.count(name) == 1, snapshot
    assert "gen: TypeError: cannot pickle 'generator' object" in listed
    # names: sizes for lists, dicts and DataFrames; names lost on restart are marked with why
    flat = " ".join(names.split())
    assert "records list 250 items · ≈" in flat and "config dict 2 keys ·" in flat
    assert "df DataFrame 1,000 rows × 2 columns ·" in flat and "columns: float64, int64" in flat
    assert "fh TextIOWrapper lost on restart: open file handles are not persisted" in flat
    assert names.splitlines()[0].endswith("2 will not survive a restart: fh, gen")
    assert (
        "a_really_long_variable_name_that_is_wider_than_a_third_of_the_terminal_width" in names.splitlines()
    )


@pytest.mark.slow
def test_in_a_real_kernel_a_typo_never_compacts_and_help_is_printed(tmp_path: Path) -> None:
    with running_kernel(tmp_path / "data", IPYTHON_COMPACT_SESSION="typo") as km:
        kc = km.client()
        kc.start_channels()
        try:

            def run(code: str) -> list[dict[str, object]]:
                msgs: list[dict[str, object]] = []
                kc.execute_interactive(code, timeout=60, output_hook=lambda m: msgs.append(m))
                return msgs

            run("%load_ext ipython_compact")
            run(f"%compact import {FIXTURE}")
            before = run("print(compact.status()['compactions'])")
            typo = run("%compact stauts")
            said = [str(m["content"]) for m in typo if m["msg_type"] in ("stream", "error")]
            assert any("UsageError" in t and "did you mean `status`?" in t for t in said), typo
            after = run("print(compact.status()['compactions'])")
            assert [m["content"] for m in before if m["msg_type"] == "stream"] == [
                m["content"] for m in after if m["msg_type"] == "stream"
            ]
            shown = run("%compact --help")
            assert not [m for m in shown if m["msg_type"] == "execute_result"]
            assert any(m["msg_type"] == "stream" and "usage: %compact" in str(m["content"]) for m in shown)
        finally:
            kc.stop_channels()
