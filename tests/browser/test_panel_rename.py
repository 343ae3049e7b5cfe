"""A renamed notebook keeps its session; the restart banner goes when a cell restores (real Chromium, real
kernel, real server).

Issue 35.1: ``Untitled.ipynb`` renamed to ``trip.ipynb``, a restart, and the panel's Restore said
"Restored 0 names.", the timeline "No compactions yet", the header still "Untitled.ipynb". Now the
header follows the rename at once, and the restarted kernel (which Jupyter Server gives the new path)
binds to the session the notebook had: Restore brings the variable back. Issue 35.5: after a restart,
``%compact restore`` run in a cell took the snapshot, yet the panel still asked "Restore variables?".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from lab_driver import PANEL, LabServer, ensure_panel_ready, name_row, run_cell, wait_kernel_idle

pytestmark = [pytest.mark.slow, pytest.mark.browser]

BEFORE = "Untitled-rename.ipynb"
AFTER = "trip.ipynb"


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (BEFORE,)


def _restart(page: Any) -> None:
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-kernel'); }")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-banner[data-kind="restart"]')
    wait_kernel_idle(page)


def test_a_renamed_notebook_restores_its_variables_after_a_restart(
    page: Any, lab_server: LabServer, shot: Callable[[str], None]
) -> None:
    ensure_panel_ready(page)
    run_cell(page, "budget = {'flights': 1200, 'hotel': 800}")
    name_row(page, "budget").wait_for()
    page.locator(f'{PANEL} button[data-action="snapshot"]').click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-result[data-action="snapshot"][data-kind="ok"]')

    # Rename as the file browser's and the title's Rename do (the context renames the file on the server).
    page.evaluate(
        "async (name) => { await window.jupyterapp.shell.currentWidget.context.rename(name); }",
        AFTER,
    )
    page.wait_for_selector(f'{PANEL}[data-notebook="{AFTER}"]')
    header = page.locator(f"{PANEL} .jp-IpythonCompact-notebook")
    header.filter(has_text=re.compile(f"^{re.escape(AFTER)}$")).wait_for()
    shot("35-1-renamed-header")

    _restart(page)
    page.locator(f'{PANEL} button[data-action="restore-after-restart"]').click()
    name_row(page, "budget").wait_for()
    # the row and the action's answer are separate redraws: wait for the answer's text
    page.locator(f"{PANEL} .jp-IpythonCompact-result p").filter(
        has_text=re.compile("^Restored 1 name: budget\\.$")
    ).wait_for()
    shot("35-1-restored-after-rename")


def test_a_restore_run_in_a_cell_clears_the_restart_banner(page: Any, shot: Callable[[str], None]) -> None:
    page.locator(f'{PANEL} button[data-action="snapshot"]').click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-result[data-action="snapshot"][data-kind="ok"]')
    _restart(page)
    shot("35-5-banner-after-restart")
    run_cell(page, "%load_ext ipython_compact\n%compact restore", path=AFTER)
    name_row(page, "budget").wait_for()
    page.wait_for_selector(f"{PANEL} .jp-IpythonCompact-banner", state="hidden")
    shot("35-5-banner-gone")
