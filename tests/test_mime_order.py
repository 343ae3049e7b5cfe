"""Which part of each ``%compact`` bundle JupyterLab, VS Code and nbconvert show.

Why: a front end shows the first MIME type of its own order that the bundle carries and it can
render. A bare ``application/json`` wins over ``text/html`` in JupyterLab (a JSON tree instead of
the table) and in VS Code's sort it is a renderable type too; so no bundle carries it, and the
machine-readable part goes under a vendor type. The browser test
(``tests/browser/test_magic_outputs.py``) checks JupyterLab for real; this one runs every
subcommand in a shell and applies each front end's order to the bundle it returns.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import pytest
from nbconvert.exporters import HTMLExporter, MarkdownExporter

from ipython_compact.kernel.display import NAMESPACE_MIME, SUMMARY_MIME

FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"

#: JupyterLab 4's rendermime order (``rendermime.mimeTypes`` read from the running Lab with this
#: package's renderers installed, in tests/browser/test_magic_outputs.py's notebook).
LAB_ORDER = [
    "text/javascript",
    "application/javascript",
    "application/json",
    "text/jsonl",
    "application/jsonl",
    "application/json-lines",
    SUMMARY_MIME,
    NAMESPACE_MIME,
    "text/html",
    "text/markdown",
    "text/latex",
    "image/svg+xml",
    "image/png",
    "image/jpeg",
    "text/plain",
]
#: VS Code's Jupyter extension sorts output items by this order (vscode-jupyter, ``orderOfMimeTypes``),
#: then VS Code shows the first item it has a renderer for.
VSCODE_ORDER = [
    "application/vnd.*",
    "application/vdom.*",
    "application/geo+json",
    "application/x-nteract-model-debug+json",
    "text/html",
    "application/javascript",
    "image/gif",
    "text/latex",
    "text/markdown",
    "image/png",
    "image/svg+xml",
    "image/jpeg",
    "application/json",
    "text/plain",
]
VSCODE_RENDERS = {
    "text/html",
    "application/javascript",
    "image/gif",
    "text/latex",
    "text/markdown",
    "image/png",
    "image/svg+xml",
    "image/jpeg",
    "application/json",
    "text/plain",
}


def _first(order: list[str], keys: list[str], renders: set[str] | None = None) -> str | None:
    for pattern in order:
        for key in keys:
            if fnmatch.fnmatch(key, pattern) and (renders is None or key in renders):
                return key
    return None


FRONT_ENDS: list[tuple[str, Any, str]] = [
    ("jupyterlab", lambda keys: _first(LAB_ORDER, keys), "text/html"),
    ("vscode", lambda keys: _first(VSCODE_ORDER, keys, VSCODE_RENDERS), "text/html"),
    (
        "nbconvert html",
        lambda keys: _first(HTMLExporter().config.NbConvertBase.display_data_priority, keys),
        "text/html",
    ),
    (
        "nbconvert markdown",
        lambda keys: _first(MarkdownExporter().config.NbConvertBase.display_data_priority, keys),
        "text/html",
    ),
]

#: Every subcommand that returns a report (not ``--help``), in an order where each has something to show.
LINES = [
    "status",
    "session",
    f"import {FIXTURE}",
    "snapshot",
    "restore",
    "pin keep the API key in env X",
    "pin --list",
    "names",
    "log -n 3",
    "preview",
    "snapshots",
    "tree",
    "now",
]


@pytest.fixture
def bundles(ip: Any, tmp_path: Path) -> dict[str, dict[str, Any]]:
    ip.user_ns["alpha"] = {"unit": "kelvin"}
    out = {
        line.split()[0] if line.split()[0] != "pin" else line: ip.run_line_magic(
            "compact", line
        )._repr_mimebundle_()[0]
        for line in LINES
    }
    entry = ip.run_line_magic("compact", "log -n 1").data[0]["id"]
    out["show"] = ip.run_line_magic("compact", f"show {entry}")._repr_mimebundle_()[0]
    out["export"] = ip.run_line_magic("compact", f"export {tmp_path / 'out.jsonl'}")._repr_mimebundle_()[0]
    return out


def test_no_bundle_carries_a_bare_application_json(bundles: dict[str, dict[str, Any]]) -> None:
    carrying = [name for name, bundle in bundles.items() if "application/json" in bundle]
    assert carrying == []


@pytest.mark.parametrize(("front_end", "pick", "shown"), FRONT_ENDS, ids=[f[0] for f in FRONT_ENDS])
def test_each_front_end_shows_the_human_rendering(
    bundles: dict[str, dict[str, Any]], front_end: str, pick: Any, shown: str
) -> None:
    human = {SUMMARY_MIME, NAMESPACE_MIME, "text/html"} if front_end == "jupyterlab" else {shown}
    picked = {name: pick(list(bundle)) for name, bundle in bundles.items()}
    assert {name: p for name, p in picked.items() if p not in human} == {}
