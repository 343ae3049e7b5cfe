"""Issue 32: a change is a change in any phrasing, and only a decision changes what holds.

Each case is a phrasing the issue lists as read wrongly by the phrase list (a revision not seen,
or a statement wrongly taken as one), folded through the layers that use the one model of
subject, stance and time (``core.stance``): the decision book, the anchors, the request book and
triage. They use only the layers' public functions, so they ran (and failed) on the code before.
"""

from __future__ import annotations

import pytest
from builders import answer_entry, calls_entry, result_entry, user_entry

from ipython_compact.core.anchors import AnchorSet, extract_anchors
from ipython_compact.core.decisions import fold
from ipython_compact.core.entries import Entry
from ipython_compact.core.requests import RequestBook
from ipython_compact.core.triage import triage


def current(*entries: Entry) -> list[str]:
    return [r.text for r in fold((), entries)]


def earlier(*entries: Entry) -> list[str]:
    return [t for r in fold((), entries) for t, _id in r.earlier]


# ---------------------------------------------------------------------------- changes seen
@pytest.mark.parametrize(
    ("before", "after", "old_word", "new_word"),
    [
        ("Use Kafka for the event bus.", "Scratch that, use NATS.", "Kafka", "NATS"),
        (
            "Write the exports as Parquet files from now on.",
            "Parquet is out; Avro from now on.",
            "Parquet",
            "Avro",
        ),
        ("Set max retries to 5 for the client.", "Bump max retries to 8.", "5", "8"),
        (
            "Use Memcached as the cache for sessions.",
            "Statt Memcached nehmen wir Redis.",
            "Memcached",
            "Redis",
        ),
        ("Use MinIO for object storage from now on.", "改用 Ceph，不再用 MinIO。", "MinIO", "Ceph"),
    ],
)
def test_a_revision_in_other_words_replaces_the_decision(
    before: str, after: str, old_word: str, new_word: str
) -> None:
    entries = (
        user_entry("u1", before),
        answer_entry("a1", "Noted."),
        user_entry("u2", after),
        answer_entry("a2", "Done."),
    )
    now = current(*entries)
    assert [t for t in now if old_word in t and new_word not in t] == []
    assert any(new_word in t for t in now)
    assert any(old_word in t for t in earlier(*entries))


def test_revert_it_replaces_the_bump_it_reverts() -> None:
    now = current(
        user_entry("u1", "Set max retries to 5 for the client."),
        answer_entry("a1", "Noted."),
        user_entry("u2", "Bump max retries to 8."),
        answer_entry("a2", "Bumped."),
        user_entry("u3", "Revert it to 3."),
        answer_entry("a3", "Reverted."),
    )
    assert now == ["Revert it to 3."]


@pytest.mark.parametrize(
    "args",
    [
        {"path": "client.py", "old_string": "MAX_RETRIES = 5", "new_string": "MAX_RETRIES = 8"},
        {"command": "sed -i 's/max_retries: 5/max_retries: 8/' config.yaml"},
    ],
)
def test_a_value_changed_only_in_code_replaces_the_decision(args: dict[str, str]) -> None:
    now = current(
        user_entry("u1", "Set max retries to 5 for the client."),
        answer_entry("a1", "Noted."),
        calls_entry("c1", ("t1", "edit" if "path" in args else "bash", args)),
        result_entry("r1", "t1", "ok"),
    )
    assert "Set max retries to 5 for the client." not in now
    assert any("8" in t and "max_retries" in t for t in now)


def test_a_value_changed_in_a_git_diff_output_replaces_the_decision() -> None:
    diff = "diff --git a/cfg.toml b/cfg.toml\n@@ -1,3 +1,3 @@\n-pool_size = 10\n+pool_size = 25\n"
    now = current(
        user_entry("u1", "Set the pool size to 10 connections."),
        answer_entry("a1", "Noted."),
        calls_entry("c1", ("t1", "bash", {"command": "git diff"})),
        result_entry("r1", "t1", diff, name="bash"),
    )
    assert now and all("pool size to 10" not in t for t in now)


# ---------------------------------------------------------------------------- not changes
@pytest.mark.parametrize(
    "later",
    [
        "If we switched to Snowflake instead of BigQuery, costs might drop; no change for now.",
        "Should we use Snowflake instead of BigQuery?",
        "We used to run Snowflake instead of BigQuery, back in 2021.",
    ],
)
def test_a_question_hypothetical_or_history_changes_nothing(later: str) -> None:
    now = current(
        user_entry("u1", "Use BigQuery as the warehouse from now on."),
        answer_entry("a1", "Noted."),
        user_entry("u2", later),
        answer_entry("a2", "Understood."),
    )
    assert now == ["Use BigQuery as the warehouse from now on."]


def test_a_proposal_the_user_rejects_is_no_decision() -> None:
    now = current(
        user_entry("u1", "Run the nightly job with cron from now on."),
        answer_entry("a1", "Noted."),
        user_entry("u2", "How could we make the nightly job more reliable?"),
        answer_entry("a2", "I'd suggest switching the nightly job to Airflow instead of cron."),
        user_entry("u3", "No, keep cron."),
        answer_entry("a3", "Keeping cron."),
    )
    assert now == ["Run the nightly job with cron from now on."]


def test_a_proposal_the_user_accepts_is_the_decision() -> None:
    now = current(
        user_entry("u1", "Run the nightly job with cron from now on."),
        answer_entry("a1", "Noted."),
        user_entry("u2", "How could we make the nightly job more reliable?"),
        answer_entry("a2", "I'd suggest switching the nightly job to Airflow instead of cron."),
        user_entry("u3", "Yes, do that."),
        answer_entry("a3", "Switched."),
    )
    assert now == ["I'd suggest switching the nightly job to Airflow instead of cron."]


def test_a_quoted_old_runbook_sets_no_constraint() -> None:
    anchors = extract_anchors(
        AnchorSet(),
        [
            user_entry("u1", "Set up the deploy pipeline."),
            user_entry(
                "u2",
                "Here is the old runbook, for reference:\nAlways deploy with Ansible.\n\n"
                "We deploy with Terraform now.",
            ),
        ],
        lambda _id: None,
    )
    assert [a.text for a in anchors.constraints if "Ansible" in a.text] == []


# ---------------------------------------------------------------------------- requests
def book(*steps: tuple[str, str]) -> list[tuple[str, str]]:
    b = RequestBook()
    for i, (role, text) in enumerate(steps):
        if role == "user":
            b.user(f"u{i}", text, text)
        else:
            b.answer(text, text)
    return [(r.text, r.status) for r in b.records()]


@pytest.mark.parametrize(
    ("ask", "cancel"),
    [
        ("Plot the residuals by region.", "Forget the plot."),
        ("Erstelle eine Heatmap der Fehler pro Region.", "Die Heatmap brauchen wir doch nicht."),
    ],
)
def test_a_cancellation_in_other_words_drops_the_request(ask: str, cancel: str) -> None:
    assert book(("user", ask), ("user", cancel)) == [(ask, "dropped")]


def test_a_deferral_said_by_the_user_is_not_done() -> None:
    found = book(
        ("user", "Export the cohort table to Excel."),
        ("user", "Actually do the Excel export later, not now."),
        ("assistant", "Okay, I will leave the export for later."),
    )
    assert found == [("Export the cohort table to Excel.", "deferred")]


def test_a_promise_is_not_done() -> None:
    found = book(
        ("user", "Build the latency dashboard."), ("assistant", "I'll build the latency dashboard next.")
    )
    assert found == [("Build the latency dashboard.", "deferred")]


def test_scratch_that_revises_a_decision_and_withdraws_no_request() -> None:
    found = book(
        ("user", "Write the consumer for the orders topic."),
        ("user", "Scratch that, use NATS for the event bus."),
    )
    assert found[0] == ("Write the consumer for the orders topic.", "open")


def test_a_cancelled_request_asked_for_again_is_reopened() -> None:
    found = book(
        ("user", "Plot the residuals by region."),
        ("user", "Forget the plot."),
        ("user", "Actually, I do want the residuals plot after all."),
    )
    assert found == [("Plot the residuals by region.", "open")]


def test_an_answer_identical_to_an_earlier_one_is_kept_for_its_request() -> None:
    span = [
        user_entry("u1", "Refresh the sales cache."),
        answer_entry("a1", "Done."),
        user_entry("u2", "Refresh the inventory cache."),
        answer_entry("a2", "Done."),
    ]
    assert [d.entry_id for d in triage(span).discarded] == []


def test_the_request_book_is_linear_with_many_open_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: each answer used to tokenize every carried-forward open request again (quadratic).
    Each text is tokenized a fixed number of times, however many requests are open."""
    import ipython_compact.core.requests as requests_module
    from ipython_compact.core import stance

    calls = {"n": 0}
    real = stance.terms

    def counted(text: str) -> frozenset[str]:
        calls["n"] += 1
        return real(text)

    monkeypatch.setattr(requests_module.stance, "terms", counted)

    def fold(turns: int) -> int:
        calls["n"] = 0
        b = RequestBook()
        for i in range(turns):
            b.user(
                f"u{i}a",
                f"Check table {i} for gaps in column c{i}.",
                f"Check table {i} for gaps in column c{i}.",
            )
            b.user(f"u{i}b", f"Plot feature f{i} by region r{i}.", f"Plot feature f{i} by region r{i}.")
            b.answer(f"Here is feature f{i} by region r{i}: skewed.", "ok")
        assert sum(r.status == "open" for r in b.records()) == turns  # one carried forward per turn
        return calls["n"]

    assert fold(400) == 2 * fold(200)


def test_scratch_that_replaces_the_constraint_said_just_before() -> None:
    anchors = extract_anchors(
        AnchorSet(),
        [
            user_entry("u1", "Build the order pipeline."),
            user_entry("u2", "Always use Kafka for the event bus."),
            user_entry("u3", "Scratch that, use NATS."),
        ],
        lambda _id: None,
    )
    assert [a.text for a in anchors.constraints] == ["Scratch that, use NATS."]
    assert [a.text for a in anchors.superseded] == ["Always use Kafka for the event bus."]


@pytest.mark.parametrize(
    "between",
    [
        # the assistant talks about the choice, a user's bare acknowledgment comes before the revision
        (answer_entry("a1", "OK. For Kafka I'd use the transactional producer."), user_entry("u2", "noted")),
        (answer_entry("a1", "Let me see what is running."), user_entry("u2", "ok")),
        (user_entry("u2", "thx"),),
    ],
)
def test_scratch_that_revises_the_last_decision_the_user_said_not_the_last_message(
    between: tuple[Entry, ...],
) -> None:
    """Dev set A (read from stop 40): "Next: the outbox. We're moving it off RabbitMQ. Let's use Kafka." —
    an assistant reply and a user's "noted" — "Scratch that, use NATS.": Kafka stayed in force."""
    entries = (
        user_entry("u1", "Next: the outbox. We're moving it off RabbitMQ, it is a pain. Let's use Kafka."),
        *between,
        user_entry("u3", "Scratch that, use NATS, platform already runs it."),
    )
    now = current(*entries)
    assert [t for t in now if "Kafka" in t] == []
    assert any("NATS" in t for t in now)
    assert any("Let's use Kafka." in t for t in earlier(*entries))


@pytest.mark.parametrize(
    "line",
    [
        "We're moving it off RabbitMQ, the cluster is a pain to operate.",
        "We are moving the outbox off RabbitMQ.",
    ],
)
def test_moving_something_off_a_value_drops_it(line: str) -> None:
    from ipython_compact.core import stance

    assert stance.dropped_values(line)


def test_scratch_that_revises_a_decision_folded_in_an_earlier_compaction() -> None:
    """The decision and its revision fall in two compaction spans (two folds)."""
    first = fold((), (user_entry("u1", "Next: the outbox. Let's use Kafka."), answer_entry("a1", "OK.")))
    now = fold(first, (user_entry("u2", "noted"), user_entry("u3", "Scratch that, use NATS.")))
    assert [r.text for r in now if "Kafka" in r.text] == []
    assert [t for r in now for t, _id in r.earlier] == ["Let's use Kafka."]
