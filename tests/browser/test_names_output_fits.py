"""``%compact names`` in a notebook output fits the output, a row a line (issue 35, item 3,
re-checked): the type "DataFrame" broke into "Data / Frame", a size wrapped over three lines,
and a long value ran past the output's right edge, cut off without an ellipsis. The value
column now gives way (an ellipsis, the whole value in its tooltip); type and size stay whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from lab_driver import ensure_panel_ready, run_cell

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTEBOOK = "names-output.ipynb"

CELL = """\
import numpy as np, pandas as pd
budget = {'flights': 1200, 'hotel': 800, 'food': 450, 'museums': 120, 'trains': 95}
grid = np.arange(12.0).reshape(3, 4)
trips = pd.DataFrame({'city': ['Lisbon', 'Porto'], 'nights': [3, 2]})
note = 'book the Porto hotel before Friday, and ask about the late check-in'
%compact names"""


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NOTEBOOK,)


def test_the_names_table_in_an_output_fits_a_row_a_line(page: Any, shot: Callable[[str], None]) -> None:
    ensure_panel_ready(page)
    run_cell(page, CELL)
    output = page.locator(".jp-Notebook .jp-OutputArea-output").last
    table = output.locator(".jp-IpythonCompact-names")
    table.wait_for()
    table.scroll_into_view_if_needed()
    shot("40-c3-names-output")
    table_box, output_box = table.bounding_box(), output.bounding_box()
    assert table_box["x"] + table_box["width"] <= output_box["x"] + output_box["width"] + 1
    heights = {
        name: {
            part: table.locator(f'tr[data-name="{name}"] .jp-IpythonCompact-{part}').bounding_box()["height"]
            for part in ("name", "type", "size", "value")
        }
        for name in ("budget", "grid", "trips", "note")
    }
    for name, cells in heights.items():
        line = cells["name"]
        assert all(h <= line + 1 for h in cells.values()), (name, cells)  # one line each
    assert table.locator('tr[data-name="trips"] .jp-IpythonCompact-type').inner_text() == "DataFrame"
    value = table.locator('tr[data-name="note"] .jp-IpythonCompact-value')
    assert value.get_attribute("title") == repr(
        "book the Porto hotel before Friday, and ask about the late check-in"
    )
