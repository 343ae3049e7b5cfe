"""Requests have a life cycle in any phrasing (issue 32): asked, deferred by the user or the
assistant, cancelled, reopened, done only when an outcome is recorded.

Table-driven over ``core.requests.RequestBook``: each row is a conversation (user / assistant
turns, each assistant turn a final answer) and the state every request must end in.
"""

from __future__ import annotations

import pytest

from ipython_compact.core.requests import RequestBook

Turn = tuple[str, str]


def states(*turns: Turn) -> list[tuple[str, str]]:
    b = RequestBook()
    for i, (role, text) in enumerate(turns):
        if role == "user":
            b.user(f"u{i}", text, text)
        else:
            b.answer(text, text)
    return [(r.text, r.status) for r in b.records()]


U, A = "user", "assistant"

CASES: list[tuple[str, list[Turn], list[tuple[str, str]]]] = [
    # a value said holds from when it is said: no deferral applies to it (dev set A)
    (
        "a value set, the answer describing a state until something",
        [
            (U, "Let's also tighten the SLO: p99 target 250 ms on /v1/charges."),
            (
                A,
                "Noted. Current p99 hovers above that, so we'll be red until the fraud call is faster.",
            ),
        ],
        [("Let's also tighten the SLO: p99 target 250 ms on /v1/charges.", "done")],
    ),
    (
        "asked and deferred in one message (en)",
        [(U, "Let's park the CDN purge script for now, not today."), (A, "Parked.")],
        [("Let's park the CDN purge script for now, not today.", "deferred")],
    ),
    (
        "asked and deferred in one message (fr)",
        [(U, "Le tableau de bord qualité, on verra plus tard, pas maintenant."), (A, "D'accord, reporté.")],
        [("Le tableau de bord qualité, on verra plus tard, pas maintenant.", "deferred")],
    ),
    (
        "deferred by the assistant without a subject",
        [
            (U, "Please add a /healthz endpoint to the tile server."),
            (A, "Will do once the router refactor lands."),
        ],
        [("Please add a /healthz endpoint to the tile server.", "deferred")],
    ),
    (
        "blocked on a prerequisite",
        [(U, "Add a retry queue for failed pages."), (A, "Noted; it needs the worker pool change first.")],
        [("Add a retry queue for failed pages.", "deferred")],
    ),
    (
        "a bare acknowledgment records no outcome (ja)",
        [(U, "オフライン時の競合解決のテストを追加してください。"), (A, "わかりました。")],
        [("オフライン時の競合解決のテストを追加してください。", "open")],
    ),
    (
        "a bare acknowledgment records no outcome (en)",
        [(U, "Add a retry queue for failed pages."), (A, "Sure.")],
        [("Add a retry queue for failed pages.", "open")],
    ),
    (
        "an acknowledged decision is settled",
        [(U, "Set the tile size to 512 px."), (A, "OK.")],
        [("Set the tile size to 512 px.", "done")],
    ),
    (
        "cancelled, then asked again: reopened, and an acknowledgment does not close it",
        [
            (U, "Write a seed script for the demo tiles."),
            (A, "I'll prepare the seed script."),
            (U, "Forget the seed script."),
            (A, "OK, dropping it."),
            (U, "Actually we do need the seed script after all, please write it."),
            (A, "Reopened: seed script is back on the list."),
        ],
        [("Write a seed script for the demo tiles.", "open")],
    ),
    (
        "cancelled and reopened in French",
        [
            (U, "Ajoute l'export Excel des montants."),
            (A, "Je l'ajoute."),
            (U, "Oublie l'export Excel."),
            (A, "Compris, abandonné."),
            (U, "Finalement, on a besoin de l'export Excel, fais-le."),
            (A, "Rouvert : export Excel."),
        ],
        [("Ajoute l'export Excel des montants.", "open")],
    ),
    (
        "a cancellation that also states a choice",
        [
            (U, "Set up email alerts for OCR failures."),
            (A, "I'll wire the email alerts."),
            (U, "forget the email alerts, we use the pager instead"),
            (A, "OK."),
        ],
        [("Set up email alerts for OCR failures.", "dropped")],
    ),
    (
        "cancelled in Chinese",
        [
            (U, "帮我画一个延迟分布图。"),
            (A, "好的，稍后画。"),
            (U, "不用做那个延迟分布图了。"),
            (A, "好的，取消。"),
        ],
        [("帮我画一个延迟分布图。", "dropped")],
    ),
    (
        "cancelled in Japanese",
        [
            (U, "週次レポートを作ってください。"),
            (A, "はい、作ります。"),
            (U, "週次レポートはもう要りません。"),
            (A, "承知しました。"),
        ],
        [("週次レポートを作ってください。", "dropped")],
    ),
    (
        "drop that, right after the ask",
        [
            (U, "Also export a CSV of tile errors."),
            (U, "Drop that, the error log is enough."),
            (A, "OK, no CSV."),
        ],
        [("Also export a CSV of tile errors.", "dropped")],
    ),
    (
        "no need for X after all",
        [
            (U, "Add a Grafana panel for tile latency, please."),
            (A, "Sure, I'll add the Grafana panel."),
            (U, "No need for the Grafana panel after all, ops has one already."),
            (A, "Understood."),
        ],
        [("Add a Grafana panel for tile latency, please.", "dropped")],
    ),
    (
        "announced next is not done",
        [(U, "Write the migration notes for ops."), (A, "I'll write the migration notes next.")],
        [("Write the migration notes for ops.", "deferred")],
    ),
    (
        "done with a recorded outcome",
        [
            (U, "Rename the bucket prefix to tiles-v2/."),
            (A, "Done: the bucket prefix is now tiles-v2/, 1204 objects moved."),
        ],
        [("Rename the bucket prefix to tiles-v2/.", "done")],
    ),
    (
        "an answer identical to an earlier one still answers",
        [
            (U, "What is the p95 render time right now?"),
            (A, "The p95 render time is 84 ms on the benchmark set."),
            (U, "Again, what is the p95 render time?"),
            (A, "The p95 render time is 84 ms on the benchmark set."),
        ],
        [("What is the p95 render time right now?", "done"), ("Again, what is the p95 render time?", "done")],
    ),
]


@pytest.mark.parametrize(("name", "turns", "expected"), CASES, ids=[c[0] for c in CASES])
def test_request_life_cycle(name: str, turns: list[Turn], expected: list[tuple[str, str]]) -> None:
    assert states(*turns) == expected, name
