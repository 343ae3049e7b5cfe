"""A real JupyterLab server and Debian's Chromium for the panel tests.

Why this shape: the panel only means something against a real kernel, a real server and a real
browser, so nothing here is mocked. The whole browser run shares one server (random free port, a token, its
own root directory, Jupyter directories and ``IPYTHON_COMPACT_DIR`` under a temporary directory)
and one Chromium; both are stopped at the end (the server shuts down its kernels). The machinery
is ``tests/lab_driver.py``, shared with bench/bench_panel_latency.py.

Each test module says which notebooks it works in (a module-scoped ``notebooks`` fixture) and
gets one ``page``: a browser context of its own with those notebooks open, the last one in front.
Screenshots of each step go to ``artifacts/screenshots/`` (gitignored) for a person to look at,
through the ``shot`` fixture.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lab_driver import OPEN_DOCUMENT, LabServer, chromium, running_lab, wait_notebook_kernel

#: Where screenshots go: ``$IPYTHON_COMPACT_SHOTS`` when set, else ``artifacts/screenshots``.
SCREENSHOTS = Path(
    os.environ.get("IPYTHON_COMPACT_SHOTS")
    or Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
)


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


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    """The notebooks a module's ``page`` opens, in order; every browser test module overrides this."""
    raise pytest.UsageError("a browser test module must define a module-scoped 'notebooks' fixture")


@pytest.fixture(scope="module")
def page(lab_server: LabServer, browser: Any, notebooks: tuple[str, ...]) -> Iterator[Any]:
    """One browser context per module with ``notebooks`` open (each with an idle kernel)."""
    for name in notebooks:
        lab_server.put_notebook(name)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        pg = context.new_page()
        # An upper bound, not a pace: every wait ends at its event. On a loaded machine (the suite
        # beside another suite, 2 cores) a reply can take far longer than 30 s (issue 35, item 8).
        pg.set_default_timeout(120_000)
        pg.goto(lab_server.lab_url(notebooks[0]))
        wait_notebook_kernel(pg, notebooks[0])
        for name in notebooks[1:]:
            pg.evaluate(OPEN_DOCUMENT, name)
            wait_notebook_kernel(pg, name)
        yield pg
    finally:
        context.close()


@pytest.fixture
def shot(page: Any, screenshot_dir: Path) -> Callable[[str], None]:
    """Save what the page shows now as ``<name>.png`` in the screenshot directory."""

    def take(name: str) -> None:
        page.screenshot(path=str(screenshot_dir / f"{name}.png"))

    return take
