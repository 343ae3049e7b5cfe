"""With a live ``%%agent``, the panel's gauge, its timeline card and the cell's card give one
context figure and name the estimate that counted it (issue 35), in real Chromium against a real
kernel and the scripted model server over HTTP.

The agent counts its context with an estimate learned from the server's usage; the gauge showed
that figure while the timeline card re-estimated the same moment from the log with the density
estimate (a third of it for this model, whose tokenizer makes three tokens of digits where the
density estimate sees one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lab_driver import PANEL, ensure_panel_ready, run_cell

from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTEBOOK = "agent-figures.ipynb"
GAUGE = f"{PANEL} .jp-IpythonCompact-tokenCount"


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NOTEBOOK,)


def triple_tokenizer(req: RecordedRequest) -> Reply:
    return Reply(
        "Noted. " + "fine " * 20, usage={"prompt_tokens": 3 * req.prompt_tokens, "completion_tokens": 30}
    )


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer(triple_tokenizer) as srv:
        yield srv


def _readings(seed: int) -> str:
    return f"Readings {seed}: " + " ".join(str((seed * 7919 + i * 104729) % 1000003) for i in range(150))


def _number(text: str, pattern: str) -> int:
    found = re.search(pattern, text)
    assert found, text
    return int(found.group(1).replace(",", ""))


def test_the_gauge_and_both_cards_give_the_agents_figure(
    page: Any, server: ModelServer, shot: Callable[[str], None]
) -> None:
    ensure_panel_ready(page)
    run_cell(page, f"%config AgentConfig.model = 'm'\n%config AgentConfig.base_url = '{server.base_url}'")
    for seed in range(6):
        run_cell(
            page, f"%%agent --window 12000\n{_readings(seed)}" if seed == 0 else f"%%agent\n{_readings(seed)}"
        )
    run_cell(page, "%compact now")
    cell_card = page.locator(".jp-Notebook .jp-OutputArea-output .jp-IpythonCompact-card").last
    cell_card.wait_for()
    after = _number(
        cell_card.locator(".jp-IpythonCompact-tokens").inner_text(), r"→ ([\d,]+) tokens in context$"
    )
    page.locator(f'{PANEL} button[data-action="refresh-names"]').click()
    page.wait_for_function(
        "([sel, n]) => { const e = document.querySelector(sel);"
        " return e && e.textContent.startsWith(n + ' /'); }",
        arg=[GAUGE, f"{after:,}"],
    )
    gauge_title = page.locator(GAUGE).get_attribute("title") or ""
    assert gauge_title.startswith("estimated by calibrated ×"), gauge_title
    card = page.locator(f"{PANEL} .jp-IpythonCompact-timeline .jp-IpythonCompact-card").last
    card.wait_for()
    head = card.locator(".jp-IpythonCompact-tokens")
    page.wait_for_function(
        "([sel, n]) => { const all = document.querySelectorAll(sel); const e = all[all.length - 1];"
        " return e && e.textContent.endsWith('→ ' + n + ' tokens in context'); }",
        arg=[
            f"{PANEL} .jp-IpythonCompact-timeline .jp-IpythonCompact-card .jp-IpythonCompact-tokens",
            f"{after:,}",
        ],
    )
    assert _number(head.inner_text(), r"→ ([\d,]+) tokens in context$") == after
    title = head.get_attribute("title") or ""
    assert title.endswith(f", {gauge_title}."), (title, gauge_title)  # the same estimate, named
    card.evaluate("e => e.scrollIntoView({block: 'nearest'})")
    shot("41-agent-card-and-gauge")


def test_after_a_restart_the_gauge_keeps_the_agents_count_and_says_whose(
    page: Any, shot: Callable[[str], None]
) -> None:
    """The gauge jumped from the agent's count to the density estimate of the same context (a
    third of it here) when the kernel restarted; it keeps the agent's count, named as such, until
    the context changes."""
    before = _number(page.locator(GAUGE).inner_text(), r"^([\d,]+) / ")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-kernel'); }")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-banner[data-kind="restart"]')
    page.wait_for_function(
        "(sel) => { const e = document.querySelector(sel);"
        " return e && (e.getAttribute('title') || '').endsWith('as the last live %%agent counted it'); }",
        arg=GAUGE,
    )
    assert _number(page.locator(GAUGE).inner_text(), r"^([\d,]+) / ") == before
    page.locator(GAUGE).scroll_into_view_if_needed()
    shot("41-agent-gauge-after-restart")
