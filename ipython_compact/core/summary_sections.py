"""The checkpoint's Markdown sections: their names, caps and order, parsing a checkpoint back,
repairing one that lacks sections, rendering items under a budget; and the item readers both
sides share (a message block's one-line description, the done / decision / next-step sentence
patterns, clipping).

Why: the offline summarizer (``core.offline_summary``) and the model path's checks both read and
write these sections; what a section is lives apart from what goes into it. Split out of
``offline_summary`` (issue 32: no core module over 650 lines).

What must hold: pure, deterministic, stdlib only; parsing a rendered checkpoint gives back its items.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal

from ipython_compact.core.facts import (
    SENTENCE_RE,
    clip_sentences,
)
from ipython_compact.core.readable import one_line
from ipython_compact.core.user_statements import user_decisions as _user_decisions

SummaryKind = Literal["history", "turn_prefix", "branch"]

HISTORY_SECTIONS: Final = (
    "Goal",
    "Constraints & Preferences",
    "Progress",
    "Key Decisions",
    "Next Steps",
    "Critical Context",
)
PROGRESS_PARTS: Final = ("Done", "In Progress", "Blocked")
TURN_PREFIX_SECTIONS: Final = ("Original Request", "Early Progress", "Context for Suffix")
REQUIRED_SECTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "history": HISTORY_SECTIONS,
    "branch": ("Goal", "Progress", "Next Steps"),
    "turn_prefix": TURN_PREFIX_SECTIONS,
}

# per-section caps (items); the newest items win
CAPS: Final[Mapping[str, int]] = {
    "Constraints & Preferences": 40,
    "Done": 8,
    "In Progress": 10,
    "Blocked": 8,
    "Key Decisions": 12,
    "Next Steps": 8,
    "Critical Context": 12,
    "Early Progress": 20,
    "Context for Suffix": 20,
}
ITEM_CHARS: Final = 240
REQUEST_CHARS: Final = 140  # a request as it appears in a Done / In Progress line
OUTCOME_CHARS: Final = 120  # the outcome after "→"
# reference lines (parenthesized, naming <anchors>) stand in for anchored text and are not items
ANCHORED_GOAL: Final = "(the goal: the first user request, verbatim in <anchors>)"
ANCHORED_REST: Final = "(the other constraints: verbatim in <anchors>)"
ANCHORED_REQUEST: Final = "(the request: verbatim in <anchors>)"
_REFERENCE: Final = re.compile(r"^\(.*<anchors>.*\)$")
_EARLIER_DONE: Final = re.compile(r"^\((\d+) earlier finished request\(s\) not listed")
_EARLIER_OPEN: Final = re.compile(r"^\((\d+) older open or deferred request\(s\)")
GOAL_CHARS: Final = 600
OLDER_OPEN_IDS: Final = 40  # ids of open requests beyond the In Progress cap, listed in one line
RAW_REQUEST_CHARS: Final = 2000  # a request as the state machine reads it (its line form is made at the end)
DONE_WINDOW: Final = 4 * CAPS["Done"]  # Done lines of a span put in their line form; older ones are counted
# sections shrunk first when the text exceeds its budget
SHRINK_ORDER: Final = (
    "Critical Context",
    "Done",
    "Key Decisions",
    "Early Progress",
    "Context for Suffix",
    "Blocked",
    "Constraints & Preferences",
    "In Progress",
    "Next Steps",
)

_DONE: Final = re.compile(
    r"(?i)\b(done|fixed|implemented|created|wrote|added|passed|passes|works "
    r"now|completed|resolved|verified|confirmed|succeeded|finished)\b"
)
_DECISION: Final = re.compile(
    r"(?i)\b(decided?|decision|chose|choose|opted|settled on|going with|go with|(?:will|'ll|let's|we'll) use|"
    r"switch(?:ed|ing)? (?:to|from)|instead of|rather than|root cause|the cause|because|in favou?r of)\b"
)
_NEXT: Final = re.compile(
    r"(?i)\b(next|then i(?:'ll| will)|i(?:'ll| will| am going to|'m going to)|let me|todo|to do:|need "
    r"to|plan to|will now|remaining|after that)\b"
)
# every text the pattern above it matches holds one of these (lower-cased): a message without any
# skips that pattern for all its sentences (one pass of substring tests instead of a scan each)
_DECISION_HINTS: Final = (
    "decid",
    "decision",
    "chose",
    "choose",
    "opted",
    "settled",
    "go with",
    "going with",
    "use",
    "switch",
    "instead",
    "rather",
    "cause",
    "favo",
)
_NEXT_HINTS: Final = (
    "next",
    "then",
    "i'll",
    "i will",
    "going to",
    "let me",
    "todo",
    "to do",
    "need to",
    "plan to",
    "will now",
    "remaining",
    "after that",
)
_POINTER: Final = re.compile(r"\[entry [^\]]+ · [\d,]+ lines · recall [^\]]+\]")
_ERROR: Final = re.compile(
    r"(?m)^\s*((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault)(?::[ \t]*.{0,200})?)$"
)
_HEADING: Final = re.compile(r"^(#{2,3})\s+(.+?)\s*$")
_ITEM_PREFIX: Final = re.compile(r"^(?:[-*]\s+(?:\[[ xX]\]\s+)?|\d+\.\s+)")


def _clip(text: str, limit: int = ITEM_CHARS) -> str:
    """An item on one line: whole sentences that fit, else its first cut at a word boundary."""
    return clip_sentences(text, limit)


def user_decisions(text: str) -> list[str]:
    """The sentences of a user message that decide something (switch, go with, instead of, ...);
    the rule ``core.anchors.decision_spans``, without its "use X" form (the assistant's reply states
    those choices in this summary's Key Decisions)."""
    return _user_decisions(text, leading_use=False)


def _sentences(text: str) -> Iterable[str]:
    for line in text.split("\n"):
        for m in SENTENCE_RE.finditer(line):
            yield m.group(0).rstrip()


# a line of code outside a fence: a statement keyword, a brace, a comment, a prompt, or a call
_CODE_LINE: Final = re.compile(
    r"^(?:(?:const|let|var|function|def|class|import|export|return|await|async|elif|except|raise)"
    r"\b(?!['’])|from \S+ import |"
    r"(?:if|for|while|switch) ?\(|[{}\])]|//|/\*|#!|\$ |>>> |@\w+\(|[\w.$\[\]'\"]+ "
    r"?\(.*\)[;,]?$|[\w.\[\]'\"]+ (?:[-+*/]?=|=>) )"
)
_BOLD_LINE: Final = re.compile(r"^\*\*[^*]+\*\*:?$")


def _json_description(text: str) -> str | None:
    """A short description of ``text`` when it is a JSON value (object or list), else None."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict):
        keys = [str(k) for k in value][:4]
        more = ", …" if len(value) > 4 else ""
        return f"[JSON object: {', '.join(keys)}{more}]" if keys else "[empty JSON object]"
    if isinstance(value, list):
        return f"[JSON list of {len(value)} item(s)]"
    return None


def _blocks(text: str) -> list[tuple[str, str]]:
    """A message as (kind, text) lines: ``prose`` (list markers removed), ``heading``, or
    ``code``: a short description standing for a fenced block or a JSON text, or "" for a line of
    code outside a fence. Summaries read prose; code and JSON become descriptions."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        desc = _json_description(stripped)
        if desc:
            return [("code", desc)]
    out: list[tuple[str, str]] = []
    fence: str | None = None
    fence_lines = 0
    for raw in text.split("\n"):
        line = raw.strip()
        if fence is not None:
            if line.startswith("```"):
                out.append(("code", f"[{fence} block, {fence_lines} line(s)]"))
                fence = None
            else:
                fence_lines += 1
            continue
        if line.startswith("```"):
            rest = line[3:].strip()
            if rest.endswith("```"):  # a one-line fence
                out.append(("code", "[code]"))
                continue
            fence, fence_lines = (rest.split()[0] if rest else "code"), 0
            continue
        if not line:
            continue
        if (line.startswith("#") and not line.startswith("#!")) or _BOLD_LINE.match(line):
            out.append(("heading", line.lstrip("#* ").rstrip("*: ")))
            continue
        item = _ITEM_PREFIX.sub("", _ITEM_PREFIX.sub("", line))  # "- - x" (a quoted list) too
        if item[:1] in ("{", "[") and (desc := _json_description(item)):
            out.append(("code", desc))
        elif _CODE_LINE.match(item):
            out.append(("code", ""))
        else:
            out.append(("prose", item))
    if fence is not None:
        out.append(("code", f"[{fence} block, {fence_lines} line(s)]"))
    return out


def _pointer_item(text: str, m: re.Match[str], tool: str) -> str:
    """A pointer as a Critical Context item: the pointer, the tool, and how its output ended
    (the last line before the pointer, and the traceback's error line when triage kept one)."""
    tail = text[: m.start()].rstrip().split("\n")[-3:]
    last = next(
        (ln.strip() for ln in reversed(tail) if len(ln.strip()) > 3 and not _CODE_LINE.match(ln.strip())), ""
    )
    after = text[m.end() :].lstrip("\n")
    error = after[len("error: ") :].split("\n", 1)[0] if after.startswith("error: ") else ""
    item = f"{m.group(0)} {tool} output"
    if last and not last.startswith("[..."):
        item += f", ends: {one_line(last, 100)}"
    if error:
        item += f" ({one_line(error, 100)})"
    return item


def _describe(text: str) -> str:
    """``text`` as one line of prose, with code and JSON replaced by short descriptions."""
    if "```" not in text and "{" not in text and "[" not in text and "\n" not in text:
        return text  # the common case, kept fast
    return " ".join(t for kind, t in _blocks(text) if t)


def missing_sections(text: str, kind: str = "history") -> list[str]:
    """Required ``## `` headings absent from ``text`` (Progress also needs its three parts)."""
    if kind not in REQUIRED_SECTIONS:
        raise ValueError(f"unknown summary kind {kind!r}; expected one of {', '.join(REQUIRED_SECTIONS)}")
    headings = {
        m.group(2).strip().lower() for line in text.splitlines() if (m := _HEADING.match(line.strip()))
    }
    missing = [name for name in REQUIRED_SECTIONS[kind] if name.lower() not in headings]
    if kind == "history" and "progress" in headings:
        missing.extend(f"Progress/{part}" for part in PROGRESS_PARTS if part.lower() not in headings)
    return missing


def repair_sections(text: str, kind: str = "history") -> tuple[str, list[str]]:
    """``text`` with every missing required section added as "(none)", and what was added.

    Why: smaller models often drop a heading. After one resample the summarizer repairs instead
    of failing the compaction, and records the repair. A missing section goes before the first
    required section that follows it in the template (else at the end); a missing part of
    Progress goes at the end of the Progress section. Existing text is never changed.
    What must hold: ``missing_sections(repair_sections(t, k)[0], k) == []``.
    """
    missing = missing_sections(text, kind)
    if not missing:
        return text, []
    lines = text.rstrip().split("\n")

    def heading_at(level: str, name: str) -> int | None:
        for i, raw in enumerate(lines):
            m = _HEADING.match(raw.strip())
            if m and m.group(1) == level and m.group(2).strip().lower() == name.lower():
                return i
        return None

    def section_end(start: int) -> int:
        for i in range(start + 1, len(lines)):
            m = _HEADING.match(lines[i].strip())
            if m and m.group(1) == "##":
                return i
        return len(lines)

    order = list(REQUIRED_SECTIONS[kind])
    for name in [m for m in missing if "/" not in m]:
        block = [f"## {name}", "(none)"]
        if kind == "history" and name == "Progress":
            block = ["## Progress", *[x for part in PROGRESS_PARTS for x in (f"### {part}", "(none)", "")]][
                :-1
            ]
        later = [heading_at("##", n) for n in order[order.index(name) + 1 :]]
        at = min((i for i in later if i is not None), default=None)
        if at is None:
            lines.extend(["", *block])
        else:
            lines[at:at] = [*block, ""]
    for part in [m.split("/", 1)[1] for m in missing if m.startswith("Progress/")]:
        start = heading_at("##", "Progress")
        assert start is not None  # a missing part is only reported when Progress is there
        end = section_end(start)
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        lines[end:end] = ["", f"### {part}", "(none)"]
    return "\n".join(lines), missing


def parse_checkpoint(text: str) -> dict[str, list[str]]:
    """Section name → item texts (list markers and checkboxes removed; "(none)" and reference
    lines to ``<anchors>`` dropped). A split turn's sections (Original Request, ...) are included."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        m = _HEADING.match(line)
        if m:
            current = m.group(2).strip()
            sections.setdefault(current, [])
            continue
        if current is None or not line or line.lower() in ("(none)", "none") or _REFERENCE.match(line):
            continue
        item = _ITEM_PREFIX.sub("", line)
        if item.lower().startswith("**turn context") or line == "---":
            continue  # the split-turn part follows; its sections have their own names
        sections[current].append(item)
    return sections


def _in_log_order(items: Sequence[str]) -> list[str]:
    """``items`` with a repeated one at its newest place only: a line said again later (the same
    request asked and answered again) belongs where it was said last, so a capped list keeps it."""
    last = {item: i for i, item in enumerate(items)}
    return [item for i, item in enumerate(items) if last[item] == i]


def _merge(old: Sequence[str], new: Sequence[str], cap: int) -> list[str]:
    out = _in_log_order([*old, *new])
    return out[-cap:] if cap > 0 else []


def _render(
    kind: SummaryKind, sections: Mapping[str, Sequence[str]], refs: Mapping[str, str] | None = None
) -> str:
    """The checkpoint text; ``refs`` adds a reference line (to <anchors>) after a section's items."""
    refs = refs or {}

    def bullets(name: str, marker: str = "- ") -> str:
        items = sections.get(name) or []
        lines = [f"{marker}{i}" for i in items] + ([refs[name]] if name in refs else [])
        return "\n".join(lines) if lines else "(none)"

    if kind == "turn_prefix":
        parts = [
            "## Original Request\n" + ("\n".join(sections.get("Original Request") or []) or "(none)"),
            "## Early Progress\n" + bullets("Early Progress"),
            "## Context for Suffix\n" + bullets("Context for Suffix"),
        ]
        return "\n\n".join(parts)
    steps = sections.get("Next Steps") or []
    parts = [
        "## Goal\n" + ("\n".join(sections.get("Goal") or []) or refs.get("Goal", "(none)")),
        "## Constraints & Preferences\n" + bullets("Constraints & Preferences"),
        "## Progress\n### "
        "Done\n" + bullets("Done", "- [x] ") + "\n\n### In "
        "Progress\n" + bullets("In Progress", "- [ ] ") + "\n\n### Blocked\n" + bullets("Blocked"),
        "## Key Decisions\n" + bullets("Key Decisions"),
        "## Next Steps\n" + ("\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1)) if steps else "(none)"),
        "## Critical Context\n" + bullets("Critical Context"),
    ]
    return "\n\n".join(parts)
