"""What a person sees in JupyterLab for each ``%compact`` report: the human table, not a JSON tree.

Found in the quickstart notebook: ``status``, ``session``, ``import``, ``snapshot``, ``restore`` and
``pin`` rendered as Lab's collapsible JSON viewer ("root ▼ … in_flight [] 0 items") because their
bundles carried ``application/json``, which Lab ranks above ``text/html``. Here each magic runs in
a real notebook and the test reads the rendered output from the DOM: the ``ipython-compact`` table
is there, no JSON tree is, and Lab's own rendermime picks ``text/html`` for the bundle. A
screenshot of the notebook is saved as ``magic-outputs.png`` (and ``magic-outputs-snapshot-restore-pin.png``)
for a person to look at. ``tests/test_mime_order.py`` checks the same bundles in VS Code's and
nbconvert's MIME order.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lab_driver import PANEL, ensure_panel_ready, run_cell, wait_kernel_idle

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTEBOOK = "magic-outputs.ipynb"
TRANSCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "pi" / "before-compaction.jsonl"

#: The magic of each cell, and a text its human table must show.
MAGICS = (
    ("%compact status", "Context"),
    ("%compact session", "session"),
    (f"%compact import {TRANSCRIPT}", "imported"),
    ("%compact snapshot", "Written"),
    ("%compact restore", "Restored"),
    ("%compact pin the API key lives in env var X", "pin_id"),
)

#: Per output of the cell at ``index``: its MIME keys, what Lab's rendermime prefers for it, and
#: what the DOM shows (the report table, a JSON tree, the rendered text).
CELL_OUTPUTS = """(index) => {
    const panel = window.jupyterapp.shell.currentWidget;
    const cell = panel.content.widgets[index];
    const out = [];
    for (let i = 0; i < cell.outputArea.model.length; i++) {
        const data = cell.outputArea.model.get(i).data;
        const preferred = panel.content.rendermime.preferredMimeType(data, 'any');
        out.push({keys: Object.keys(data), preferred});
    }
    const node = cell.outputArea.node;
    return {outputs: out, tables: node.querySelectorAll('table.ipython-compact').length,
            jsonTrees: node.querySelectorAll('.jp-RenderedJSON').length, text: node.innerText};
}"""


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NOTEBOOK,)


def test_every_report_magic_renders_its_table_in_lab(page: Any, shot: Callable[[str], None]) -> None:
    ensure_panel_ready(page)
    run_cell(page, "alpha = {'unit': 'kelvin'}")
    first = int(page.evaluate("() => window.jupyterapp.shell.currentWidget.content.activeCellIndex"))
    for line, _ in MAGICS:
        run_cell(page, line)
    page.evaluate("() => window.jupyterapp.shell.currentWidget.content.scrollToItem(0, 'start')")
    shot("magic-outputs")
    page.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.scrollToItem(i, 'start')", first + 3)
    shot("magic-outputs-snapshot-restore-pin")
    for k, (line, expected) in enumerate(MAGICS):
        seen = page.evaluate(CELL_OUTPUTS, first + k)
        assert seen["outputs"], f"{line}: no output"
        for output in seen["outputs"]:
            assert "application/json" not in output["keys"], f"{line}: {output['keys']}"
            assert output["preferred"] == "text/html", (
                f"{line}: Lab picks {output['preferred']} of {output['keys']}"
            )
        assert seen["jsonTrees"] == 0, f"{line}: rendered as a JSON tree"
        assert seen["tables"] >= 1, f"{line}: no report table in {seen['text'][:300]!r}"
        assert expected in seen["text"], f"{line}: {expected!r} not in {seen['text'][:300]!r}"


def test_panel_restore_asks_before_replacing_a_name_defined_since(
    page: Any, shot: Callable[[str], None]
) -> None:
    """After a restart the user defines ``ledger`` again, then presses Restore: the snapshot's
    ``ledger`` is not bound; the panel lists it and asks; Overwrite takes the snapshot's value."""
    ensure_panel_ready(page)
    run_cell(page, "ledger = [1, 2, 3]\nuntouched = 'kept'")
    page.locator(f'{PANEL} button[data-action="snapshot"]').click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-result[data-action="snapshot"][data-kind="ok"]')
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-kernel'); }")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-banner[data-kind="restart"]')
    wait_kernel_idle(page)
    # Before the new kernel loads the extension, the panel shows what the session log holds (served
    # by the server extension): the gauge with the window the kernel last reported, the timeline.
    page.wait_for_selector(f"{PANEL} .jp-IpythonCompact-fromLog")
    assert page.get_attribute(PANEL, "data-state") == "not-loaded"
    gauge = page.locator(f"{PANEL} .jp-IpythonCompact-tokenCount")
    gauge.filter(has_text=re.compile(r"^[\d,]+ / 128,000 tokens$")).wait_for()
    page.locator(f"{PANEL} .jp-IpythonCompact-timeline .jp-IpythonCompact-card").nth(1).wait_for()
    shot("panel-after-restart-from-session-log")
    run_cell(page, "ledger = 'my new value'")
    page.locator(f'{PANEL} button[data-action="restore"]').click()
    banner = page.locator(f'{PANEL} .jp-IpythonCompact-banner[data-kind="restore-kept"]')
    banner.wait_for()
    assert "ledger" in banner.inner_text() and "untouched" not in banner.inner_text()
    # the banner and the action's answer are drawn separately: wait for the answer's text
    page.locator(f"{PANEL} .jp-IpythonCompact-result").filter(
        has_text="Not overwritten (you defined them since): ledger"
    ).wait_for()
    shot("restore-asks-before-overwriting")
    run_cell(page, "print(repr(ledger), repr(untouched))")
    assert "'my new value' 'kept'" in page.evaluate(CELL_OUTPUTS, _last_run(page))["text"]

    page.locator(f'{PANEL} button[data-action="restore-overwrite"]').click()
    banner.wait_for(state="detached")
    message = page.locator(f"{PANEL} .jp-IpythonCompact-result p")
    # the banner can leave before the action's answer replaces "restore…" (CI, a loaded machine)
    message.filter(has_text="Restored 1 name: ledger.").wait_for()
    # The action's message clears once the user moves on (runs a cell), and can be dismissed.
    run_cell(page, "print(repr(ledger))")
    assert "[1, 2, 3]" in page.evaluate(CELL_OUTPUTS, _last_run(page))["text"]
    message.wait_for(state="detached")
    page.locator(f'{PANEL} button[data-action="snapshot"]').click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-result[data-action="snapshot"][data-kind="ok"]')
    page.locator(f'{PANEL} button[data-action="dismiss-result"]').click()
    message.wait_for(state="detached")


def _last_run(page: Any) -> int:
    return int(page.evaluate("() => window.jupyterapp.shell.currentWidget.content.activeCellIndex")) - 1


def _column(page: Any, index: int) -> list[str]:
    return [
        t.strip()
        for t in page.locator(
            f"{PANEL} .jp-IpythonCompact-names tbody tr td:nth-child({index})"
        ).all_inner_texts()
    ]


def test_namespace_table_sorts_by_column_and_previews_values(page: Any, shot: Callable[[str], None]) -> None:
    ensure_panel_ready(page)
    run_cell(
        page,
        "%reset -f\nbig = list(range(5000))\nmid = 'a' * 300\nsmall = 7\nlabel = 'kelvin'\n"
        "gen = (i for i in range(3))",
    )
    page.wait_for_function(
        f"() => document.querySelectorAll('{PANEL} .jp-IpythonCompact-names tbody tr').length === 5"
    )
    assert _column(page, 1) == ["big", "gen", "label", "mid", "small"]  # by name, the default
    values = dict(zip(_column(page, 1), _column(page, 4), strict=True))
    assert (
        values["small"] == "7"
        and values["label"] == "'kelvin'"
        and values["big"] == "[0, 1, 2, 3, 4, 5, …]"  # a list's first items (issue 35.3)
        and values["gen"] == ""  # a generator: no preview (its code never runs)
    )
    size = f'{PANEL} .jp-IpythonCompact-names th[data-sort="size"]'
    first_name = f"{PANEL} .jp-IpythonCompact-names tbody tr td:nth-child(1)"
    page.locator(size).click()
    # each click redraws the table: wait for the header's new state, then read the rows
    page.wait_for_selector(f'{size}[aria-sort="descending"]')
    page.locator(first_name).first.filter(has_text="big").wait_for()  # largest first
    page.locator(size).click()
    page.wait_for_selector(f'{size}[aria-sort="ascending"]')
    page.locator(first_name).last.filter(has_text="big").wait_for()
    page.locator(f'{PANEL} .jp-IpythonCompact-names th[data-sort="type"]').click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-names th[data-sort="type"][aria-sort]')
    types = _column(page, 2)
    assert types == sorted(types)
    page.locator(f"{PANEL} .jp-IpythonCompact-namespace").scroll_into_view_if_needed()
    shot("namespace-sorted-with-values")
