"""The token-budget options ``plan`` and ``compact`` share, declared once so they cannot drift apart."""

from __future__ import annotations

import argparse

from ipython_compact.cli import IntOption
from ipython_compact.core.settings import CompactionSettings


def budget_options(parser: argparse.ArgumentParser, defaults: CompactionSettings) -> None:
    """``--keep-recent-tokens`` and ``--reserve-tokens``, bounded and defaulting to ``defaults``."""
    parser.add_argument(
        "--keep-recent-tokens",
        type=IntOption(0, 20000),
        default=defaults.keep_recent_tokens,
        metavar="N",
        help=f"newest tokens kept verbatim (default {defaults.keep_recent_tokens:,})",
    )
    parser.add_argument(
        "--reserve-tokens",
        type=IntOption(0, 16384),
        default=defaults.reserve_tokens,
        metavar="N",
        help=f"tokens reserved for the reply (default {defaults.reserve_tokens:,})",
    )
