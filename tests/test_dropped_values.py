"""``stance.dropped_values``: the values a line names only to drop them (issue 32).

Why: a decision that names what it replaces ("switch to X, Y won't do") kept verbatim in the
decision book, the ledger's request lines or the offline summary states the old value as if it
held. Every layer marks such a line through ``history_marks.replaced_mark``; these rules are about
language and structure (negation, too-much/too-little complaints, a clause told as history, how
things stand before a change), with our own example sentences.
"""

from __future__ import annotations

import pytest

from ipython_compact.core import history_marks, stance

DROPS = [
    # (sentence, a value it drops)
    ("Move the cache to Memcached 1.6, Redis 7 is too slow on the batch path.", "7"),
    ("Logging: switch to Loki, Graylog won't scale past the third cluster.", "graylog"),
    ("Nimm 40 Worker, 25 ist zu wenig für den Nachtlauf.", "25"),
    ("超时 30 太短了，改成 90。", "30"),
    ("Use Podman for CI images; the runners don't support a second Docker daemon.", "docker"),
    ("We used to ship with Gradle 7, use Gradle 8 from now on.", "7"),
    ("Currently we bill by Stripe Checkout, let's move to Adyen for the EU shop.", "checkout stripe"),
    ("目前是 weekly batch，建议改成每天跑一次。", "batch weekly"),
    ("Use Vault for secrets instead of SOPS files.", "files sops"),
    ("Stop using Jenkins and put the jobs on Buildkite.", "jenkins"),
]
KEEPS = [
    # reports, questions and complaints that change nothing
    "Python 3.12 is not supported by numba 0.58 yet.",
    "The staging run is too slow today.",
    "Port 8443 is not open on the bastion.",
    "We don't use Kafka anywhere.",
    "Right now the queue depth is 120 and that is fine.",
    "Train on data before 2024, validate on 2024.",
    "3 月之前训练，4 月验证。",
]


@pytest.mark.parametrize(("sentence", "value"), DROPS)
def test_a_value_named_only_to_drop_it_is_found(sentence: str, value: str) -> None:
    assert value in [w for found in stance.dropped_values(sentence) for w in [found, *found.split()]]
    assert history_marks.replaced_mark(sentence) == history_marks.NAMES_REPLACED


@pytest.mark.parametrize("sentence", KEEPS)
def test_a_line_that_changes_nothing_drops_nothing(sentence: str) -> None:
    assert stance.dropped_values(sentence) == []
    assert history_marks.replaced_mark(sentence) == ""


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("früher lief das auf Jenkins", "historical"),
        ("之前一直用 Jenkins。", "historical"),
        ("9 月之前训练，10 月验证。", "not historical"),
    ],
)
def test_cjk_history_words_need_no_word_boundary_and_a_date_bound_is_not_history(
    sentence: str, expected: str
) -> None:
    found = stance.stance(sentence, "user")
    assert found == expected if expected == "historical" else found != "historical"


@pytest.mark.parametrize(
    ("sentence", "values"),
    [
        (
            "Heads-up: people keep asking, but we are not moving to Azure. All of it stays in eu-west-1.",
            ["Azure"],
        ),
        ("We won't switch to Yarn Berry for this repo.", ["Yarn Berry"]),
        ("Wir wechseln nicht zu Bitbucket, GitLab bleibt.", ["Bitbucket"]),
        ("我们不迁移到 Ceph，继续用 MinIO。", ["Ceph"]),
        ("We are moving to Postgres 16 next week.", []),
        ("The move to Postgres 16 is done.", []),
    ],
)
def test_a_move_said_not_to_happen_names_what_is_not_adopted(sentence: str, values: list[str]) -> None:
    assert history_marks.not_adopted(sentence) == values
    assert ("not adopted" in history_marks.not_adopted_mark(sentence)) == bool(values)


@pytest.mark.parametrize(
    "said", ["Let's park the CDN purge script for now, not today.", "Mach das später, nicht jetzt."]
)
def test_not_now_names_no_replaced_value(said: str) -> None:
    assert stance.named_old(said) == []
