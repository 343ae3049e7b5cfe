"""The prebuilt JupyterLab extension ships in the wheel and is found by JupyterLab.

Why: `pip install .` then `jupyter lab` must show the panel with no Node on the user's machine,
so the wheel has to carry the built extension as shared-data under
share/jupyter/labextensions/ipython-compact, with the install.json that tells JupyterLab it is
managed by pip. The dev install (`make setup`) links the same build into the venv instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import ipython_compact

REPO = Path(__file__).resolve().parents[2]
BUILT = REPO / "ipython_compact" / "labextension"
PREFIX = "ipython_compact-{v}.data/data/share/jupyter/labextensions/ipython-compact/"
SERVER_CONFIG = "ipython_compact-{v}.data/data/etc/jupyter/jupyter_server_config.d/ipython_compact.json"

pytestmark = pytest.mark.slow


def test_labextension_paths_point_at_the_built_extension() -> None:
    paths = ipython_compact._jupyter_labextension_paths()
    assert paths == [{"src": "labextension", "dest": "ipython-compact"}]
    built = Path(ipython_compact.__file__).parent / paths[0]["src"]
    meta = json.loads((built / "package.json").read_text())
    assert meta["name"] == "ipython-compact"
    # Both the panel plugin and the mime renderers are registered with JupyterLab.
    assert meta["jupyterlab"]["_build"]["extension"] == "./extension"
    assert meta["jupyterlab"]["_build"]["mimeExtension"] == "./mimeExtension"
    assert (built / meta["jupyterlab"]["_build"]["load"]).is_file()


def test_wheel_carries_the_prebuilt_extension(tmp_path: Path) -> None:
    # No build isolation: the venv already has hatchling and hatch-jupyter-builder, and the
    # extension is already built (skip-if-exists), so this needs neither network nor npm.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            ".",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
        ],
        cwd=REPO,
        check=True,
        timeout=180,
    )
    wheels = list(tmp_path.glob("ipython_compact-*.whl"))
    assert len(wheels) == 1
    prefix = PREFIX.format(v=ipython_compact.__version__)
    with zipfile.ZipFile(wheels[0]) as zf:
        names = set(zf.namelist())
        install = json.loads(zf.read(prefix + "install.json"))
        meta = json.loads(zf.read(prefix + "package.json"))
        server_config = json.loads(zf.read(SERVER_CONFIG.format(v=ipython_compact.__version__)))
    assert install["packageManager"] == "python"
    assert install["packageName"] == "ipython-compact"
    assert prefix + "static/style.js" in names
    assert prefix + meta["jupyterlab"]["_build"]["load"] in names
    assert not any("node_modules" in n for n in names)
    # The server extension that keeps the panel's subshell statuses out of the kernel's busy/idle.
    assert server_config["ServerApp"]["jpserver_extensions"] == {
        "ipython_compact.jupyter.server_extension": True
    }


def test_jupyterlab_reports_the_extension_enabled() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jupyterlab.labextensions", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    text = out.stdout + out.stderr
    line = next((ln for ln in text.splitlines() if "ipython-compact" in ln), "")
    assert "enabled" in line and "OK" in line, text
