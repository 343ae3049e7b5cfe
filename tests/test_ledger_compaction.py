"""The ledger a real compaction writes (real SQLite store, offline summarizer): a request whose
answer is in the kept tail is done, not open."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore


def say(store: SessionStore, role: str, text: str, **extra: Any) -> str:
    message = {"role": role, "content": [{"type": "text", "text": text}], **extra}
    return store.append("s", "message", {"message": message}).id


def test_a_request_answered_in_the_kept_tail_is_not_listed_as_open(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.db")
    store.create_session("s")
    asked = say(store, "user", "Build the quarterly report from sales.csv")
    filler = " ".join(f"word{i}" for i in range(600))
    for i in range(4):  # a long turn: the model narrates its way to the answer
        say(store, "assistant", f"Step {i}: {filler}", stopReason="toolUse")
    answered = say(store, "assistant", "The report is built: Q3 was the best quarter.", stopReason="stop")
    result = Compactor(store, settings=CompactionSettings(keep_recent_tokens=60)).compact("s")
    first_kept = result.entry.data["first_kept_entry_id"]
    ids = [e.id for e in store.path("s")]
    # asked before the cut, answered after
    assert ids.index(asked) < ids.index(first_kept) <= ids.index(answered)
    requests = result.details["ledger"]["requests"]
    assert [(r["entry_id"], r["status"]) for r in requests] == [(asked, "done")]
    assert "- [ ] Build the quarterly report" not in result.summary
    store.close()
