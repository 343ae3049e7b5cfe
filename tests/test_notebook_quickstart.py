"""notebooks/quickstart.ipynb runs top to bottom in a real kernel, with the kernel restarted (via
the kernel manager) where the notebook tells the reader to restart it."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.util import run_sync

pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "quickstart.ipynb"


def _text(output: dict) -> str:  # type: ignore[type-arg]
    data = output.get("data", {})
    return str(data.get("text/plain", "")) + str(output.get("text", ""))


def test_quickstart_notebook_executes_with_a_restart(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    env = {k: v for k, v in os.environ.items() if k not in ("IPYTHON_COMPACT_SESSION", "JPY_SESSION_NAME")}
    env["IPYTHON_COMPACT_DIR"] = str(tmp_path / "data")
    restarted = False
    with client.setup_kernel(env=env):
        for index, cell in enumerate(nb.cells):
            if "restart-kernel" in cell.metadata.get("tags", []):
                run_sync(client.km.restart_kernel)(now=False)
                run_sync(client.kc.wait_for_ready)(timeout=60)
                restarted = True
                continue
            if cell.cell_type == "code":
                client.execute_cell(cell, index)
    assert restarted
    code = [c for c in nb.cells if c.cell_type == "code"]
    for cell in code:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
    by_source = {c.source.splitlines()[0]: c for c in code}
    names = _text(by_source["%compact names"].outputs[0])
    assert "data" in names and "ndarray" in names
    compacted = by_source["%compact now focus on the sales means"].outputs[0]
    assert "application/vnd.ipython-compact.summary+json" in compacted["data"]
    notice = compacted["data"]["application/vnd.ipython-compact.summary+json"]["notice"]
    assert "These names are still defined:" in notice and "lines (TypeError" in notice
    after_restart = by_source["%load_ext ipython_compact"]  # the later cell with this first line
    assert _text(after_restart.outputs[-1]) == "False"  # the restart really emptied the namespace
    restored = _text(by_source["%compact restore"].outputs[0])
    assert "data" in restored and "double" in restored
    assert " ".join(_text(by_source['double(data).tolist(), notes["goal"]'].outputs[0]).split()) == (
        "([[0.0, 2.0, 4.0, 6.0], [8.0, 10.0, 12.0, 14.0], [16.0, 18.0, 20.0, 22.0]], 'demo')"
    )
    # nbconvert (HTML and Markdown) shows our fallbacks: the summary and the namespace table read as text
    from nbconvert import HTMLExporter, MarkdownExporter

    html, _ = HTMLExporter().from_notebook_node(nb)
    assert "ipython-compact-summary" in html and "&lt;ipython_state&gt;" in html
    assert '<table class="ipython-compact">' in html
    markdown, _ = MarkdownExporter().from_notebook_node(nb)
    assert "These names are still defined:" in markdown
