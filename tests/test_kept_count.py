"""One number for "kept messages": the cell that compacts and the panel's timeline card count the
same entries (issue 35, item 6: a cell said 42 kept messages, the panel 41).

The cell's figure is the plan's kept tail: every entry the model sees verbatim after the
checkpoint (messages, and the kernel-state notices, system and custom messages among them). The
timeline reads the log alone (``summaries_of``) and must count those same entries."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from builders import assistant, user

from ipython_compact.kernel.config import CompactConfig
from ipython_compact.kernel.service import KernelService


def test_the_timeline_counts_the_kept_entries_the_compaction_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    shell: Any = SimpleNamespace(user_ns={}, user_ns_hidden={}, kernel=None)
    config = CompactConfig(session="kept", compaction={"keep_recent_tokens": 400})
    service = KernelService(shell, config)
    try:
        store = service.store
        for t in range(30):
            store.append("kept", "message", user(f"question {t} " + "words " * 20))
            store.append("kept", "message", assistant(f"answer {t} " + "detail " * 20))
            if t % 4 == 3:  # a notice in the context, not a chat message
                store.append("kept", "kernel_state", {"content": f"<ipython_state>{t}</ipython_state>"})
        reply = service.compact()
        said = reply["compaction"]["kept_entries"]
        timeline = service.summaries()[-1]
        assert timeline["id"] == reply["compaction"]["id"]
        assert timeline["kept_entries"] == said
        messages_only = store.count_on_path(
            "kept", ("message",), leaf=timeline["id"], from_id=timeline["first_kept_entry_id"]
        )
        assert messages_only < said  # the tail holds notices too: the case that disagreed
    finally:
        service.close()


def test_an_imported_pi_compaction_is_neither_manual_nor_after_unknown(tmp_path: Path) -> None:
    """pi records neither a reason nor the tokens after; the timeline said "manual" and "→ ?".
    It says "imported", and the context right after it as the log holds it."""
    from ipython_compact.core.tokens import estimate_context
    from ipython_compact.kernel.session_summaries import summaries_of
    from ipython_compact.store import SessionStore
    from ipython_compact.store.importers import import_file

    fixture = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
    with SessionStore(tmp_path / "s.db") as store:
        import_file(store, fixture, session="pi")
        listed = summaries_of(store, "pi")
        assert listed
        for card in listed:
            assert card["reason"] == "imported"
            view = store.context_view("pi", leaf=card["id"])
            right_after = estimate_context(view.entries, "density", tokens=view.tokens("density")).tokens
            assert card["tokens_after"] == right_after
            assert 0 < right_after < int(card["tokens_before"] or 0)
