"""The offline extractive summarizer: sections, determinism, rolling update, hard budget, speed."""

from __future__ import annotations

import json

import pytest
from builders import assistant_message, entry, text_block, tool_call
from builders import message_entry as m

from ipython_compact.cli.demo_transcript import CONSTRAINTS, GOAL, TranscriptGenerator
from ipython_compact.core.entries import Entry, entry_text
from ipython_compact.core.offline_summary import (
    ANCHORED_GOAL,
    CAPS,
    missing_sections,
    offline_summary,
    parse_checkpoint,
    repair_sections,
)
from ipython_compact.core.prompts import combine_split_turn
from ipython_compact.summarizers import OfflineSummarizer, Summarizer, SummaryInput


def entries_of(rounds: int, seed: int = 3) -> list[Entry]:
    gen = TranscriptGenerator(seed)
    out: list[Entry] = []
    for msgs in gen.rounds(rounds):
        for message in msgs:
            out.append(Entry(f"e{len(out)}", None, "message", "t", {"message": message}))
    return out


@pytest.mark.parametrize("kind", ["history", "branch", "turn_prefix"])
def test_sections_present_for_each_kind(kind: str) -> None:
    text = offline_summary(entries_of(6), kind=kind)  # type: ignore[arg-type]
    assert missing_sections(text, kind) == []


@pytest.mark.parametrize(
    ("text", "kind", "missing"),
    [
        (
            "## Goal\nx",
            "history",
            ["Constraints & Preferences", "Progress", "Key Decisions", "Next Steps", "Critical Context"],
        ),
        ("## Goal\n## Progress\n### Done\n## Next Steps", "branch", []),
        (
            "## Goal\n## Constraints & Preferences\n## Progress\n### Done\n## Key Decisions\n## Next "
            "Steps\n## "
            "Critical Context",
            "history",
            ["Progress/In Progress", "Progress/Blocked"],
        ),
        ("## Original Request\n## Early Progress", "turn_prefix", ["Context for Suffix"]),
    ],
)
def test_missing_sections(text: str, kind: str, missing: list[str]) -> None:
    assert missing_sections(text, kind) == missing


def test_unknown_kind_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown summary kind 'poem'"):
        missing_sections("", "poem")


def test_deterministic_and_extracts_goal_constraints_progress() -> None:
    span = entries_of(12)
    a = offline_summary(span, focus="holdout")
    assert a == offline_summary(span, focus="holdout")
    sections = parse_checkpoint(a)
    assert sections["Goal"] == [GOAL]
    assert ("Always use CUDA 12.4 for the GPU runs, not any newer toolkit.") in sections[
        "Constraints & Preferences"
    ]
    assert any("Done with step" in d for d in sections["Done"])
    assert sections["Next Steps"]


def test_rolling_update_keeps_previous_items_and_moves_done() -> None:
    first = offline_summary(
        [m("u1", "user", "Goal: build X. Never touch prod."), m("u2", "user", "Also add tests")]
    )
    # a goal statement is the goal, not a request to settle; open requests carry their recall id
    assert parse_checkpoint(first)["In Progress"] == ["Also add tests (entry u2)"]
    second = offline_summary(
        [
            m(
                "a1",
                "assistant",
                "I decided to use sqlite because it is local. All finished.",
                stopReason="stop",
            )
        ],
        previous_summary=first,
    )
    sec = parse_checkpoint(second)
    assert sec["Goal"] == ["Goal: build X. Never touch prod."]
    assert sec["Constraints & Preferences"] == ["Never touch prod."]
    assert sec["In Progress"] == []
    assert sec["Done"] == ["Also add tests → All finished."]  # one line per request
    assert sec["Key Decisions"] == ["I decided to use sqlite because it is local."]


@pytest.mark.parametrize("budget", [300, 1000, 4000])
def test_hard_budget(budget: int) -> None:
    text = offline_summary(entries_of(80), max_chars=budget)
    assert len(text) <= budget


def test_thousand_entry_span_keeps_its_budget_and_sections() -> None:
    """Speed on this span is measured in bench/bench_fidelity.py (no timed unit tests)."""
    span = entries_of(230)[:1000]
    assert len(span) == 1000
    text = offline_summary(span, max_chars=8000)
    assert len(text) <= 8000
    assert missing_sections(text, "history") == []


def test_adapter_and_split_turn_merge() -> None:
    summarizer = OfflineSummarizer(max_chars=5000)
    assert isinstance(summarizer, Summarizer)
    span = entries_of(5)
    history = summarizer.summarize(SummaryInput(span[:20], "history", None, None, 4000))
    prefix = summarizer.summarize(SummaryInput(span[20:], "turn_prefix", None, None, 2000))
    merged = combine_split_turn(history.text, prefix.text)
    assert missing_sections(merged, "history") == []
    assert missing_sections(merged, "turn_prefix") == []
    assert history.summarizer == "offline" and history.finish_reason == "stop"
    assert len(summarizer.summarize(SummaryInput(span, "history", None, None, 10)).text) <= 40
    with pytest.raises(ValueError, match="max_chars must be positive"):
        OfflineSummarizer(max_chars=0)


def test_one_done_line_per_finished_request() -> None:
    span = entries_of(12)
    done = parse_checkpoint(offline_summary(span))["Done"]
    # a repeated request answered the same way is one line
    requests = sorted({entry_text(e) for e in span if (e.message or {}).get("role") == "user"})
    assert len(done) == min(len(requests), CAPS["Done"]) + (1 if len(requests) > CAPS["Done"] else 0)
    listed = [d for d in done if not d.startswith("(")]
    assert all(not d.startswith("Done with step") for d in listed)  # the answer is the outcome, not a line
    assert all(" → " in d for d in listed)  # request → the outcome the assistant reported
    assert sum(" → Done with step " in d for d in listed) >= len(listed) - 1
    # the count is of requests: one asked twice is listed once and counted once more
    asked = [e for e in span if (e.message or {}).get("role") == "user"]
    assert len(asked) > len(requests)
    assert done[0] == (
        f"({len(asked) - CAPS['Done']} earlier finished request(s) not listed; the log has them)"
    )


def test_done_count_rolls_forward_and_survives_the_budget() -> None:
    first = offline_summary(
        [m("u1", "user", "task one"), m("a1", "assistant", "Finished one.", stopReason="stop")]
    )
    text = first
    for i in range(2, 13):
        text = offline_summary(
            [m(f"u{i}", "user", f"task {i}"), m(f"a{i}", "assistant", f"Finished {i}.", stopReason="stop")],
            previous_summary=text,
        )
    done = parse_checkpoint(text)["Done"]
    assert done == ["(4 earlier finished request(s) not listed; the log has them)"] + [
        f"task {i} → Finished {i}." for i in range(5, 13)
    ]
    small = offline_summary([m("u13", "user", "task 13")], previous_summary=text, max_chars=560)
    assert len(small) <= 560
    assert parse_checkpoint(small)["Done"][0].startswith("(")  # the count is folded into, never dropped
    assert (
        int(parse_checkpoint(small)["Done"][0][1:].split()[0]) + len(parse_checkpoint(small)["Done"]) - 1
        == 12
    )


def test_anchored_goal_and_constraints_are_referred_to_not_repeated() -> None:
    span = entries_of(12)
    anchors = (GOAL, *CONSTRAINTS)
    plain = offline_summary(span)
    anchored = offline_summary(span, anchors=anchors)
    assert GOAL in plain and CONSTRAINTS[0] in plain
    assert GOAL not in anchored
    assert all(c not in anchored for c in CONSTRAINTS)  # not in sections, not inside request lines
    sections = parse_checkpoint(anchored)
    assert sections["Goal"] == [] and sections["Constraints & Preferences"] == []
    assert ANCHORED_GOAL in anchored
    rolled = offline_summary(entries_of(20)[len(span) :], previous_summary=anchored, anchors=anchors)
    # a later span's first request is not the goal
    assert ANCHORED_GOAL in rolled and parse_checkpoint(rolled)["Goal"] == []


def test_unanchored_constraints_stay_listed_beside_the_reference() -> None:
    span = [
        m("u1", "user", "Build it. Never touch prod. Always run the linter."),
        m("a1", "assistant", "Built.", stopReason="stop"),
    ]
    text = offline_summary(span, anchors=("Build it. Never touch prod.", "Never touch prod."))
    assert parse_checkpoint(text)["Constraints & Preferences"] == ["Always run the linter."]
    assert "(the other constraints: verbatim in <anchors>)" in text


@pytest.mark.parametrize(
    ("sentence", "decision"),
    [
        ("I'll use LightGBM because it handles missing values natively.", True),
        ("Switching to the parquet loader for speed.", True),
        ("We decided to keep the 2026-Q3 holdout untouched.", True),
        ("Going with 5 folds instead of 10.", True),
        ("The root cause is a stale cache.", True),
        ("Let's use the cached frame rather than reloading it.", True),
        ("The loader reads 12 files.", False),
        ("Should I use XGBoost instead?", False),
    ],
)
def test_key_decisions_from_assistant_text(sentence: str, decision: bool) -> None:
    text = offline_summary(
        [
            m("u1", "user", "Train it"),
            m("a1", "assistant", f"Looked at the data. {sentence}", stopReason="stop"),
        ]
    )
    assert (parse_checkpoint(text)["Key Decisions"] == [sentence]) is decision
    assert parse_checkpoint(text)["Key Decisions"] in ([sentence], [])


@pytest.mark.parametrize(
    ("answers", "steps"),
    [
        # no new intent: the last one stands
        (["Next I will plot the AUC.", "Loaded it."], ["Next I will plot the AUC."]),
        # the newest wins
        (["Next I will plot the AUC.", "Then I'll write the report."], ["Then I'll write the report."]),
        (
            ["Loaded it.", "Let me check the holdout split. I will rerun it after that."],
            ["Let me check the holdout split.", "I will rerun it after that."],
        ),
    ],
)
def test_next_steps_from_the_newest_intent(answers: list[str], steps: list[str]) -> None:
    span = [m(f"a{i}", "assistant", text, stopReason="stop") for i, text in enumerate(answers)]
    assert parse_checkpoint(offline_summary([m("u0", "user", "go"), *span]))["Next Steps"] == steps


def test_split_turn_request_is_settled_by_the_next_span() -> None:
    prefix = offline_summary(
        [m("u1", "user", "Refit the model on all folds"), m("a1", "assistant", "I will load the folds.")],
        kind="turn_prefix",
    )
    previous = combine_split_turn(
        offline_summary([m("u0", "user", "Build it"), m("a0", "assistant", "Built.", stopReason="stop")]),
        prefix,
    )
    assert "(in progress)" not in prefix  # the request is shown once, as the Original Request
    text = offline_summary(
        [m("a2", "assistant", "Refit done on all folds.", stopReason="stop")], previous_summary=previous
    )
    assert parse_checkpoint(text)["Done"] == [
        "Build it → Built.",
        "Refit the model on all folds → Refit done on all folds.",
    ]
    assert parse_checkpoint(text)["In Progress"] == []


def test_adapter_passes_the_anchors() -> None:
    span = entries_of(4)
    with_anchors = OfflineSummarizer().summarize(SummaryInput(span, "history", None, None, 4000, (GOAL,)))
    without = OfflineSummarizer().summarize(SummaryInput(span, "history", None, None, 4000))
    assert ANCHORED_GOAL in with_anchors.text and GOAL not in with_anchors.text
    assert parse_checkpoint(without.text)["Goal"] == [GOAL]


def _call(eid: str, cid: str, code: str, text: str) -> Entry:
    return entry(
        eid, assistant_message(blocks=[text_block(text), tool_call(cid, "python", code=code)], stop="toolUse")
    )


def _result(eid: str, cid: str, text: str, error: bool = False) -> Entry:
    return m(eid, "toolResult", text, toolCallId=cid, toolName="python", isError=error)


SALES = [
    m("u1", "user", "Find why revenue dropped in March. Use polars, not pandas."),
    _call("a1", "c1", "df = pl.read_parquet('sales.parquet')", "I'll use polars because the file is 4 GB."),
    _result("r1", "c1", "shape: (41_000_000, 12)"),
    _call("a2", "c2", "df.group_by('month')", "Let me aggregate by month."),
    _result("r2", "c2", "Traceback (most recent call last):\nColumnNotFoundError: month", error=True),
    _call(
        "a3",
        "c3",
        "df = add_month(df)",
        "The month column does not exist; switching to deriving it from date.",
    ),
    _result("r3", "c3", "ok"),
    m(
        "a4",
        "assistant",
        "Revenue fell 18% in March. The root cause is a missing store feed. Next I will check April.",
        stopReason="stop",
    ),
    m("u2", "user", "Check April too, and write report.md."),
    _call("a5", "c4", "check_april(df)", "I will compare April against the feed log."),
    _result("r4", "c4", "April complete"),
    m(
        "a6",
        "assistant",
        "April is complete; only March is affected. I wrote report.md. Then I'll wait for your review.",
        stopReason="stop",
    ),
]


def test_a_realistic_span_reads_well() -> None:
    anchors = ("Find why revenue dropped in March. Use polars, not pandas.", "Use polars, not pandas.")
    sections = parse_checkpoint(offline_summary(SALES, anchors=anchors))
    assert sections["Goal"] == [] and sections["Constraints & Preferences"] == []
    assert sections["Done"] == [
        "the goal request (verbatim in <anchors>) → Revenue fell 18% in March.",
        "Check April too, and write report.md. → April is complete; only March is affected. I wrote "
        "report.md.",
    ]
    assert sections["Key Decisions"] == [
        "I'll use polars because the file is 4 GB.",
        "The month column does not exist; switching to deriving it from date.",
        "The root cause is a missing store feed.",
    ]
    assert sections["Next Steps"] == ["Then I'll wait for your review."]
    assert sections["Blocked"] == []  # the failed cell was followed by a success
    plain = parse_checkpoint(offline_summary(SALES))
    assert plain["Constraints & Preferences"] == ["Use polars, not pandas."]
    assert plain["Done"][0] == (  # it names pandas only to drop it: marked (history_marks.replaced_mark)
        "Find why revenue dropped in March. Use polars, not pandas. → Revenue fell 18% in March."
        " — (what it names as dropped is replaced)"
    )


@pytest.mark.parametrize(
    ("text", "kind", "added", "expected"),
    [
        (
            "## Goal\ng\n\n## Constraints & Preferences\n(none)\n\n## Progress\n### Done\n- a\n\n## Key "
            "Decisions\n(none)\n\n## Next Steps\n1. n\n\n## Critical Context\n(none)",
            "history",
            ["Progress/In Progress", "Progress/Blocked"],
            "## Goal\ng\n\n## Constraints & Preferences\n(none)\n\n## Progress\n### Done\n- a\n\n### In "
            "Progress\n(none)\n\n### Blocked\n(none)\n\n## Key Decisions\n(none)\n\n## Next Steps\n1. "
            "n\n\n## "
            "Critical Context\n(none)",
        ),
        (
            "## Goal\ng\n\n## Next Steps\n1. n",
            "branch",
            ["Progress"],
            "## Goal\ng\n\n## Progress\n(none)\n\n## Next Steps\n1. n",
        ),
        (
            "## Original Request\nr",
            "turn_prefix",
            ["Early Progress", "Context for Suffix"],
            "## Original Request\nr\n\n## Early Progress\n(none)\n\n## Context for Suffix\n(none)",
        ),
        (
            "## Original Request\nr\n\n## Early Progress\n- x\n\n## Context for Suffix\n- y",
            "turn_prefix",
            [],
            "## Original Request\nr\n\n## Early Progress\n- x\n\n## Context for Suffix\n- y",
        ),
    ],
)
def test_repair_sections_adds_what_is_missing_in_template_order(
    text: str, kind: str, added: list[str], expected: str
) -> None:
    repaired, missing = repair_sections(text, kind)
    assert (repaired, missing) == (expected, added)
    assert missing_sections(repaired, kind) == []


def _decisions_of(text: str) -> list[str]:
    summary = offline_summary([m("u1", "user", "Fix it"), m("a1", "assistant", text, stopReason="stop")])
    return parse_checkpoint(summary)["Key Decisions"]


@pytest.mark.parametrize(
    ("text", "decisions"),
    [
        (
            "## Root Cause Analysis\nThe cause is a stale cache because nobody clears it.",
            ["The cause is a stale cache because nobody clears it."],
        ),
        ("**Root cause**\nNothing decided here.", []),
        ("this.showMessage(`Switched instead of ${x}`);", []),
        ("Let me update WP14 to create main-new.ts instead of modifying main.ts:", []),
        ("```ts\nconst a = b ?? c; // instead of a || c\n```\nDone.", []),
        ("- - Use InteractiveMode instead of TuiRenderer", ["Use InteractiveMode instead of TuiRenderer"]),
    ],
)
def test_decisions_come_from_deciding_sentences_not_headings_or_code(text: str, decisions: list[str]) -> None:
    assert _decisions_of(text) == decisions


@pytest.mark.parametrize(
    ("request_text", "answer", "done"),
    [
        (
            '{"model": "gpt", "temperature": 0.2, "tools": [], "stream": true, "seed": 1}',
            "Saved it.",
            "[JSON object: model, temperature, tools, stream, …] → Saved it.",
        ),
        (
            "Run this:\n```bash\nmake test\nmake lint\n```",
            "Both passed.",
            "Run this: [bash block, 2 line(s)] → Both passed.",
        ),
        (
            "Tag the release",
            "Ready to tag:\n```bash\ngit tag v0.8.0\n```",
            "Tag the release → [bash block, 1 line(s)]",
        ),
    ],
)
def test_json_and_code_become_short_descriptions(request_text: str, answer: str, done: str) -> None:
    summary = offline_summary(
        [m("u1", "user", request_text), m("a1", "assistant", answer, stopReason="stop")]
    )
    assert parse_checkpoint(summary)["Done"] == [done]
    assert "```" not in summary and '"temperature"' not in summary


def test_a_pointer_in_critical_context_says_how_the_output_ended() -> None:
    from ipython_compact.core.triage import triage

    log = "\n".join(f"epoch {i} loss 0.{i:03d}" for i in range(300)) + "\nfinished run-7f3a2c: auc=0.763"
    call = {"type": "toolCall", "id": "c1", "name": "python", "arguments": {"code": "train()"}}
    span = [
        m("u1", "user", "Train it"),
        Entry(
            "a1",
            None,
            "message",
            "t",
            {"message": {"role": "assistant", "content": [call], "stopReason": "toolUse"}},
        ),
        m("r1", "toolResult", log, toolCallId="c1", toolName="python"),
        m("a2", "assistant", "Trained.", stopReason="stop"),
    ]
    summary = offline_summary(triage(span).encode)
    assert parse_checkpoint(summary)["Critical Context"] == [
        "[entry r1 · 301 lines · recall r1] python output, ends: finished run-7f3a2c: auc=0.763"
    ]


def test_pi_session_summary_reads_like_a_summary() -> None:
    from pathlib import Path

    from ipython_compact.core.drift import track_identifiers
    from ipython_compact.core.pi_format import parse_pi_session
    from ipython_compact.core.triage import triage

    path = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
    objects = [
        (n, json.loads(line)) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()
    ]
    entries = parse_pi_session(objects).entries
    sections = parse_checkpoint(offline_summary(triage(entries).encode))
    assert sections["Key Decisions"]
    assert not [
        d for d in sections["Key Decisions"] if d.startswith("#") or d.endswith(":") or d.startswith("this.")
    ]
    tracked = {i.text for i in track_identifiers([], entries, max_count=10_000, max_chars=10**7)}
    assert not {"/dev/null", "and/or", "console.log", "I/O", "model/thinking", "/usr/bin/env"} & tracked
    assert "/Users/badlogic/workspaces/pi-mono/packages/coding-agent/src/core/agent-session.ts" in tracked


def test_a_long_item_is_cut_at_a_word_boundary() -> None:
    """An item longer than its budget (a focus sentence of 300+ characters) ends on a whole word
    and an ellipsis, never inside a word or a path."""
    words = " ".join(f"column_{i:03d}" for i in range(40))
    sentence = f"The mean of the sales columns is stable across {words} and the rest."
    text = offline_summary(
        [m("u1", "user", "Check the sales means."), m("a1", "assistant", sentence, stopReason="stop")],
        focus="sales means",
    )
    item = next(line for line in text.splitlines() if line.startswith("- The mean of the sales columns"))
    assert item.endswith("…") and item[:-1].rstrip().split()[-1] in sentence.split()


def _steps(first: int, last: int, prefix: str = "") -> list[Entry]:
    out: list[Entry] = []
    for i in range(first, last + 1):
        out.append(m(f"{prefix}u{i}", "user", f"Step {i}: load sales_{i}.csv and total it."))
        out.append(
            m(
                f"{prefix}a{i}",
                "assistant",
                f"Loaded sales_{i}.csv; the total is {1000 + i}.",
                stopReason="stop",
            )
        )
    return out


def _listed(text: str) -> list[str]:
    return [d.split(":")[0] for d in parse_checkpoint(text)["Done"]]


def test_a_request_repeated_in_a_later_span_takes_its_newest_place() -> None:
    """The demo notebook's second compaction: the same sixteen steps asked again. Done must read
    in log order (the count of older ones, then the newest eight), never old places kept for
    repeated lines with the span's other lines after them; the count adds up to every request."""
    first = offline_summary(_steps(0, 9))
    assert _listed(first) == ["(2 earlier finished request(s) not listed; the log has them)"] + [
        f"Step {i}" for i in range(2, 10)
    ]
    second = offline_summary(_steps(0, 10, "r"), previous_summary=first)
    # 21 requests finished: 8 listed (the second round's newest), 13 counted
    assert _listed(second) == ["(13 earlier finished request(s) not listed; the log has them)"] + [
        f"Step {i}" for i in range(3, 11)
    ]


@pytest.mark.parametrize(
    ("span", "previous_steps", "expected"),
    [
        (  # the plan stated, then asked for and done in the same span: settled
            [
                ("user", "Load the data."),
                ("assistant", "Loaded 10 rows. Next I will plot the revenue."),
                ("user", "Go ahead and plot it."),
                ("assistant", "Plotted the revenue to plot.png."),
            ],
            [],
            [],
        ),
        (  # the plan stays while the work after it is about something else
            [
                ("user", "Load the data."),
                ("assistant", "Loaded 10 rows. Next I will plot the revenue."),
                ("user", "Also count the columns."),
                ("assistant", "There are 4 columns."),
            ],
            [],
            ["Next I will plot the revenue."],
        ),
        (  # the newest plan is stated in the last answer: it stands
            [("user", "Load the data."), ("assistant", "Loaded 10 rows. Next I will plot the revenue.")],
            [],
            ["Next I will plot the revenue."],
        ),
        (  # a plan carried from the previous checkpoint, done in this span
            [("user", "Plot the revenue now."), ("assistant", "Plotted it to plot.png.")],
            ["Next I will plot the revenue."],
            [],
        ),
        (  # a carried plan that nothing in the span does
            [("user", "Count the rows."), ("assistant", "There are 10 rows.")],
            ["Next I will plot the revenue.", "Then I'll email the report."],
            ["Next I will plot the revenue.", "Then I'll email the report."],
        ),
        (  # only the settled one of two carried plans leaves
            [("user", "Email the report to Ana."), ("assistant", "Emailed the report.")],
            ["Next I will plot the revenue.", "Then I'll email the report."],
            ["Next I will plot the revenue."],
        ),
    ],
)
def test_a_next_step_that_a_later_finished_request_does_leaves(
    span: list[tuple[str, str]], previous_steps: list[str], expected: list[str]
) -> None:
    entries = [
        m(f"e{i}", role, text, **({"stopReason": "stop"} if role == "assistant" else {}))
        for i, (role, text) in enumerate(span)
    ]
    previous = None
    if previous_steps:
        steps = "\n".join(f"{i}. {s}" for i, s in enumerate(previous_steps, 1))
        previous = f"## Goal\nShip the report.\n\n## Next Steps\n{steps}\n"
    text = offline_summary(entries, previous_summary=previous)
    assert parse_checkpoint(text)["Next Steps"] == expected


def test_a_hostile_previous_next_steps_list_is_bounded() -> None:
    """A model's previous checkpoint may hold hundreds of huge Next Steps: the update keeps the
    newest ones within the cap, and settling compares a bounded number of words of each."""
    huge = " ".join(f"word{i}" for i in range(5000))
    steps = "\n".join(f"{i}. Next I will {huge} {i}." for i in range(300))
    previous = f"## Goal\nShip it.\n\n## Next Steps\n{steps}\n"
    span = [m("u1", "user", f"Please {huge}."), m("a1", "assistant", "Finished that.", stopReason="stop")]
    text = offline_summary(span, previous_summary=previous, max_chars=200_000)
    left = parse_checkpoint(text)["Next Steps"]
    assert len(left) <= CAPS["Next Steps"]
    # the request did every step's first words: each carried step is settled
    assert left == []


def test_a_split_turns_request_keeps_its_recall_id_when_it_stays_open() -> None:
    """The request of a split turn is summarized as the turn prefix's Original Request; when the
    turn does not finish it, the next checkpoint's In Progress line still carries its entry id
    (the ledger's and the recall command's handle), like every other open request."""
    history = offline_summary([m("u1", "user", "Build the churn model."), m("a1", "assistant", "Done.")])
    prefix = offline_summary(
        [
            m("u7", "user", "Write a data dictionary for the feature table."),
            entry("c7", assistant_message(blocks=[tool_call("k7", "python", code="cols()")], stop="toolUse")),
        ],
        kind="turn_prefix",
    )
    assert parse_checkpoint(prefix)["Original Request"] == [
        "Write a data dictionary for the feature table. (entry u7)"
    ]
    rolled = offline_summary(
        [
            m("u8", "user", "Also count the rows."),
            m("a8", "assistant", "There are 10 rows.", stopReason="stop"),
        ],
        previous_summary=combine_split_turn(history, prefix),
    )
    assert (
        "Write a data dictionary for the feature table. (entry u7)" in parse_checkpoint(rolled)["In Progress"]
    )
