"""Drift guard: identifier extraction, machine blocks, the guard itself, and anchors (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from builders import message_entry as msg

from ipython_compact.core.anchors import Anchor, AnchorSet, apply_pins, extract_anchors, resolve_anchors
from ipython_compact.core.drift import (
    MAX_TRACKED,
    MAX_TRACKED_CHARS,
    OUTPUT_IDENTIFIERS,
    Identifier,
    apply_guard,
    entry_identifiers,
    extract_identifiers,
    render_block,
    strip_machine_blocks,
    track_identifiers,
    variables_in_code,
)
from ipython_compact.core.entries import Entry, entry_text
from ipython_compact.core.user_statements import constraint_spans


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Use CUDA 12.4 please", [("version", "CUDA 12.4")]),
        ("pin pandas==2.2.3", [("version", "pandas==2.2.3")]),
        ("upgrade to 4.5.6 now", [("version", "4.5.6")]),
        ("a ratio of 0.5 is fine", []),
        ("see /work/data/train.csv", [("path", "/work/data/train.csv")]),
        ("edit src/model.py then", [("path", "src/model.py")]),
        ("open notes.md", [("path", "notes.md")]),
        ("commit 3f2a9c1d landed", [("commit", "3f2a9c1d")]),
        ("the word deadbeef has no digit", []),
        ("tracked in JIRA-123 and #4017", [("id", "JIRA-123"), ("id", "#4017")]),
        ("id 123e4567-e89b-12d3-a456-426614174000", [("id", "123e4567-e89b-12d3-a456-426614174000")]),
        (
            "OSError: [Errno 98] address already in use",
            [("error", "OSError: [Errno 98] address already in use")],
        ),
        ("see https://example.org/a/b.html.", [("url", "https://example.org/a/b.html")]),
    ],
)
def test_extract_identifiers(text: str, expected: list[tuple[str, str]]) -> None:
    assert extract_identifiers(text) == expected


@pytest.mark.parametrize(
    ("code", "names"),
    [
        ("df = load()\nx = 1", ["df"]),
        ("def train(a):\n    inner = 2\nclass Net: pass", ["train", "Net"]),
        ("import numpy as np\nfrom a import b as bee", ["np", "bee"]),
        ("model: Net = Net()\nif a == b: pass\n_hidden = 3", ["model"]),
        ("left, right = split(df)", ["left"]),
    ],
)
def test_variables_in_code(code: str, names: list[str]) -> None:
    assert variables_in_code(code) == names


def test_entry_identifiers_reads_tool_call_code_and_limits_tool_output() -> None:
    call = {
        "type": "toolCall",
        "id": "c1",
        "name": "python",
        "arguments": {"code": "frame_9 = load('/data/x.csv')"},
    }
    assistant = Entry("a1", None, "message", "t", {"message": {"role": "assistant", "content": [call]}})
    found = {(i.cls, i.text) for i in entry_identifiers(assistant)}
    assert ("variable", "frame_9") in found
    assert ("path", "/data/x.csv") in found
    big = "\n".join(f"/tmp/file_{i}.txt" for i in range(2000)) + "\nValueError: bad shape (3, 4)"
    result = msg("r1", "toolResult", big, toolCallId="c1")
    texts = [i.text for i in entry_identifiers(result)]
    assert len(texts) <= OUTPUT_IDENTIFIERS  # head and tail only, and a few of them, not all 2,000 paths
    assert "/tmp/file_1000.txt" not in texts  # the middle stays in the log
    assert "/tmp/file_0.txt" in texts and "/tmp/file_1999.txt" in texts
    assert "ValueError: bad shape (3, 4)" in texts


def test_the_result_on_the_last_line_of_a_long_log_is_tracked() -> None:
    log = (
        "\n".join(f"epoch {i:04d} loss {1 / (i + 1):.4f}" for i in range(3000))
        + "\nfinished run-7f3a2c: auc=0.763"
    )
    result = msg("r1", "toolResult", log, toolCallId="c1")
    texts = [i.text for i in entry_identifiers(result)]
    assert texts[:2] == ["auc=0.763", "run-7f3a2c"]  # from the end backwards
    tracked = track_identifiers([], [result])
    assert {"run-7f3a2c", "auc=0.763"} <= {t.text for t in tracked}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("redirect to /dev/null and/or ignore", []),
        ("console.log(x) in Node.js", []),
        ("see I/O and model/thinking, s/old/new", []),
        ("#!/usr/bin/env python", []),
        ("use offset=2001 to continue", []),
        ("colour #444444, issue #4017", [("id", "#4017")]),
        ("Screenshot at 01.27.21.png", [("path", "01.27.21.png")]),
        ("look in src/core and packages/tui", [("path", "src/core"), ("path", "packages/tui")]),
        ("json.load(open(p)) then read data.json", [("path", "data.json")]),
        (
            "finished run-7f3a2c: auc=0.763 rows=4211",
            [("id", "run-7f3a2c"), ("metric", "auc=0.763"), ("metric", "rows=4211")],
        ),
        ("ckpt_000120 and exp_0042b saved", [("id", "ckpt_000120"), ("id", "exp_0042b")]),
        # not also the bare hash
        ("verified shard-003 sha256=d9af3dc296e87dea", [("metric", "sha256=d9af3dc296e87dea")]),
        ("===== 266 passed, 2 failed in 3.21s =====", [("metric", "266 passed"), ("metric", "2 failed")]),
        (
            "renamed fetch_user_03bc to fetch_account_03bc",
            [("id", "fetch_user_03bc"), ("id", "fetch_account_03bc")],
        ),
        (
            "Release v0.14.2 via git push origin v0.14.2",
            [("version", "Release v0.14.2"), ("version", "v0.14.2")],
        ),
    ],
)
def test_extractor_skips_noise_and_finds_results(text: str, expected: list[tuple[str, str]]) -> None:
    assert extract_identifiers(text) == expected


def test_code_assignments_are_not_metrics() -> None:
    call = {"type": "toolCall", "id": "c1", "name": "python", "arguments": {"code": "n=5\nlr=0.01\nprint(n)"}}
    assistant = Entry("a1", None, "message", "t", {"message": {"role": "assistant", "content": [call]}})
    assert {i.cls for i in entry_identifiers(assistant)} == {"variable"}


def test_track_identifiers_is_bounded_and_recency_ordered() -> None:
    entries = [msg(f"u{i}", "user", f"look at /data/part_{i}.csv") for i in range(50)]
    tracked = track_identifiers([], entries, max_count=10)
    assert [t.text for t in tracked] == [f"/data/part_{i}.csv" for i in range(40, 50)]
    assert [t.last for t in tracked] == list(range(41, 51))  # positions continue across entries
    again = track_identifiers(tracked, [msg("u99", "user", "back to /data/part_40.csv")], max_count=10)
    assert again[-1] == Identifier("/data/part_40.csv", "path", "u99", mentions=2, last=51)
    assert len(again) == 10
    assert Identifier.from_json(again[0].to_json()) == again[0]


@pytest.mark.parametrize(
    ("early_mentions", "later", "kept"),
    [
        (1, 3, False),  # a one-off mention is evicted by newer ones
        (4, 3, True),  # mentioned in 4 entries: 3 mentions × MENTION_WEIGHT of recency bonus
        (4, 200, False),  # the bonus is capped: a long stretch without it evicts it too
        (50, 200, False),
    ],
)
def test_relevance_keeps_often_mentioned_identifiers_a_while(
    early_mentions: int, later: int, kept: bool
) -> None:
    early = [msg(f"e{i}", "user", "load data/churn.csv") for i in range(early_mentions)]
    fill = [msg(f"f{i}", "user", f"see DATA-{1000 + i}") for i in range(later)]
    tracked = track_identifiers([], early + fill, max_count=3)
    assert len(tracked) == 3
    assert ("data/churn.csv" in [t.text for t in tracked]) is kept
    assert tracked[-1].text == f"DATA-{1000 + later - 1}"  # the newest always stays


def test_char_budget_skips_what_does_not_fit_and_fills_with_the_rest() -> None:
    entries = [
        msg("u1", "user", "see DATA-1001"),
        msg("u2", "user", "see /" + "x/" * 40 + "big.csv"),
        msg("u3", "user", "see DATA-1003"),
    ]
    tracked = track_identifiers([], entries, max_count=10, max_chars=40)
    assert [t.text for t in tracked] == ["DATA-1001", "DATA-1003"]
    assert sum(len(t.text) + 3 for t in tracked) <= 40


def test_working_set_reaches_a_fixed_size() -> None:
    from ipython_compact.cli.demo_transcript import TranscriptGenerator

    gen = TranscriptGenerator(seed=7, big_output_lines=20)
    tracked: list[Identifier] = []
    sizes: list[int] = []
    # a new metric value replaces the old one, so the set fills later than when each value took a slot
    for span in range(60):
        entries = [msg(f"s{span}m{i}", "user", text) for i, text in enumerate(_texts(gen.rounds(6)))]
        tracked = track_identifiers(tracked, entries, max_count=MAX_TRACKED, max_chars=MAX_TRACKED_CHARS)
        sizes.append(sum(len(t.text) + 3 for t in tracked))
    assert max(sizes) <= MAX_TRACKED_CHARS
    assert all(len(t.text) >= 3 for t in tracked)
    assert min(sizes[40:]) >= 0.8 * max(sizes)  # full within the first two thirds, then flat


def test_a_working_set_of_long_identifiers_is_bounded_by_its_characters() -> None:
    """The character budget is the guard block's token budget. With metric values replacing
    each other, a session naming long paths and error lines (the retention bench's) kept adding
    long strings until compaction ~31 under the count bound alone; the character bound fills
    within the first half of 50 compactions, then the set only turns over."""
    from ipython_compact.cli.demo_transcript import TranscriptGenerator

    gen = TranscriptGenerator(seed=2026, big_output_lines=20)
    tracked: list[Identifier] = []
    sizes: list[int] = []
    for span in range(50):
        entries = [msg(f"s{span}m{i}", "user", text) for i, text in enumerate(_texts(gen.rounds(6)))]
        tracked = track_identifiers(tracked, entries)
        sizes.append(sum(len(t.text) + 3 for t in tracked))
    assert len(tracked) < MAX_TRACKED  # the characters bind, not the count
    assert min(sizes[24:]) >= 0.9 * max(sizes)  # within 10% of full by compaction 25 (the bench's "steady")


def _texts(rounds: Any) -> list[str]:
    out: list[str] = []
    for messages in rounds:
        for message in messages:
            content = message.get("content")
            if isinstance(content, list):
                out.extend(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("text"))
    return out


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # older record
        ({"text": "a.py", "cls": "path", "entry_id": "e1"}, Identifier("a.py", "path", "e1", 1, 0)),
        (
            {"text": "a.py", "cls": "path", "entry_id": None, "mentions": 3, "last": 9},
            Identifier("a.py", "path", None, 3, 9),
        ),
    ],
)
def test_identifier_from_json(obj: dict[str, Any], expected: Identifier) -> None:
    assert Identifier.from_json(obj) == expected


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"text": "a.py", "cls": "file"}, "unknown class 'file'"),
        ({"text": "a.py", "cls": "path", "mentions": "many"}, "mentions and last must be integers"),
        ({"text": "a.py", "cls": "path", "mentions": 0}, "mentions must be >= 1"),
    ],
)
def test_identifier_from_json_rejects_bad_records(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Identifier.from_json(obj)


def test_machine_blocks_round_trip_and_strip() -> None:
    narrative = "## Goal\nship it"
    block = render_block("ledger", ["files read: a.py"])
    text = f"{render_block('anchors', ['goal'])}\n\n{narrative}\n\n{block}"
    assert strip_machine_blocks(text) == narrative
    assert render_block("ledger", []) == ""
    with pytest.raises(ValueError, match="unknown machine block tag"):
        render_block("bogus", ["x"])


@pytest.mark.parametrize(
    ("checkpoint", "required", "missing"),
    [
        ("use CUDA 12.4", ["CUDA 12.4"], []),
        ("use CUDA 12.x", ["CUDA 12.4"], ["CUDA 12.4"]),
        ("nothing", ["a.py", "a.py", "b.py"], ["a.py", "b.py"]),
    ],
)
def test_apply_guard(checkpoint: str, required: list[str], missing: list[str]) -> None:
    text, report = apply_guard(checkpoint, required)
    assert list(report.missing) == missing
    assert text.startswith(checkpoint)
    assert all(item in text for item in required)
    assert ("<drift-guard" in text) == bool(missing)
    assert strip_machine_blocks(text) == checkpoint


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("Always use CUDA 12.4. Then run it.", ["Always use CUDA 12.4."]),
        ("Please look at it.\nNever write to /data/raw!", ["Never write to /data/raw!"]),
        ("I prefer tabs over spaces", ["I prefer tabs over spaces"]),
        ("Just run the tests.", []),
        ("Why must it be CUDA 12.4? Keep it.", ["Keep it."]),
        ("必须使用 CUDA 12.4。", ["必须使用 CUDA 12.4。"]),
        ("Load it. Use polars, not pandas.", ["Use polars, not pandas."]),
        ("Please use uv instead of pip.", ["Please use uv instead of pip."]),
        ("I use it daily, not weekly.", []),  # a statement, not an instruction
    ],
)
def test_constraint_spans(text: str, sentences: list[str]) -> None:
    assert [text[s:e] for s, e in constraint_spans(text)] == sentences


def test_anchors_are_recopied_from_raw_log_not_from_stored_text() -> None:
    raw = msg("u1", "user", "Fix the loader. Always use CUDA 12.4 on the cluster.")
    first = extract_anchors(AnchorSet(), [raw], lambda _id: None)
    assert first.goal is not None and first.goal.text == entry_text(raw)
    assert [a.text for a in first.constraints] == ["Always use CUDA 12.4 on the cluster."]
    # a corrupted (drifted) stored copy is repaired from the raw entry
    drifted = AnchorSet(
        goal=first.goal,
        constraints=(
            Anchor(
                "constraint", "use a recent CUDA", "u1", first.constraints[0].start, first.constraints[0].end
            ),
        ),
    )
    fixed = resolve_anchors(drifted, {"u1": raw}.get)
    assert fixed.constraints[0].text == "Always use CUDA 12.4 on the cluster."
    with pytest.raises(ValueError, match="not in the log"):
        resolve_anchors(drifted, lambda _id: None)


def test_goal_skips_bare_commands() -> None:
    command = msg("u0", "user", "/mode")
    real = msg("u1", "user", "Refactor the loader, please.")
    anchors = extract_anchors(AnchorSet(), [command, real], lambda _id: None)
    assert anchors.goal is not None and anchors.goal.entry_id == "u1"


def test_goal_is_kept_and_constraints_deduplicated() -> None:
    a = msg("u1", "user", "Goal: train the model. Never use the GPU.")
    b = msg("u2", "user", "Second thing. Never use the GPU.")
    first = extract_anchors(AnchorSet(), [a], lambda _id: None)
    second = extract_anchors(AnchorSet.from_json(first.to_json()), [b], {"u1": a}.get)
    assert second.goal is not None and second.goal.entry_id == "u1"
    assert [c.text for c in second.constraints] == ["Never use the GPU."]


def test_pins_and_unpins() -> None:
    target = msg("u7", "user", "the threshold is 0.42")
    pins = [
        Entry("p1", None, "pin", "t", {"action": "pin", "pin_id": "pin-1", "text": "remember port 8765"}),
        Entry("p2", None, "pin", "t", {"action": "pin", "pin_id": "pin-2", "entry_id": "u7"}),
        Entry("p3", None, "pin", "t", {"action": "unpin", "pin_id": "pin-1"}),
    ]
    active = apply_pins((), pins, {"u7": target}.get)
    assert [(p.pin_id, p.text) for p in active] == [("pin-2", "the threshold is 0.42")]
    assert apply_pins(active, pins[:2], {"u7": target}.get) == (
        active[0],
        Anchor("pin", "remember port 8765", None, 0, 18, "pin-1"),
    )
    rendered = AnchorSet(pins=active).render()
    assert "the threshold is 0.42" in rendered and rendered.startswith("<anchors")


def test_constraint_cap_drops_oldest_and_says_so() -> None:
    users = [msg(f"u{i}", "user", f"Always keep log {i} under /var/log/app_{i}.") for i in range(10)]
    anchors = extract_anchors(AnchorSet(), users, lambda _id: None, max_chars=120)
    assert [a.entry_id for a in anchors.constraints] == ["u7", "u8", "u9"]
    assert anchors.dropped == 7
    assert anchors.goal is not None and anchors.goal.entry_id == "u0"
    assert "7 older constraint sentence(s) left this block" in anchors.render()


def test_guarded_checkpoint_stops_growing(tmp_path: Any) -> None:
    """Real store and Compactor: after a few compactions the checkpoint and its guard block stay flat."""
    import re

    from ipython_compact.cli.demo_transcript import TranscriptGenerator
    from ipython_compact.compaction.compactor import Compactor
    from ipython_compact.core.settings import CompactionSettings
    from ipython_compact.store import SessionStore

    store = SessionStore(tmp_path / "s.db")
    store.create_session("s")
    gen = TranscriptGenerator(seed=11, big_output_lines=300)
    compactor = Compactor(store, None, CompactionSettings(keep_recent_tokens=1000))
    sizes: list[int] = []
    for _ in range(40):
        for messages in gen.rounds(6):
            store.append_many("s", [("message", {"message": m}) for m in messages])
        result = compactor.compact("s", reason="threshold")
        block = re.search(r"<drift-guard[^>]*>\n(.*?)\n</drift-guard>", result.summary, re.DOTALL)
        assert (
            block is None or sum(len(line) + 3 for line in block.group(1).splitlines()) <= MAX_TRACKED_CHARS
        )
        assert all(t in result.summary for t in (i["text"] for i in result.details["identifiers"]))
        sizes.append(len(result.summary))
    late = sizes[25:]
    assert max(late) <= 1.15 * min(late), sizes
    assert store.verify("s").ok
    store.close()


def test_a_traceback_contributes_its_innermost_frames_and_its_error_only() -> None:
    frames = "\n".join(
        f'  File "/srv/app/layer_{i}.py", line {i + 10}, in step_{i}\n    value = handler(payload)'
        for i in range(30)
    )
    trace = f"Traceback (most recent call last):\n{frames}\nKeyError: 'amount_391f'"
    texts = [i.text for i in entry_identifiers(msg("r1", "toolResult", trace, toolCallId="c1"))]
    assert texts == ["KeyError: 'amount_391f'", "/srv/app/layer_29.py", "/srv/app/layer_28.py"]


def test_a_new_value_of_a_metric_replaces_the_old_one_but_other_runs_stay() -> None:
    entries = [
        msg("o1", "toolResult", "rows after dedup: rows=41203", toolCallId="c1"),
        msg("o2", "toolResult", "finished run-7f3a2c: auc=0.763", toolCallId="c2"),
        msg("o3", "toolResult", "finished run-9c2e11: auc=0.791", toolCallId="c3"),
        msg("o4", "toolResult", "rows after dedup: rows=40877", toolCallId="c4"),
    ]
    tracked = [t.text for t in track_identifiers([], entries)]
    assert "rows=40877" in tracked and "rows=41203" not in tracked  # the same quantity: the newest value only
    assert {"auc=0.763", "auc=0.791", "run-7f3a2c", "run-9c2e11"} <= set(tracked)  # two runs, two results
    again = track_identifiers(track_identifiers([], entries[:1]), entries[1:])  # across compactions too
    assert [t.text for t in again] == tracked


def test_a_long_span_is_read_from_the_newest_entries_until_nothing_older_can_enter() -> None:
    entries = [msg(f"u{i}", "user", f"look at /data/part_{i}.csv") for i in range(5000)]
    tracked = track_identifiers([], entries, max_count=20)
    assert [t.text for t in tracked] == [f"/data/part_{i}.csv" for i in range(4980, 5000)]
    assert [t.last for t in tracked] == list(range(4981, 5001))  # positions as if every entry was read
    early = [msg("x0", "user", "the key file is /data/keep.csv"), *entries]
    assert "/data/keep.csv" not in [t.text for t in track_identifiers([], early, max_count=20)]


def test_a_long_span_stops_being_read_once_the_characters_are_full() -> None:
    """With long identifiers the character budget binds before the count: reading must stop
    there too (a 200,000-entry span otherwise read every entry: 177 s instead of 0.1 s)."""
    from ipython_compact.core import drift

    entries = [
        msg(f"u{i}", "user", f"look at /work/derived/features_v{i}/part-{i:05d}.parquet")
        for i in range(20000)
    ]
    read: list[str] = []
    original = drift.entry_identifiers

    def counting(entry: Any) -> Any:
        read.append(entry.id)
        return original(entry)

    drift.entry_identifiers = counting
    try:
        tracked = track_identifiers([], entries, max_count=240, max_chars=4800)
    finally:
        drift.entry_identifiers = original
    assert len(read) < 2000
    assert len(tracked) < 240 and sum(len(t.text) + 3 for t in tracked) <= 4800
    assert tracked[-1].text == "/work/derived/features_v19999/part-19999.parquet"
