"""Messages that must say a thing once and whole (issue 35, item 5): the preview counts what it
does not list, a recall of an unknown id says so once, a restore names what the snapshot could
not hold and why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from ipython_compact.cli.demo_transcript import TranscriptGenerator
from ipython_compact.compaction.results import SHOWN
from ipython_compact.kernel.extension import extension_for


def _plain(shown: Any) -> str:
    return str(shown._repr_mimebundle_()[0]["text/plain"])


def test_the_preview_counts_the_discarded_entries_it_does_not_list(ip: Any) -> None:
    ext = extension_for(ip)
    assert ext is not None
    service = ext.service
    for msgs in TranscriptGenerator(7).rounds(40):
        service.store.append_many(service.session, [("message", {"message": m}) for m in msgs])
    ip.run_line_magic("config", "CompactConfig.compaction = {'keep_recent_tokens': 300}")
    plan = ip.run_line_magic("compact", "preview").data
    discarded = len(plan["discard"])
    assert discarded > SHOWN, plan["discard"]  # the generator repeats itself: plenty of duplicates
    text = " ".join(_plain(ip.run_line_magic("compact", "preview")).split())
    assert text.count("discard entry ") == SHOWN
    assert f"+{discarded - SHOWN:,} more discarded" in text, text


def test_recall_of_an_unknown_id_says_it_once(ip: Any) -> None:
    with pytest.raises(UsageError) as caught:
        ip.run_line_magic("compact", "recall zzzz")
    text = str(caught.value)
    assert text.count("'zzzz'") == 1, text
    assert text.startswith("%compact recall: no entry 'zzzz' in session")


def test_restore_names_what_the_snapshot_could_not_hold(ip: Any, tmp_path: Path) -> None:
    ip.run_cell("kept = [1, 2, 3]\ngen = (i for i in range(3))")
    ip.run_line_magic("compact", "snapshot")
    ip.run_cell("del kept, gen")
    text = _plain(ip.run_line_magic("compact", "restore"))
    assert "kept" in text.splitlines()[0] or "Restored" in text
    never = [line for line in text.splitlines() if line.startswith("Never saved")]
    assert never and never[0].split(None, 2)[2].startswith("gen: "), text


def test_now_and_status_agree_on_the_context_after_a_compaction(ip: Any) -> None:
    fixture = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
    ip.run_line_magic("compact", f"import {fixture}")
    head = _plain(ip.run_line_magic("compact", "now")).splitlines()[0]
    ext = extension_for(ip)
    assert ext is not None
    tokens = ext.service.status()["tokens"]
    assert f"→ {tokens:,} tokens in context" in head, (head, tokens)


def test_names_shows_the_probes_value_preview(ip: Any) -> None:
    ip.run_cell("answer = 42\ngreeting = 'hello there'")
    plain = _plain(ip.run_line_magic("compact", "names"))
    assert any(line.startswith("answer") and "value: 42" in line for line in plain.splitlines()), plain
    assert "value: 'hello there'" in plain
