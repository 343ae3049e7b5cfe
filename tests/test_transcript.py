"""The ``%%agent`` transcript: every step in full, escaped, one line per compaction event."""

from __future__ import annotations

import pytest

from ipython_compact.agent.events import AgentEvent
from ipython_compact.kernel.transcript import Transcript, answer_bundle, answer_markdown, fenced

EVIL = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def turn(*events: AgentEvent) -> Transcript:
    t = Transcript()
    for e in events:
        t.add(e)
    return t


def test_a_turn_becomes_code_output_events_and_the_answer() -> None:
    t = turn(
        AgentEvent("user", "sum it"),
        AgentEvent("assistant", "Let me compute."),
        AgentEvent("tool_call", "total = sum(xs)\nprint(total)"),
        AgentEvent("tool_result", "12", {"is_error": False}),
        AgentEvent("compaction_start", "background compaction: over the 400-token line"),
        AgentEvent("compaction_end", "threshold compaction placed"),
        AgentEvent("assistant", "The total is 12."),
        AgentEvent("turn_end", "The total is 12.", {"stopped": "final"}),
    )
    assert [s.kind for s in t.steps] == ["note", "tool", "event", "event"]
    assert t.answer == "The total is 12."
    plain = t.plain()
    assert plain.splitlines() == [
        "Let me compute.",
        "",
        "▶ python",
        "    total = sum(xs)",
        "    print(total)",
        "  ⤷ output (1 line)",
        "  │ 12",
        "",
        "⟳ background compaction: over the 400-token line",
        "",
        "⟳ threshold compaction placed",
    ]
    assert "The total is 12." not in t.bundle()["text/html"]  # the answer is shown once, on its own


def test_nothing_is_cut() -> None:
    long_output = "\n".join(f"line {i}" for i in range(5000))
    t = turn(AgentEvent("tool_call", "x" * 2000), AgentEvent("tool_result", long_output, {"is_error": False}))
    for form in t.bundle().values():
        assert "x" * 2000 in form and "line 4999" in form


def test_errors_are_labelled() -> None:
    t = turn(
        AgentEvent("tool_call", "1/0"), AgentEvent("tool_result", "ZeroDivisionError", {"is_error": True})
    )
    assert "⤷ error (1 line)" in t.plain() and ">error (1 line)</summary>" in t.html()


def test_model_and_kernel_text_is_escaped_in_html() -> None:
    t = turn(
        AgentEvent("assistant", EVIL),
        AgentEvent("tool_call", EVIL),
        AgentEvent("tool_result", EVIL, {}),
        AgentEvent("error", EVIL),
    )
    html = t.html()
    assert "<img" not in html and "<script" not in html and "&lt;script&gt;" in html


def test_code_fences_inside_text_cannot_close_the_block() -> None:
    text = "a\n```\nb ```` c"
    block = fenced(text, "text")
    assert block.startswith("`````text\n") and block.endswith("\n`````")


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        (
            "**bold** and a [link](https://example.org)",
            '<strong>bold</strong> and a <a href="https://example.org">link</a>',
        ),
        (EVIL, "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"),
        ("use `<div>` here", "use <code>&lt;div&gt;</code> here"),  # inline code stays code
        ("```html\n<b>x</b>\n```", '<pre><code class="language-html">&lt;'),  # a block, coloured
        ("a & b", "a &amp; b"),
    ],
)
def test_the_answer_keeps_its_markdown_but_never_renders_html(answer: str, shown: str) -> None:
    bundle = answer_bundle(answer)
    assert shown in bundle["text/html"] and "<b>" not in bundle["text/html"]
    assert bundle["text/markdown"] == answer_markdown(answer) == fenced(answer, "text")  # verbatim
    assert bundle["text/plain"] == answer


def test_a_stopped_turn_has_no_answer_and_keeps_its_narration() -> None:
    t = turn(
        AgentEvent("assistant", "Trying once more."),
        AgentEvent("turn_end", "step limit", {"stopped": "step_limit"}),
    )
    assert t.answer is None and [s.text for s in t.steps] == ["Trying once more."]


def test_a_running_turn_shows_the_text_streaming_in() -> None:
    t = turn(AgentEvent("assistant_delta", "The tot"), AgentEvent("assistant_delta", "al is"))
    assert t.plain(running=True).endswith("The total is")
    assert t.plain(running=False) == ""


def test_the_answer_is_shown_once_even_when_an_event_follows_it() -> None:
    t = turn(
        AgentEvent("tool_call", "x = 1"),
        AgentEvent("tool_result", "", {"is_error": False}),
        AgentEvent("assistant", "Done: x is 1."),
        AgentEvent("compaction_end", "threshold compaction placed at the turn boundary"),
        AgentEvent("turn_end", "Done: x is 1.", {"stopped": "final"}),
    )
    assert [s.kind for s in t.steps] == ["tool", "event"] and t.answer == "Done: x is 1."
    assert "Done: x is 1." not in t.plain()
