"""The panel gives back what it takes in the kernel: its comm and its subshell.

Found with ten notebooks and page reloads: closing a notebook left a subshell thread in the
kernel, and each page reload added a comm and a subshell that were never closed (3 reloads:
1 → 4 comms, 2 → 5 subshells). Counted here by a jupyter_client connection of our own
(``LabServer.kernel_census``), so what the page believes does not matter.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from lab_driver import (
    OPEN_DOCUMENT,
    PANEL,
    LabServer,
    ensure_panel_ready,
    ensure_panel_ready_for,
    name_row,
    run_cell,
    show_notebook,
    wait_notebook_kernel,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTEBOOK = "lifecycle.ipynb"
OTHER = "lifecycle-other.ipynb"


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NOTEBOOK,)


def _kernel_id(page: Any, path: str) -> str:
    return str(
        page.evaluate(
            """(path) => {
            const w = window.jupyterapp.shell.widgets('main').find(x => x.context && x.context.path === path);
            return w.sessionContext.session.kernel.id;
        }""",
            path,
        )
    )


def _census_settles(
    lab_server: LabServer, kernel_id: str, expected: tuple[int, int], timeout: float = 180
) -> None:
    deadline = time.monotonic() + timeout
    seen = lab_server.kernel_census(kernel_id)
    while seen != expected and time.monotonic() < deadline:
        time.sleep(0.25)
        seen = lab_server.kernel_census(kernel_id)
    assert seen == expected, f"(comms, subshells) = {seen}, expected {expected}"


def test_page_reloads_leave_one_comm_and_one_subshell(
    page: Any, lab_server: LabServer, shot: Callable[[str], None]
) -> None:
    ensure_panel_ready(page)
    run_cell(page, "omega = 1")
    name_row(page, "omega").wait_for()
    kernel_id = _kernel_id(page, NOTEBOOK)
    _census_settles(lab_server, kernel_id, (1, 1))
    for _ in range(3):
        page.reload()
        wait_notebook_kernel(page, NOTEBOOK)
        ensure_panel_ready(page)
        name_row(page, "omega").wait_for()
        assert _kernel_id(page, NOTEBOOK) == kernel_id, "the reload reconnected to the same kernel"
        _census_settles(lab_server, kernel_id, (1, 1))
    shot("21-after-three-reloads")


def test_closing_a_notebook_releases_its_comm_and_subshell(page: Any, lab_server: LabServer) -> None:
    lab_server.put_notebook(OTHER)
    page.evaluate(OPEN_DOCUMENT, OTHER)
    # After the reloads above, JupyterLab opens the tab without bringing it to the front.
    show_notebook(page, OTHER)
    ensure_panel_ready(page)
    # Opening the side panel can hand "current" back to the notebook that last had DOM focus (the
    # first one): bring this one to the front again, so the panel follows it.
    show_notebook(page, OTHER)
    # The first look may have been at the other notebook: wait until the panel answers for this one.
    ensure_panel_ready_for(page, OTHER)
    run_cell(page, "psi = 2", path=OTHER)
    # Running the cell can hand "current" back to the first notebook too: the panel then shows
    # that one's names (seen 1 run in 3). Bring this one to the front again before looking.
    show_notebook(page, OTHER)
    name_row(page, "psi").wait_for()
    kernel_id = _kernel_id(page, OTHER)
    _census_settles(lab_server, kernel_id, (1, 1))
    # Close the tab (saved first, so nothing asks); the kernel keeps running, as it does in Lab.
    page.evaluate(
        """async (path) => {
            const app = window.jupyterapp;
            const w = Array.from(app.shell.widgets('main')).find(w => w.context && w.context.path === path);
            await w.context.save();
            w.close();
        }""",
        OTHER,
    )
    page.wait_for_function(
        f"() => document.querySelector('{PANEL}').dataset.notebook !== {json.dumps(OTHER)}"
    )
    assert any(k["id"] == kernel_id for k in lab_server.api("GET", "/api/kernels"))
    _census_settles(lab_server, kernel_id, (0, 0))
