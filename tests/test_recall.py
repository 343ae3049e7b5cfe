"""Recall: the original text of compacted spans, by entry id or full-text query, on a real log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ipython_compact.cli.demo_transcript import TranscriptGenerator
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.entries import entry_text
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore


@pytest.fixture
def compacted(tmp_path: Path) -> Any:
    store = SessionStore(tmp_path / "log.db")
    store.create_session("s")
    gen = TranscriptGenerator(11)
    for msgs in gen.rounds(20):
        store.append_many("s", [("message", {"message": m}) for m in msgs])
    compactor = Compactor(store, settings=CompactionSettings(keep_recent_tokens=1500))
    result = compactor.compact("s")
    yield store, compactor, result
    store.close()


def test_recall_externalized_output_by_id_returns_full_original(compacted: Any) -> None:
    store, compactor, result = compacted
    pointer = result.details["externalized"][0]
    assert f"recall {pointer['entry_id']}" in result.summary
    (hit,) = compactor.recall("s", entry_id=pointer["entry_id"])
    assert hit.id == pointer["entry_id"]
    assert hit.text == entry_text(store.get(pointer["entry_id"], "s"))
    assert len(hit.text.splitlines()) == pointer["lines"] == 2400
    assert hit.role == "toolResult"


def test_recall_by_query_finds_compacted_source_not_summaries(compacted: Any) -> None:
    store, compactor, _ = compacted
    compacted_ids = {e.id for e in store.path("s")} - {e.id for e in store.context_path("s")}
    hits = compactor.recall("s", query="tenure_bucket_5")
    assert hits
    assert all(h.kind == "message" for h in hits)
    assert hits[0].id in compacted_ids
    assert "KeyError: 'tenure_bucket_5'" in hits[0].text
    assert compactor.recall("s", query="no-such-word-anywhere") == []
    assert len(compactor.recall("s", query="step", limit=3)) == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of entry_id or query"),
        ({"entry_id": "x", "query": "y"}, "exactly one of entry_id or query"),
        ({"entry_id": "missing"}, "no entry 'missing' in session 's'"),
        ({"query": "   "}, "recall query is empty"),
    ],
)
def test_recall_errors(compacted: Any, kwargs: dict[str, str], message: str) -> None:
    _, compactor, _ = compacted
    with pytest.raises(ValueError, match=message):
        compactor.recall("s", **kwargs)


def test_query_hits_are_not_crowded_out_by_checkpoints_quoting_the_same_words(tmp_path: Path) -> None:
    """A pinned sentence is copied into every checkpoint; those summaries rank above a long source
    output with the same word, yet ``limit`` counts source entries only."""
    store = SessionStore(tmp_path / "log.db")
    store.create_session("s")
    text = "\n".join(f"row {i} " + "lorem ipsum " * 8 for i in range(400)) + "\nthreshold zetamarker reached"
    big = store.append(
        "s",
        "message",
        {
            "message": {
                "role": "toolResult",
                "toolCallId": "z",
                "toolName": "python",
                "content": [{"type": "text", "text": text}],
                "isError": False,
            }
        },
    )
    compactor = Compactor(store, settings=CompactionSettings(keep_recent_tokens=400))
    pin = compactor.pin("s", text="Alert when zetamarker fires")
    gen = TranscriptGenerator(17, big_output_every=0)
    for _ in range(6):
        for msgs in gen.rounds(5):
            store.append_many("s", [("message", {"message": m}) for m in msgs])
        compactor.compact("s")
    ranked = [h.entry.kind for h in store.search("zetamarker", session="s", limit=50)]
    # the source ranks below the checkpoints
    assert ranked.count("compaction") > 4 and ranked[-1] == "message"
    assert [h.id for h in compactor.recall("s", query="zetamarker", limit=2)] == [big.id, pin.id]  # as logged
    store.close()


@pytest.mark.parametrize("query", ["\x00", "hello\x00", "\x00world hello"])
def test_a_query_with_nul_characters_searches_the_words_around_them(tmp_path: Path, query: str) -> None:
    """Red team 3, minor: a NUL in a recall query failed with SQLite's "unterminated string"."""
    with SessionStore(tmp_path / "s.db") as store:
        store.ensure_session("s")
        store.append("s", "message", {"message": {"role": "user", "content": "hello world"}})
        hits = store.search(query, session="s")
    assert len(hits) == (0 if not query.replace("\x00", "").strip() else 1)


def test_query_hits_written_in_one_millisecond_come_back_in_log_order(tmp_path: Path) -> None:
    """CI failure: two entries sharing a timestamp came back in rank order, not as logged."""
    store = SessionStore(tmp_path / "log.db")
    store.create_session("s")
    when = "2026-12-05T12:00:00.000Z"
    first = store.append(
        "s", "message", {"message": {"role": "user", "content": "zetamarker once"}}, timestamp=when
    )
    second = store.append(
        "s",
        "message",
        {"message": {"role": "user", "content": "zetamarker zetamarker zetamarker twice over"}},
        timestamp=when,
    )
    ranked = [h.entry.id for h in store.search("zetamarker", session="s")]
    recalled = [h.id for h in Compactor(store).recall("s", query="zetamarker", limit=2)]
    store.close()
    assert recalled == [first.id, second.id]
    assert ranked == [second.id, first.id]  # the search ranks the later one first: the tie is real
