"""Facts with a lifetime (issue 18): supersession, request states, and how lines read."""

from __future__ import annotations

from typing import Any

import pytest
from builders import message_entry

from ipython_compact.core.anchors import AnchorSet, extract_anchors
from ipython_compact.core.entries import Entry
from ipython_compact.core.facts import clip_sentences, dedupe_sentences, newest_current, supersedes
from ipython_compact.core.ledger import Ledger, output_artifacts, version_key
from ipython_compact.core.offline_summary import offline_summary, parse_checkpoint
from ipython_compact.core.requests import RequestBook, RequestRecord


def m(eid: str, role: str, text: str, **extra: Any) -> Entry:
    return message_entry(eid, role, text, **({"stopReason": "stop"} if role == "assistant" else {}), **extra)


@pytest.mark.parametrize(
    ("output", "found"),
    [
        # git's own words
        ("[main 1a2b3c4] fix loader\n 1 file changed, 3 insertions(+)", [("commit", "1a2b3c4")]),
        ("[main (root-commit) 9f8e7d6] first commit\n 2 files changed", [("commit", "9f8e7d6")]),
        ("[feature/api-v2 0123456] rename the client", [("commit", "0123456")]),  # all digits is a hash too
        ("x\n" * 40 + "[detached HEAD abcdef1] wip", [("commit", "abcdef1")]),  # on the last lines
        ("[1, 2, 3]\n[4 5]", []),  # a printed list is not a commit
        ("x\n" * 10 + "[main 1a2b3c4] fix loader\n" + "x\n" * 10, []),  # not on the first or last lines
    ],
)
def test_a_commit_git_printed_is_an_artifact(output: str, found: list[tuple[str, str]]) -> None:
    assert output_artifacts(output) == found


@pytest.mark.parametrize(
    ("new", "old", "replaces"),
    [
        # names what it replaces
        ("Actually, use DuckDB for storage instead of Postgres.", "Use Postgres for storage.", True),
        ("The decision threshold is now 0.35.", "The decision threshold is 0.5.", True),  # one value changed
        ("Report PR-AUC as the headline metric.", "Report AUC as the headline metric.", True),
        ("Use polars, not pandas.", "Use pandas for loading.", True),
        ("the best run is now run-23 (auc=0.84)", "the best run is run-17 (auc=0.81)", True),
        # two facts, not one revised: several changes, or too little in common
        (
            "The root cause is a race in pay/refund.py because it reuses state.",
            "The root cause is a stale cache in bill/inv.py because it reuses state.",
            False,
        ),
        ("Done with gbm_04ab.", "Done with gbm_03cd.", False),
        (
            "Keep every fix under 40 changed lines.",
            "Keep the random seed fixed at 1337 for every experiment.",
            False,
        ),
        (
            "Always use CUDA 12.4 for the GPU runs, not any newer toolkit.",
            "Never write into /data/raw.",
            False,
        ),
        ("Use Postgres for storage.", "Use Postgres for storage.", False),
    ],
)
def test_supersedes(new: str, old: str, replaces: bool) -> None:
    assert supersedes(new, old) is replaces


def test_newest_current_keeps_the_newest_statement_of_a_subject_and_marks_it() -> None:
    items = [
        "Use a decision threshold of 0.5.",
        "I'll use LightGBM because it handles gaps.",
        "Use a decision threshold of 0.35.",
    ]
    assert newest_current(items, 10) == [
        "I'll use LightGBM because it handles gaps.",
        "Use a decision threshold of 0.35. — replaced: Use a decision threshold of 0.5.",
    ]


def test_lines_read_once_and_clip_at_a_sentence_end() -> None:
    assert (
        dedupe_sentences("Step 0: load chunk 0 and report the mean. " * 8)
        == "Step 0: load chunk 0 and report the mean."
    )
    assert (
        clip_sentences("First sentence here. Second one is longer than the rest.", 30)
        == "First sentence here."
    )
    clipped = clip_sentences("one " * 40, 30)
    assert clipped.endswith("…") and len(clipped) <= 30 and not clipped[:-1].endswith(" ")


# ---------------------------------------------------------------------------------- requests
def _book(*steps: tuple[str, str]) -> list[RequestRecord]:
    book = RequestBook()
    for i, (role, text) in enumerate(steps):
        if role == "user":
            book.user(f"u{i}", text, text)
        else:
            book.answer(text, text)
    return book.records()


def test_a_final_answer_settles_only_its_turn_and_not_what_it_puts_off() -> None:
    records = _book(
        ("user", "Add the ROC plot to the report."),
        ("assistant", "I'll add the ROC plot once the backfill is done."),
        ("user", "Retrain the model on March data."),
        ("assistant", "Retrained on March data: auc=0.81."),
    )
    assert [(r.text, r.status) for r in records] == [
        ("Add the ROC plot to the report.", "deferred"),
        ("Retrain the model on March data.", "done"),
    ]
    assert records[0].note == "I'll add the ROC plot once the backfill is done."
    later = RequestBook(records)
    later.answer("The backfill finished; the ROC plot is added to the report.", "")
    assert later.records()[0].status == "done"


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        ("April is complete. Then I'll wait for your review.", "done"),  # waiting on the user defers nothing
        ("I'll do that after the migration lands.", "deferred"),  # refers back to the request
        ("Not yet: blocked on the vendor feed for the April numbers.", "deferred"),  # names it
    ],
)
def test_what_defers_a_request(answer: str, status: str) -> None:
    assert _book(("user", "Check the April numbers."), ("assistant", answer))[0].status == status


def test_a_withdrawal_drops_the_request_it_names() -> None:
    records = _book(
        ("user", "Make a PDF export of the dashboard."),
        ("user", "Also add a churn cohort table."),
        ("user", "Never mind the PDF export."),
        ("assistant", "Added the churn cohort table."),
    )
    assert [(r.text, r.status) for r in records] == [
        ("Make a PDF export of the dashboard.", "dropped"),
        ("Also add a churn cohort table.", "done"),
    ]


def test_ledger_counts_every_state_and_lists_every_open_request() -> None:
    session = [
        m("u1", "user", "Add the ROC plot to the report."),
        m("a1", "assistant", "I'll add the ROC plot once the backfill is done."),
        m("u2", "user", "Make a PDF export."),
        m("u3", "user", "Never mind the PDF export."),
        m("u4", "user", "Retrain on March data."),
        m("a2", "assistant", "Retrained on March data."),
        *[x for i in range(15) for x in (m(f"q{i}", "user", f"Open question {i} about segment {i}"),)],
    ]
    ledger = Ledger().update(session)
    text = ledger.render()
    assert "user requests (18 total: 1 done, 15 open, 1 deferred, 1 withdrawn;" in text
    assert ledger.request_counts() == {"open": 15, "deferred": 1, "done": 1, "dropped": 1}
    assert "deferred: I'll add the ROC plot once the backfill is done." in text
    assert "- [-] withdrawn: Make a PDF export." in text
    for i in range(15):  # every open request: in full, or by its recall id
        assert f"Open question {i} about" in text or f"q{i}" in text
    assert Ledger.from_json(ledger.to_json()) == ledger


def test_offline_summary_keeps_deferred_requests_in_progress_with_their_ids() -> None:
    span = [
        m("u1", "user", "Add the ROC plot to the report."),
        m("a1", "assistant", "I'll add the ROC plot once the backfill is done."),
        m("u2", "user", "Retrain on March data."),
        m("a2", "assistant", "Retrained on March data."),
    ]
    first = offline_summary(span)
    sections = parse_checkpoint(first)
    assert sections["In Progress"] == [
        "Add the ROC plot to the report. — deferred: I'll add the ROC plot "
        "once the backfill is done. (entry u1)"
    ]
    assert sections["Done"] == ["Retrain on March data. → Retrained on March data."]
    rolled = offline_summary(
        [m("u3", "user", "Any news?"), m("a3", "assistant", "Nothing new.")], previous_summary=first
    )
    # a later answer does not settle it
    assert parse_checkpoint(rolled)["In Progress"] == sections["In Progress"]
    done = offline_summary(
        [m("a4", "assistant", "The backfill landed and the ROC plot is added to the report.")],
        previous_summary=rolled,
    )
    assert parse_checkpoint(done)["In Progress"] == []
    assert parse_checkpoint(done)["Done"][-1].startswith("Add the ROC plot to the report. → ")


def test_offline_summary_states_only_the_current_decision_and_the_users_goal() -> None:
    first = offline_summary(
        [
            m("u1", "user", "Load the data and show me the head."),
            m("u2", "user", "Our goal is a churn model with a calibrated decision threshold."),
            m("a1", "assistant", "I'll use Postgres for storage because it is already running."),
        ]
    )
    assert parse_checkpoint(first)["Goal"] == [
        "Our goal is a churn model with a calibrated decision threshold."
    ]
    second = offline_summary(
        [
            m("u3", "user", "Let's switch to DuckDB instead of Postgres."),
            m("a2", "assistant", "Switching storage to DuckDB instead of Postgres as you asked."),
        ],
        previous_summary=first,
    )
    decisions = parse_checkpoint(second)["Key Decisions"]
    assert not [d for d in decisions if "Postgres for storage because" in d.split(" — replaced: ")[0]]
    assert any("DuckDB" in d and "— replaced: I'll use Postgres" in d for d in decisions)


def test_notebook_repeats_read_once() -> None:
    text = offline_summary(
        [
            m("u1", "user", "Step 0: load chunk 0 of the sales data and report the mean. " * 8),
            m("a1", "assistant", "Chunk 0 loaded; the mean is 0.0. " * 12 + "Next I will plot it. " * 8),
        ]
    )
    sections = parse_checkpoint(text)
    assert sections["Done"] == [
        "Step 0: load chunk 0 of the sales data and report the mean. → Chunk 0 loaded; the mean is 0.0."
    ]
    assert sections["Next Steps"] == ["Next I will plot it."]
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#") and ln != "(none)"]
    assert len(lines) == len(set(lines))


# ---------------------------------------------------------------------------------- anchors
def test_a_revised_constraint_replaces_the_anchor_and_the_old_one_is_marked() -> None:
    entries = [
        m("e1", "user", "Build the churn model. Always use Postgres for storage."),
        m("e2", "user", "Please use DuckDB for storage instead of Postgres from now on."),
    ]
    lookup = {e.id: e for e in entries}.get
    first = extract_anchors(AnchorSet(), entries[:1], lookup)
    assert [a.text for a in first.constraints] == ["Always use Postgres for storage."]
    second = extract_anchors(first, entries[1:], lookup)
    assert [a.text for a in second.constraints] == [
        "Please use DuckDB for storage instead of Postgres from now on."
    ]
    assert [(a.text, a.entry_id) for a in second.superseded] == [("Always use Postgres for storage.", "e1")]
    block = second.render()
    assert "Build the churn model. [revised: see entry e2]" in block  # the goal message stated the old rule
    line = next(ln for ln in block.splitlines() if "Postgres for storage." in ln and "Always" in ln)
    # the old text only as the new one's history
    assert "DuckDB" in line and "replaced" in line and "e1" in line
    assert second.replacements() == [
        ("Always use Postgres for storage.", "Please use DuckDB for storage instead of Postgres from now on.")
    ]
    assert AnchorSet.from_json(second.to_json()) == second


def test_a_goal_statement_becomes_the_goal_and_a_step_request_never_does() -> None:
    entries = [
        m("e1", "user", "Load sales.csv and print the head."),
        m("e2", "user", "Now plot the monthly totals."),
        m("e3", "user", "Goal: forecast April revenue within 5%."),
    ]
    lookup = {e.id: e for e in entries}.get
    after_two = extract_anchors(AnchorSet(), entries[:2], lookup)
    assert after_two.goal is not None and after_two.goal.entry_id == "e1"
    anchors = extract_anchors(after_two, entries[2:], lookup)
    assert anchors.goal is not None and anchors.goal.text == "Goal: forecast April revenue within 5%."
    assert [a.entry_id for a in anchors.superseded] == ["e1"]


# ---------------------------------------------------------------------------------- artifacts
def test_artifacts_keep_the_newest_version() -> None:
    assert (
        version_key("models/churn_v3.pkl")
        == version_key("models/churn_v4.pkl")
        != version_key("models/churn.pkl")
    )
    assert output_artifacts(
        "Saved model to models/churn_v3.pkl\n" + "x\n" * 50 + "[main 1a2b3c4d] committed fix"
    ) == [("file", "models/churn_v3.pkl"), ("commit", "1a2b3c4d")]
    call = {
        "type": "toolCall",
        "id": "c1",
        "name": "write",
        "arguments": {"path": "models/churn_v3.pkl", "content": "x"},
    }
    call2 = {
        "type": "toolCall",
        "id": "c2",
        "name": "write",
        "arguments": {"path": "models/churn_v4.pkl", "content": "x"},
    }
    session = [
        Entry(
            "a1",
            None,
            "message",
            "t",
            {"message": {"role": "assistant", "content": [call], "stopReason": "toolUse"}},
        ),
        m("r1", "toolResult", "ok", toolCallId="c1"),
        Entry(
            "a2",
            None,
            "message",
            "t",
            {"message": {"role": "assistant", "content": [call2], "stopReason": "toolUse"}},
        ),
        m("r2", "toolResult", "ok", toolCallId="c2"),
    ]
    text = Ledger().update(session).render()
    assert "files modified: models/churn_v4.pkl (replaced models/churn_v3.pkl)" in text


@pytest.mark.parametrize(
    ("new", "old", "replaces"),
    [
        # two rules, numbered
        ("Always keep log 8 under /var/log/app_8.", "Always keep log 7 under /var/log/app_7.", False),
        ("Done with gbm_04ab.", "Done with gbm_03cd.", False),  # a report per step, not a quantity
        ("Pin lightgbm==5.2.4 for the GPU runs.", "Pin lightgbm==4.1.3 for the GPU runs.", True),
    ],
)
def test_values_that_change_word_for_word(new: str, old: str, replaces: bool) -> None:
    assert supersedes(new, old) is replaces


def test_a_result_may_change_several_values() -> None:
    new, old = (
        ("The best run is run-cd34 with best_auc=0.812."),
        "The best run is run-ab12 with best_auc=0.801.",
    )
    assert supersedes(new, old, values_only=True) and not supersedes(
        "Here is the tenure view.", "Here is the region view.", values_only=True
    )


def test_numbered_siblings_are_not_versions_and_run_ids_keep_their_results_apart() -> None:
    from ipython_compact.core.drift import metric_subject

    assert version_key("src/billing/ledger_01.py") != version_key("src/billing/ledger_02.py")  # two files
    assert version_key("model-rev3.pt") == version_key("model-rev4.pt")
    assert metric_subject("finished run-0b8f2f: auc=0.787", "auc=0.787") != metric_subject(
        "finished run-0b8e2a: auc=0.790", "auc=0.790"
    )
    assert metric_subject("epoch 12 loss=0.3", "loss=0.3") == metric_subject("epoch 13 loss=0.2", "loss=0.2")


def test_a_withdrawal_is_not_a_standing_rule() -> None:
    from ipython_compact.core.user_statements import constraint_spans

    assert constraint_spans("Never mind the PDF export of the dashboard.") == []


def test_open_requests_beyond_in_progress_roll_on_by_id() -> None:
    span = [m(f"u{i}", "user", f"Open question {i} about segment {i}") for i in range(14)]
    first = offline_summary(span)
    line = parse_checkpoint(first)["In Progress"][0]
    assert line.startswith("(5 older open or deferred request(s): entries u0, u1, u2, u3, u4; recall by id)")
    rolled = parse_checkpoint(
        offline_summary([m("u99", "user", "One more question")], previous_summary=first)
    )["In Progress"]
    # still open, by id
    assert rolled[0].startswith("(6 older open or deferred request(s): entries u0, u1, u2, u3, u4, u5;")
