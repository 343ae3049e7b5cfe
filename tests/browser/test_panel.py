"""The JupyterLab panel in real Chromium against a real kernel with the real kernel side.

One notebook, one kernel, steps in the order a person would take them: the panel opens and says
the extension is not loaded (and loads it on request); a variable defined in a cell appears; while
a long cell runs the panel's namespace request is still answered over the subshell comm; compact
adds a timeline entry with a rendered summary; restart is noticed and restore brings a variable
back; the summary renderer shows hostile text as text. Each step saves a screenshot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from lab_driver import (
    PANEL,
    SEED_TRANSCRIPT,
    ensure_panel_ready,
    name_row,
    names_updated_at,
    open_panel,
    run_cell,
    show_notebook,
    wait_kernel_idle,
    wait_notebook_kernel,
    wait_panel_state,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTEBOOK = "compact-demo.ipynb"


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NOTEBOOK,)


def _subshells(page: Any) -> list[str]:
    return list(
        page.evaluate(
            """async () => {
            const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
            const reply = await k.requestListSubshell({}).done;
            return reply.content.subshell_id;
        }"""
        )
    )


def test_panel_opens_and_offers_to_load_the_extension(page: Any, shot: Callable[[str], None]) -> None:
    # Until the panel is shown it sends nothing: no comm, no subshell in the user's kernel.
    page.wait_for_timeout(1_000)
    assert _subshells(page) == []
    open_panel(page)
    wait_panel_state(page, "not-loaded")
    banner = page.locator(f"{PANEL} .jp-IpythonCompact-banner")
    assert "not loaded" in banner.inner_text()
    assert page.locator(f'{PANEL} button[data-action="compact"]').is_disabled()
    shot("01-panel-not-loaded")

    # The panel re-renders on every report (a cell running, the kernel asked again); the button the
    # user is pressing must stay the same element, or the click is lost. CI (stop 39) saw "element
    # was detached from the DOM" for 120 s on a loaded machine.
    page.evaluate(
        f"""() => {{
            document.querySelector('{PANEL} button[data-action="load-extension"]').dataset.seen = '1';
            window.__panelRenders = 0;
            new MutationObserver(() => {{ window.__panelRenders += 1; }}).observe(
                document.querySelector('{PANEL} .jp-IpythonCompact-state'), {{childList: true}});
        }}"""
    )
    run_cell(page, "1 + 1")
    page.wait_for_function("() => window.__panelRenders > 0")
    assert page.locator(f'{PANEL} button[data-action="load-extension"][data-seen="1"]').count() == 1
    shot("01b-still-not-loaded-after-a-cell")

    banner.locator('button[data-action="load-extension"]').click()
    wait_panel_state(page, "ready")
    page.locator(f"{PANEL} .jp-IpythonCompact-state").filter(
        has_text=re.compile("^connected$", re.I)
    ).wait_for()
    page.locator(f"{PANEL} .jp-IpythonCompact-stateDetail").filter(
        has_text="live while cells run (subshell)"
    ).wait_for()
    # A plain notebook has no model conversation: the gauge says what it is for, Compact waits for one.
    note = page.locator(f"{PANEL} .jp-IpythonCompact-noConversation")
    note.wait_for()
    assert note.inner_text().startswith("No model conversation in this session yet.")
    assert page.locator(f"{PANEL} .jp-IpythonCompact-tokenCount").count() == 0
    assert page.locator(f'{PANEL} button[data-action="compact"]').get_attribute("title") == note.inner_text()
    assert page.locator(f'{PANEL} button[data-action="snapshot"]').is_enabled()
    shot("02-panel-connected")
    assert len(_subshells(page)) == 1


def test_variable_defined_in_a_cell_appears(page: Any, shot: Callable[[str], None]) -> None:
    ensure_panel_ready(page)
    run_cell(page, "alpha = [1, 2, 3]\nimport numpy as np\ngrid = np.zeros((3, 4))")
    name_row(page, "alpha").wait_for()
    name_row(page, "grid").wait_for()
    alpha_cells = name_row(page, "alpha").locator("td").all_inner_texts()
    grid_cells = name_row(page, "grid").locator("td").all_inner_texts()
    assert alpha_cells[1] == "list"
    assert "len 3" in alpha_cells[2]
    assert "(3, 4)" in grid_cells[2]
    shot("03-variable-appears")


def test_namespace_is_answered_while_a_long_cell_runs(
    page: Any, shot: Callable[[str], None], lab_server: Any
) -> None:
    ensure_panel_ready(page)
    before = names_updated_at(page)
    go = lab_server.root / "beta-go"
    go.unlink(missing_ok=True)
    # The cell runs until the test lets it go: "still running" is a fact, not a race with a clock.
    run_cell(
        page,
        "beta = 42\nimport pathlib, time\nwhile not pathlib.Path('beta-go').exists():\n    time.sleep(0.05)",
        wait=False,
    )
    try:
        page.wait_for_selector(f'{PANEL}[data-busy="true"]')
        # `beta` exists only inside the running cell: seeing it proves the request was answered mid-cell.
        name_row(page, "beta").wait_for()
        assert page.get_attribute(PANEL, "data-busy") == "true", (
            "the cell had finished before the panel answered"
        )
        assert names_updated_at(page) > before
        page.locator(f"{PANEL} .jp-IpythonCompact-note").filter(has_text="subshell").wait_for()
        shot("04-answered-while-cell-runs")
    finally:
        go.write_text("go")
    wait_kernel_idle(page)
    page.wait_for_selector(f'{PANEL}[data-busy="false"]')


def test_compact_adds_a_timeline_entry_with_a_rendered_summary(
    page: Any, shot: Callable[[str], None]
) -> None:
    ensure_panel_ready(page)
    run_cell(page, "%config CompactConfig.compaction = {'keep_recent_tokens': 400}")
    run_cell(page, SEED_TRANSCRIPT.strip())
    page.locator(f'{PANEL} button[data-action="refresh-names"]').click()
    # A conversation now: the gauge shows the kernel's own figures, a window and both threshold lines.
    page.wait_for_selector(f"{PANEL} .jp-IpythonCompact-tokenCount")
    assert "tokens" in page.inner_text(f"{PANEL} .jp-IpythonCompact-tokenCount")
    assert page.locator(f"{PANEL} .jp-IpythonCompact-line-blocking").count() == 1
    assert page.locator(f"{PANEL} .jp-IpythonCompact-line-background").count() == 1
    page.fill(f"{PANEL} .jp-IpythonCompact-focus", "revenue totals")
    page.locator(f'{PANEL} button[data-action="preview"]').click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-result[data-action="preview"][data-kind="ok"]')
    plan = page.locator(f"{PANEL} .jp-IpythonCompact-plan")
    assert "tokens" in plan.locator('tr[data-bucket="summarize"]').inner_text()
    assert "tokens" in plan.locator('tr[data-bucket="keep"]').inner_text()
    assert page.locator(f"{PANEL} .jp-IpythonCompact-card").count() == 0, "preview must not compact"
    shot("05-preview")
    page.locator(f'{PANEL} button[data-action="compact"]').click()
    card = page.locator(f"{PANEL} .jp-IpythonCompact-timeline .jp-IpythonCompact-card")
    card.first.wait_for()
    # the card and the result line are drawn by separate replies: wait for the result's own state
    result = page.locator(f"{PANEL} .jp-IpythonCompact-result")
    page.wait_for_selector(
        f'{PANEL} .jp-IpythonCompact-result[data-action="compact"]:not([data-kind="pending"])'
    )
    assert result.get_attribute("data-kind") == "ok", result.inner_text()
    head = card.first.locator(".jp-IpythonCompact-tokens").inner_text()
    assert "→" in head and "tokens" in head
    assert card.first.locator(".jp-IpythonCompact-reason").inner_text() == "manual"
    summary = card.first.locator(".jp-IpythonCompact-summary")
    assert summary.inner_text().strip() != ""
    # Rendered, not dumped: the checkpoint's headings/lists became elements.
    assert summary.locator("h3, h4, h5, h6, li").count() > 0
    # The plan kept the recent tail verbatim; the card says how much (the kernel counts it).
    assert re.search(
        r"\b[1-9]\d* kept "
        r"messages?\b",
        card.first.locator(".jp-IpythonCompact-kept").inner_text(),
    )
    # for the screenshot only; a refresh may replace the card meanwhile (the locator finds the new one)
    card.first.evaluate("e => e.scrollIntoView({block: 'nearest'})")
    shot("06-compaction-timeline")


def test_restart_is_noticed_and_restore_brings_a_variable_back(
    page: Any, shot: Callable[[str], None]
) -> None:
    ensure_panel_ready(page)
    run_cell(page, "gamma = {'city': 'Lyon', 'rows': 3}")
    name_row(page, "gamma").wait_for()
    page.locator(f'{PANEL} button[data-action="snapshot"]').click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-result[data-action="snapshot"][data-kind="ok"]')
    assert "saved" in page.inner_text(f"{PANEL} .jp-IpythonCompact-result")
    shot("07-snapshot-saved")

    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-kernel'); }")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-banner[data-kind="restart"]')
    wait_kernel_idle(page)
    name_row(page, "gamma").wait_for(state="detached")
    shot("08-restart-noticed")

    page.locator(f'{PANEL} button[data-action="restore-after-restart"]').click()
    name_row(page, "gamma").wait_for()
    # the row, the action's answer and the banner's leaving are separate redraws: wait for each
    page.locator(f"{PANEL} .jp-IpythonCompact-result").filter(has_text="gamma").wait_for()
    page.wait_for_selector(f"{PANEL} .jp-IpythonCompact-banner", state="hidden")
    # The value is really back in the kernel, not only listed.
    run_cell(page, "print(gamma['city'])")
    outputs = page.locator(".jp-Notebook .jp-OutputArea-output").all_inner_texts()
    assert any("Lyon" in o for o in outputs)
    shot("09-restored")


def test_summary_renderer_shows_hostile_text_as_text(page: Any, shot: Callable[[str], None]) -> None:
    payload = {
        "id": "e-x",
        "timestamp": "2026-01-01T00:00:00Z",
        "reason": "threshold",
        "tokens_before": 120000,
        "tokens_after": 18000,
        "first_kept_entry_id": "e-9",
        "kept_entries": 4,
        "summary": '## Goal\n- keep **totals** in `df`\n<img src=x onerror="window.__pwned=1">',
    }
    code = (
        "from IPython.display import display\n"
        f"display({{'application/vnd.ipython-compact.summary+json': {json.dumps(payload)}, "
        "'text/plain': 'summary'}, raw=True)"
    )
    run_cell(page, code)
    out = page.locator(".jp-Notebook .jp-OutputArea-output .jp-IpythonCompact-card").last
    out.wait_for()
    assert out.locator("h3, h4").first.inner_text() == "Goal"
    assert out.locator("strong").first.inner_text() == "totals"
    assert out.locator("img").count() == 0
    assert "<img src=x" in out.inner_text()
    assert page.evaluate("() => window.__pwned === undefined")
    out.scroll_into_view_if_needed()
    shot("10-summary-renderer")


def test_compact_magic_outputs_use_the_renderers(page: Any, shot: Callable[[str], None]) -> None:
    ensure_panel_ready(page)
    run_cell(page, "zeta = 'z'\n%compact names")
    table = page.locator(".jp-Notebook .jp-OutputArea-output .jp-IpythonCompact-names").last
    table.wait_for()
    assert table.locator('tr[data-name="zeta"]').count() == 1
    # The probe's readable dtype, not numpy's type string ('<f8').
    assert "float64" in table.locator('tr[data-name="grid"]').inner_text()
    table.scroll_into_view_if_needed()
    shot("11a-names-output")
    cards = page.locator(".jp-Notebook .jp-OutputArea-output .jp-IpythonCompact-card")
    before = cards.count()
    # A restart (previous test) reset the kernel's config: keep a small recent tail again.
    run_cell(page, "%config CompactConfig.compaction = {'keep_recent_tokens': 400}")
    run_cell(page, SEED_TRANSCRIPT.strip())
    run_cell(page, "%compact now revenue")
    page.wait_for_function(
        "(n) => document.querySelectorAll('.jp-Notebook .jp-OutputArea-output "
        ".jp-IpythonCompact-card').length > n",
        arg=before,
    )
    card = cards.last
    assert card.locator(".jp-IpythonCompact-reason").inner_text() == "manual"
    assert "→" in card.locator(".jp-IpythonCompact-tokens").inner_text()
    assert card.locator(".jp-IpythonCompact-summary").inner_text().strip() != ""
    # Done lines are checked boxes, not "[x]" as text; the list is in log order (issue 18)
    done = card.locator('.jp-IpythonCompact-summary li[data-task="done"]')
    assert done.count() >= 2
    texts = done.all_inner_texts()
    assert not any("[x]" in t for t in texts)
    steps = [int(m) for m in re.findall(r"Step (\d+):", " ".join(texts))]
    assert steps == sorted(steps) and len(steps) >= 2
    card.scroll_into_view_if_needed()
    shot("11-magic-outputs")


def test_without_subshells_the_panel_says_busy_instead_of_freezing(
    page: Any, shot: Callable[[str], None], lab_server: Any
) -> None:
    # The same switch JupyterLab's "commsOverSubshells" setting flips; a kernel or a Lab without
    # subshells behaves this way: comm requests would queue behind the running cell.
    lab_server.put_notebook("no-subshells.ipynb")
    page.evaluate("""async () => {
        const app = window.jupyterapp;
        app.serviceManager.kernels.commsOverSubshells = 'disabled';
        await app.commands.execute('docmanager:open', {path: 'no-subshells.ipynb'});
    }""")
    wait_notebook_kernel(page, "no-subshells.ipynb")
    ensure_panel_ready(page)
    assert page.inner_text(f"{PANEL} .jp-IpythonCompact-stateDetail") == "refreshes between cells"
    run_cell(page, "delta = 1")
    name_row(page, "delta").wait_for()

    go = lab_server.root / "epsilon-go"
    go.unlink(missing_ok=True)
    run_cell(
        page,
        "epsilon = 2\nimport pathlib, time\n"
        "while not pathlib.Path('epsilon-go').exists():\n    time.sleep(0.05)",
        wait=False,
    )
    try:
        page.wait_for_selector(f'{PANEL}[data-busy="true"]')
        note = page.locator(f"{PANEL} .jp-IpythonCompact-note")
        note.filter(has_text="Kernel busy").wait_for()
        assert "no subshells" in note.inner_text()
        assert name_row(page, "epsilon").count() == 0
        assert page.get_attribute(PANEL, "data-busy") == "true"
        assert page.locator(f'{PANEL} button[data-action="snapshot"]').is_disabled()
        shot("12-busy-without-subshells")
    finally:
        go.write_text("go")
    wait_kernel_idle(page)
    name_row(page, "epsilon").wait_for()
    assert page.locator(f"{PANEL} .jp-IpythonCompact-note").is_hidden()
    page.evaluate("() => { window.jupyterapp.serviceManager.kernels.commsOverSubshells = 'perCommTarget'; }")


def test_panel_follows_the_dark_theme(page: Any, shot: Callable[[str], None]) -> None:
    open_panel(page)
    # The notebook with a namespace and a timeline, so the dark screenshot shows every part.
    show_notebook(page, NOTEBOOK)
    background = f"() => getComputedStyle(document.querySelector('{PANEL}')).backgroundColor"
    light = page.evaluate(background)
    page.evaluate(
        "async (theme) => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme}); }",
        "JupyterLab Dark",
    )
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    page.wait_for_function(f"(light) => ({background})() !== light", arg=light)
    page.wait_for_selector("#jupyterlab-splash", state="detached")
    shot("13-dark-theme")
    page.evaluate(
        "async (theme) => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme}); }",
        "JupyterLab Light",
    )
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'")
