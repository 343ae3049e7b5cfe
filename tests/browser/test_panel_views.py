"""The namespace's wide view, the call tree, 100,000 names, and what the panel shows after a restart.

Real JupyterLab, real kernel, real Chromium. The wide view (main area) shows whole types and
values, sorts, filters and stays live while a cell runs; the timeline shows the call tree of
sub-agent sessions; the panel walks the probe's pages so 100,000 names are all listed; after a
kernel restart, before the extension is loaded again, the newest snapshot's names, the gauge
and the call tree are shown from disk (the server extension). Each step saves a screenshot.
Cells that must still be running while the test looks wait for a file the test writes (an event),
not for a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from lab_driver import (
    PANEL,
    LabServer,
    ensure_panel_ready,
    name_row,
    run_cell,
    show_notebook,
    wait_kernel_idle,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTEBOOK = "views-demo.ipynb"
WIDE = ".jp-IpythonCompact-wide"


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NOTEBOOK,)


def _wide_row(page: Any, name: str) -> Any:
    return page.locator(f'{WIDE} .jp-IpythonCompact-nsTable tr[data-name="{name}"]')


def _wide_names(page: Any) -> list[str]:
    return list(
        page.evaluate(
            f"() => [...document.querySelectorAll('{WIDE} .jp-IpythonCompact-nsTable tbody tr')].map(r => "
            f"r.dataset.name)"
        )
    )


def test_the_wide_view_shows_whole_types_sorts_filters_and_stays_live(
    page: Any, shot: Callable[[str], None], lab_server: LabServer
) -> None:
    ensure_panel_ready(page)
    run_cell(
        page,
        "import pathlib, collections\n"
        "home_path = pathlib.Path('/tmp/some/where')\n"
        "gen = (i for i in range(3))\n"
        "ordered_counts = collections.OrderedDict(a=1)\n"
        "ratio = 0.25\n"
        "label = 'hello'\n"
        "big = list(range(100_000))",
    )
    name_row(page, "big").wait_for()
    shot("30-narrow-panel")
    page.locator(f'{PANEL} button[data-action="open-wide"]').click()
    _wide_row(page, "home_path").wait_for()
    # Whole types, with their module; nothing in the table is cut.
    assert _wide_row(page, "home_path").locator(".jp-IpythonCompact-type").inner_text() == "pathlib.PosixPath"
    assert (
        _wide_row(page, "ordered_counts").locator(".jp-IpythonCompact-type").inner_text()
        == "collections.OrderedDict"
    )
    cut = page.evaluate(
        f"() => [...document.querySelectorAll('{WIDE} .jp-IpythonCompact-nsTable "
        f"td:not(.jp-IpythonCompact-value)')]"
        ".filter(td => td.scrollWidth > td.clientWidth + 1).map(td => td.textContent)"
    )
    assert cut == []
    # A value preview, and why a value would not survive a restart.
    assert _wide_row(page, "ratio").locator(".jp-IpythonCompact-value").inner_text() == "0.25"
    assert _wide_row(page, "label").locator(".jp-IpythonCompact-value").inner_text() == "'hello'"
    assert _wide_row(page, "gen").locator(".jp-IpythonCompact-restart").inner_text().strip() != ""
    assert _wide_row(page, "ratio").locator(".jp-IpythonCompact-restart").inner_text() == ""
    # Sortable: by size, largest first; again, smallest first.
    page.locator(f'{WIDE} th[data-sort="size"]').click()
    # the click redraws the table: wait for the header's new state, then read the rows
    page.wait_for_selector(f'{WIDE} th[data-sort="size"][aria-sort="descending"]')
    assert _wide_names(page)[0] == "big"
    # Filterable, apart from the panel's own filter.
    page.locator(f"{WIDE} .jp-IpythonCompact-nsFilter").fill("home")
    page.wait_for_function(
        f"() => document.querySelectorAll('{WIDE} .jp-IpythonCompact-nsTable tbody tr').length === 1"
    )
    assert _wide_names(page) == ["home_path"]
    assert page.input_value(f"{PANEL} .jp-IpythonCompact-nsFilter") == ""
    assert name_row(page, "big").count() == 1
    shot("31-wide-view")
    page.locator(f"{WIDE} .jp-IpythonCompact-nsFilter").fill("")

    # Live while a cell runs: a name the running cell defines shows up before the cell ends.
    go = lab_server.root / "wide-go"
    go.unlink(missing_ok=True)
    show_notebook(page, NOTEBOOK)  # the wide view stays open beside it
    assert page.locator(WIDE).is_visible()
    run_cell(
        page,
        "import pathlib, time\nlive_while_running = 1\n"
        "while not pathlib.Path('wide-go').exists():\n    time.sleep(0.05)",
        wait=False,
    )
    try:
        page.wait_for_selector(f'{PANEL}[data-busy="true"]')
        _wide_row(page, "live_while_running").wait_for()
        assert page.get_attribute(PANEL, "data-busy") == "true"
        shot("32-wide-view-live")
    finally:
        go.write_text("go")
    wait_kernel_idle(page)


SEED_CALLS = """
def _seed_calls():
    from ipython_compact.files import paths
    from ipython_compact.store import SessionStore
    root = compact.status()["session"]
    store = SessionStore(paths.database_path())
    for child, parent, name in [(root + "/sub-1", root, "researcher"),
                                (root + "/sub-1/a", root + "/sub-1", "fetcher"),
                                (root + "/sub-2", root, "summarizer")]:
        store.ensure_session(child)
        store.append(child, "custom", {"custom_type": "parent_link", "parent_session": parent,
                                       "parent_entry": None, "name": name, "task": "t"})
    store.close()
_seed_calls()
del _seed_calls
"""

CALLS = f"{PANEL} .jp-IpythonCompact-calls"


def _call_tree(page: Any) -> list[tuple[str, str]]:
    return [
        tuple(x)
        for x in page.evaluate(
            f"() => [...document.querySelectorAll('{CALLS} li')].map("
            "li => [li.dataset.depth, li.querySelector('.jp-IpythonCompact-callName').textContent])"
        )
    ]


def test_the_timeline_shows_the_call_tree_of_sub_agents(page: Any, shot: Callable[[str], None]) -> None:
    ensure_panel_ready(page)
    assert page.locator(CALLS).is_hidden()  # no sub-agent yet: no tree
    run_cell(page, SEED_CALLS.strip())
    page.wait_for_function(f"() => document.querySelectorAll('{CALLS} li').length === 4")
    assert _call_tree(page) == [
        ("0", "this session"),
        ("1", "└ researcher"),
        ("2", "└ fetcher"),
        ("1", "└ summarizer"),
    ]
    assert page.inner_text(f"{CALLS} .jp-IpythonCompact-callsHead") == "Call tree · 3 sub-agents"
    page.locator(CALLS).scroll_into_view_if_needed()
    shot("33-call-tree")


def test_a_hundred_thousand_names_are_all_listed(page: Any, shot: Callable[[str], None]) -> None:
    ensure_panel_ready(page)
    run_cell(page, "globals().update({f'w{i:06d}': i for i in range(100_000)})")
    count = f"{PANEL} .jp-IpythonCompact-nsCount"
    page.wait_for_function(f"() => Number(document.querySelector('{count}').dataset.total) >= 100000")
    filt = page.locator(f"{PANEL} .jp-IpythonCompact-nsFilter")
    filt.fill("w0")
    page.wait_for_selector(f'{count}[data-matching="100000"]')
    # The last names are on the probe's last page: they are listed, not cut by a time budget.
    filt.fill("w099999")
    name_row(page, "w099999").wait_for()
    assert "pages" in (page.get_attribute(f"{PANEL} .jp-IpythonCompact-updated", "title") or "")
    assert "Not every name" not in page.inner_text(f"{PANEL} .jp-IpythonCompact-namespace")
    shot("34-hundred-thousand-names")
    filt.fill("")
    run_cell(page, "for _k in [k for k in globals() if k.startswith('w0')]:\n    del globals()[_k]")
    page.wait_for_function(f"() => Number(document.querySelector('{count}').dataset.total) < 1000")


def test_after_a_restart_the_snapshot_gauge_and_tree_show_before_loading(
    page: Any, shot: Callable[[str], None]
) -> None:
    ensure_panel_ready(page)
    run_cell(page, "kept_n = 42\nkept_text = 'persisted'")
    name_row(page, "kept_n").wait_for()
    page.locator(f'{PANEL} button[data-action="snapshot"]').click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-result[data-action="snapshot"][data-kind="ok"]')

    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-kernel'); }")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_selector(f'{PANEL} .jp-IpythonCompact-banner[data-kind="restart"]')
    wait_kernel_idle(page)
    page.wait_for_selector(f'{PANEL}[data-state="not-loaded"]')
    # From disk, before the kernel has the extension: the snapshot's names with their types,
    snap = f"{PANEL} .jp-IpythonCompact-nsSnapshot"
    page.locator(f'{snap} tr[data-name="kept_n"]').wait_for()
    assert page.inner_text(f'{snap} tr[data-name="kept_n"] .jp-IpythonCompact-type') == "int"
    assert page.inner_text(f'{snap} tr[data-name="kept_text"] .jp-IpythonCompact-type') == "str"
    assert "Not in the kernel yet" in page.inner_text(f"{snap} .jp-IpythonCompact-nsSnapshotNote")
    assert name_row(page, "kept_n").count() == 0  # the live table stays the kernel's
    # ... the gauge's status from the session log (a plain notebook: it says so, rather than
    # "No context figures yet"), and the call tree.
    page.locator(f"{PANEL} .jp-IpythonCompact-noConversation").wait_for()
    page.wait_for_function(f"() => document.querySelectorAll('{CALLS} li').length === 4")
    assert len(_call_tree(page)) == 4
    shot("35-after-restart-from-disk")

    page.locator(f'{PANEL} button[data-action="restore-after-restart"]').click()
    name_row(page, "kept_n").wait_for()
    page.wait_for_selector(snap, state="hidden")
    shot("36-after-restore")
