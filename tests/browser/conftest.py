"""A real JupyterLab server and Debian's Chromium for the panel tests.

Why this shape: the panel only means something against a real kernel, a real server and a real
browser, so nothing here is mocked. The whole browser run shares one server (random free port, a token, its
own root directory, Jupyter directories and ``IPYTHON_COMPACT_DIR`` under a temporary directory)
and one Chromium; both are stopped at the end (the server shuts down its kernels). The machinery
is ``ipython_compact.testing.jupyterlab``, shared with bench/bench_panel_latency.py.

Screenshots of each step go to ``artifacts/screenshots/`` (gitignored) for a person to look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipython_compact.testing.jupyterlab import LabServer, chromium, running_lab

SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    # Session-wide: starting JupyterLab costs seconds; each test module opens its own notebooks.
    with running_lab(tmp_path_factory.mktemp("lab")) as server:
        yield server


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        with chromium() as b:
            yield b
    except RuntimeError as exc:
        if "Chromium not found" in str(exc):
            pytest.fail(str(exc))
        raise


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
