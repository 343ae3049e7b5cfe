"""MIME bundles for everything ``%compact`` shows.

Why: one output must read well in JupyterLab (custom renderer or HTML), VS Code (HTML/Markdown),
nbconvert (HTML/Markdown) and a terminal IPython (plain text). So every result carries a custom
JSON type plus ``text/html``, ``text/markdown`` and ``text/plain``.

Never a bare ``application/json``: JupyterLab ranks it above ``text/html`` and shows a collapsible
JSON tree instead of the table, and VS Code renders it too. The machine-readable payload goes under
a vendor type (``REPORT_MIME``, ``ENTRY_MIME``, or the summary/namespace types the labextension
renders); Lab, VS Code and nbconvert skip a vendor type they have no renderer for and show the HTML.

What must hold: every string that came from the user, the session log or the namespace is escaped
in HTML (``html.escape``) and Markdown (backslash-escaped specials), so a name or summary can never
inject markup or script. The JSON payloads equal the comm protocol's objects (docs/protocol.md).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ipython_compact.core.entries import COMPACTION, Entry, entry_text
from ipython_compact.core.readable import (
    cell_text,
    entry_gist,
    fmt_bytes,
    one_line,  # one cell per line: tables never break apart
)
from ipython_compact.kernel import plain_text

__all__ = ["cell_text", "entry_gist", "fmt_bytes"]  # re-exported: the kernel side's one import for rendering

SUMMARY_MIME = "application/vnd.ipython-compact.summary+json"
NAMESPACE_MIME = "application/vnd.ipython-compact.namespace+json"
# status, session, import, snapshot, restore, pin…
REPORT_MIME = "application/vnd.ipython-compact.report+json"
ENTRY_MIME = "application/vnd.ipython-compact.entry+json"  # one log entry's raw record (`%compact show`)

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~&-])")


def md_escape(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", text)


def _h(text: Any) -> str:
    return html.escape(str(text), quote=True)


@dataclass
class Rendered:
    """A displayable result: IPython calls ``_repr_mimebundle_``; ``data`` is for programs."""

    bundle: dict[str, Any]
    data: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.bundle, self.metadata

    def __repr__(self) -> str:
        return str(self.bundle.get("text/plain", ""))


PLAIN_CELL_WIDTH = 100
HTML_CELL_WIDTH = 300
#: Preformatted text wraps at spaces; a word breaks only when it alone is wider than the output
#: (a long path). JupyterLab's own ``pre`` rule says ``word-break: break-all``, which cut words
#: mid-way ("a / nd", "23, / 625"); the inline style wins over it.
PRE_STYLE = "white-space:pre-wrap;word-break:normal;overflow-wrap:anywhere"
#: Table cells read left to right: JupyterLab right-aligns ``td``/``th`` in rendered HTML.
CELL_STYLE = "text-align:left;vertical-align:top"


def _pre(text: str) -> str:
    return f'<pre style="{PRE_STYLE}">{_h(text)}</pre>'


def _cells(tag: str, cells: Sequence[Any]) -> str:
    return "".join(f'<{tag} style="{CELL_STYLE}">{_h(c)}</{tag}>' for c in cells)


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None = None
) -> tuple[str, str, str]:
    """HTML, Markdown and plain-text renderings of one table; every cell is one line (in plain
    text wrapped inside its column to fit ``width``, default the terminal's)."""
    html_rows = [[one_line(cell_text(c), HTML_CELL_WIDTH) for c in r] for r in rows]
    plain_rows = [[one_line(cell_text(c), PLAIN_CELL_WIDTH) for c in r] for r in rows]
    head = _cells("th", headers)
    body = "".join("<tr>" + _cells("td", r) + "</tr>" for r in html_rows)
    html_t = f'<table class="ipython-compact"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    md = "| " + " | ".join(md_escape(h) for h in headers) + " |\n|" + "---|" * len(headers) + "\n"
    md += "".join("| " + " | ".join(md_escape(c) for c in r) + " |\n" for r in html_rows)
    # each cell wraps inside its own column, so the table fits the terminal (``plain_text.table``)
    plain = plain_text.table([str(h) for h in headers], plain_rows, width or plain_text.terminal_width())
    return html_t, md, plain


def fields_bundle(
    title: str,
    rows: Sequence[tuple[str, str]],
    data: Any,
    *,
    mime: str | None = None,
    width: int | None = None,
) -> Rendered:
    """A titled list of labelled values, each in full: plain text wraps a long value under itself
    (``plain_text.fields``) instead of cutting it; ``mime`` (default ``REPORT_MIME``) carries ``data``."""
    plain = f"{title}\n{plain_text.fields(rows, width or plain_text.terminal_width())}" if rows else title
    body = "".join(
        f'<tr><th style="text-align:left">{_h(k)}</th><td '
        f'style="text-align:left;white-space:pre-wrap">'
        f"{_h(v)}</td></tr>"
        for k, v in rows
    )
    html_t = (
        f'<p><strong>{_h(title)}</strong></p><table class="ipython-compact"><tbody>{body}</tbody></table>'
    )
    md = f"**{md_escape(title)}**\n\n" + "".join(
        f"- **{md_escape(k)}**: {md_escape(' '.join(v.split()))}\n" for k, v in rows
    )
    payload = json.loads(json.dumps(data, default=str))
    bundle: dict[str, Any] = {
        mime or REPORT_MIME: payload,
        "text/html": html_t,
        "text/markdown": md,
        "text/plain": plain,
    }
    return Rendered(bundle, data)


def grid_bundle(
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    data: Any,
    *,
    mime: str | None = None,
    width: int | None = None,
) -> Rendered:
    """A titled table whose cells are shown in full: plain text wraps a cell inside its column
    (``plain_text.table``) so the table fits the terminal."""
    plain = (
        f"{title}\n{plain_text.table(headers, rows, width or plain_text.terminal_width())}" if rows else title
    )
    rows = [[c.replace(plain_text.KEEP, " ") for c in r] for r in rows]
    head = _cells("th", headers)
    body = "".join("<tr>" + _cells("td", r) + "</tr>" for r in rows)
    html_t = (
        f"<p><strong>{_h(title)}</strong></p><table "
        f'class="ipython-compact"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )
    md = (
        f"**{md_escape(title)}**\n\n| "
        f""
        + " | ".join(md_escape(h) for h in headers)
        + " |\n|"
        + "---|" * len(headers)
        + "\n"
        + "".join("| " + " | ".join(md_escape(" ".join(c.split())) for c in r) + " |\n" for r in rows)
    )
    bundle: dict[str, Any] = {"text/html": html_t, "text/markdown": md, "text/plain": plain}
    if mime:
        bundle[mime] = data
    return Rendered(bundle, data)


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "?"


def summary_bundle(compaction: Mapping[str, Any], notice: str | None = None) -> Rendered:
    """One compaction (as in the ``summaries`` op) with its summary text."""
    summary = str(compaction.get("summary", ""))
    head = (
        f"Compaction {compaction.get('id') or '?'} ({compaction.get('reason') or '-'}): "
        f"{_count(compaction.get('tokens_before'))} → {_count(compaction.get('tokens_after'))} tokens"
    )
    after, now = compaction.get("tokens_after"), compaction.get("context_after")
    estimate = str(compaction.get("estimate") or "")
    if isinstance(after, int) and isinstance(now, int) and now != after:
        # one number for one thing: the context now is what `%compact status` says right after;
        # the compaction's own figure (checkpoint + kept tail) is named as such. A live agent's
        # learned estimate also counts what every request carries (tool schemas, framing), and
        # is named, as `%compact status` names it; the two are then not a sum of parts.
        learned = bool(estimate) and not estimate.startswith("default")
        rest = (
            f"checkpoint and kept tail {after:,} by the compaction's own count; estimated by {estimate}"
            if learned
            else f"checkpoint and kept tail {after:,}, placed after it {now - after:+,}"
        )
        head = (
            f"Compaction {compaction.get('id') or '?'} ({compaction.get('reason') or '-'}): "
            f"{_count(compaction.get('tokens_before'))} → {now:,} tokens in context ({rest})"
        )
    width = plain_text.terminal_width()
    plain = f"{plain_text.wrap_block(head, width)}\n\n{plain_text.wrap_block(summary, width)}" + (
        f"\n\n{plain_text.wrap_block(notice, width)}" if notice else ""
    )
    html_t = (
        f'<div class="ipython-compact-summary"><p><strong>{_h(head)}</strong></p>'
        + _pre(summary)
        + (f"<details><summary>kernel state notice</summary>{_pre(notice)}</details>" if notice else "")
        + "</div>"
    )
    md = f"**{md_escape(head)}**\n\n```text\n{summary.replace('```', '` ` `')}\n```\n"
    if notice:
        md += f"\n```text\n{notice.replace('```', '` ` `')}\n```\n"
    payload = dict(compaction)
    if notice:
        payload["notice"] = notice
    return Rendered(
        {SUMMARY_MIME: payload, "text/html": html_t, "text/markdown": md, "text/plain": plain}, payload
    )


def mapping_bundle(title: str, data: Mapping[str, Any], *, mime: str | None = None) -> Rendered:
    """A titled key/value listing (restore, pin, import reports): every value in full, as text."""
    return fields_bundle(title, [(str(k), cell_text(v)) for k, v in data.items()], dict(data), mime=mime)


def text_bundle(text: str, *, title: str | None = None) -> Rendered:
    """Preformatted text (notices, exports, help)."""
    shown = plain_text.wrap_block(text, plain_text.terminal_width())
    t = f"{title}\n\n{shown}" if title else shown
    html_t = (f"<p><strong>{_h(title)}</strong></p>" if title else "") + _pre(text)
    md = (f"**{md_escape(title)}**\n\n" if title else "") + f"```text\n{text.replace('```', '` ` `')}\n```\n"
    return Rendered({"text/plain": t, "text/html": html_t, "text/markdown": md}, text)


def rows_bundle(
    title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], data: Any = None
) -> Rendered:
    h, md, txt = _table(headers, rows)
    return Rendered(
        {
            "text/html": f"<p><strong>{_h(title)}</strong></p>{h}",
            "text/markdown": f"**{md_escape(title)}**\n\n{md}",
            "text/plain": f"{title}\n{txt}",
        },
        data,
    )


def entry_bundle(entry: Mapping[str, Any]) -> Rendered:
    """One log entry (``Entry.to_json()``): a one-line header, then its whole text — a message's
    content, tool calls included — never the raw JSON record (that stays in ``ENTRY_MIME``)."""
    record = Entry.from_json(entry)
    text = entry_text(record)
    facts = [record.kind] + ([str(record.role)] if record.role else []) + [record.timestamp]
    if record.parent_id:
        facts.append(f"parent {record.parent_id}")
    details = record.data.get("details")
    focus = details.get("focus") if isinstance(details, Mapping) else None
    if record.kind == COMPACTION and isinstance(focus, str) and focus:
        facts.append(f"focus: {focus}")
    title = f"Entry {record.id} · " + " · ".join(facts)
    shown = text_bundle(text or "(no text)", title=title)
    shown.bundle[ENTRY_MIME] = json.loads(json.dumps(dict(entry), default=str))
    shown.data = dict(entry)
    return shown
