"""The deterministic ledger (pure): files, commands with status, errors, requests done/open."""

from __future__ import annotations

import re

import pytest
from builders import answer_entry as answer
from builders import calls_entry as calls
from builders import entry as m
from builders import result_entry
from builders import user_entry as user

from ipython_compact.core.entries import Entry
from ipython_compact.core.ledger import Ledger, code_file_ops, parse_error
from ipython_compact.core.requests import RequestRecord


def res(eid: str, cid: str, text: str, error: bool = False) -> Entry:
    return result_entry(eid, cid, text, name=None, error=error)


SESSION = [
    user("u1", "Please fix the loader"),
    calls(
        "a1", ("c1", "read", {"path": "src/load.py"}), ("c2", "python", {"code": "df = load()\nprint(df)"})
    ),
    res("r1", "c1", "def load(): ..."),
    res("r2", "c2", "Traceback (most recent call last):\n  File x\nKeyError: 'tenure'", error=False),
    calls("a2", ("c3", "edit", {"path": "src/load.py", "old": "a", "new": "b"})),
    res("r3", "c3", "ok"),
    calls("a3", ("c4", "bash", {"command": "pytest -q"})),
    res("r4", "c4", "3 passed"),
    answer("a4", "Fixed: the loader now fills tenure."),
    user("u2", "Now plot it"),
]


def test_ledger_from_a_session() -> None:
    led = Ledger().update(SESSION)
    assert led.files_modified == ("src/load.py",)
    assert led.files_read == ()
    assert [(c.tool, c.text, c.status) for c in led.commands] == [
        ("python", "df = load() (+1 lines)", "error"),
        ("bash", "pytest -q", "ok"),
    ]
    assert [(e.type, e.message, e.entry_id) for e in led.errors] == [("KeyError", "'tenure'", "r2")]
    assert [(r.text, r.status) for r in led.requests] == [
        ("Please fix the loader", "done"),
        ("Now plot it", "open"),
    ]
    assert (led.command_total, led.command_failed, led.error_total, led.request_total) == (2, 1, 1, 2)


@pytest.mark.parametrize("split", range(len(SESSION) + 1))
def test_fold_is_associative_at_any_cut(split: int) -> None:
    whole = Ledger().update(SESSION)
    parts = Ledger().update(SESSION[:split]).update(SESSION[split:])
    assert parts.to_json() == whole.to_json()


def test_json_round_trip_and_bad_details() -> None:
    led = Ledger().update(SESSION)
    assert Ledger.from_json(led.to_json()) == led
    assert Ledger.from_json(None) == Ledger()
    with pytest.raises(ValueError, match="ledger details are malformed"):
        Ledger.from_json({"commands": [{"tool": "x"}]})


def test_render_marks_done_and_open() -> None:
    text = Ledger().update(SESSION).render()
    assert text.startswith("<ledger>") and text.endswith("</ledger>")
    assert "- [x] Please fix the loader" in text
    assert "- [ ] Now plot it" in text
    assert "KeyError: 'tenure'" in text
    assert "files modified: src/load.py" in text


def test_bash_execution_and_bounds() -> None:
    many = [
        m(
            f"b{i}",
            {
                "role": "bashExecution",
                "command": f"echo {i}",
                "output": "boom" if i % 2 else "",
                "exitCode": i % 2,
            },
        )
        for i in range(100)
    ]
    led = Ledger().update(many)
    assert led.command_total == 100
    assert led.command_failed == 50
    assert len(led.commands) == 40
    assert led.commands[-1].text == "echo 99"
    assert len(led.errors) == 1  # the same error ("boom") is kept once, counted every time
    assert led.error_total == 50


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("Traceback...\nValueError: bad value", ("ValueError", "bad value")),
        ("x\nmodule.sub.CustomError: oops\nKeyboardInterrupt", ("KeyboardInterrupt", "")),
        ("all fine", None),
    ],
)
def test_parse_error(text: str, parsed: tuple[str, str] | None) -> None:
    assert parse_error(text) == parsed


@pytest.mark.parametrize(
    ("code", "reads", "writes"),
    [
        ('df = pd.read_csv("data/churn.csv")', ("data/churn.csv",), ()),
        ("df.to_parquet('/work/derived/x.parquet', index=False)", (), ("/work/derived/x.parquet",)),
        ('with open("out/log.txt", "w") as f:\n    f.write("x")', (), ("out/log.txt",)),
        ("text = open('notes.txt').read()", ("notes.txt",), ()),
        ('np.save("arr.npy", a)\nplt.savefig("fig.png")', (), ("arr.npy", "fig.png")),
        ('cfg = Path("cfg.yaml").read_text()', ("cfg.yaml",), ()),
        ("df = pd.read_csv(path_var)", (), ()),
    ],
)
def test_code_file_ops(code: str, reads: tuple[str, ...], writes: tuple[str, ...]) -> None:
    assert code_file_ops(code) == (reads, writes)


@pytest.mark.parametrize(
    ("is_error", "read", "modified"), [(False, ("in.csv",), ("out.csv",)), (True, (), ())]
)
def test_python_cells_count_file_ops_only_when_they_succeed(
    is_error: bool, read: tuple[str, ...], modified: tuple[str, ...]
) -> None:
    code = 'df = pd.read_csv("in.csv")\ndf.to_csv("out.csv")'
    led = Ledger().update(
        [
            calls("a1", ("c1", "python", {"code": code})),
            res("r1", "c1", "Error" if is_error else "ok", error=is_error),
        ]
    )
    assert (led.files_read, led.files_modified) == (read, modified)
    assert Ledger.from_json(
        Ledger().update([calls("a1", ("c1", "python", {"code": code}))]).to_json()
    ).update([res("r1", "c1", "ok")]).files_modified == ("out.csv",)


def test_kernel_names_from_successful_cells() -> None:
    ok = [
        calls("a1", ("c1", "python", {"code": "df = load()\ndef clean(x):\n    return x"})),
        res("r1", "c1", "ok"),
    ]
    bad = [
        calls("a2", ("c2", "python", {"code": "model = fit(df)"})),
        res("r2", "c2", "ValueError: nope", error=True),
    ]
    again = [calls("a3", ("c3", "python", {"code": "df = reload()"})), res("r3", "c3", "ok")]
    led = Ledger().update(ok + bad + again)
    assert led.names == ("clean", "df")
    assert (
        "kernel names defined by cells that succeeded (still in the kernel; reuse them): clean, df"
    ) in led.render()
    assert Ledger.from_json(led.to_json()) == led


def _rounds(n: int, *, retry_every: int = 0) -> list[Entry]:
    """``n`` answered requests, each with one cell (optionally failing once and retried)."""
    out: list[Entry] = []
    for i in range(n):
        out.append(user(f"u{i:04d}", f"request {i:04d}: look at part {i:04d}"))
        out.append(calls(f"c{i:04d}", (f"k{i:04d}", "python", {"code": f"frame_{i:04d} = load({i})"})))
        if retry_every and i % retry_every == 0:
            out.append(res(f"e{i:04d}", f"k{i:04d}", f"KeyError: 'col_{i:04d}'", error=True))
            out.append(calls(f"d{i:04d}", (f"j{i:04d}", "python", {"code": f"frame_{i:04d} = load({i})"})))
            out.append(res(f"s{i:04d}", f"j{i:04d}", "ok"))
        else:
            out.append(res(f"r{i:04d}", f"k{i:04d}", "ok"))
        out.append(answer(f"a{i:04d}", f"Finished part {i:04d}."))
    return out


def test_render_lists_newest_done_requests_and_counts_the_rest_with_ids() -> None:
    led = Ledger().update([*_rounds(30), user("u9999", "Now plot it")])
    lines = led.render().splitlines()
    assert lines[1] == "user requests (31 total: 30 done, 1 open; done = already answered, do not redo):"
    newest_ids = ", ".join(f"u{i:04d}" for i in range(18, 26))  # the 8 newest of the ones not listed
    assert lines[2] == f"- [x] 26 earlier request(s) done (newest: entries {newest_ids}; recall by id)"
    assert lines[3:7] == [
        f"- [x] request {i:04d}: look at part {i:04d}  (entry u{i:04d})" for i in range(26, 30)
    ]
    assert lines[7] == "- [ ] Now plot it  (entry u9999)"
    assert "request 0025" not in led.render()


def test_render_folds_a_failed_attempt_into_the_retry_that_succeeded() -> None:
    text = Ledger().update(_rounds(3, retry_every=2)).render()
    assert "- ok after 1 failed attempt(s): python: frame_0000 = load(0)  (entry d0000)" in text
    assert "- ok: python: frame_0001 = load(1)  (entry c0001)" in text
    assert "- ok after 1 failed attempt(s): python: frame_0002 = load(2)  (entry d0002)" in text
    assert "commands and cells run (5 total, 2 failed; last 3):" in text
    assert "errors (2 total; last 2 distinct):" in text


def test_render_shows_the_newest_names_with_a_count_of_older_ones() -> None:
    text = Ledger().update(_rounds(30)).render()
    names = ", ".join(f"frame_{i:04d}" for i in range(18, 30))
    assert (
        f"kernel names defined by cells that succeeded (still in the kernel; reuse them): {names} (+18 "
        f"older, not listed)"
    ) in text


@pytest.mark.parametrize("rounds", [80, 160, 320])
def test_render_reaches_a_fixed_size(rounds: int) -> None:
    """Past the section budgets, a longer session renders the same ledger shape: only numbers differ."""

    def shape(text: str) -> str:
        return re.sub(r"\d+", "#", text)

    base = Ledger().update(_rounds(40, retry_every=4)).render()
    text = Ledger().update(_rounds(rounds, retry_every=4)).render()
    assert len(shape(text)) == len(shape(base))
    assert len(text) - len(base) <= 20  # the digits of totals, counts and entry numbers


def test_render_folds_a_request_repeated_verbatim() -> None:
    session = [
        *_rounds(3),
        user("q1", "Where are we?"),
        answer("b1", "On step 3."),
        user("q2", "Where are we?"),
        answer("b2", "Still 3."),
    ]
    text = Ledger().update(session).render()
    assert "- [x] Where are we?  (asked 2 times: entries q1, q2)" in text
    assert text.count("Where are we?") == 1


@pytest.mark.parametrize(
    ("later", "status"),
    [
        ([answer("k1", "Here is the plot.")], "done"),  # answered in the kept tail
        (
            [
                calls("k1", ("c9", "python", {"code": "plot()"})),
                res("k2", "c9", "ok"),
                answer("k3", "Plotted."),
            ],
            "done",
        ),
        ([calls("k1", ("c9", "python", {"code": "plot()"})), res("k2", "c9", "ok")], "open"),  # still working
        (
            [
                m(
                    "k1",
                    {
                        "role": "assistant",
                        "content": [{"type": "text", "text": "partial"}],
                        "stopReason": "error",
                    },
                )
            ],
            "open",
        ),
        (
            [
                m(
                    "k1",
                    {"role": "assistant", "content": [{"type": "text", "text": "  "}], "stopReason": "stop"},
                )
            ],
            "open",
        ),
        ([], "open"),
    ],
)
def test_a_request_answered_in_the_kept_tail_is_done(later: list[Entry], status: str) -> None:
    led = Ledger().update(SESSION).settle_answered(later)  # SESSION ends with an open "Now plot it"
    assert [(r.text, r.status) for r in led.requests] == [
        ("Please fix the loader", "done"),
        ("Now plot it", status),
    ]
    assert ("- [x] Now plot it" in led.render()) is (status == "done")


def test_done_requests_the_summary_above_already_writes_out_are_listed_by_id() -> None:
    """The ledger follows the narrative in the checkpoint: a done request whose text the narrative
    already shows (its Done line, a split turn's Original Request) is named by entry id only, so
    the handoff states each request once; the others keep their line."""
    led = Ledger().update(_rounds(6))
    narrative = (
        "### Done\n- [x] request 0004: look at part 0004 → Done.\n- [x] request 0005: look at part "
        "0005 → Done."
    )
    text = led.render(shown=narrative)
    assert "- [x] request 0003: look at part 0003  (entry u0003)" in text
    assert "- [x] 2 done, written out in the summary above: entries u0004, u0005" in text
    assert (narrative + text).count("look at part 0004") == 1
    assert led.render().count("look at part 0004") == 1  # without a narrative: every line in full


def test_a_long_request_is_clipped_at_a_sentence_end() -> None:
    """The ledger shows a long request up to its last whole sentence that fits, then " …" (the
    rest is one recall away), never cut inside a word or a path."""
    long = (
        "Step 44: look at score sample bucket variance split score and tell me what changes. "
        "Use pandas==2.2.3 exactly, the cluster image pins it. Save the result to "
        "/work/derived/features_v44/part-0044.parquet."
    )
    text = Ledger().update([user("u1", long), answer("a1", "Done with step 44.")]).render()
    assert (
        "- [x] Step 44: look at score sample bucket variance split score and tell me what changes. Use "
        "pandas==2.2.3 exactly, the cluster image pins it. …  (entry u1)"
    ) in text
    assert "/work/d" not in text


@pytest.mark.parametrize(
    ("record", "replaced", "line"),
    [
        (
            RequestRecord("e1", "Export the scores to scores.parquet.", "open"),
            {},
            "- [ ] open, written out above  (entry e1)",
        ),
        (
            RequestRecord("e2", "Tune the learning rate next.", "deferred", "I will do it after the CV run."),
            {},
            "- [ ] deferred, written out above  (entry e2; deferred: I will do it after the CV run.)",
        ),
        (
            RequestRecord(
                "e3", "Make a PDF export of the dashboard.", "dropped", "Never mind the PDF export."
            ),
            {},
            "- [-] withdrawn, written out above  (entry e3; Never mind the PDF export.)",
        ),
        (
            RequestRecord("e4", "Load data/churn.csv and show me the first rows.", "done", "Loaded."),
            {"Load data/churn.csv": "e9"},
            "- [x] done, written out above  (entries e4; what it says was replaced later (entry e9))",
        ),
    ],
)
def test_a_request_the_text_above_writes_out_is_named_by_state_and_id(
    record: RequestRecord, replaced: dict[str, str], line: str
) -> None:
    """Every state, as done ones already were: the handoff states each request once (the summary's
    line, or the goal anchor), and the ledger keeps its state, id, why, and any "replaced" mark."""
    led = Ledger(requests=(record,), request_total=1)
    narrative = f"## In Progress\n- {record.text}\n"
    text = led.render(replaced, shown=narrative)
    assert line in text.splitlines()
    assert (narrative + text).count(record.text) == 1
    assert record.text in led.render(replaced)  # nothing above: the ledger writes it out itself


def test_done_requests_written_above_beyond_the_ledger_window_are_named_there_too() -> None:
    """The summary above may write out more done requests than the ledger's own window (its Done
    list keeps eight): those are named by id in the "written out above" line, not counted among
    the earlier ones, so listed plus counted is every request and none is hidden in a count."""
    led = Ledger().update(_rounds(20))
    narrative = "### Done\n" + "\n".join(
        f"- [x] request {i:04d}: look at part {i:04d} → Done." for i in range(12, 20)
    )
    lines = led.render(shown=narrative).splitlines()
    ids = ", ".join(f"u{i:04d}" for i in range(12, 20))
    assert f"- [x] 8 done, written out in the summary above: entries {ids}" in lines
    older = ", ".join(f"u{i:04d}" for i in range(4, 12))
    assert f"- [x] 12 earlier request(s) done (newest: entries {older}; recall by id)" in lines
