"""The panel in a plain notebook, with a large namespace, and under an output flood (real Chromium, real
kernel).

A plain notebook (nothing talks to a model) says what the context gauge is for and disables
Compact/Preview with that reason; counts read "1 compaction", not "1 compactions"; a timeline card
shows its compaction's focus. A namespace of 10,000 names is counted in full, filtered by name and
drawn 200 rows at a time, and a poll that finds the same names keeps the table it drew. A cell that
floods its output (the server's IOPub rate limiter drops the panel's replies) until the panel shows
the flood never puts the panel in an error state, and the panel shows fresh names once the cell ends. Each
step saves a screenshot.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from lab_driver import (
    PANEL,
    SEED_TRANSCRIPT,
    LabServer,
    ensure_panel_ready,
    name_row,
    names_updated_at,
    run_cell,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTEBOOK = "namespace-demo.ipynb"

NO_CONVERSATION = (
    "No model conversation in this session yet. The gauge fills when an %%agent cell runs "
    "or a transcript is imported with %compact import FILE."
)


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NOTEBOOK,)


def _button(page: Any, action: str) -> Any:
    return page.locator(f'{PANEL} .jp-IpythonCompact-actions button[data-action="{action}"]')


def _shows(page: Any, count: str, rows: int | None = None) -> None:
    """Wait until the names count reads ``count`` (and the table holds ``rows`` rows): a click or a
    keystroke redraws the table after it returns, so what it produces is waited for, not read."""
    page.wait_for_function(
        """([panel, count, rows]) => {
            const said = document.querySelector(`${panel} .jp-IpythonCompact-nsCount`);
            const shown = document.querySelectorAll(`${panel} .jp-IpythonCompact-nsTable tbody tr`).length;
            return said !== null && said.textContent === count && (rows === null || shown === rows);
        }""",
        arg=[PANEL, count, rows],
    )


def test_a_plain_notebook_says_what_the_gauge_is_for(page: Any, shot: Callable[[str], None]) -> None:
    ensure_panel_ready(page)
    note = page.locator(f"{PANEL} .jp-IpythonCompact-gauge .jp-IpythonCompact-noConversation")
    note.wait_for()
    assert note.inner_text() == NO_CONVERSATION
    # No "0 / 128,000 tokens" and no bar: there is nothing to measure yet.
    assert page.locator(f"{PANEL} .jp-IpythonCompact-tokenCount").count() == 0
    assert page.locator(f"{PANEL} .jp-IpythonCompact-bar").count() == 0
    for action in ("compact", "preview"):
        assert _button(page, action).is_disabled(), action
        assert _button(page, action).get_attribute("title") == NO_CONVERSATION
    # Disabled, Compact no longer looks like the primary action (no brand-blue fill).
    colours = page.evaluate(
        f"""() => [...document.querySelectorAll('{PANEL} .jp-IpythonCompact-actions button')].map(
            b => [b.dataset.action, getComputedStyle(b).backgroundColor])"""
    )
    by_action = dict(colours)
    assert by_action["compact"] == by_action["preview"], colours
    for action in ("snapshot", "restore"):
        assert _button(page, action).is_enabled(), action
        assert not _button(page, action).get_attribute("title")
    assert page.inner_text(f"{PANEL} .jp-IpythonCompact-stateDetail") == "live while cells run (subshell)"
    shot("20-plain-notebook")


def test_ten_thousand_names_are_counted_filtered_and_paged(page: Any, shot: Callable[[str], None]) -> None:
    ensure_panel_ready(page)
    run_cell(page, "globals().update({f'v{i:05d}': i for i in range(10_000)})")
    _shows(page, "10,000 names", 200)
    more = page.locator(f'{PANEL} button[data-action="more-names"]')
    assert more.inner_text() == "Showing 200 of 10,000 · show 200 more"
    # Every name was listed: no time-budget truncation note.
    assert "time budget" not in page.inner_text(f"{PANEL} .jp-IpythonCompact-namespace")
    assert re.fullmatch(r"updated \d\d:\d\d:\d\d", page.inner_text(f"{PANEL} .jp-IpythonCompact-updated"))
    shot("21-ten-thousand-names")
    more.click()
    _shows(page, "10,000 names", 400)
    more.filter(has_text="Showing 400 of 10,000 · show 200 more").wait_for()

    filt = page.locator(f"{PANEL} .jp-IpythonCompact-nsFilter")
    filt.fill("v0999")
    _shows(page, "10 of 10,000 names match", 10)
    assert name_row(page, "v09999").count() == 1 and name_row(page, "v00001").count() == 0
    assert more.is_hidden()
    shot("22-names-filtered")
    filt.fill("V099")  # case does not matter
    _shows(page, "100 of 10,000 names match")
    filt.fill("nosuchname")
    page.locator(f"{PANEL} .jp-IpythonCompact-nsTable").filter(
        has_text=re.compile("^No name contains “nosuchname”.$")
    ).wait_for()
    filt.fill("")
    _shows(page, "10,000 names", 200)

    # A refresh that finds the same names keeps the table element; a changed namespace rebuilds it.
    page.evaluate(
        f"() => {{ document.querySelector('{PANEL} .jp-IpythonCompact-names').dataset.mark = 'kept'; }}"
    )
    before = names_updated_at(page)
    page.locator(f'{PANEL} button[data-action="refresh-names"]').click()
    page.wait_for_function(
        f"(t) => Number(document.querySelector('{PANEL} .jp-IpythonCompact-updated').dataset.updatedAt) > t",
        arg=before,
    )
    assert page.locator(f'{PANEL} .jp-IpythonCompact-names[data-mark="kept"]').count() == 1
    run_cell(page, "aaa_new = 1")
    name_row(page, "aaa_new").wait_for()
    _shows(page, "10,001 names")
    assert page.locator(f'{PANEL} .jp-IpythonCompact-names[data-mark="kept"]').count() == 0


# Watches the panel every 100 ms from inside the page, so no state between two checks is missed.
MONITOR = """(panel) => {
    window.__floodSeen = [];
    window.__floodMonitor = window.setInterval(() => {
        const p = document.querySelector(panel);
        const note = p.querySelector('.jp-IpythonCompact-note');
        const problems = [...p.querySelectorAll('.jp-IpythonCompact-problem')].map(e => e.textContent);
        const banner = p.querySelector('.jp-IpythonCompact-banner');
        window.__floodSeen.push({
            state: p.dataset.state, flooding: p.dataset.flooding, busy: p.dataset.busy,
            noteKind: note.hidden ? '' : note.dataset.kind, note: note.hidden ? '' : note.textContent,
            problems, banner: banner.hidden ? '' : banner.textContent,
        });
    }, 100);
}"""


#: The flood: FLOOD_RATE output messages a second — over the server's limit of 1,000 a second, so it
#: drops messages (the panel's replies among them) — until the test says stop, which it does once the
#: panel shows the flood. Bounded work, so it takes the same course on a loaded machine: the messages
#: are paced (the server handles a few thousand a second, not a burst whose backlog took minutes to
#: drain), and each one updates one small display in place, so the page has one output to redraw
#: rather than a text that grows by a line per message (redrawn whole each time, which kept the page
#: from seeing the cell's end for minutes). The bound (two minutes' worth) only ends a test that
#: never says stop.
FLOOD_RATE = 1_500
FLOOD_BOUND = 120 * FLOOD_RATE
FLOOD_CELL = f"""import pathlib, time
from IPython.display import display
_stop, _i, _t0 = pathlib.Path('flood-stop'), 0, time.monotonic()
_shown = display('0', display_id=True)
while _i < {FLOOD_BOUND} and not _stop.exists():
    for _ in range(25):
        _shown.update(str(_i))
        _i += 1
    time.sleep(max(0.0, _t0 + _i / {FLOOD_RATE} - time.monotonic()))
flood_lines = _i
flood_done = True"""


def test_an_output_flood_never_shows_an_error_and_the_panel_recovers(
    page: Any, shot: Callable[[str], None], lab_server: LabServer
) -> None:
    ensure_panel_ready(page)
    stop = lab_server.root / "flood-stop"
    stop.unlink(missing_ok=True)
    page.evaluate(MONITOR, PANEL)
    # Event-bound, not clock-bound: the cell floods until the panel has shown the flood, then stops.
    run_cell(page, FLOOD_CELL, wait=False)
    page.wait_for_selector(f'{PANEL}[data-busy="true"]')
    started = names_updated_at(page)
    try:
        page.wait_for_selector(f'{PANEL}[data-flooding="true"]')
    finally:
        stop.write_text("stop")
    # (No screenshot mid-flood: capturing a page that is still drawing the lines stalls it.)
    # The events that end the flood, in order: the cell's own last line ran, then the panel saw idle.
    phases = [time.monotonic()]
    name_row(page, "flood_done").wait_for()
    phases.append(time.monotonic())
    page.wait_for_selector(f'{PANEL}[data-busy="false"]')  # caps: the page may draw slowly
    phases.append(time.monotonic())
    page.wait_for_function(
        f"() => document.querySelector('{PANEL}').dataset.flooding === 'false'", timeout=120_000
    )
    phases.append(time.monotonic())
    assert names_updated_at(page) > started
    seen = page.evaluate("() => { window.clearInterval(window.__floodMonitor); return window.__floodSeen; }")
    assert len(seen) > 10
    bad = [
        s for s in seen if s["state"] != "ready" or s["problems"] or s["banner"] or s["noteKind"] == "error"
    ]
    assert bad == [], [(s["note"], s["problems"], s["banner"]) for s in bad[:5]]
    flooded = [s for s in seen if s["flooding"] == "true"]
    assert flooded
    for s in flooded:
        assert s["note"] == "Kernel output is flooding; the panel will refresh when it calms down.", s
    # The flood ended because the panel saw it (the stop file), not at the safety bound.
    lines = int(name_row(page, "flood_lines").locator(".jp-IpythonCompact-value").inner_text())
    assert 0 < lines < FLOOD_BOUND
    print(
        f"panel samples: {len(seen)}, flooding in {len(flooded)}, output messages {lines:,}; after the "
        f"stop "
        f"(s): flood_done listed {phases[1] - phases[0]:.1f}, idle {phases[2] - phases[0]:.1f}, "
        f"calm {phases[3] - phases[0]:.1f}"
    )
    # The cell finished: the line after the loop ran (`flood_done` above), and the prompt shows its count.
    prompt = page.locator(".jp-Notebook .jp-CodeCell").nth(-2).locator(".jp-InputPrompt").inner_text()
    assert re.fullmatch(r"\[\d+\]:", prompt.strip()), prompt
    assert page.get_attribute(PANEL, "data-state") == "ready"
    page.locator(f"{PANEL} .jp-IpythonCompact-namespace").scroll_into_view_if_needed()
    shot("24-after-flood")


def test_counts_are_singular_for_one_and_cards_show_the_focus(page: Any, shot: Callable[[str], None]) -> None:
    ensure_panel_ready(page)
    run_cell(page, "%config CompactConfig.compaction = {'keep_recent_tokens': 400}")
    run_cell(page, SEED_TRANSCRIPT.strip())
    # A conversation now: the gauge is back and Compact is usable, without the plain-notebook tooltip.
    page.wait_for_selector(f"{PANEL} .jp-IpythonCompact-tokenCount")
    assert page.locator(f"{PANEL} .jp-IpythonCompact-noConversation").count() == 0
    assert _button(page, "compact").is_enabled() and not _button(page, "compact").get_attribute("title")
    page.fill(f"{PANEL} .jp-IpythonCompact-focus", "revenue totals")
    _button(page, "compact").click()
    card = page.locator(f"{PANEL} .jp-IpythonCompact-timeline .jp-IpythonCompact-card").first
    card.wait_for()
    assert card.locator(".jp-IpythonCompact-cardFocus").inner_text() == "focus: revenue totals"
    page.wait_for_function(
        f"() => / · 1 compaction$/.test(document.querySelector('{PANEL} "
        f".jp-IpythonCompact-facts').textContent)",
    )
    facts = page.inner_text(f"{PANEL} .jp-IpythonCompact-facts")
    assert re.fullmatch(r"[\d,]+ entries · 1 compaction", facts), facts
    page.locator(f"{PANEL} .jp-IpythonCompact-gauge").scroll_into_view_if_needed()
    shot("25-singular-counts")
    card.scroll_into_view_if_needed()
    shot("26-card-focus")
    # A compaction without focus text has no focus line.
    run_cell(page, SEED_TRANSCRIPT.strip())
    page.fill(f"{PANEL} .jp-IpythonCompact-focus", "")
    _button(page, "compact").click()
    page.wait_for_function(
        f"() => document.querySelectorAll('{PANEL} .jp-IpythonCompact-timeline "
        f".jp-IpythonCompact-card').length === 2",
    )
    cards = page.locator(f"{PANEL} .jp-IpythonCompact-timeline .jp-IpythonCompact-card")
    assert cards.nth(0).locator(".jp-IpythonCompact-cardFocus").count() == 1
    assert cards.nth(1).locator(".jp-IpythonCompact-cardFocus").count() == 0
    assert page.inner_text(f"{PANEL} .jp-IpythonCompact-facts").endswith(" · 2 compactions")
