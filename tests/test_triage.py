"""Five-layer triage of a span (pure): externalize big outputs, discard duplicates and superseded attempts."""

from __future__ import annotations

from typing import Any

import pytest
from builders import bash_message, calls_entry, entry, result_entry
from builders import user_entry as user

from ipython_compact.core.entries import Entry, entry_text
from ipython_compact.core.triage import (
    GIST_HEAD_CHARS,
    GIST_IDENTIFIERS,
    GIST_TAIL_CHARS,
    Gist,
    make_gist,
    pointer_lines,
    pointer_text,
    triage,
)


def call(eid: str, cid: str, code: str, name: str = "python") -> Entry:
    return calls_entry(eid, (cid, name, {"code": code}))


def result(eid: str, cid: str, text: str, error: bool = False) -> Entry:
    return result_entry(eid, cid, text, error=error)


def bash(eid: str, output: str) -> Entry:
    return entry(eid, bash_message("make", output))


@pytest.mark.parametrize(
    ("entry_id", "lines", "text"),
    [
        ("123", 24013, "[entry 123 · 24,013 lines · recall 123]"),
        ("ab", 1, "[entry ab · 1 lines · recall ab]"),
    ],
)
def test_pointer_text(entry_id: str, lines: int, text: str) -> None:
    assert pointer_text(entry_id, lines) == text


@pytest.mark.parametrize(
    ("output", "externalized"),
    [
        ("short output", False),
        ("\n".join(f"line {i}" for i in range(250)), True),
        ("x" * 9000, True),
    ],
)
def test_externalize_large_tool_results(output: str, externalized: bool) -> None:
    span = [user("u1", "go"), call("a1", "c1", "run()"), result("r1", "c1", output)]
    t = triage(span)
    assert [p.entry_id for p in t.externalized] == (["r1"] if externalized else [])
    encoded = {e.id: e for e in t.encode}
    assert set(encoded) == {"u1", "a1", "r1"}
    assert (t.tokens["externalize"] > 0) == externalized


@pytest.mark.parametrize(
    "span",
    [
        [user("u1", "go"), call("a1", "c1", "run()"), result("r1", "c1", "short")],
        [
            call("a1", "c1", "train()"),
            result("r1", "c1", "\n".join(f"step {i} loss=0.{i}" for i in range(400))),
        ],
        [bash("b1", "x" * 9000 + "\nValueError: bad shape"), user("u2", "again"), bash("b2", "x" * 9000)],
        [
            call("a1", "c1", "fit()"),
            result("r1", "c1", "Traceback (most recent call last)\nKeyError: 'y'", error=True),
            call("a2", "c2", "fit()"),
            result("r2", "c2", "\n".join(f"epoch {i} acc=0.9" for i in range(300))),
            user("u1", "ok"),
            user("u2", "ok"),
        ],
    ],
)
def test_counting_only_decides_as_the_full_triage(span: list[Entry]) -> None:
    """A preview's triage (gists=False, issue 37) makes the same decisions and counts as the full
    one, with the same pointers less their gist, and leaves the entries unshortened."""
    full, counted = triage(span), triage(span, gists=False)
    assert counted.tokens == full.tokens and counted.discarded == full.discarded
    assert [p.to_json() for p in counted.externalized] == [
        {k: v for k, v in p.to_json().items() if k != "gist"} for p in full.externalized
    ]
    assert all(p.gist is None for p in counted.externalized) and full.gists and not counted.gists
    assert [e.id for e in counted.encode] == [e.id for e in full.encode]
    assert {e.id: e for e in counted.encode} == {e.id: e for e in span if e.id in {x.id for x in full.encode}}


def test_externalized_entry_keeps_head_and_pointer_only() -> None:
    output = "\n".join(f"line {i}" for i in range(24013))
    t = triage([call("a1", "c1", "run()"), result("r1", "c1", output)])
    short = entry_text(next(e for e in t.encode if e.id == "r1"))
    assert short.endswith("[entry r1 · 24,013 lines · recall r1]")
    assert short.startswith("line 0\nline 1\n")
    assert "line 24012" in short and "line 500" not in short
    assert len(short) < 2000


def test_externalize_bash_output() -> None:
    t = triage([bash("b1", "\n".join(str(i) for i in range(500)))])
    assert [p.lines for p in t.externalized] == [500]
    assert "recall b1" in (t.encode[0].message or {})["output"]


def test_exact_duplicates_are_discarded() -> None:
    span = [user("u1", "status?"), user("u2", "other"), user("u3", "status?")]
    t = triage(span)
    assert [(d.entry_id, d.reason) for d in t.discarded] == [("u3", "duplicate of u1")]
    assert [e.id for e in t.encode] == ["u1", "u2"]


@pytest.mark.parametrize(
    ("second_code", "second_error", "discarded"),
    [
        ("load()", False, {"a1", "r1"}),  # same target, later success: superseded
        ("load()", True, set()),  # the retry failed too: nothing superseded
        ("other()", False, set()),  # a different target: not a retry
    ],
)
def test_superseded_attempts(second_code: str, second_error: bool, discarded: set[str]) -> None:
    span = [
        call("a1", "c1", "load()"),
        result("r1", "c1", "KeyError: 'x'", True),
        call("a2", "c2", second_code),
        result("r2", "c2", "ok", second_error),
    ]
    t = triage(span)
    assert {d.entry_id for d in t.discarded} == discarded
    assert all(d.reason.startswith("superseded by") for d in t.discarded)


def test_a_failed_call_sharing_its_message_with_another_call_is_not_superseded() -> None:
    # Discarding a1 would orphan r9, the result of a1's other call: pairs go together or not at all.
    blocks = [
        {"type": "toolCall", "id": cid, "name": "python", "arguments": {"code": code}}
        for cid, code in (("c1", "load()"), ("c9", "other()"))
    ]
    both = Entry(
        "a1",
        None,
        "message",
        "t",
        {"message": {"role": "assistant", "content": blocks, "stopReason": "toolUse"}},
    )
    span = [
        both,
        result("r1", "c1", "KeyError: 'x'", True),
        result("r9", "c9", "fine"),
        call("a2", "c2", "load()"),
        result("r2", "c2", "ok"),
    ]
    assert triage(span).discarded == ()


def test_every_entry_lands_once_and_tokens_add_up() -> None:
    span = [user("u1", "a"), user("u2", "a"), call("a1", "c1", "x"), result("r1", "c1", "y\n" * 300)]
    kept = [user("k1", "tail")]
    t = triage(span, kept, tokens=lambda e: 10)
    ids = [e.id for e in t.encode] + [d.entry_id for d in t.discarded]
    assert sorted(ids) == sorted(e.id for e in span)
    assert t.tokens["summarize"] == 40
    assert t.tokens["encode"] + t.tokens["externalize"] + t.tokens["discard"] == 40
    assert t.tokens["keep"] == 10
    assert t.kept == tuple(kept)


@pytest.mark.parametrize(
    ("second_output", "discarded"),
    [
        ("same output", {"a2", "r2"}),  # identical rerun: the second pair adds nothing
        ("new output", set()),  # same call, different result: both kept
    ],
)
def test_identical_reruns_are_discarded(second_output: str, discarded: set[str]) -> None:
    span = [
        call("a1", "c1", "ls()"),
        result("r1", "c1", "same output"),
        call("a2", "c2", "ls()"),
        result("r2", "c2", second_output),
    ]
    t = triage(span)
    assert {d.entry_id for d in t.discarded} == discarded
    assert all(d.reason == "duplicate of a1" for d in t.discarded)


TRAINING_LOG = (
    "\n".join(f"epoch {i:04d} train_loss {1 / (i + 1):.5f} " + "x" * 40 for i in range(118))
    + "\nfinished run-7f3a2c: auc=0.763"
)
TRACEBACK = (
    "\n".join(f"step {i} ok" for i in range(300))
    + '\nTraceback (most recent call last):\n  File "<cell>", line 3, in <module>\n    fit(frame_12)\n'
    + "KeyError: 'tenure_bucket_5'\n"
    + "\n".join(f"cleanup {i}" for i in range(5))
)


@pytest.mark.parametrize(
    ("output", "tail_has", "error", "ids_have"),
    [
        (TRAINING_LOG, "finished run-7f3a2c: auc=0.763", None, []),
        (TRACEBACK, "cleanup 4", "KeyError: 'tenure_bucket_5'", []),
        (
            "\n".join(f"/work/derived/part-{i:04d}.parquet written" for i in range(400)),
            "/work/derived/part-0399.parquet written",
            None,
            ["/work/derived/part-0396.parquet"],
        ),
    ],
)
def test_gist_keeps_tail_error_line_and_identifiers(
    output: str, tail_has: str, error: str | None, ids_have: list[str]
) -> None:
    gist = make_gist(output)
    assert any(tail_has in line for line in gist.tail)
    assert gist.error == error
    assert set(ids_have) <= set(gist.identifiers)
    assert sum(map(len, gist.head)) <= GIST_HEAD_CHARS and sum(map(len, gist.tail)) <= GIST_TAIL_CHARS
    assert len(gist.identifiers) <= GIST_IDENTIFIERS
    assert Gist.from_json(gist.to_json()) == gist


def test_pointer_of_a_long_training_log_keeps_its_result_line() -> None:
    t = triage([call("a1", "c1", "train()"), result("r1", "c1", TRAINING_LOG)])
    (pointer,) = t.externalized
    lines = pointer_lines(pointer.to_json())
    assert lines[0] == "[entry r1 · 119 lines · recall r1] python output, 8,408 chars"
    assert "  tail: finished run-7f3a2c: auc=0.763" in lines
    assert lines[1] == "  call: train()"
    assert lines[2].startswith("  head: epoch 0000")
    assert pointer.subject == "train()"


def test_pointer_of_a_traceback_keeps_the_error_line_for_the_summarizer_too() -> None:
    t = triage([call("a1", "c1", "fit()"), result("r1", "c1", TRACEBACK, error=True)])
    (pointer,) = t.externalized
    assert "  error: KeyError: 'tenure_bucket_5'" in pointer_lines(pointer.to_json())
    short = entry_text(next(e for e in t.encode if e.id == "r1"))
    assert "error: KeyError: 'tenure_bucket_5'" in short


def test_pointer_lines_of_a_pointer_stored_without_a_gist() -> None:
    assert pointer_lines({"entry_id": "e9", "tool": "python", "lines": 300, "chars": 9000}) == [
        "[entry e9 · 300 lines · recall e9] python output, 9,000 chars"
    ]


def test_older_pointers_become_index_items_and_the_block_stops_growing() -> None:
    from ipython_compact.core.triage import (
        CARRIED_INDEX,
        CARRIED_WITH_GIST,
        INDEX_HEADER,
        carry_pointers,
        externalized_lines,
    )

    carried: list[dict[str, Any]] = []
    sizes = []
    for k in range(100):
        code = f"feat_gbm_{k:02d}ab = build_features('gbm_{k:02d}ab', seed=1337)"
        t = triage([call(f"a{k}", f"c{k}", code), result(f"r{k}", f"c{k}", TRAINING_LOG)])
        carried = carry_pointers(carried, [p.to_json() for p in t.externalized])
        sizes.append(len("\n".join(externalized_lines(carried))))
    assert len(carried) == CARRIED_WITH_GIST + CARRIED_INDEX
    lines = externalized_lines(carried)
    first = 100 - CARRIED_WITH_GIST - CARRIED_INDEX
    assert lines[0].startswith(
        f"{INDEX_HEADER} r{first} feat_gbm_{first:02d}ab · r{first + 1} feat_gbm_{first + 1:02d}ab · "
    )
    assert (
        "  tail: finished run-7f3a2c: auc=0.763" in lines
        and ("[entry r99 · 119 lines · recall r99] python output, 8,408 chars") in lines
    )
    assert max(sizes[70:]) - min(sizes[70:]) < 20  # a fixed size once full


def test_older_outputs_of_one_subject_are_one_index_item() -> None:
    """A loop calling ``load_step(k, seed=1337)`` has one subject: the index names it once, with
    every id (oldest first), and outputs of other subjects stay items of their own."""
    from ipython_compact.core.triage import CARRIED_WITH_GIST, INDEX_HEADER, externalized_lines

    pointers: list[dict[str, Any]] = [
        {"entry_id": f"o{k}", "tool": "python", "lines": 900, "chars": 50_000, "subject": "seed=1337"}
        for k in range(3)
    ]
    pointers.insert(
        1, {"entry_id": "x1", "tool": "python", "lines": 900, "chars": 50_000, "subject": "feat_gbm_01fa"}
    )
    pointers.append({"entry_id": "b1", "tool": "bash", "lines": 900, "chars": 50_000})
    gist = {"head": ["first"], "tail": ["last"]}
    pointers += [
        {"entry_id": f"n{k}", "tool": "python", "lines": 900, "chars": 50_000, "gist": gist}
        for k in range(CARRIED_WITH_GIST)
    ]
    lines = externalized_lines(pointers)
    assert lines[0] == f"{INDEX_HEADER} o0, o1, o2 seed=1337 · x1 feat_gbm_01fa · b1 bash"
    assert lines[0].count("seed=1337") == 1
    assert sum(line.startswith("[entry n") for line in lines) == CARRIED_WITH_GIST


def test_a_remembered_gist_is_the_gist_of_that_very_output() -> None:
    """make_gist remembers gists across plans (issue 37); an equal output read again (a new str)
    gets the same gist, and outputs of equal length that differ anywhere get their own."""
    lines = [f"step {k} loss={k / 7:.4f} run_id=run-{k:04d}" for k in range(400)]
    output = "\n".join(lines)
    again = "".join(list(output))  # equal, not the same object
    first = make_gist(output, "train()")
    assert make_gist(again, "train()") == first
    assert make_gist(output, "train(seed=2)").call == "train(seed=2)"
    edited = output.replace("run-0399", "run-9399")
    assert len(edited) == len(output)
    assert "run-9399" in make_gist(edited, "train()").text()
    assert "run-9399" not in first.text()


def _with_error_line(middle: list[str]) -> str:
    """An output whose error line (if any) sits before three closing lines, so the gist's tail
    does not already show it."""
    return "\n".join(["start 1", "start 2", *middle, "closing 1", "closing 2", "closing 3"])


@pytest.mark.parametrize(
    ("middle", "error"),
    [
        (
            ["Traceback (most recent call last):", '  File "a.py", line 1', "ValueError: bad"],
            "ValueError: bad",
        ),
        (["KeyError: 'a'", "work", "OSError: disk full"], "OSError: disk full"),  # the last one
        (["   \tIndexError: out of range"], "IndexError: out of range"),  # indented
        (["RuntimeError: windows line\r"], "RuntimeError: windows line"),  # \r before the newline
        (["", "   ", "\tpkg.mod.SomeError"], "pkg.mod.SomeError"),  # blank lines before
        (["an Error was mentioned", "no exception line here"], None),  # words, no error line
        (["ValueError: first", "  ", "not an error: Error"], "ValueError: first"),
        (["lower_error: x", "Warning: y"], None),
    ],
)
def test_gist_error_is_the_last_error_line(middle: list[str], error: str | None) -> None:
    assert make_gist(_with_error_line(middle)).error == error
