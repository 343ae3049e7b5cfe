"""``--db postgresql://…`` where the ``postgres`` extra (psycopg, psycopg_pool) is not installed:
one line that names the install command, exit 2, no traceback.

Why: the fourth red team got a raw ``ModuleNotFoundError`` traceback. Real parts: the console
script in a subprocess whose ``import psycopg`` fails for real: a folder first on ``PYTHONPATH``
holds a ``psycopg`` (or ``psycopg_pool``) package that raises ``ModuleNotFoundError`` as a
missing one does. No server is needed: the driver is imported before any connection.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "ipython-compact"


@pytest.mark.parametrize("missing", ["psycopg", "psycopg_pool"])
@pytest.mark.parametrize("command", [["sessions"], ["log", "-s", "x"]])
def test_a_postgres_url_without_the_driver_names_the_extra_in_one_line(
    tmp_path: Path, missing: str, command: list[str]
) -> None:
    shim = tmp_path / "shim" / missing
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{missing}'\", name={missing!r})\n", encoding="utf-8"
    )
    path = os.pathsep.join(p for p in (str(shim.parent), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [str(SCRIPT), "--db", "postgresql://me:secret@127.0.0.1:9/log", *command],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": path, "IPYTHON_COMPACT_DIR": str(tmp_path / "data")},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "pip install 'ipython-compact[postgres]'" in lines[0] and missing in lines[0]
    assert "secret" not in lines[0] and "postgresql://me:***@127.0.0.1:9/log" in lines[0]
