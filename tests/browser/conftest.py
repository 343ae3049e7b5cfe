"""A real JupyterLab server and Debian's Chromium for the panel tests.

Why this shape: the panel only means something against a real kernel, a real server and a real
browser, so nothing here is mocked. Each module gets one server (random free port, a token, its
own root directory, Jupyter config/data/runtime directories and ``IPYTHON_COMPACT_DIR`` under a
temporary directory) and one Chromium page; the server and every kernel it started are stopped at
the end. Playwright cannot download browsers here, so it drives ``/usr/bin/chromium``.

Screenshots of each step go to ``artifacts/screenshots/`` (gitignored) for a person to look at.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("IPYTHON_COMPACT_CHROMIUM", "/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "artifacts" / "screenshots"


@dataclass(frozen=True)
class LabServer:
    """Where the server listens and what it serves."""

    url: str
    token: str
    root: Path
    data_dir: Path
    log_path: Path

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Call the server's REST API with the token; returns the decoded JSON (or None)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.url}{path}", data=data, method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(server: LabServer, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{server.log_tail()}")
        try:
            server.api("GET", "/api/status")
            return
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.25)
    raise RuntimeError(f"jupyter lab did not answer within {timeout} s:\n{server.log_tail()}")


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    base = tmp_path_factory.mktemp("lab")
    root, data_dir = base / "root", base / "compact-data"
    jconfig, jdata, jruntime = base / "jupyter-config", base / "jupyter-data", base / "jupyter-runtime"
    for d in (root, data_dir, jconfig / "labconfig", jdata, jruntime):
        d.mkdir(parents=True)
    # The news prompt would cover the panel in screenshots; nothing else is changed.
    (jconfig / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "IPYTHON_COMPACT_DIR": str(data_dir),
        "JUPYTER_CONFIG_DIR": str(jconfig),
        "JUPYTER_DATA_DIR": str(jdata),
        "JUPYTER_RUNTIME_DIR": str(jruntime),
        "JUPYTERLAB_SETTINGS_DIR": str(base / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "lab-workspaces"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    env.pop("IPYTHON_COMPACT_SESSION", None)
    log_path = base / "jupyter-lab.log"
    server = LabServer(f"http://127.0.0.1:{port}", token, root, data_dir, log_path)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "jupyter", "lab", "--no-browser",
                "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
                "--LabApp.expose_app_in_browser=True",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--ServerApp.allow_root=True",
            ],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        _wait_ready(server, proc, timeout=90)
        yield server
    finally:
        # SIGINT twice is jupyter's "shut down now, kernels too"; then make sure.
        for sig in (signal.SIGTERM,):
            if proc.poll() is None:
                proc.send_signal(sig)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.fail(f"Chromium not found at {CHROMIUM}: run 'make system-deps' (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def screenshot_dir() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
