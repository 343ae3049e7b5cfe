"""The LLM path knows what was superseded (issue 18, item 2): the update prompt names it, and the
deterministic layers appended after the model's summary never state the old text as current."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from builders import assistant_message as answer
from builders import tool_calls_message, tool_result_message
from builders import user_message as user

from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore
from ipython_compact.summarizers.openai_summarizer import OpenAISummarizer
from ipython_compact.testing import ModelServer

# a model that carries the previous checkpoint forward word for word and adds nothing: if the
# pipeline re-injected the old rule anywhere, it would show in what follows its text
STUBBORN = """## Goal
Build the churn model.

## Constraints & Preferences
- Keep the storage decision in <anchors>.

## Progress
### Done
- [x] Loaded the data.

### In Progress
(none)

### Blocked
(none)

## Key Decisions
(none)

## Next Steps
1. Train.

## Critical Context
(none)"""


def _compactor(store: SessionStore, srv: ModelServer) -> Compactor:
    """The OpenAI-compatible summarizer against ``srv``, no recent tail kept (the spans are tiny)."""
    summarizer = OpenAISummarizer(model="m", base_url=srv.base_url, api_key="k", backoff=0.01, timeout=5.0)
    return Compactor(store, summarizer, CompactionSettings(keep_recent_tokens=0))


def result(cid: str, text: str) -> list[dict[str, Any]]:
    return [tool_calls_message((cid, "python", {"code": "stats()"})), tool_result_message(cid, text)]


def test_the_update_prompt_names_what_was_superseded_and_the_blocks_never_restate_it(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.db")
    store.create_session("s")
    with ModelServer(script=lambda _req: STUBBORN) as srv:
        compactor = _compactor(store, srv)
        first = [
            user("Build the churn model. Always use Postgres for storage."),
            *result("c1", "rows after dedup: rows=41203"),
            answer("Loaded the data."),
            user("Now train it."),
            answer("Training next."),
        ]
        # threshold compactions: tiny spans, a manual one would be refused as not smaller
        second = [
            user("Please use DuckDB for storage instead of Postgres from now on."),
            *result("c2", "rows after dedup: rows=40877"),
            answer("Switched to DuckDB."),
            user("Thanks."),
            answer("You're welcome."),
        ]
        done = _compact_twice(compactor, store, first, second)
        prompts = [str((r.body or {})["messages"][1]["content"]) for r in srv.chat_requests]
    prompt = next(p for p in reversed(prompts) if "<previous-summary>" in p)  # the update of the history part
    block = re.search(r"<superseded>\n(.*?)\n</superseded>", prompt, re.DOTALL)
    assert block is not None
    assert (
        "- earlier: Always use Postgres for storage.\n  now: Please use DuckDB for storage instead of "
        "Postgres from now on."
    ) in block.group(1)
    assert "- earlier: rows=41203\n  now: rows=40877" in block.group(1)
    appended = done.summary.split(STUBBORN, 1)[1]  # what the pipeline added after the model's text
    anchors = done.summary.split(STUBBORN, 1)[0]
    for text in (anchors, appended):
        stated = [
            ln
            for ln in text.splitlines()
            if ("Always use Postgres" in ln or "rows=41203" in ln) and "replaced" not in ln
        ]
        assert stated == []  # the old rule and the old value appear only as the new one's history
    assert "rows=41203" not in appended


def _decide_and_revise(compactor: Compactor, store: SessionStore) -> Any:
    """Two compactions: the assistant picks XGBoost, then switches to LightGBM and the user moves the
    threshold (neither a constraint: only the decision book carries them)."""
    first = [
        user("Build the churn model. What model should we use?"),
        answer("I'll use XGBoost for the model because it is the team default."),
        user("Use a decision threshold of 0.35 for the retention list."),
        answer("Noted."),
    ]
    second = [
        user("Train it on the new features."),
        answer("Switching the model to LightGBM instead of XGBoost because it trains faster on them."),
        user("Use a decision threshold of 0.42 for the retention list."),
        answer("Noted."),
    ]
    return _compact_twice(compactor, store, first, second)


def _compact_twice(
    compactor: Compactor, store: SessionStore, first: list[dict[str, Any]], second: list[dict[str, Any]]
) -> Any:
    """``first`` appended and compacted, then ``second``: the second compaction's result (its
    prompt is the update of the first one's summary)."""
    for messages in (first, second):
        store.append_many("s", [("message", {"message": m}) for m in messages])
        done = compactor.compact("s", reason="threshold")
    return done


def test_a_model_summary_without_the_decisions_gets_their_current_revision_after_it(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.db")
    store.create_session("s")
    with ModelServer(script=lambda _req: STUBBORN) as srv:
        done = _decide_and_revise(_compactor(store, srv), store)
        prompts = [str((r.body or {})["messages"][1]["content"]) for r in srv.chat_requests]
    update = next(p for p in reversed(prompts) if "<previous-summary>" in p)
    block = re.search(r"<superseded>\n(.*?)\n</superseded>", update, re.DOTALL)
    assert block is not None  # the update is told which decisions the new messages replaced
    assert (
        "- earlier: I'll use XGBoost for the model because it is the team default.\n  now: Switching the "
        "model to LightGBM instead of XGBoost because it trains faster on them."
    ) in block.group(1)
    assert (
        "- earlier: Use a decision threshold of 0.35 for the retention list.\n  now: Use a decision "
        "threshold of 0.42 for the retention list."
    ) in block.group(1)
    appended = done.summary.split(STUBBORN, 1)[1]
    lines = appended.splitlines()
    decided = lines[lines.index(next(ln for ln in lines if ln.startswith("decisions in force"))) + 1 :][:2]
    assert [ln.split("  (")[0] for ln in decided] == [
        "- Use a decision threshold of 0.42 for the retention list.",
        "- Switching the model to LightGBM instead of XGBoost because it trains faster on them.",
    ]
    assert "— replaced: Use a decision threshold of 0.35 for the retention list. (entry " in decided[0]
    for old in ("XGBoost for the model because", "threshold of 0.35"):
        assert [ln for ln in done.summary.splitlines() if old in ln and "replaced" not in ln] == []


def test_a_decision_the_model_summary_states_is_not_repeated(tmp_path: Path) -> None:
    states = STUBBORN.replace(
        "## Key Decisions\n(none)",
        "## Key Decisions\n- Switching the model to LightGBM instead of XGBoost because it trains faster "
        "on them.\n- Use a decision threshold of 0.42 for the retention list.",
    )
    store = SessionStore(tmp_path / "s.db")
    store.create_session("s")
    with ModelServer(script=lambda _req: states) as srv:
        done = _decide_and_revise(_compactor(store, srv), store)
    assert "decisions in force" not in done.summary
    ledger = done.summary.split("<ledger>", 1)[1]  # what the pipeline appends after the model's text
    assert "LightGBM" not in ledger and "threshold of 0.42" not in ledger
    # the book still carries them for the next compaction (a later summary may drop them)
    assert [d["entry_id"] for d in done.details["ledger"]["decisions"]] != []


def test_the_update_prompt_names_a_planned_step_that_was_carried_out(tmp_path: Path) -> None:
    """A model that rewrites the checkpoint is told that its previous Next Step was done since
    (its own summary stated the plan; the span carries it out): a plan gone stale is superseded."""
    planned = STUBBORN.replace("1. Train.", "1. Next I will plot the revenue by region.")
    store = SessionStore(tmp_path / "s.db")
    store.create_session("s")
    with ModelServer(script=lambda _req: planned) as srv:
        compactor = _compactor(store, srv)
        first = [
            user("Build the churn model."),
            answer("Loaded the data. Next I will plot the revenue by region."),
        ]
        second = [
            user("Plot the revenue by region."),
            answer("Plotted the revenue by region to region.png."),
            user("Thanks."),
            answer("You're welcome."),
        ]
        _compact_twice(compactor, store, first, second)
        prompts = [str((r.body or {})["messages"][1]["content"]) for r in srv.chat_requests]
    prompt = next(p for p in reversed(prompts) if "<previous-summary>" in p)
    block = re.search(r"<superseded>\n(.*?)\n</superseded>", prompt, re.DOTALL)
    assert block is not None
    assert (
        "- earlier: Next I will plot the revenue by region.\n  now: done: Plot the revenue by region."
        in block.group(1)
    )
