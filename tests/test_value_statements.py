"""A user statement that says what a subject's value is ("Max zoom is zoom 18.", "Region stays
eu-central-1.", "同期間隔は 10 分に変更します。") is a decision (issue 32): the decision book carries
it, so the checkpoint states current values whose last statement lies many compactions back.

Table-driven over ``core.user_statements.user_decisions`` and ``core.decisions.fold``.
"""

from __future__ import annotations

import pytest
from builders import calls_entry, result_entry
from test_facts_lifetime import m

from ipython_compact.core import stance
from ipython_compact.core.decisions import fold
from ipython_compact.core.facts import supersedes
from ipython_compact.core.user_statements import user_decisions


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Max zoom is zoom 14 for the first release.", True),
        ("Final: max zoom is zoom 18.", True),
        ("Region stays eu-central-1.", True),
        ("Auth stays on Keycloak.", True),
        ("Threshold again: 0.72, the 0.85 rejects too many good fields.", True),
        ("Confidence threshold: 0.80 for accepting a field.", True),
        ("同期間隔は 10 分に変更します。", True),
        ("Das Timeout setzen wir auf 45 Sekunden, vorher waren es 20 Sekunden.", True),
        ("Non, on garde fra+eng.", True),
        # not a statement of a value: a request for work, a question, a hypothetical, history
        ("Check table 3 for gaps in column c3.", False),
        ("What is the p95 render time right now?", False),
        ("If we ever moved to us-east-2 the latency for our users would double.", False),
        ("Back in 2023 we used CouchDB for sync, just for the record.", False),
        ("Quick routine check, please.", False),
    ],
)
def test_a_value_statement_is_a_decision(text: str, found: bool) -> None:
    assert bool(user_decisions(text)) is found, text


@pytest.mark.parametrize(
    ("said", "current"),
    [
        (
            [
                "Max zoom is zoom 14 for the first release.",
                "Max zoom goes up: zoom 16.",
                "Final: max zoom is zoom 18.",
            ],
            ["Final: max zoom is zoom 18."],
        ),
        (
            [
                "Confidence threshold: 0.80 for accepting a field.",
                "Raise the confidence threshold to 0.85.",
                "Threshold again: 0.72, the 0.85 rejects too many good fields.",
            ],
            ["Threshold again: 0.72, the 0.85 rejects too many good fields."],
        ),
        (
            ["同期間隔は 25 分にします。", "同期間隔は 10 分に変更します。"],
            ["同期間隔は 10 分に変更します。"],
        ),
    ],
)
def test_the_newest_value_statement_is_current(said: list[str], current: list[str]) -> None:
    found = fold((), [m(f"u{i}", "user", s) for i, s in enumerate(said)])
    assert [r.text for r in found] == current


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("Revert it: max_retries=3 again, 8 hammered the gateway.", "Set max_retries=8 for the push client."),
        ("On passe à PaddleOCR, plus de Tesseract.", "Le moteur OCR est Tesseract pour l'instant."),
        (
            "Threshold again: 0.72, the 0.85 rejects too many good fields.",
            "Raise the confidence threshold to 0.85.",
        ),
    ],
)
def test_a_change_in_other_words_replaces(new: str, old: str) -> None:
    assert stance.replaces(new, old), (new, old)


def test_a_value_told_as_before_is_marked_dropped() -> None:
    said = "Das Timeout setzen wir auf 45 Sekunden, vorher waren es 20 Sekunden."
    assert stance.dropped_values(said) == ["20 sekunden"]


@pytest.mark.parametrize(
    ("name", "args", "output", "line", "was"),
    [
        (
            "edit",
            {"path": "config/tilesrv.toml", "old": "workers = 4", "new": "workers = 12"},
            "ok",
            "- workers = 12 in config/tilesrv.toml  (assistant, entry c1) — replaced: workers = 4 (entry c1)",
            "workers = 4",
        ),
        (
            "bash",
            {"command": "sed -i 's/dpi: 300/dpi: 400/' ocr-pipe/config.yaml"},
            "",
            "- dpi: 400  (assistant, entry c1) — replaced: dpi: 300 (entry c1)",
            "dpi: 300",
        ),
    ],
)
def test_a_value_set_only_in_code_is_a_decision_with_its_history(
    name: str, args: dict[str, str], output: str, line: str, was: str
) -> None:
    """No earlier statement of the key: the change is still the current value, verbatim."""
    found = fold((), [calls_entry("c1", ("t1", name, args)), result_entry("r1", "t1", output)])
    assert [r.line() for r in found] == [line]
    assert found[0].earlier == ((was, "c1"),)


def test_a_value_set_only_in_a_diff_output_is_a_decision() -> None:
    diff = "--- a/c.yaml\n+++ b/c.yaml\n@@ -5,2 +5,2 @@\n store:\n"
    diff += "-  bucket: invoices-raw\n+  bucket: invoices-ocr-in"
    found = fold(
        (),
        [
            calls_entry("c1", ("t1", "bash", {"command": "git show HEAD"})),
            result_entry("r1", "t1", diff, name="bash"),
        ],
    )
    assert [r.text for r in found] == ["bucket: invoices-ocr-in"]


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("Set max_retries=8 for the push client.", "push_batch: groups of 50"),
        ("Statt Redis nehmen wir ab jetzt Varnish als Tile-Cache.", "cache_backend: Varnish"),
    ],
)
def test_a_short_line_sharing_one_word_is_not_told_as_replaced(new: str, old: str) -> None:
    """The update prompt's <superseded> pairs read subjects strictly: one shared word is no subject."""
    assert not supersedes(new, old, loose="strict")


def test_a_labelled_proposal_is_not_a_decision() -> None:
    said = "Proposal: switch the language pack to fra+deu, some invoices come from Germany."
    assert stance.stance(said, "assistant") == "proposed"


@pytest.mark.parametrize(
    "said",
    [
        "Nach einer Woche Daten: 0.15 ist zu lasch, wir haben einen echten Einbruch verpasst.",
        "Cost review came back: 16 is too much.",
        "Honestly the alert threshold 0.4 is too strict for nights.",
        "Batch size: 5000 doesn't work with the new writer.",
    ],
)
def test_a_value_said_to_be_wrong_is_no_decision(said: str) -> None:
    """A complaint about a value names the value it is about to drop (dev set A)."""
    assert user_decisions(said) == []


@pytest.mark.parametrize(
    "said",
    ["Threshold again: 0.72", "Max zoom is zoom 18.", "0.15 ist zu lasch, setz 0.095 für die Schwelle."],
)
def test_a_value_statement_or_a_change_after_a_complaint_still_decides(said: str) -> None:
    assert user_decisions(said) != []


@pytest.mark.parametrize(
    ("said", "rejected"),
    [
        ("We are not adding Temporal to the stack three weeks before the freeze.", ["Temporal"]),
        ("We won't introduce Kafka for this service.", ["Kafka"]),
        ("No, we're not using Redis here.", ["Redis"]),
    ],
)
def test_a_negated_adoption_names_what_is_not_adopted(said: str, rejected: list[str]) -> None:
    from ipython_compact.core import history_marks

    assert history_marks.not_adopted(said) == rejected


@pytest.mark.parametrize(
    ("proposal", "taken", "edit", "named"),
    [
        # an assistant's proposal naming the old value beside the new one, taken, then made in code
        (
            "Vorschlag: Wir stellen die Parquet-Kompression von snappy auf zstd um.",
            "Ja, mach das.",
            {"path": "conf.yaml", "old": "  compression: snappy", "new": "  compression: zstd"},
            "snappy",
        ),
        (
            "Suggestion: pooled OLS ignores the clustering; a mixed model fits better.",
            "ok, go",
            {"path": "params.py", "old": 'MODEL = "pooled OLS"', "new": 'MODEL = "mixed"'},
            "pooled OLS",
        ),
    ],
)
def test_a_ledger_line_naming_a_value_replaced_in_code_says_so(
    proposal: str, taken: str, edit: dict[str, str], named: str
) -> None:
    """Dev set A: the accepted proposal stayed in the ledger naming the old value as if it held."""
    from builders import answer_entry, user_entry

    from ipython_compact.core.decisions import shown_lines

    found = fold(
        (), [answer_entry("a1", proposal), user_entry("u1", taken), calls_entry("c1", ("t1", "edit", edit))]
    )
    lines = [line for line in shown_lines(found) if proposal[:20] in line]
    assert lines and lines[0].endswith(f" — (names a value since replaced: {named})")


def test_a_value_replaced_and_set_again_is_no_history() -> None:
    """A revert: the old value holds again, so a line naming it names what holds."""
    from ipython_compact.core.decisions import replaced_values

    first = {"path": "c.yaml", "old": "  codec: snappy", "new": "  codec: zstd"}
    back = {"path": "c.yaml", "old": "  codec: zstd", "new": "  codec: snappy"}
    found = fold((), [calls_entry("c1", ("t1", "edit", first)), calls_entry("c2", ("t2", "edit", back))])
    assert "snappy" not in replaced_values(found)


@pytest.mark.parametrize(
    ("line", "pairs"),
    [
        ("  label: churn_days=30     # 30 天无登录视为流失", [("label", "churn_days=30")]),
        ("pool_size = 20  # per pod", [("pool_size", "20")]),
        ("url: http://a/b#frag", []),
    ],
)
def test_a_trailing_comment_is_no_part_of_the_value(line: str, pairs: list[tuple[str, str]]) -> None:
    assert stance.key_values(line) == pairs
