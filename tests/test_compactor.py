"""The Compactor on real SQLite session logs, with the offline summarizer and the OpenAI one
against the local model server: append-only, five layers, anchors, pins, ledger, failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ipython_compact.cli.demo_transcript import GOAL, TranscriptGenerator
from ipython_compact.compaction.compactor import (
    MAX_CARRIED_POINTERS,
    CompactionError,
    CompactionFailed,
    Compactor,
    NothingToCompact,
)
from ipython_compact.core.context import build_context
from ipython_compact.core.entries import COMPACTION, COMPACTION_OUTCOME
from ipython_compact.core.offline_summary import missing_sections
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.triage import CARRIED_WITH_GIST
from ipython_compact.store import SessionStore
from ipython_compact.summarizers.openai_summarizer import OpenAISummarizer
from ipython_compact.testing import ModelServer, RecordedRequest, Reply

SETTINGS = CompactionSettings(keep_recent_tokens=1500)
CHECKPOINT = (
    "## Goal\nchurn model\n\n## Constraints & Preferences\n(none)\n\n## Progress\n### Done\n- [x] work\n\n"
    "### In Progress\n(none)\n\n### Blocked\n(none)\n\n## Key Decisions\n(none)\n\n## Next Steps\n1. "
    "more\n\n## Critical Context\n(none)"
)
PREFIX = "## Original Request\nstep\n\n## Early Progress\n- started\n\n## Context for Suffix\n- none"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = SessionStore(tmp_path / "log.db")
    s.create_session("s")
    yield s
    s.close()


def feed(store: SessionStore, gen: TranscriptGenerator, rounds: int) -> None:
    for msgs in gen.rounds(rounds):
        store.append_many("s", [("message", {"message": m}) for m in msgs])


def snapshot(store: SessionStore) -> list[dict[str, Any]]:
    return [e.to_json() for e in store.entries("s")]


def test_compaction_after_a_preview_is_the_compaction_without_one(tmp_path: Path) -> None:
    """A preview counts what it would externalize without making gists (issue 37); a compaction
    that reuses the preview's decision makes them, and writes what a compaction with no preview
    before it writes (a copy of the same session, another store)."""
    payloads = []
    for name, preview in (("a", True), ("b", False)):
        ids = iter(range(10**6))
        with SessionStore(
            tmp_path / f"{name}.db",
            clock=lambda: "2026-01-01T00:00:00.000Z",
            new_id=lambda ids=ids: f"{next(ids):08x}",
        ) as s:
            s.create_session("s")
            feed(s, TranscriptGenerator(1), 20)
            compactor = Compactor(s, settings=SETTINGS)
            if preview:
                plan = compactor.plan("s")
                assert plan.externalize and all(p.gist is None for p in plan.externalize)
                assert all("gist" not in p for p in plan.to_json()["externalize"])
            payloads.append(compactor.prepare("s"))
    assert payloads[0] is not None and payloads[0] == payloads[1]
    pointers = payloads[0]["details"]["externalized"]
    assert pointers and all(p["gist"]["tail"] for p in pointers)


def openai_summarizer(srv: ModelServer, **kw: Any) -> OpenAISummarizer:
    opts: dict[str, Any] = {"max_retries": 1, "backoff": 0.01, "max_wait": 0.2, "timeout": 1.0}
    opts.update(kw)
    return OpenAISummarizer(model="m", base_url=srv.base_url, api_key="k", **opts)


def test_compact_only_appends_and_plan_writes_nothing(store: SessionStore) -> None:
    gen = TranscriptGenerator(1)
    feed(store, gen, 20)
    compactor = Compactor(store, settings=SETTINGS)
    before = snapshot(store)
    plan = compactor.plan("s", focus="holdout")
    assert snapshot(store) == before
    assert plan.summarize.entries > 0 and plan.keep.entries > 0
    assert plan.keep.tokens <= 3 * SETTINGS.keep_recent_tokens
    assert [p.lines for p in plan.externalize] == [2400, 2400]
    assert any(d["reason"].startswith("duplicate of") for d in plan.discard)
    assert any(d["reason"].startswith("superseded by") for d in plan.discard)
    assert "externalize [entry" in plan.render()
    assert compactor.prepare("s") is not None
    assert snapshot(store) == before

    result = compactor.compact("s", focus="holdout")
    after = snapshot(store)
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1
    assert after[-1]["kind"] == COMPACTION
    assert store.verify("s").ok
    assert result.tokens_after < result.tokens_before
    assert missing_sections(result.summary.split("<ledger>")[0].split("</anchors>")[1], "history") == []
    for tag in ("<anchors", "<ledger>", "<externalized"):
        assert tag in result.summary
    assert result.details["summarizer"] == "offline"
    with pytest.raises(NothingToCompact):
        compactor.compact("s")
    assert compactor.prepare("s") is None


def test_anchors_survive_many_compactions_verbatim(store: SessionStore) -> None:
    gen = TranscriptGenerator(2, big_output_every=0)
    compactor = Compactor(store, settings=CompactionSettings(keep_recent_tokens=400))
    for _ in range(8):
        feed(store, gen, 6)
        summary = compactor.compact("s").summary
        assert GOAL in summary
        view = "\n".join(str(m) for m in build_context(store.context_path("s")))
        for constraint in gen.facts.constraints:
            assert constraint in view
    assert len(gen.facts.constraints) >= 5
    assert store.verify("s").ok


def test_pins_by_text_and_entry_and_unpin(store: SessionStore) -> None:
    gen = TranscriptGenerator(3)
    feed(store, gen, 10)
    compactor = Compactor(store, settings=SETTINGS)
    first_user = store.path("s")[0]
    p1 = compactor.pin("s", text="Port 8765 is reserved for the dashboard")
    p2 = compactor.pin("s", entry_id=first_user.id)
    assert (p1.data["pin_id"], p2.data["pin_id"]) == ("pin-1", "pin-2")
    feed(store, gen, 10)
    summary = compactor.compact("s").summary
    assert "Port 8765 is reserved for the dashboard" in summary
    assert "[pinned pin-2 · entry" in summary
    compactor.unpin("s", "pin-1")
    feed(store, gen, 10)
    summary = compactor.compact("s").summary
    assert "Port 8765 is reserved for the dashboard" not in summary.split("</anchors>")[0]
    assert "[pinned pin-2" in summary
    with pytest.raises(ValueError, match="no active pin 'pin-1'"):
        compactor.unpin("s", "pin-1")
    with pytest.raises(ValueError, match="cannot pin entry 'nope'"):
        compactor.pin("s", entry_id="nope")
    with pytest.raises(ValueError, match="exactly one of text or entry_id"):
        compactor.pin("s")


def test_ledger_and_identifiers_carry_forward(store: SessionStore) -> None:
    gen = TranscriptGenerator(4)
    compactor = Compactor(store, settings=SETTINGS)
    totals = []
    for _ in range(3):
        feed(store, gen, 12)  # enough that each compaction shrinks the context (a manual one must)
        details = compactor.compact("s").details
        totals.append(details["ledger"]["totals"]["requests"])
        summarized_users = sum(1 for e in store.path("s") if e.role == "user") - sum(
            1 for e in store.context_path("s") if e.role == "user"
        )
        # each request counted once, though spans start at the last kept entry
        assert totals[-1] == summarized_users
    assert totals[0] < totals[1] < totals[2]
    ids = {i["text"] for i in details["identifiers"]}
    assert "frame_1" in ids


def test_naive_mode_has_no_anchor_block_or_guard(store: SessionStore) -> None:
    feed(store, TranscriptGenerator(5), 15)
    result = Compactor(store, settings=SETTINGS, anchors=False, drift_guard=False).compact("s")
    assert "<anchors" not in result.summary and "<drift-guard" not in result.summary
    assert result.details["drift"]["checked"] == 0


def scripted(req: RecordedRequest) -> str:
    """The checkpoint, or the turn-prefix summary when the request asks for one."""
    return PREFIX if "FIRST PART of one long turn" in str(req.messages[-1]["content"]) else CHECKPOINT


def test_openai_compaction_guard_and_stripped_previous_summary(store: SessionStore) -> None:
    gen = TranscriptGenerator(6)
    feed(store, gen, 12)
    with ModelServer(script=scripted) as srv:
        # the drift guard alone (judging would add the offline checkpoint to this poor summary)
        compactor = Compactor(store, openai_summarizer(srv), SETTINGS, judge_summaries=False)
        first = compactor.compact("s")
        assert "<drift-guard" in first.summary  # the scripted summary drops every planted identifier
        assert "frame_1" in first.summary
        assert first.details["usage"]["prompt_tokens"] > 0
        assert first.details["drift"]["appended"] > 0
        feed(store, gen, 12)
        compactor.compact("s")
        bodies = [
            r.body or {} for r in srv.chat_requests if "FIRST PART" not in str(r.messages[-1]["content"])
        ]
        second_user = [m["content"] for m in bodies[-1]["messages"] if m["role"] == "user"]
        prev = second_user[0].split("<previous-summary>")[1].split("</previous-summary>")[0]
        assert "## Goal" in prev
        for tag in ("<anchors", "<ledger", "<drift-guard", "<externalized"):
            assert tag not in prev
    assert store.verify("s").ok


FAULTS = [
    (Reply.rate_limited(retry_after=0.1), "rate_limited", 2),
    (Reply.server_error(), "server_error", 2),
    (Reply.hang(20), "timeout", 2),
]
# A reply the model did send but that cannot be a checkpoint: the offline checkpoint replaces it.
REPLY_FAULTS = [
    (Reply.length_cut(), "length"),
    (Reply.tool_call("run_python", {"code": "x"}), "tool_call"),
    (Reply.empty(), "empty"),
]


@pytest.mark.parametrize(("fault", "code"), REPLY_FAULTS, ids=[f[1] for f in REPLY_FAULTS])
def test_an_unusable_reply_is_replaced_by_the_offline_checkpoint_and_the_details_say_why(
    store: SessionStore, fault: Reply, code: str
) -> None:
    feed(store, TranscriptGenerator(7), 10)
    with ModelServer(script=[fault] * 4) as srv:
        result = Compactor(store, openai_summarizer(srv, timeout=0.4), SETTINGS).compact(
            "s", reason="threshold"
        )
    judged = result.details["calls"][0]["judged"]
    assert judged["action"] == "replaced" and judged["why"].startswith(code)
    assert "## Goal" in result.summary and "frame_1" in result.summary
    assert store.verify("s").ok


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "code", "attempts"), FAULTS, ids=[f[1] for f in FAULTS])
def test_transport_failures_are_recorded_and_history_untouched(
    store: SessionStore, fault: Reply, code: str, attempts: int
) -> None:
    feed(store, TranscriptGenerator(7), 10)
    before = snapshot(store)
    with ModelServer(script=[fault] * 4) as srv:
        compactor = Compactor(store, openai_summarizer(srv, timeout=0.4), SETTINGS)
        with pytest.raises(CompactionFailed) as info:
            compactor.compact("s", reason="threshold")
        assert len(srv.chat_requests) == attempts
    after = snapshot(store)
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1
    outcome = after[-1]
    assert outcome["kind"] == COMPACTION_OUTCOME
    assert outcome["data"]["outcome"] == "failed"
    assert outcome["data"]["code"] == code == info.value.code
    assert outcome["data"]["reason"] == "threshold"
    assert outcome["data"]["attempts"] == attempts
    assert outcome["data"]["error"] and outcome["data"]["error"] in str(info.value)
    assert store.verify("s").ok


def one_long_turn(store: SessionStore) -> None:
    gen = TranscriptGenerator(8, big_output_every=0, filler_words=200)
    feed(store, gen, 6)
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Run the long sweep over every fold."}]}]
    for i in range(30):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "toolCall",
                        "id": f"sw{i}",
                        "name": "python",
                        "arguments": {"code": f"fold_{i} = sweep({i})"},
                    }
                ],
                "stopReason": "toolUse",
            }
        )
        msgs.append(
            {
                "role": "toolResult",
                "toolCallId": f"sw{i}",
                "toolName": "python",
                "content": [{"type": "text", "text": "score " + "x " * 300}],
                "isError": False,
            }
        )
    store.append_many("s", [("message", {"message": m}) for m in msgs])


def test_split_turn_with_offline_summarizer(store: SessionStore) -> None:
    one_long_turn(store)
    result = Compactor(store, settings=SETTINGS).compact("s")
    assert result.details["is_split_turn"] is True
    assert "**Turn context (split turn):**" in result.summary
    assert "## Original Request\nRun the long sweep over every fold." in result.summary
    assert len(result.details["calls"]) == 2


def test_split_turn_with_openai_summarizer(store: SessionStore) -> None:
    one_long_turn(store)
    with ModelServer(script=[CHECKPOINT, PREFIX]) as srv:
        result = Compactor(store, openai_summarizer(srv), SETTINGS).compact("s")
        prompts = [(r.body or {})["messages"][1]["content"] for r in srv.chat_requests]
        caps = [(r.body or {})["max_tokens"] for r in srv.chat_requests]
    assert "FIRST PART of one long turn" in prompts[1]
    assert caps == [SETTINGS.summary_max_tokens, SETTINGS.turn_prefix_max_tokens]
    assert CHECKPOINT in result.summary and PREFIX in result.summary
    assert result.details["usage"]["prompt_tokens"] > 0


@pytest.mark.parametrize("kind", ["offline", "openai"])
def test_branch_summary(store: SessionStore, kind: str) -> None:
    gen = TranscriptGenerator(9)
    feed(store, gen, 3)
    fork = store.leaf("s")
    assert fork is not None
    feed(store, gen, 4)
    branch = (
        "## Goal\nx\n\n## Constraints & Preferences\n(none)\n\n## Progress\n### Done\n- [x] y\n\n### "
        "In "
        "Progress\n(none)\n\n### Blocked\n(none)\n\n## Key Decisions\n(none)\n\n## Next Steps\n1. z"
    )
    with ModelServer(script=[branch]) as srv:
        summarizer = openai_summarizer(srv) if kind == "openai" else None
        entry = Compactor(store, summarizer, SETTINGS).summarize_branch("s", fork)
    assert entry.kind == "branch_summary" and entry.parent_id == fork
    assert store.leaf("s") == entry.id
    assert missing_sections(str(entry.data["summary"]), "branch") == []
    assert "frame_5" in entry.data["summary"]  # a variable of the abandoned branch survives (guard)
    assert store.verify("s").ok


@pytest.mark.parametrize("method", ["compact", "prepare"])
def test_bad_reason_is_rejected_before_anything_is_written(store: SessionStore, method: str) -> None:
    feed(store, TranscriptGenerator(10), 10)
    before = snapshot(store)
    with pytest.raises(ValueError, match="unknown compaction reason 'because'"):
        getattr(Compactor(store, settings=SETTINGS), method)("s", reason="because")
    assert snapshot(store) == before


@pytest.mark.parametrize(
    "details",
    [
        {"ledger": {"commands": [{"tool": "x"}]}},
        {"anchors": {"goal": {"kind": "wish", "text": "x"}}},
        {"identifiers": [{"text": "a.py", "cls": "planet"}]},
    ],
)
def test_malformed_previous_details_are_reported_and_nothing_written(
    store: SessionStore, details: dict[str, Any]
) -> None:
    gen = TranscriptGenerator(12)
    feed(store, gen, 6)
    first_kept = store.path("s")[-4].id
    bad = store.append(
        "s",
        COMPACTION,
        {
            "summary": "## Goal\nx",
            "first_kept_entry_id": first_kept,
            "tokens_before": 1,
            "reason": "manual",
            "details": details,
        },
    )
    feed(store, gen, 10)
    before = snapshot(store)
    with pytest.raises(
        CompactionError, match=f"previous compaction \\(entry {bad.id}\\) has malformed details"
    ):
        Compactor(store, settings=SETTINGS).compact("s")
    assert snapshot(store) == before


def file_ops(store: SessionStore, read: list[str], modified: list[str]) -> None:
    """What kernel/fileops.py appends after a cell that opened files."""
    store.append(
        "s", "custom", {"custom_type": "ipython_file_ops", "data": {"read": read, "modified": modified}}
    )


def test_kernel_file_ops_of_the_summarized_span_are_folded_into_the_ledger(store: SessionStore) -> None:
    gen = TranscriptGenerator(13, big_output_every=0)
    feed(store, gen, 2)
    file_ops(store, ["/w/in.csv", "/w/notes.md"], [])
    feed(store, gen, 2)
    file_ops(store, ["/w/more.csv"], ["/w/in.csv"])  # read earlier, written now: modified only
    feed(store, gen, 12)
    file_ops(store, ["/w/tail.csv"], ["/w/tail-out.csv"])  # in the kept tail: not summarized yet
    feed(store, gen, 2)
    compactor = Compactor(store, settings=CompactionSettings(keep_recent_tokens=800))
    ledger = compactor.compact("s").details["ledger"]
    assert ledger["files_read"] == ["/w/notes.md", "/w/more.csv"]
    assert ledger["files_modified"] == ["/w/in.csv"]
    feed(store, gen, 12)
    ledger = compactor.compact("s").details["ledger"]  # the next span folds the tail's record, once
    assert ledger["files_read"] == ["/w/notes.md", "/w/more.csv", "/w/tail.csv"]
    assert ledger["files_modified"] == ["/w/in.csv", "/w/tail-out.csv"]


def test_externalized_pointers_are_carried_into_later_checkpoints_up_to_the_cap(store: SessionStore) -> None:
    gen = TranscriptGenerator(14, big_output_every=3, big_output_lines=300)
    compactor = Compactor(store, settings=CompactionSettings(keep_recent_tokens=600))
    carried: list[str] = []
    for _ in range(3):
        feed(store, gen, 9)
        result = compactor.compact("s")
        new = [p.entry_id for p in result.plan.externalize]
        assert new  # every span has big outputs of its own
        carried = [i for i in carried if i not in new] + new
        ids = [p["entry_id"] for p in result.details["externalized"]]
        assert ids == carried[-MAX_CARRIED_POINTERS:]
        for entry_id in ids:
            assert f"recall {entry_id}" in result.summary
        with_gist = [p["entry_id"] for p in result.details["externalized"] if p.get("gist")]
        assert with_gist == ids[-CARRIED_WITH_GIST:]  # older ones are index items: "[recall ID] subject"
    assert len(carried) > CARRIED_WITH_GIST


@pytest.mark.parametrize(("count", "chars"), [(0, 10_000), (3, 10_000), (50, 40)])
def test_identifier_budget_bounds_what_the_checkpoint_tracks(
    store: SessionStore, count: int, chars: int
) -> None:
    feed(store, TranscriptGenerator(15), 20)
    details = (
        Compactor(store, settings=SETTINGS, max_identifiers=count, identifier_chars=chars)
        .compact("s")
        .details
    )
    texts = [i["text"] for i in details["identifiers"]]
    assert len(texts) <= count and sum(len(t) for t in texts) <= chars
    assert texts or count == 0  # a non-zero budget keeps some


@pytest.mark.parametrize("bad", [{"max_identifiers": -1}, {"identifier_chars": -5}])
def test_a_negative_identifier_budget_is_refused(store: SessionStore, bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="identifier budget must be non-negative"):
        Compactor(store, **bad)


def test_a_manual_compaction_that_would_grow_the_context_is_refused(store: SessionStore) -> None:
    """Found in the panel: after a preview of "summarize 0 tokens · 0 entries" (only a small turn
    prefix before the tail), Compact reported "2934 → 2962 tokens" as a success."""
    feed(store, TranscriptGenerator(4), 8)
    before = len(store.path("s"))
    plan = Compactor(store, settings=SETTINGS).plan("s")
    assert plan.summarize.entries == 0 and plan.turn_prefix.entries > 0
    with pytest.raises(
        NothingToCompact,
        match=r"would not make its context smaller: the checkpoint \([\d,]+ "
        r"tokens\) "
        r"is not smaller than the [\d,]+ tokens it would replace",
    ):
        Compactor(store, settings=SETTINGS).compact("s")
    assert len(store.path("s")) == before  # nothing written, not even an outcome record


def test_nothing_to_compact_states_the_numbers(store: SessionStore) -> None:
    feed(store, TranscriptGenerator(4), 2)
    with pytest.raises(
        NothingToCompact,
        match=r"the context holds ([\d,]+) tokens; the \1 tokens of conversation fit in the recent tail "
        r"kept verbatim \(keep_recent_tokens 1,500\)",
    ):
        Compactor(store, settings=SETTINGS).compact("s")


def test_a_plan_is_decided_again_once_the_session_moves_on(store: SessionStore) -> None:
    """A decision is remembered for the view it was made on (issue 37): a second plan of the same
    view is the same plan; after new entries, or with other limits, the plan is decided afresh."""
    gen = TranscriptGenerator(3)
    feed(store, gen, 20)
    first = Compactor(store, settings=SETTINGS).plan("s")
    assert Compactor(store, settings=SETTINGS).plan("s") == first
    feed(store, gen, 4)
    moved = Compactor(store, settings=SETTINGS).plan("s")
    assert moved.tokens_before != first.tokens_before  # counted on the longer view
    wider = Compactor(store, settings=CompactionSettings(keep_recent_tokens=40_000)).plan("s")
    assert wider.first_kept_entry_id != moved.first_kept_entry_id
    fewer = Compactor(store, settings=SETTINGS, externalize_lines=100_000, externalize_chars=10**9).plan("s")
    assert fewer.externalize == () and moved.externalize != ()


def test_the_guard_does_not_restore_a_value_replaced_in_code(store: SessionStore) -> None:
    """Dev set A: a threshold set by ``sed`` (0.085 -> 0.15) and then by an edit (-> 0.095) came back
    in the drift guard as "0.085/drop_alert_threshold" and "label: churn_days=45 # comment"'s value
    the same way: history stated bare, as if it held."""
    from generated_sessions import Writer

    w = Writer()
    w.user("Build the ingest pipeline; config in conf/pipeline.yaml.")
    w.call(
        "bash",
        {"command": "cat conf/pipeline.yaml"},
        "alerts:\n  drop_alert_threshold: 0.085\n  label: churn_days=30  # days\n",
    )
    w.say("Threshold 0.085, churn_days=30.")
    w.user("Alerting is too noisy. Set the threshold to 0.15 and churn to 45 days.")
    w.call(
        "bash",
        {"command": "sed -i 's/drop_alert_threshold: 0.085/drop_alert_threshold: 0.15/' conf/pipeline.yaml"},
        "",
    )
    w.call(
        "edit",
        {
            "path": "conf/pipeline.yaml",
            "old": "  label: churn_days=30  # days",
            "new": "  label: churn_days=45  # days",
        },
        "ok",
    )
    w.say("drop_alert_threshold: 0.15 and churn_days=45 are active.")
    for i in range(40):
        w.user(f"Quick routine check {i}, please.")
        w.call("bash", {"command": "pytest -q"}, "." * 300 + f"\n{i + 10} passed in 1.{i}s")
        w.say("All tests pass.")
    store.append_many("s", [("message", {"message": m}) for m in w.take()])
    checkpoint = Compactor(store, settings=SETTINGS).compact("s").summary
    guard = checkpoint.split("<drift-guard", 1)[-1] if "<drift-guard" in checkpoint else ""
    assert "0.085/drop_alert_threshold" not in guard
    assert "churn_days=30" not in guard
