"""Generated probe sessions, and the failure they were built to catch: results printed on the last
line of a long output must stay in the context through rolling compactions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from generated_sessions import PROBE_KINDS, SESSION_KINDS, make_session

from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.context import build_context
from ipython_compact.core.entries import text_of_content
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore


@pytest.mark.parametrize("kind", SESSION_KINDS)
def test_sessions_are_deterministic_and_every_answer_is_in_the_session(kind: str) -> None:
    one, two = make_session(kind, seed=5, chunks=6), make_session(kind, seed=5, chunks=6)
    assert one.chunks == two.chunks and one.probes == two.probes
    assert make_session(kind, seed=6, chunks=6).chunks != one.chunks
    text = json.dumps(one.chunks, ensure_ascii=False)
    assert all(json.dumps(p.answer, ensure_ascii=False)[1:-1] in text for p in one.probes)
    assert {p.kind for p in make_session(kind, chunks=12).probes} == set(PROBE_KINDS)
    assert all(1 <= p.chunk <= 6 for p in one.probes)


def test_unknown_kind_and_bad_length_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown session kind 'chat'"):
        make_session("chat")
    with pytest.raises(ValueError, match="chunks must be at least 1"):
        make_session("analysis", chunks=0)


@pytest.mark.slow
def test_run_ids_on_the_last_line_of_long_training_logs_survive_rolling_compactions(tmp_path: Path) -> None:
    session = make_session("analysis", chunks=30)
    store = SessionStore(tmp_path / "log.db")
    store.create_session("s")
    compactor = Compactor(store, settings=CompactionSettings(keep_recent_tokens=800))
    for chunk in session.chunks:
        store.append_many("s", [("message", {"message": m}) for m in chunk])
        compactor.compact("s", reason="threshold")
    view = "\n".join(text_of_content(m.get("content")) for m in build_context(store.context_path("s")))
    last_line = [p.answer for p in session.probes if p.last_line]
    assert len(last_line) == 60
    assert [a for a in last_line if a not in view] == []
    # older training logs are index items
    assert "older outputs (entry id, subject; recall by entry id):" in view
    assert store.verify("s").ok
