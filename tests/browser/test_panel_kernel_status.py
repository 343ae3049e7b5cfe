"""The kernel's busy/idle status stays true while the panel talks to it over a subshell.

Why: ipykernel publishes busy → idle for every comm request it handles on a subshell, with that
request as the parent. JupyterLab (``KernelConnection._handleMessage``) and jupyter_server's
activity tracking applied each of those as the kernel's status, so with the panel open the
status bar read "Idle" while a cell was still running (and a culler would see an idle kernel).
The fix ships ``MappingKernelManager.untracked_message_types`` with the comm message types (see
docs/kernel-status.md); these tests check the browser's status bar, the kernel connection and
the server's own ``execution_state`` mid-cell, after the panel has been answered on its subshell.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from lab_driver import (
    PANEL,
    ensure_panel_ready,
    name_row,
    names_updated_at,
    run_cell,
    wait_kernel_idle,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTEBOOK = "status-bar.ipynb"


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NOTEBOOK,)


def _kernel_status(page: Any) -> dict[str, str]:
    """The status the browser shows: the kernel connection's and the status bar's text."""
    return dict(
        page.evaluate(
            """() => {
            const w = window.jupyterapp.shell.currentWidget;
            const items = [...document.querySelectorAll('.jp-StatusBar-TextItem')];
            const titled = '.jp-StatusBar-Widget .jp-StatusBar-TextItem[title*="Kernel"]';
            const item = document.querySelector(titled)
                || items.find(n => /\\|\\s*(Idle|Busy)/.test(n.textContent));
            return {kernel: w.sessionContext.session.kernel.status,
                    display: w.sessionContext.kernelDisplayStatus,
                    bar: item ? item.textContent : ''};
        }"""
        )
    )


def _server_state(lab_server: Any, page: Any) -> str:
    kernel_id = page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id")
    return str(lab_server.api("GET", f"/api/kernels/{kernel_id}")["execution_state"])


def test_status_bar_says_busy_while_a_cell_runs_with_the_panel_open(
    page: Any, shot: Callable[[str], None], lab_server: Any
) -> None:
    ensure_panel_ready(page)
    run_cell(page, "import pathlib, time")
    before = names_updated_at(page)
    go = lab_server.root / "tau-go"
    go.unlink(missing_ok=True)
    # The cell runs until the test lets it go, so "busy" is checked while it surely runs.
    run_cell(page, "tau = 1\nwhile not pathlib.Path('tau-go').exists():\n    time.sleep(0.05)", wait=False)
    try:
        page.wait_for_selector(f'{PANEL}[data-busy="true"]')
        # `tau` only exists inside the running cell: its row proves the panel was answered on the
        # subshell mid-cell, i.e. the subshell has published its busy → idle pair by now.
        name_row(page, "tau").wait_for()
        assert names_updated_at(page) > before
        # Give the poll (every 2 s) a second round trip on the subshell, then look.
        page.wait_for_function(
            f"(t) => Number(document.querySelector('{PANEL} .jp-IpythonCompact-updated')"
            ".dataset.updatedAt) > t",
            arg=names_updated_at(page),
        )
        status = _kernel_status(page)
        assert page.get_attribute(PANEL, "data-busy") == "true", "the cell ended before the check"
        page.locator(".jp-StatusBar-Widget").first.scroll_into_view_if_needed()
        shot("20-status-bar-busy-with-panel")
        assert status["kernel"] == "busy", status
        assert status["display"] == "busy", status
        assert "Busy" in status["bar"], status
        # The server's own record (what a culler reads) is not fooled either.
        assert _server_state(lab_server, page) == "busy"
    finally:
        go.write_text("go")
    wait_kernel_idle(page)
    assert _kernel_status(page)["kernel"] == "idle"
    assert _server_state(lab_server, page) == "idle"
