"""A ``%%agent`` turn as a transcript people can read, built from the loop's events.

Why: the cell printed one line per event, each cut at 300 characters, so the model's answer and
the tool output were lost unless streamed. Here a turn becomes: each tool call as its code
(highlighted) with its output folded away (``<details>``), compaction and recovery events as one
line each, and the final answer in full, its Markdown rendered — in one MIME bundle (``text/html``,
``text/markdown``, ``text/plain``) so JupyterLab and VS Code show the rich form and a terminal or
nbconvert the plain one.

What must hold:
- Nothing is cut: code, output and answer appear in full in every form.
- Every text from the model or the kernel is escaped in HTML; code fences in Markdown cannot be
  closed early by the text inside them; HTML in the model's answer is shown as text, never
  rendered (an answer is untrusted input: a model repeats what it read), while its Markdown
  formatting still renders. That holds by construction, never by guessing where code is: the
  answer's HTML is built by a CommonMark parser with raw HTML, images and non-web links off
  (``answer_html``), and its Markdown form is the text verbatim in a fence (``answer_markdown``).
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass, field
from typing import Any

from ipython_compact.agent.events import AgentEvent

#: Wrap at spaces; break a word only when it alone is too wide (JupyterLab's pre rule breaks any word).
_PRE = "white-space:pre-wrap;word-break:normal;overflow-wrap:anywhere"

#: Events shown as one line each (what the loop did besides calling the model and running code).
ONE_LINE = {
    "compaction_start": "⟳",
    "compaction_queued": "⟳",
    "compaction_end": "⟳",
    "compaction_stale": "⟳",
    "compaction_dropped": "⟳",
    "compaction_requested": "⟳",
    "overflow": "⚠",
    "guard": "·",
    "kernel_restart": "↻",
    "kernel_failed": "✗",
    "error": "✗",
    "continuation": "↪",
    "settings": "⚙",
}


@dataclass
class Step:
    """One block of the transcript: ``kind`` is ``note`` (model text between tool calls), ``tool``
    (code and its output) or ``event`` (one line)."""

    kind: str
    text: str
    output: str | None = None
    is_error: bool = False
    mark: str = ""


@dataclass
class Transcript:
    """Collects one turn's events (``add``) and renders them (``bundle``, ``plain_lines``)."""

    steps: list[Step] = field(default_factory=list)
    answer: str | None = None
    stopped: str | None = None
    streaming: str = ""
    _pending_text: str | None = None

    def add(self, event: AgentEvent) -> Step | None:
        """Fold ``event`` in; returns the step it completed (for terminals that print as they go)."""
        kind, text = event.kind, event.text
        if kind == "assistant_delta":
            self.streaming += text
            return None
        if kind == "assistant":
            self.streaming = ""
            self._pending_text = text if text.strip() else None
            return None
        if kind == "tool_call":
            done = self._flush_note()
            self.steps.append(Step("tool", text))
            return done
        if (
            kind == "tool_result"
            and self.steps
            and self.steps[-1].kind == "tool"
            and self.steps[-1].output is None
        ):
            step = self.steps[-1]
            step.output, step.is_error = text, bool(event.data.get("is_error"))
            return step
        if kind in ONE_LINE:
            self._flush_note()
            step = Step("event", text or kind.replace("_", " "), mark=ONE_LINE[kind])
            self.steps.append(step)
            return step
        if kind == "turn_end":
            self.stopped = str(event.data.get("stopped") or "final")
            if self.stopped == "final":
                self.answer = text
                self._pending_text = None
                notes = [i for i, s in enumerate(self.steps) if s.kind == "note"]
                if notes and self.steps[notes[-1]].text == text:  # flushed early by a later one-line event
                    del self.steps[notes[-1]]
            else:
                self._flush_note()
        return None

    def _flush_note(self) -> Step | None:
        """Model text followed by a tool call is narration, not the answer: it becomes a note."""
        if self._pending_text is None:
            return None
        step = Step("note", self._pending_text)
        self._pending_text = None
        self.steps.append(step)
        return step

    # ------------------------------------------------------------------ rendering
    def bundle(self, *, running: bool = False) -> dict[str, Any]:
        """The steps (not the answer, which ``answer_bundle`` shows on its own) in three forms;
        ``running`` adds the text streaming in and a "working" line."""
        return {
            "text/html": self.html(running=running),
            "text/markdown": self.markdown(running=running),
            "text/plain": self.plain(running=running),
        }

    def plain(self, *, running: bool = False) -> str:
        parts = [step_plain(s) for s in self.steps]
        if running:
            parts.append(self.streaming or "… working")
        return "\n\n".join(p for p in parts if p)

    def html(self, *, running: bool = False) -> str:
        parts = [step_html(s) for s in self.steps]
        if running:
            parts.append(
                f'<pre style="{_PRE}">{_h(self.streaming)}</pre>'
                if self.streaming
                else "<p><em>… working</em></p>"
            )
        return '<div class="ipython-compact-transcript">' + "".join(parts) + "</div>"

    def markdown(self, *, running: bool = False) -> str:
        parts = [step_markdown(s) for s in self.steps]
        if running:
            parts.append(fenced(self.streaming, "text") if self.streaming else "*… working*")
        return "\n\n".join(p for p in parts if p) + "\n"


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def fenced(text: str, lang: str) -> str:
    """A fenced code block whose fence is longer than any backtick run inside ``text``."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _line_count(text: str) -> str:
    n = len(text.splitlines()) or 1
    return f"{n:,} line{'' if n == 1 else 's'}"


def step_plain(step: Step) -> str:
    if step.kind == "event":
        return f"{step.mark} {step.text}"
    if step.kind == "note":
        return step.text
    code = "\n".join("    " + ln for ln in step.text.splitlines()) or "    (no code)"
    if step.output is None:
        return f"▶ python\n{code}"
    label = "error" if step.is_error else "output"
    output = "\n".join("  │ " + ln for ln in step.output.splitlines()) or "  │"
    return f"▶ python\n{code}\n  ⤷ {label} ({_line_count(step.output)})\n{output}"


def highlighted(code: str) -> str:
    """Python code as HTML with inline colours (no stylesheet needed), escaped either way."""
    import pygments.formatters  # type: ignore[import-untyped]  # IPython's dependency; deferred (start-up)
    import pygments.lexers  # type: ignore[import-untyped]  # deferred (start-up): ~10 ms, %%agent output only

    formatter = pygments.formatters.HtmlFormatter(noclasses=True, nobackground=True)
    return str(pygments.highlight(code, pygments.lexers.PythonLexer(), formatter))


def step_html(step: Step) -> str:
    if step.kind == "event":
        return f'<div class="ipython-compact-event">{_h(step.mark)} {_h(step.text)}</div>'
    if step.kind == "note":
        return answer_html(step.text)
    code = (
        f'<div class="ipython-compact-code" style="border-left:3px solid '
        f'rgba(128,128,128,.5);padding-left:8px">'
        f"{highlighted(step.text)}</div>"
    )
    if step.output is None:
        return code + "<div><em>running…</em></div>"
    label = "error" if step.is_error else "output"
    color = ' style="color:#c62828"' if step.is_error else ""
    return (
        code + f"<details><summary{color}>{label} ({_line_count(step.output)})</summary>"
        f'<pre style="{_PRE}">{_h(step.output)}</pre></details>'
    )


def step_markdown(step: Step) -> str:
    if step.kind == "event":
        return f"{step.mark} {_md_text(step.text)}"
    if step.kind == "note":
        return answer_markdown(step.text)  # the text verbatim (see answer_markdown)
    block = fenced(step.text, "python")
    if step.output is None:
        return block
    label = "error" if step.is_error else "output"
    return (
        f"{block}\n\n<details><summary>{label} ({_line_count(step.output)})</summary>\n\n"
        f"{fenced(step.output, 'text')}\n\n</details>"
    )


_MD_LINE_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~&])")


def _md_text(text: str) -> str:
    return _MD_LINE_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def answer_markdown(text: str) -> str:
    """The model's answer for a Markdown-only reader (nbconvert to Markdown, a front end without
    HTML): the text verbatim in a fenced block, which CommonMark shows as text whatever it holds.

    Why not the answer's own Markdown with its HTML escaped: escaping ``<`` only outside code means
    knowing where code is, and only a full CommonMark parse knows (an escaped backtick, a span that
    a paragraph break ends, a fence of the other kind); the fourth red team got ``<img onerror>``
    through such a guess. The formatted form is ``answer_html``, which a parser builds."""
    return fenced(text, "text")


def _safe_link(url: str) -> bool:
    """Whether a link the answer makes may stay a link: http, https, mailto or relative (no
    scheme). Anything else (``javascript:``, ``data:``, ``vbscript:``, ``file:``) stays text.
    ``url`` is already normalized (entities decoded, unsafe characters percent-encoded)."""
    head = re.match(r"[^:/?#]*:", url.strip())
    return head is None or head.group().lower() in {"http:", "https:", "mailto:"}


def _highlighted_fence(code: str, lang: str, attrs: str) -> str:
    """A fenced block's code with inline colours when Pygments knows its language, else "" (the
    parser then escapes it itself). Pygments escapes every token; ``lang`` only picks a lexer."""
    import pygments  # type: ignore[import-untyped]  # deferred (start-up): IPython's dependency, %%agent only
    import pygments.formatters  # type: ignore[import-untyped]  # deferred (start-up), as above
    import pygments.lexers  # type: ignore[import-untyped]  # deferred (start-up), as above
    import pygments.util  # type: ignore[import-untyped]  # deferred (start-up), as above

    try:
        lexer = pygments.lexers.get_lexer_by_name(lang.strip() or "text")
    except pygments.util.ClassNotFound:
        return ""
    formatter = pygments.formatters.HtmlFormatter(noclasses=True, nobackground=True, nowrap=True)
    return str(pygments.highlight(code, lexer, formatter))


@functools.lru_cache(maxsize=1)
def _renderer() -> Any:
    """CommonMark (plus tables and strikethrough, as models write them) with raw HTML off (every
    ``<`` the answer holds is shown as text), images off (an image is fetched on display, from a
    URL the model chose: a way out for what it read) and only ``_safe_link`` links."""
    from markdown_it import MarkdownIt  # deferred (start-up): %%agent answers only

    md = MarkdownIt("commonmark", {"html": False, "highlight": _highlighted_fence})
    md.enable(["table", "strikethrough"]).disable("image")
    md.validateLink = _safe_link  # type: ignore[method-assign]  # markdown-it-py documents this override
    return md


def answer_html(text: str) -> str:
    """The model's Markdown as HTML, built by a CommonMark parser that treats the answer as
    untrusted: formatting renders, and by construction no tag, attribute or script link comes
    from the answer (the parser escapes all text; raw HTML is off)."""
    return str(_renderer().render(text))


def answer_bundle(text: str) -> dict[str, Any]:
    """The final answer on its own: rendered HTML (every front end we know picks it before
    Markdown), the text verbatim for Markdown-only readers, and plain text."""
    return {"text/html": answer_html(text), "text/markdown": answer_markdown(text), "text/plain": text}
