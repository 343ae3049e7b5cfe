"""The namespace table at the panel's default width: values previewed, names whole, sizes on one line, and
a frame's, list's or dict's first rows one click away (real Chromium, real kernel).

Issue 35.3: at the default width sizes wrapped onto three lines, names were cut ("mid_ce…") and there
was no Value column. Each row is now two lines (name and size; type and value), the value a preview the
kernel computed without running user code, and clicking a value with a table view opens its head as a
grid in the main area. Each step saves a screenshot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from lab_driver import PANEL, ensure_panel_ready, name_row, run_cell

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTEBOOK = "values-demo.ipynb"

CELL = """
import numpy as np, pandas as pd
mid_century_budget = {"flights": 1200, "hotel": 800, "food": 450}
itinerary = ["Oslo", "Bergen", "Flåm", "Stavanger"]
trips = pd.DataFrame(
    {"city": ["Oslo", "Bergen", "Flåm"] * 40, "km": [0.0, 463.5, 176.25] * 40, "days": [2, 3, 1] * 40}
)
grid = np.arange(12.0).reshape(3, 4)
"""

CELL_FACTS = """(row) => {
    const cell = (cls) => row.querySelector('.' + cls);
    const box = (el) => el.getBoundingClientRect();
    const name = cell('jp-IpythonCompact-name'), size = cell('jp-IpythonCompact-size');
    const value = cell('jp-IpythonCompact-value');
    return {
        nameCut: name.scrollWidth > name.clientWidth,
        sizeLines: Math.round(box(size).height / box(name).height),
        sizeCut: size.scrollWidth > size.clientWidth,
        valueWidth: box(value).width,
        valueShown: getComputedStyle(value).display !== 'none' && box(value).width > 0,
        value: value.textContent,
    };
}"""


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NOTEBOOK,)


def test_values_are_previewed_and_names_and_sizes_fit_the_default_width(
    page: Any, shot: Callable[[str], None]
) -> None:
    ensure_panel_ready(page)
    run_cell(page, CELL)
    for name in ("mid_century_budget", "itinerary", "trips", "grid"):
        name_row(page, name).wait_for()
    width = page.evaluate(f"() => document.querySelector('{PANEL}').getBoundingClientRect().width")
    assert width < 420, f"the panel is {width}px wide: this test is about its default (narrow) width"
    facts = {
        name: name_row(page, name).evaluate(CELL_FACTS)
        for name in ("mid_century_budget", "itinerary", "trips", "grid")
    }
    shot("35-3-values-default-width")
    for name, f in facts.items():
        assert not f["nameCut"], (name, f)
        assert f["sizeLines"] == 1 and not f["sizeCut"], (name, f)
        assert f["valueShown"] and f["valueWidth"] > 100, (name, f)
    assert facts["mid_century_budget"]["value"] == "{'flights': 1200, 'hotel': 800, 'food': 450}"
    assert facts["itinerary"]["value"] == "['Oslo', 'Bergen', 'Flåm', 'Stavanger']"
    assert facts["trips"]["value"] == "120 × 3: city, km, days"
    assert facts["grid"]["value"] == "[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]]"


def test_clicking_a_frame_opens_its_first_rows_as_a_table(page: Any, shot: Callable[[str], None]) -> None:
    name_row(page, "trips").locator('[data-action="inspect"]').click()
    view = page.locator('.jp-IpythonCompact-tableView[data-name="trips"][data-state="ready"]')
    view.wait_for()
    assert view.locator(".jp-IpythonCompact-tableNote").inner_text() == (
        "frame of 120 rows × 3 columns; showing the first 50 rows."
    )
    header = view.locator("thead th").all_inner_texts()
    assert header == ["", "city", "km", "days"]
    assert view.locator("tbody tr").count() == 50
    assert view.locator("tbody tr").first.locator("th, td").all_inner_texts() == ["0", "Oslo", "0.0", "2"]
    shot("35-3-frame-table")
    name_row(page, "mid_century_budget").locator('[data-action="inspect"]').click()
    budget = page.locator('.jp-IpythonCompact-tableView[data-name="mid_century_budget"][data-state="ready"]')
    budget.wait_for()
    assert budget.locator("tbody tr").first.locator("th, td").all_inner_texts() == ["flights", "1200"]
    shot("35-3-dict-table")
