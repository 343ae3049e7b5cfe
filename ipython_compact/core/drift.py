"""Drift guard: exact identifiers that must survive every compaction, and the machine blocks.

Why: a checkpoint is re-summarized at every compaction (s_{k+1} = C(s_k + R_k)); each pass may
soften "CUDA 12.4" into "12.x" and then into "a recent CUDA". The guard tracks the exact strings a
future action depends on — paths, versions, error messages, ids and issue refs, commit hashes,
kernel variable names — and after any summarizer checks that each one is still present verbatim in
the new checkpoint; what is missing is appended verbatim in a ``<drift-guard>`` machine block.

Machine blocks (``<anchors>``, ``<ledger>``, ``<drift-guard>``, ``<externalized>``, ...) are built
deterministically and appended after the summarizer's narrative. They are stripped from the
previous summary before it goes back to a model, so a model never paraphrases them.

What must hold:
- Extraction is deterministic: same text, same identifiers, same order (first occurrence).
- ``apply_guard`` never edits the narrative; it only appends one block.
- ``strip_machine_blocks(render + narrative)`` returns the narrative (modulo surrounding blank lines).

What an identifier is (its classes, patterns and noise lists) lives in ``core.identifiers``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ipython_compact.core.entries import Entry, text_of_content, tool_calls_of
from ipython_compact.core.identifiers import (
    CODE_KEYS,
    Identifier,
    IdentifierClass,
    extract_identifiers,
    variables_in_code,
)

MACHINE_TAGS: Final = (
    "anchors",
    "ledger",
    "drift-guard",
    "externalized",
    "read-files",
    "modified-files",
    "compaction-elision",
    "fact-appendix",
    "user-requests",
    "recent-state-anchor",
)

# the guard's working set: how many exact strings, and how many characters, it may carry at most.
# The characters are the identifier block's token budget (4,800 ≈ 1,200 tokens, under a tenth of
# the default summary budget); the count bounds a set of short strings. Sessions naming short ids
# and results (the probe sessions: 240 of them fit in 4,400 characters) are bound by the count;
# 160 strings lost 7% of the probe benchmark's facts from view by compaction 30, 200 lost 1%.
# Sessions naming long paths and error lines (the retention bench's) are bound by the characters:
# since a metric's new value replaces the old one (issue 18) such a set no longer turns over
# through metric values, and at 9,600 characters it kept growing until compaction ~31; at 4,800
# it is full by ~25 and then flat (docs/fidelity.md).
# (the identifier block is part of the checkpoint's hard size budget; see ``track_identifiers``)
MAX_TRACKED: Final = 240
MAX_TRACKED_CHARS: Final = 4800

_BLOCK_RE: Final = re.compile(
    r"\n*<(" + "|".join(re.escape(t) for t in MACHINE_TAGS) + r")(?:\s[^>]*)?>.*?</\1>\n*",
    re.DOTALL,
)

OUTPUT_HEAD_CHARS: Final = 2500
OUTPUT_TAIL_CHARS: Final = 1500
OUTPUT_IDENTIFIERS: Final = 16  # per output: one output must not take over the working set
_ERROR_LINE_RE: Final = re.compile(r"(?m)^.*(?:Error|Exception|Traceback|FAILED|error:).*$")


_FRAME_RE: Final = re.compile(r'(?m)^[ \t]*File "[^"\n]*", line \d+.*\n?')
TRACEBACK_FRAMES: Final = 2


def _innermost_frames(text: str, keep: int = TRACEBACK_FRAMES) -> str:
    """``text`` with each traceback's stack frames cut to the innermost ``keep``: a 30-frame stack
    names 30 files, and only the frames nearest the error say where it happened."""
    frames = list(_FRAME_RE.finditer(text))
    if len(frames) <= keep:
        return text
    drop = frames[:-keep]
    out, pos = [], 0
    for m in drop:
        out.append(text[pos : m.start()])
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def output_identifiers(
    text: str,
    *,
    head_chars: int = OUTPUT_HEAD_CHARS,
    tail_chars: int = OUTPUT_TAIL_CHARS,
    max_count: int = OUTPUT_IDENTIFIERS,
) -> list[tuple[IdentifierClass, str]]:
    """Identifiers of a tool output: its head, its tail and its error lines, tail first.

    Why the tail: the end of an output is where results are (the run id and final metric of a
    training log, the error line of a traceback, the path a cell wrote). Why not everything: a
    24K-line log would flood the bounded working set; the whole output stays recallable instead.
    Order: the tail's identifiers from the end backwards, then the error lines' (last first), then
    the head's (first occurrence, no duplicates), at most ``max_count`` of them (a long output's
    tail gets 3/5 of them, its error lines and its head 1/5 each), and only the last
    value of each metric key (a log prints ``loss=…`` at every step; the final one is the result),
    so a caller that keeps only a few keeps the results.
    """
    if "Traceback (most recent call last)" in text:
        text = _innermost_frames(text)
    if len(text) <= head_chars + tail_chars:
        head, middle, tail = "", "", text  # short: read it all, from the end (results come last)
    else:
        head, middle, tail = text[:head_chars], text[head_chars:-tail_chars], text[-tail_chars:]
        tail = tail.split("\n", 1)[1] if "\n" in tail else tail  # whole lines only
    quick = ("Error", "Exception", "Traceback", "FAILED", "error:")
    errors = (
        "\n".join(m.group(0) for m in _ERROR_LINE_RE.finditer(middle))
        if middle and any(q in middle for q in quick)
        else ""
    )
    seen: dict[str, IdentifierClass] = {}
    metric_keys: set[str] = set()
    # shares of ``max_count``: most for the tail (results), some for error lines and the head
    shares = (
        (tail, True, max_count - 2 * (max_count // 5)),
        (errors, True, max_count // 5),
        (head, False, max_count // 5),
    )
    for part, backwards, share in shares:
        found = extract_identifiers(part) if part else []
        limit = len(seen) + share if head else max_count  # a short output is all tail
        for cls, value in reversed(found) if backwards else found:
            if len(seen) >= limit:
                break
            if cls == "metric":  # a log prints loss=… every step: keep the last value of each key
                key = value.split("=", 1)[0]
                if key in metric_keys:
                    continue
                metric_keys.add(key)
            seen.setdefault(value, cls)
    return [(cls, value) for value, cls in seen.items()]


RESULT_LINES: Final = 3


def _last_lines(text: str, count: int = RESULT_LINES) -> str:
    """The last ``count`` non-empty lines of ``text`` (read from the end; cheap on a long output)."""
    lines: list[str] = []
    end = len(text)
    while end > 0 and len(lines) < count:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end]
        if line.strip():
            lines.append(line)
        end = start - 1
    return "\n".join(reversed(lines))


def entry_identifiers(entry: Entry) -> list[Identifier]:
    """Identifiers worth tracking from one entry.

    User and assistant text and tool-call arguments count in full (metric pairs are not read from
    code, where ``x=1`` is an assignment); a tool output counts through ``output_identifiers``
    (head, tail and error lines), so a 24K-line log does not flood the tracked set while its
    result line still enters it.
    """
    msg = entry.message
    out: list[Identifier] = []
    if msg is None:
        return out
    role = msg.get("role")
    texts: list[str] = []
    codes: list[str] = []
    found: list[tuple[IdentifierClass, str]] = []
    if role in ("user", "assistant"):
        texts.append(text_of_content(msg.get("content")))
        for call in tool_calls_of(msg):
            args = call.get("arguments")
            if isinstance(args, Mapping):
                for key, value in args.items():
                    if isinstance(value, str):
                        (codes if key in CODE_KEYS else texts).append(value)
    results: set[str] = set()
    if role in ("toolResult", "bashExecution"):
        output = text_of_content(msg.get("content")) if role == "toolResult" else str(msg.get("output", ""))
        if role == "bashExecution":
            texts.append(str(msg.get("command", "")))
        found.extend(output_identifiers(output))
        results = {value for _cls, value in extract_identifiers(_last_lines(output))}
    sources: list[tuple[str, list[tuple[IdentifierClass, str]]]] = (
        [(output, found)] if role in ("toolResult", "bashExecution") else []
    )
    for text in texts:
        pairs = extract_identifiers(text)
        sources.append((text, pairs))
    for text, pairs in sources:
        out.extend(
            Identifier(
                value,
                cls,
                entry.id,
                result=value in results,
                subjects=(metric_subject(text, value),) if cls == "metric" else (),
            )
            for cls, value in pairs
        )
    for code in codes:
        out.extend(
            Identifier(value, cls, entry.id)
            for cls, value in extract_identifiers(code)
            if cls not in ("error", "metric")
        )
        out.extend(Identifier(name, "variable", entry.id) for name in variables_in_code(code))
    return out


# a bare number, not part of an id
_NUMBER: Final = re.compile(r"(?<![\w.-])[-+]?\d+(?:[.,:]\d+)*%?(?![\w-])")
MAX_SUBJECTS: Final = 3  # subjects kept per metric (an output line and the answer that repeats it)


def metric_subject(text: str, value: str) -> str:
    """What a metric pair measures: its key and the words before it on its (last) line, bare
    numbers left out ("rows after dedup: rows=41203" and "... rows=40877" share it, so do "epoch 12
    loss=…" and "epoch 13 loss=…"; "finished run-7f3a: auc=0.76" and "finished run-9c2e: auc=0.79"
    do not: an id is kept whole). A later value of the same subject
    replaces the earlier one in the working set."""
    at = text.rfind(value)
    start = text.rfind("\n", 0, at) + 1 if at >= 0 else 0
    before = " ".join(_NUMBER.sub("", text[start:at] if at >= 0 else "").lower().split())[-40:]
    section = section_of(text, start)
    return f"{section}{value.split('=', 1)[0]}|{before}"


_SECTION_HEADER: Final = re.compile(r"(?m)^\[([\w.\- ]{1,60})\][ \t]*$")


def section_of(text: str, at: int) -> str:
    """The ``[section]`` header a settings dump puts above position ``at`` ("staging." for a key
    under ``[staging]``), empty when none: a staging value is not production's."""
    head = text.rfind("\n[", 0, at)
    if head < 0 and not text.startswith("["):
        return ""
    m = _SECTION_HEADER.match(text, head + 1 if head >= 0 else 0)
    return f"{m.group(1).strip().lower()}." if m else ""


# one extra mention is worth this many entries of recency (capped), so a path named in many turns
# outlives a one-off id named once a little later
MENTION_WEIGHT: Final = 40
MENTION_CAP: Final = 4


# a result (printed on an output's last lines) is worth this many entries of recency: the end of
# an output is where results are, and a result is usually printed once
RESULT_WEIGHT: Final = 120


def relevance(ident: Identifier) -> int:
    """How much an identifier deserves a place in the bounded working set (higher = keep).

    Recency of the last mention, plus a capped bonus for being mentioned in several entries, plus
    a bonus for being a result.
    """
    return (
        ident.last
        + MENTION_WEIGHT * min(ident.mentions - 1, MENTION_CAP)
        + (RESULT_WEIGHT if ident.result else 0)
    )


# an identifier first named at position t can reach at most t + this much relevance
MAX_BONUS: Final = MENTION_WEIGHT * MENTION_CAP + RESULT_WEIGHT


def track_identifiers(
    previous: Sequence[Identifier],
    entries: Iterable[Entry],
    *,
    max_count: int = MAX_TRACKED,
    max_chars: int = MAX_TRACKED_CHARS,
    replaced: list[tuple[str, str]] | None = None,
) -> list[Identifier]:
    """Carry the tracked set forward: previous identifiers plus those in ``entries``.

    Each entry advances a position counter (continuing from the previous set's newest ``last``); an
    identifier seen again gets the new position and one more mention; a metric seen with a new
    value of its subject (``metric_subject``) replaces the earlier value, which leaves the set
    (the log keeps it). When the set is over ``max_count`` identifiers or ``max_chars``
    characters (+3 per item for its line), the least relevant leave first (``relevance``: recency,
    then mentions; ties: older first). Identifiers of the newest entries therefore always stay, and
    the set, and the guard block built from it, reaches a fixed size instead of growing with the
    session. The result is ordered by last mention, oldest first (deterministic). ``replaced``, when
    given, receives (earlier value, later value) for each metric value replaced, in order.

    Linear, and bounded by what can matter: entries are read newest first, and reading stops once
    ``max_count`` identifiers (fitting ``max_chars``), or identifiers filling ``max_chars`` to
    within ``FILL_SLACK``, were named more than ``MAX_BONUS`` positions after the next older entry:
    nothing first named there could outrank them. The fold then runs
    over the entries read, at their own positions; mentions are counted in the entries read. A
    200,000-entry span reads a few thousand entries; a span shorter than ``MAX_BONUS`` entries is
    read whole.
    """
    span = entries if isinstance(entries, Sequence) else list(entries)
    tick0 = max((ident.last for ident in previous), default=0)
    read: list[list[Identifier]] = []  # newest first
    # (position of first sighting walking back, cost), decreasing positions
    newest: list[tuple[int, int]] = []
    seen_keys: set[str] = set()
    strong = 0  # leading items of ``newest`` that no older entry can outrank
    strong_chars = 0  # their cost
    first = 0
    for k in range(len(span) - 1, -1, -1):
        idents = entry_identifiers(span[k])
        read.append(idents)
        for ident in idents:
            key = ident.subjects[0] if ident.subjects else ident.text
            if key not in seen_keys:
                seen_keys.add(key)
                newest.append((tick0 + k + 1, len(ident.text) + 3))
        bound = tick0 + k + MAX_BONUS  # the best an identifier first named before entry k can reach
        while strong < len(newest) and newest[strong][0] > bound:
            strong_chars += newest[strong][1]
            strong += 1
        could_fill = strong >= max_count or strong_chars > max_chars - FILL_SLACK
        if could_fill and k % 64 == 0 and _fills(newest[:strong], max_count, max_chars):
            first = k
            break
    order: dict[str, Identifier] = {ident.text: ident for ident in previous}
    subjects: dict[str, str] = {subject: ident.text for ident in previous for subject in ident.subjects}
    tick = tick0 + first
    for idents in reversed(read):
        tick += 1
        seen: set[str] = set()
        for ident in idents:
            if ident.text in seen:
                continue
            seen.add(ident.text)
            old = order.pop(ident.text, None)
            for subject in ident.subjects:
                earlier = subjects.get(subject)
                if earlier is not None and earlier != ident.text:
                    order.pop(earlier, None)  # a new value of the same quantity
                    if replaced is not None and (earlier, ident.text) not in replaced:
                        replaced.append((earlier, ident.text))
                subjects[subject] = ident.text
            mentions = 1 if old is None else old.mentions + 1
            order[ident.text] = Identifier(
                ident.text,
                ident.cls,
                ident.entry_id,
                mentions,
                tick,
                ident.result or (old is not None and old.result),
                tuple(dict.fromkeys((*(old.subjects if old else ()), *ident.subjects)))[-MAX_SUBJECTS:],
            )
    items = list(order.values())  # insertion order = last mention, oldest first
    rank = sorted(range(len(items)), key=lambda i: (relevance(items[i]), i), reverse=True)
    keep: set[int] = set()
    chars = 0
    for i in rank:
        cost = len(items[i].text) + 3
        if len(keep) >= max_count:
            break
        if chars + cost > max_chars:
            continue  # a long one that does not fit; shorter, less relevant ones still may
        keep.add(i)
        chars += cost
    return [item for i, item in enumerate(items) if i in keep]


# room left in the character budget below which reading older entries stops: what could still
# fit there is a short string older than every one kept (the newest entries' strings fill the set)
FILL_SLACK: Final = 48


def _fills(candidates: Sequence[tuple[int, int]], max_count: int, max_chars: int) -> bool:
    """Whether ``candidates`` (newest first, with their cost) fill the working set when taken in
    that order, skipping what does not fit (as it is filled): ``max_count`` of them fit, or they
    leave less than ``FILL_SLACK`` characters (long identifiers: the characters bind first)."""
    count = chars = 0
    for _tick, cost in candidates:
        if chars + cost <= max_chars:
            count += 1
            chars += cost
            if count >= max_count or chars > max_chars - FILL_SLACK:
                return True
    return False


def strip_machine_blocks(text: str) -> str:
    """The summary without its machine blocks: what may go back to a model as previous summary."""
    return _BLOCK_RE.sub("\n\n", text).strip()


def render_block(tag: str, lines: Iterable[str], *, attrs: Mapping[str, str] | None = None) -> str:
    """A machine block; empty string when there are no lines."""
    if tag not in MACHINE_TAGS:
        raise ValueError(f"unknown machine block tag {tag!r}; known: {', '.join(MACHINE_TAGS)}")
    body = [line for line in lines if line]
    if not body:
        return ""
    attr_text = "".join(f' {k}="{v}"' for k, v in (attrs or {}).items())
    return f"<{tag}{attr_text}>\n" + "\n".join(body) + f"\n</{tag}>"


@dataclass(frozen=True)
class GuardReport:
    """What the guard checked and what it had to append."""

    checked: int
    missing: tuple[str, ...]

    @property
    def appended(self) -> int:
        return len(self.missing)

    def to_json(self) -> dict[str, Any]:
        return {"checked": self.checked, "missing": list(self.missing), "appended": self.appended}


def missing_strings(checkpoint: str, required: Iterable[str]) -> list[str]:
    """Each required string not present verbatim in ``checkpoint`` (order kept, no duplicates)."""
    out: list[str] = []
    seen: set[str] = set()
    for item in required:
        if item and item not in seen and item not in checkpoint:
            out.append(item)
        seen.add(item)
    return out


def apply_guard(checkpoint: str, required: Sequence[str]) -> tuple[str, GuardReport]:
    """Append a ``<drift-guard>`` block with every required string missing from ``checkpoint``.

    Required strings are appended as they are, one per line; anchors normally live in the
    ``<anchors>`` block, so in practice the missing items are identifiers the narrative dropped.
    """
    missing = missing_strings(checkpoint, required)
    unique = len({r for r in required if r})
    if not missing:
        return checkpoint, GuardReport(unique, ())
    block = render_block("drift-guard", missing, attrs={"note": "exact strings the summary dropped"})
    return f"{checkpoint.rstrip()}\n\n{block}", GuardReport(unique, tuple(missing))
