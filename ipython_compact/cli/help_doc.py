"""``docs/cli.md``, rendered from the parsers themselves, so the CLI's reference cannot drift from it.

``python -m ipython_compact.cli.help_doc > docs/cli.md`` writes it; ``tests/test_docs_drift.py`` fails
when the committed page differs from a fresh rendering (the way simonw/llm keeps its CLI docs true).
The width is fixed so the page does not depend on the terminal that rendered it.
"""

from __future__ import annotations

import argparse
import os

from ipython_compact.cli import PROG, build_parser

WIDTH = 100


def _help(parser: argparse.ArgumentParser) -> str:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        return parser.format_help().rstrip()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def render() -> str:
    """The whole page: the top-level help, then each command's, in the order ``--help`` lists them."""
    parser = build_parser()
    parts = [
        f"# `{PROG}` command reference",
        "",
        "Generated from the parsers by `python -m ipython_compact.cli.help_doc > docs/cli.md`; a test",
        "fails when this page and the code disagree. Do not edit by hand.",
        "",
        "```text",
        _help(parser),
        "```",
    ]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        parts += ["", f"## `{PROG} {name}`", "", "```text", _help(sub), "```"]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    print(render(), end="")
