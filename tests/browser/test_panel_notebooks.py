"""The panel across two notebooks, and the recall box, in real Chromium against real kernels.

Per-notebook state: a restart noticed in one notebook still offers restore after the user looked
at another notebook and came back, while the other notebook never shows that banner; what the
user typed (focus text) stays with its notebook. Recall: clicking an externalized pointer
(``recall <id>``) in a compaction summary shows that entry's original text; a typed query or id
finds entries; text from the log is shown as text, never as markup. Screenshots of each step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from lab_driver import (
    PANEL,
    ensure_panel_ready,
    name_row,
    run_cell,
    show_notebook,
    wait_kernel_idle,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NB_A = "switch-a.ipynb"
NB_B = "switch-b.ipynb"


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NB_A, NB_B)


# A transcript whose first tool output (401 lines) is externalized by compaction: the summary then
# holds the pointer "[entry <id> · 401 lines · recall <id>]". One message carries hostile markup.
SEED = """
def _seed_big_output():
    from ipython_compact.files import paths
    from ipython_compact.store import SessionStore
    session = compact.status()["session"]
    store = SessionStore(paths.database_path())
    log = "\\n".join(f"build step {i}: ok" for i in range(400)) + "\\nFAILED: linker could not find libquartz"
    items = [
        ("message", {"message": {"role": "user", "timestamp": 1765233665000, "content": [
            {"type": "text", "text": "Read the build log and find why the nightly job failed."}]}}),
        ("message", {"message": {"role": "assistant", "timestamp": 1765233665100, "stopReason": "toolUse",
            "content": [{"type": "toolCall", "id": "call-1", "name": "python",
                         "arguments": {"code": "print(open('build.log').read())"}}]}}),
        ("message", {"message": {"role": "toolResult", "toolCallId": "call-1", "toolName": "python",
            "isError": False, "timestamp": 1765233665200, "content": [{"type": "text", "text": log}]}}),
        ("message", {"message": {"role": "user", "timestamp": 1765233665300, "content": [{"type": "text",
            "text": 'zebrafish note <img src=x onerror="window.__recallPwned=1"> keep this'}]}}),
    ]
    for i in range(10):
        items.append(("message", {"message": {"role": "user", "timestamp": 1765233666000 + i,
            "content": [{"type": "text",
                         "text": f"Step {i}: check the quartz library path and rerun. " * 6}]}}))
        items.append(("message", {"message": {"role": "assistant", "timestamp": 1765233666500 + i,
            "content": [{"type": "text",
                         "text": f"Checked step {i}; the quartz path is still missing. " * 6}]}}))
    store.append_many(session, items)
    store.close()
_seed_big_output()
del _seed_big_output
"""


def _banner(page: Any) -> Any:
    return page.locator(f'{PANEL} .jp-IpythonCompact-banner[data-kind="restart"]')


def test_restart_banner_and_focus_text_stay_with_their_notebook(
    page: Any, shot: Callable[[str], None]
) -> None:
    show_notebook(page, NB_A)
    ensure_panel_ready(page)
    run_cell(page, "kappa = {'unit': 'kelvin'}")
    name_row(page, "kappa").wait_for()
    page.fill(f"{PANEL} .jp-IpythonCompact-focus", "focus for A")
    page.locator(f'{PANEL} button[data-action="snapshot"]').click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-result[data-action="snapshot"][data-kind="ok"]')

    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-kernel'); }")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    _banner(page).wait_for()
    wait_kernel_idle(page)

    # The other notebook: its own kernel, no restart there, nothing typed there.
    show_notebook(page, NB_B)
    ensure_panel_ready(page)
    assert _banner(page).count() == 0
    assert page.input_value(f"{PANEL} .jp-IpythonCompact-focus") == ""
    page.locator(f"{PANEL} .jp-IpythonCompact-notebook").filter(has_text="switch-b.ipynb").wait_for()
    shot("14-other-notebook-no-banner")

    # Back to the restarted notebook: the offer to restore is still there, and so is the focus text.
    show_notebook(page, NB_A)
    _banner(page).wait_for()
    assert page.input_value(f"{PANEL} .jp-IpythonCompact-focus") == "focus for A"
    # The panel reconnects on return; the fresh kernel has not loaded the extension yet.
    page.wait_for_function(
        f"() => ['ready', 'not-loaded'].includes(document.querySelector('{PANEL}').dataset.state)"
    )
    assert _banner(page).count() == 1
    shot("15-restart-banner-kept")
    page.locator(f'{PANEL} button[data-action="restore-after-restart"]').click()
    name_row(page, "kappa").wait_for()
    page.locator(f"{PANEL} .jp-IpythonCompact-result").filter(has_text="kappa").wait_for()
    _banner(page).wait_for(state="detached")


def test_a_restart_in_a_notebook_not_shown_is_noticed(page: Any) -> None:
    show_notebook(page, NB_A)
    # Restart B's kernel while the panel shows A; A shows no banner, B does once it is shown.
    page.evaluate(
        """async (path) => {
            for (const w of window.jupyterapp.shell.widgets('main')) {
                if (w.context && w.context.path === path) { await w.sessionContext.session.kernel.restart(); }
            }
        }""",
        NB_B,
    )
    page.wait_for_timeout(500)
    assert _banner(page).count() == 0
    show_notebook(page, NB_B)
    _banner(page).wait_for()
    page.locator(f'{PANEL} button[data-action="dismiss-restart"]').click()
    _banner(page).wait_for(state="detached")


def test_recall_from_a_summary_pointer_and_from_the_search_box(
    page: Any, shot: Callable[[str], None]
) -> None:
    show_notebook(page, NB_A)
    ensure_panel_ready(page)
    run_cell(page, "%config CompactConfig.compaction = {'keep_recent_tokens': 400}")
    run_cell(page, SEED.strip())
    page.fill(f"{PANEL} .jp-IpythonCompact-focus", "")
    page.locator(f'{PANEL} button[data-action="compact"]').click()
    card = page.locator(f"{PANEL} .jp-IpythonCompact-timeline .jp-IpythonCompact-card").last
    card.wait_for()

    # The externalized pointer is a button; clicking it recalls that entry's original text.
    link = card.locator(".jp-IpythonCompact-recallLink").first
    link.wait_for()
    entry_id = link.get_attribute("data-entry-id")
    assert entry_id and re.fullmatch(r"[\w:-]+", entry_id)
    assert link.inner_text() == f"recall {entry_id}"
    link.click()
    hit = page.locator(f'{PANEL} .jp-IpythonCompact-recall[data-kind="ok"] .jp-IpythonCompact-hit')
    hit.first.wait_for()
    assert hit.count() == 1
    assert hit.first.get_attribute("data-entry-id") == entry_id
    assert hit.first.locator(".jp-IpythonCompact-hitRole").inner_text().lower() == "tool result"
    text = hit.first.locator(".jp-IpythonCompact-hitText")
    assert text.inner_text().startswith("build step 0: ok")
    assert "libquartz" not in text.inner_text(), "a long hit starts as an excerpt"
    assert page.input_value(f"{PANEL} .jp-IpythonCompact-recallInput") == entry_id
    hit.first.scroll_into_view_if_needed()
    shot("16-recall-pointer")
    hit.first.locator('button[data-action="recall-more"]').click()
    text.filter(has_text="FAILED: linker could not find libquartz").wait_for()

    # A typed query: the hostile message is found and shown as text.
    page.fill(f"{PANEL} .jp-IpythonCompact-recallInput", "zebrafish")
    page.press(f"{PANEL} .jp-IpythonCompact-recallInput", "Enter")
    page.wait_for_function(
        f"() => document.querySelector('{PANEL} .jp-IpythonCompact-recall').textContent.includes('zebrafish')"
    )
    found = page.locator(f"{PANEL} .jp-IpythonCompact-recall .jp-IpythonCompact-hit")
    assert found.count() >= 1
    assert '<img src=x onerror="window.__recallPwned=1">' in found.first.inner_text()
    assert page.locator(f"{PANEL} .jp-IpythonCompact-recall img").count() == 0
    assert page.evaluate("() => window.__recallPwned === undefined")
    assert "for query" in page.inner_text(f"{PANEL} .jp-IpythonCompact-recallHead")
    shot("17-recall-query")

    # A typed entry id is looked up as an id; an unknown word finds nothing, plainly.
    page.fill(f"{PANEL} .jp-IpythonCompact-recallInput", entry_id)
    page.press(f"{PANEL} .jp-IpythonCompact-recallInput", "Enter")
    page.wait_for_function(
        f"(id) => document.querySelector('{PANEL} "
        f".jp-IpythonCompact-recallHead')?.textContent.includes('entry ' + id)",
        arg=entry_id,
    )
    assert found.count() == 1 and found.first.get_attribute("data-entry-id") == entry_id
    page.fill(f"{PANEL} .jp-IpythonCompact-recallInput", "xylophoneabsent")
    page.press(f"{PANEL} .jp-IpythonCompact-recallInput", "Enter")
    page.wait_for_function(
        f"() => document.querySelector('{PANEL} .jp-IpythonCompact-recallHead')?.textContent.startsWith('0 "
        f"hits')"
    )
    assert found.count() == 0


def test_after_closing_a_notebook_the_panel_follows_the_next_one(page: Any) -> None:
    show_notebook(page, NB_B)
    # Saved first, so closing asks nothing.
    page.evaluate("""async () => {
        const app = window.jupyterapp;
        await app.commands.execute('docmanager:save');
        await app.commands.execute('application:close');
    }""")
    page.wait_for_function(f"() => document.querySelector('{PANEL}').dataset.notebook !== {json.dumps(NB_B)}")
    show_notebook(page, NB_A)
    ensure_panel_ready(page)
    name_row(page, "kappa").wait_for()
    assert _banner(page).count() == 0


def test_a_long_name_stays_on_one_line_with_the_full_name_in_its_tooltip(page: Any) -> None:
    show_notebook(page, NB_A)
    ensure_panel_ready(page)
    long_name = "quarterly_revenue_by_region_after_currency_adjustment"
    run_cell(page, f"{long_name} = [1.5, 2.5]")
    name_row(page, long_name).wait_for()
    # Measured in one go inside the page: the table is redrawn on every answer.
    facts = page.wait_for_function(
        """([panel, longName]) => {
            const cell = (n) => document.querySelector(
                `${panel} .jp-IpythonCompact-names tr[data-name="${n}"] td`);
            const long = cell(longName), short = cell('kappa');
            if (!long || !short) { return null; }
            return {title: long.title, longHeight: long.getBoundingClientRect().height,
                    shortHeight: short.getBoundingClientRect().height,
                    cut: long.scrollWidth > long.clientWidth};
        }""",
        arg=[PANEL, long_name],
    ).json_value()
    assert facts["title"] == long_name
    assert abs(facts["longHeight"] - facts["shortHeight"]) < 2, "the long name wrapped"
    assert facts["cut"], "the cell should be cut with an ellipsis"
