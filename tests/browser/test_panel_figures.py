"""The panel's timeline card, its Compact result and its gauge give one context figure (issue 35,
item 6), in real Chromium against a real kernel.

The card showed the compaction's own estimate (checkpoint and kept tail) while the gauge, right
after, showed the context with the kernel-state notice placed after the compaction: two numbers
under one label. Now the card and the result lead with the context right after (the gauge's
figure) and name the compaction's own estimate as "checkpoint and kept tail".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from lab_driver import PANEL, SEED_TRANSCRIPT, ensure_panel_ready, run_cell

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTEBOOK = "figures.ipynb"
GAUGE = f"{PANEL} .jp-IpythonCompact-tokenCount"


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NOTEBOOK,)


def _number(text: str, pattern: str) -> int:
    found = re.search(pattern, text)
    assert found, text
    return int(found.group(1).replace(",", ""))


def _gauge(page: Any) -> int:
    return _number(page.inner_text(GAUGE), r"^([\d,]+) / ")


def _gauge_drops_below(page: Any, before: int) -> None:
    page.wait_for_function(
        "([sel, n]) => { const e = document.querySelector(sel);"
        " const m = e && e.textContent.match(/^([\\d,]+) \\//);"
        " return m !== null && Number(m[1].replace(/,/g, '')) < n; }",
        arg=[GAUGE, before],
    )


def test_the_card_the_result_and_the_gauge_agree_after_a_compaction(
    page: Any, shot: Callable[[str], None]
) -> None:
    ensure_panel_ready(page)
    run_cell(page, "%config CompactConfig.compaction = {'keep_recent_tokens': 400}\nrows = [1, 2, 3]")
    run_cell(page, SEED_TRANSCRIPT.strip())
    page.locator(f'{PANEL} button[data-action="refresh-names"]').click()
    page.wait_for_function(
        "(sel) => { const e = document.querySelector(sel); return e && /^[\\d,]+ \\//.test(e.textContent)"
        " && !/^[0-9] \\//.test(e.textContent); }",
        arg=GAUGE,
    )
    before = _gauge(page)
    page.locator(f'{PANEL} button[data-action="compact"]').click()
    page.wait_for_selector(
        f'{PANEL} .jp-IpythonCompact-result[data-action="compact"]:not([data-kind="pending"])'
    )
    result = page.locator(f"{PANEL} .jp-IpythonCompact-result").inner_text()
    _gauge_drops_below(page, before)
    gauge = _gauge(page)
    card = page.locator(f"{PANEL} .jp-IpythonCompact-timeline .jp-IpythonCompact-card").last
    card.wait_for()
    head = card.locator(".jp-IpythonCompact-tokens").inner_text()
    kept = card.locator(".jp-IpythonCompact-kept").inner_text()
    card.evaluate("e => e.scrollIntoView({block: 'nearest'})")
    shot("40-b-card")
    page.locator(GAUGE).scroll_into_view_if_needed()
    shot("40-b-gauge-and-result")
    assert _number(head, r"→ ([\d,]+) tokens in context$") == gauge, (head, gauge)
    assert _number(result, r"→ ([\d,]+) tokens in context") == gauge, (result, gauge)
    own = _number(kept, r"^checkpoint and kept tail ([\d,]+) · ")
    assert own != gauge and f"(checkpoint and kept tail {own:,})" in result, (kept, result)

    # the cell's own card (the summary renderer) says the same as the gauge right after it
    run_cell(page, SEED_TRANSCRIPT.strip())
    run_cell(page, "%compact now")
    cell_card = page.locator(".jp-Notebook .jp-OutputArea-output .jp-IpythonCompact-card").last
    cell_card.wait_for()
    page.locator(f'{PANEL} button[data-action="refresh-names"]').click()
    cell_head = cell_card.locator(".jp-IpythonCompact-tokens").inner_text()
    after = _number(cell_head, r"→ ([\d,]+) tokens in context$")
    page.wait_for_function(
        "([sel, n]) => { const e = document.querySelector(sel);"
        " return e && e.textContent.startsWith(n + ' /'); }",
        arg=[GAUGE, f"{after:,}"],
    )
    cell_card.locator(".jp-IpythonCompact-tokens").scroll_into_view_if_needed()
    page.locator(GAUGE).scroll_into_view_if_needed()
    shot("40-b-cell-card-and-gauge")


def test_a_long_nothing_to_compact_note_stays_inside_the_panel(
    page: Any, shot: Callable[[str], None]
) -> None:
    """The note names the session (a notebook's whole path) and the setting
    (CompactConfig.compaction['keep_recent_tokens']): words longer than the panel is wide ran past
    its edge and were clipped."""
    run_cell(page, "%config CompactConfig.compaction = {'keep_recent_tokens': 400000}")
    page.locator(f'{PANEL} button[data-action="preview"]').click()
    note = page.locator(f'{PANEL} .jp-IpythonCompact-result[data-action="preview"][data-kind="note"] p')
    note.wait_for()
    assert "keep_recent_tokens" in note.inner_text()
    note.scroll_into_view_if_needed()
    shot("40-c6-preview-note-fits")
    widths = note.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert widths[0] <= widths[1], widths
