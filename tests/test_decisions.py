"""Decisions with a lifetime (issue 18, items 1 and 2): the ledger's decision book.

The book is folded from the raw log, so the checkpoint carries the current revision of every
decision whatever a model summary wrote: never an old one as current, never one the summary
already states."""

from __future__ import annotations

import pytest
from builders import answer_entry, user_entry

from ipython_compact.core.anchors import AnchorSet, extract_anchors
from ipython_compact.core.decisions import (
    DecisionRecord,
    assistant_decisions,
    fold,
    replacements,
    shown_lines,
    user_decisions,
)
from ipython_compact.core.ledger import Ledger

THRESHOLDS = [
    user_entry("u1", "Use a decision threshold of 0.50 for the retention list."),
    answer_entry("a1", "Noted: use a decision threshold of 0.50 for the retention list."),
    user_entry("u2", "Use a decision threshold of 0.35 for the retention list."),
    answer_entry("a2", "Noted."),
    user_entry("u3", "What should we do about the model?"),
    answer_entry("a3", "I'll use XGBoost for the model because it is the team default."),
    user_entry("u4", "Use a decision threshold of 0.42 for the retention list."),
    answer_entry(
        "a4",
        "Switching the model to LightGBM instead of XGBoost because it trains faster on the new features.",
    ),
]
CURRENT_THRESHOLD = "Use a decision threshold of 0.42 for the retention list."
LIGHTGBM = "Switching the model to LightGBM instead of XGBoost because it trains faster on the new features."


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Use a decision threshold of 0.42 for the retention list.", True),
        ("Let's go with a split grouped by customer_id instead of the random row split.", True),
        ("From now on, report PR-AUC as the headline metric.", True),
        ("Please set the learning rate to 0.05 for every run.", True),
        ("Use the mean?", False),  # a question
        ("Plot the churn rate by tenure.", False),  # a request, no choice
        ("i think the loader doesn't handle empty files correctly.", False),
        ("Use it.", False),  # too short to say what
    ],
)
def test_user_sentences_that_decide(text: str, found: bool) -> None:
    assert (user_decisions(text) == [text]) is found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("I'll use XGBoost for the model because it is the team default.", True),
        ("Switching the model to LightGBM instead of XGBoost because it trains faster.", True),
        ("For gbm_03 I decided on isotonic calibration because the curve bends.", True),
        ("The root cause is a stale cache in ledger.py because state is reused.", False),  # a finding
        ("Noted: use a decision threshold of 0.42 for the retention list.", False),  # an echo
        ("I'll add the ROC plot once the backfill is done.", False),  # a promise, not a choice
        ("Should I use DuckDB instead of Postgres?", False),
    ],
)
def test_assistant_sentences_that_choose(text: str, found: bool) -> None:
    assert (assistant_decisions(text) == [text]) is found


def test_a_revision_replaces_the_decision_and_remembers_what_it_replaced() -> None:
    book = fold((), THRESHOLDS)
    assert [(r.entry_id, r.text) for r in book] == [("u4", CURRENT_THRESHOLD), ("a4", LIGHTGBM)]
    threshold, model = book
    assert threshold.earlier == (
        ("Use a decision threshold of 0.50 for the retention list.", "u1"),
        ("Use a decision threshold of 0.35 for the retention list.", "u2"),
    )
    assert model.replaced == ("I'll use XGBoost for the model because it is the team default.", "a3")
    assert threshold.line() == (
        f"- {CURRENT_THRESHOLD}  (user, entry u4) — replaced: Use a decision threshold of 0.35 for the "
        "retention list. (entry u2)"
    )


def test_folding_in_parts_is_folding_the_whole() -> None:
    for cut in range(len(THRESHOLDS) + 1):
        assert fold(fold((), THRESHOLDS[:cut]), THRESHOLDS[cut:]) == fold((), THRESHOLDS)


def test_a_restatement_is_one_decision_and_a_constraint_revising_one_replaces_it() -> None:
    book = fold(
        (),
        [
            user_entry("u1", "Let's use Postgres for storage."),
            answer_entry("a1", "I'll use Postgres for storage as you asked."),  # the same choice, restated
            user_entry("u2", "Let's use Postgres for storage."),
        ],
    )
    assert [r.entry_id for r in book] == ["u1"]
    # a constraint (the anchors state it) that replaces the decision: the decision is no longer current
    book = fold(book, [user_entry("u3", "Always use DuckDB for storage instead of Postgres.")])
    assert [(r.entry_id, r.replaced) for r in book] == [("u3", ("Let's use Postgres for storage.", "u1"))]
    assert replacements(book, ["u3"]) == [
        ("Let's use Postgres for storage.", "Always use DuckDB for storage instead of Postgres.")
    ]
    assert replacements(book, ["u1"]) == []  # only what the given span revised


def test_a_constraint_that_revises_no_decision_stays_the_anchors_own() -> None:
    assert fold((), [user_entry("u1", "Always keep the random seed at 1337.")]) == ()


@pytest.mark.parametrize(
    ("summary", "shown"),
    [
        # the summary states it (exactly, or with every value and most words): not repeated
        (f"## Key Decisions\n- {CURRENT_THRESHOLD}", []),
        ("## Key Decisions\n- Decision threshold of 0.42 for the retention list (user).", []),
        # paraphrased away its value, or left it out: stated by the ledger, with what it replaced
        ("## Key Decisions\n- Use a decision threshold of 0.x for the retention list.", ["u4"]),
        ("## Key Decisions\n(none)", ["u4"]),
        # the summary still states an older revision as current: the ledger states the current one
        ("## Key Decisions\n- Use a decision threshold of 0.35 for the retention list.", ["u4"]),
        # quoted only as history: not stated
        (f"## Key Decisions\n- Use a threshold of 0.3. — replaced: {CURRENT_THRESHOLD}", ["u4"]),
        # the summary states a newer revision the book never saw: not contradicted
        ("## Key Decisions\n- Use a decision threshold of 0.45 for the retention list.", []),
    ],
)
def test_a_decision_is_shown_when_the_text_before_does_not_state_it(summary: str, shown: list[str]) -> None:
    book = fold((), THRESHOLDS[:4] + THRESHOLDS[6:7])  # the threshold only
    lines = shown_lines(book, f"{summary}\n\n## Next Steps\n(none)")
    assert [ln.split("entry ")[1][:2] for ln in lines[1:]] == shown
    assert all("0.50" not in ln and "0.35" not in ln.split(" — replaced: ")[0] for ln in lines)


def test_the_newest_decision_comes_first_and_the_ledger_carries_the_book() -> None:
    ledger = Ledger().update(THRESHOLDS)
    assert ledger.decisions == fold((), THRESHOLDS)
    assert Ledger.from_json(ledger.to_json()) == ledger
    block = ledger.render()
    decided = block.split("decisions in force", 1)[1].split("\n")[1:3]
    assert [d.split("  (")[0] for d in decided] == [f"- {LIGHTGBM}", f"- {CURRENT_THRESHOLD}"]
    assert "XGBoost for the model because" in decided[0].split(" — replaced: ")[1]
    assert "decisions in force" not in ledger.render(shown=f"{CURRENT_THRESHOLD}\n{LIGHTGBM}")


def test_a_malformed_decision_is_reported() -> None:
    with pytest.raises(ValueError, match="speaker must be user or assistant"):
        DecisionRecord.from_json({"entry_id": "e", "speaker": "bot", "text": "x"})
    with pytest.raises(ValueError, match="ledger details are malformed"):
        Ledger.from_json({"decisions": [{"speaker": "user"}]})


def test_a_user_decision_that_revises_a_constraint_is_the_anchor_and_the_ledger_does_not_repeat_it() -> None:
    log = [
        user_entry("u1", "Always use Postgres for storage."),
        answer_entry("a1", "Noted."),
        user_entry("u2", "Let's switch storage to DuckDB instead of Postgres."),  # no constraint marker
        answer_entry("a2", "Done, switched."),
    ]
    anchors = extract_anchors(AnchorSet(), log, lambda _id: None)
    assert [a.text for a in anchors.constraints] == ["Let's switch storage to DuckDB instead of Postgres."]
    assert [(a.text, a.replaced_by) for a in anchors.superseded] == [
        ("Always use Postgres for storage.", "u2:0")
    ]
    block = anchors.render()
    assert [ln for ln in block.splitlines() if "Always use Postgres" in ln and "replaced" not in ln] == []
    # the decision book holds it too, and the anchors state it: the ledger says it once (not at all)
    assert "decisions in force" not in Ledger().update(log).render(shown=block)
