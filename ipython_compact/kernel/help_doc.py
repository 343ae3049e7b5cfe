"""``docs/magics.md``, rendered from the magics' own parsers, so the magics' reference cannot drift.

``python -m ipython_compact.kernel.help_doc > docs/magics.md`` writes it; ``tests/test_docs_drift.py``
fails when the committed page differs from a fresh rendering. The width is fixed so the page does not
depend on the terminal that rendered it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ipython_compact.kernel.agent_magic import agent_parser
from ipython_compact.kernel.magics import COMMANDS, overview

WIDTH = 100


def _fixed_width(render: Callable[[], str]) -> str:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        return render().rstrip()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def render() -> str:
    """``%compact --help``, each subcommand's help in declaration order, then ``%%agent --help``."""
    parts = [
        "# `%compact` and `%%agent` reference",
        "",
        "Generated from the magics' parsers by `python -m ipython_compact.kernel.help_doc > docs/magics.md`;",
        "a test fails when this page and the code disagree. Do not edit by hand.",
        "",
        "```text",
        _fixed_width(lambda: overview(WIDTH)),
        "```",
    ]
    for name in COMMANDS.names():
        help_text = _fixed_width(COMMANDS[name].parser("%compact").format_help)
        parts += ["", f"## `%compact {name}`", "", "```text", help_text, "```"]
    parts += ["", "## `%%agent`", "", "```text", _fixed_width(lambda: agent_parser().format_help()), "```"]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    print(render(), end="")
