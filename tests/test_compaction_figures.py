"""One number for one thing after a compaction (issue 35, item 6).

A compaction has two figures: its own estimate of its checkpoint and kept tail
(``tokens_after``), and the context right after it as ``status`` counts it, with the kernel-state
notice the kernel places after it (``context_after``). The cell named both; the panel's timeline
card and its Compact result showed the first while the gauge showed the second, and the CLI's
``show --list`` said "-> not recorded (pi)" where the panel read a figure off the log. Every place
now leads with the context right after, and names the compaction's own figure as what it is.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from builders import assistant, user

from ipython_compact.kernel.config import CompactConfig
from ipython_compact.kernel.display import summary_bundle
from ipython_compact.kernel.service import KernelService, summaries_of
from ipython_compact.store import SessionStore
from ipython_compact.store.importers import import_file

PI_FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "IPYTHON_COMPACT_DIR": str(data)}
    env.pop("IPYTHON_COMPACT_DB", None)
    script = Path(sys.executable).parent / "ipython-compact"
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=120, env=env)


def test_the_compact_reply_the_timeline_and_status_give_one_context_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    shell: Any = SimpleNamespace(user_ns={"rows": [1, 2, 3]}, user_ns_hidden={}, kernel=None)
    service = KernelService(shell, CompactConfig(session="fig", compaction={"keep_recent_tokens": 400}))
    try:
        for t in range(30):
            service.store.append("fig", "message", user(f"question {t} " + "words " * 20))
            service.store.append("fig", "message", assistant(f"answer {t} " + "detail " * 20))
        reply = service.compact()
        assert reply["notice"]  # the kernel placed its notice after the compaction
        now = service.status()["tokens"]
        comp = reply["compaction"]
        assert comp["context_after"] == now
        assert comp["tokens_after"] != now  # the two figures differ: the case that read as a contradiction
        card = service.summaries()[-1]
        assert card["id"] == comp["id"]
        assert (card["context_after"], card["tokens_after"]) == (now, comp["tokens_after"])
        # the cell (summary MIME bundle, as `%compact now` and a requested compaction show it)
        plain = summary_bundle({**comp, "reason": "manual"}).bundle["text/plain"]
        head = plain.split("\n\n")[0].replace("\n", " ")
        assert f"→ {now:,} tokens in context (checkpoint and kept tail {comp['tokens_after']:,}" in head
    finally:
        service.close()


def test_an_imported_pi_compaction_has_one_after_figure_in_timeline_and_cli(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with SessionStore(data / "sessions.db") as store:
        import_file(store, PI_FIXTURE, session="work")
        cards = summaries_of(store, "work", 0)
    assert cards and all(c["reason"] == "imported" for c in cards)
    # no notice follows an imported compaction: the one figure is the context right after it
    assert all(c["context_after"] == c["tokens_after"] and c["context_after"] for c in cards)
    listed = _cli(data, "show", "-s", "work", "--list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == len(cards)
    for line, card in zip(lines, cards, strict=True):
        assert "not recorded" not in line and len(line) <= 80, line
        figures = rf"imported +{card['tokens_before']:,} -> +{card['context_after']:,} in context$"
        assert re.search(rf"^{card['id']}  .*  {figures}", line), line
    newest = " ".join(_cli(data, "show", "-s", "work").stdout.split("\n<")[0].split())  # the head, unwrapped
    assert f"reason imported · {cards[-1]['tokens_before']:,} tokens before · " in newest
    assert f"{cards[-1]['context_after']:,} tokens in context" in newest and "None" not in newest
