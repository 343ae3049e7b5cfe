"""The offline extractive summarizer: a deterministic checkpoint without a model.

Why: compaction must work on a fresh machine with no network and no key, and tests and benchmarks
need a summarizer whose output is a function of its input. This one picks sentences from the raw
messages by simple, documented rules and writes them into the same section structure the model
prompts ask for, so everything downstream (drift guard, section validation, the panel) treats both
summarizers alike.

Rules (per span, in log order):
- Goal: the newest user message that says it is the goal ("Our goal is ...", "Goal: ..."),
  else the first user request (kept from the previous checkpoint once known); a redefined goal
  says what it replaced.
- Constraints & Preferences: user sentences with a constraint/preference marker (``core.anchors``).
- Progress: requests go through ``core.requests`` (open / deferred / done / dropped): one Done line
  per finished request (the request, then ``→`` the outcome the assistant reported for it), open
  and deferred requests In Progress with their entry id (a deferred one with the sentence that put
  it off), errors not followed by a success Blocked. Done keeps the newest ``CAPS["Done"]`` lines
  and counts the older ones in one line; an outcome a newer Done line replaces leaves the older one.
- Key Decisions: assistant sentences that choose or explain ("I'll use X because Y", "decided",
  "switching to", "instead of", "root cause") and user sentences that decide ("let's switch to",
  "from now on"); the newest statement of a subject only (``core.facts``), marked with what it
  replaced.
- Next Steps: the newest assistant intent ("next I will", "then", "I'll", "plan to", ...), replacing
  older ones (plans go stale); each sentence once; a step that a request finished after it carried
  out leaves (``_settled``).
- Critical Context: assistant sentences matching the focus text (by stem) that no Done line says,
  pointers to externalized outputs.
- Anchors: when the caller says which texts the checkpoint already carries verbatim (``anchors``),
  sections do not repeat them: Goal and anchored constraints become one reference line, and
  anchored constraint sentences are cut from request lines. Texts the caller says were
  superseded (``superseded``) are stated by no section.

What must hold:
- Deterministic: same entries, previous summary, focus and budget → byte-identical text.
- Rolling: items of the previous checkpoint are kept (bounded per section, newest win; Done lines
  that leave are added to the count line, never silently dropped), In Progress items and a split
  turn's Original Request that became Done move.
- One line per finished request: the assistant's own "done" sentences are the outcome of a request,
  never lines of their own.
- Hard budget: ``len(result) <= max_chars`` always.
- Fast: linear in the span's text (a 1,000-entry span well under a second; 200,000 entries in a few
  seconds: only the lines a checkpoint can show are put in their line form).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from ipython_compact.core import stance
from ipython_compact.core.entries import Entry, entry_text, text_of_content, tool_calls_of
from ipython_compact.core.facts import (
    SENTENCE_RE,
    clip_sentences,
    dedupe_sentences,
    mark_revised,
    newest_current,
    replaced_note,
    replaced_texts,
    supersedes,
    without_note,
)
from ipython_compact.core.history_marks import not_adopted_mark, replaced_mark
from ipython_compact.core.ledger_records import NOT_ANSWERS
from ipython_compact.core.requests import RequestBook, RequestRecord
from ipython_compact.core.summary_sections import (
    _DECISION,
    _DECISION_HINTS,
    _DONE,
    _EARLIER_DONE,
    _EARLIER_OPEN,
    _ERROR,
    _NEXT,
    _NEXT_HINTS,
    _POINTER,
    ANCHORED_GOAL,
    ANCHORED_REQUEST,
    ANCHORED_REST,
    CAPS,
    DONE_WINDOW,
    GOAL_CHARS,
    OLDER_OPEN_IDS,
    OUTCOME_CHARS,
    RAW_REQUEST_CHARS,
    REQUEST_CHARS,
    SHRINK_ORDER,
    SummaryKind,
    _blocks,
    _clip,
    _describe,
    _in_log_order,
    _merge,
    _pointer_item,
    _render,
    _sentences,
    parse_checkpoint,
    user_decisions,
)
from ipython_compact.core.summary_sections import (
    missing_sections as missing_sections,
)
from ipython_compact.core.summary_sections import (
    repair_sections as repair_sections,
)
from ipython_compact.core.user_statements import constraint_spans, is_goal_statement, is_request


def _norm(text: str) -> str:
    return " ".join(text.split())


class _Anchored:
    """Which texts the checkpoint already carries verbatim (whitespace-insensitive containment)."""

    def __init__(self, anchors: Sequence[str]) -> None:
        self.blob = "\n".join(_norm(a) for a in anchors if a.strip())
        self.goal = _norm(anchors[0]) if anchors else ""  # the goal comes first when there is one

    def __bool__(self) -> bool:
        return bool(self.blob)

    def has(self, text: str) -> bool:
        core = _norm(text).removesuffix("…").rstrip()
        return bool(self.blob) and bool(core) and core in self.blob

    def is_goal(self, text: str) -> bool:
        """Whether ``text`` is (contained in) the first anchor, the goal."""
        core = _norm(text).removesuffix("…").rstrip()
        return bool(core) and core in self.goal

    def strip_from(self, text: str) -> str:
        """``text`` without its constraint sentences that are anchored (the rest as written)."""
        if not self.blob:
            return text
        cut = [(s, e) for s, e in constraint_spans(text) if self.has(text[s:e])]
        if not cut:
            return text
        out, pos = [], 0
        for s, e in cut:
            out.append(text[pos:s])
            pos = e
        out.append(text[pos:])
        return "".join(out)


def _request_line(text: str, anchored: _Anchored) -> str:
    if anchored.is_goal(text):
        return "the goal request (verbatim in <anchors>)"
    text = dedupe_sentences(_describe(text))
    return clip_sentences(anchored.strip_from(text), REQUEST_CHARS) or clip_sentences(text, REQUEST_CHARS)


# an In Progress line: the request, its state when deferred, and its entry id (parsed back when rolling)
_OPEN_LINE: Final = re.compile(
    r"^(?P<text>.*?)(?: — deferred: (?P<why>.*?))?(?: \(entry "
    r"(?P<id>[^()\s]+)\))?$"
)


def _open_line(r: RequestRecord) -> str:
    why = f" — deferred: {clip_sentences(r.note, OUTCOME_CHARS)}" if r.status == "deferred" else ""
    where = f" (entry {r.entry_id})" if r.entry_id else ""
    return f"{r.text}{why}{where}"


def _open_records(lines: Sequence[str]) -> list[RequestRecord]:
    out: list[RequestRecord] = []
    for line in lines:
        if _EARLIER_OPEN.match(line):  # older ones shown by id only: they stay open, by id
            ids = re.search(r"entries ([^;)]+)", line)
            out.extend(
                RequestRecord(i.strip(), f"(the request of entry {i.strip()}; recall by id)", "open")
                for i in (ids.group(1).split(",") if ids else ())
            )
            continue
        m = _OPEN_LINE.match(line)
        assert m is not None  # every group is optional
        out.append(
            RequestRecord(
                m.group("id") or "",
                m.group("text"),
                "deferred" if m.group("why") else "open",
                m.group("why") or "",
            )
        )
    return out


def _extract(
    entries: Sequence[Entry],
    focus: str | None,
    open_before: Sequence[RequestRecord] = (),
    anchored: _Anchored | None = None,
    steps_before: Sequence[str] = (),
) -> dict[str, list[str]]:
    """Items found in the span, per section. ``open_before`` are the requests still open or
    deferred from the previous checkpoint: they go on through the same state machine
    (``core.requests``) as the span's own. "Goal" holds the newest goal statement of the span
    (the first request when none says it is the goal). "Next Steps" holds the newest intents
    stated (``steps_before``, the previous checkpoint's, when the span states none) less those a
    request finished after them settles (``_settled``)."""
    anchored = anchored or _Anchored(())
    out: dict[str, list[str]] = {
        name: []
        for name in (
            "Goal",
            "Goal statement",
            "First request entry",
            "Constraints & Preferences",
            "Done",
            "Done earlier",
            "Open older",
            "In Progress",
            "Blocked",
            "Key Decisions",
            "Next Steps",
            "Settled steps",
            "Settled by",
            "Critical Context",
        )
    }
    focus_words = _stems(focus or "")  # a focus word matches by its stem ("means" finds "the mean is 30.0")
    book = RequestBook(open_before)
    done_events: list[tuple[RequestRecord, str]] = []  # (request done, its outcome line or "")
    outcome: str | None = None  # what the assistant last reported as finished for the open requests
    pending_errors: dict[str, str] = {}  # tool name -> error line
    next_steps: list[str] = list(steps_before)[-CAPS["Next Steps"] :]  # a model's list can be long
    steps_from = 0  # the done events after the newest intents were stated
    call_tools: dict[str, str] = {}
    for entry in entries:
        msg = entry.message
        if msg is None:
            text = entry_text(entry)
            if "[entry " in text:
                out["Critical Context"].extend(m.group(0) for m in _POINTER.finditer(text))
            continue
        role = msg.get("role")
        text = text_of_content(msg.get("content")) if role != "bashExecution" else str(msg.get("output", ""))
        if role == "user":
            if not text.strip():
                continue
            stated = is_goal_statement(text)
            if (not out["Goal"] or stated) and is_request(text):
                if not out["Goal"]:
                    out["First request entry"] = [entry.id]
                out["Goal statement" if stated else "Goal"] = [
                    clip_sentences(dedupe_sentences(_describe(text)), GOAL_CHARS)
                ]
                out["Goal"] = out["Goal"] or out["Goal statement"]
            full = entry_text(entry)
            out["Constraints & Preferences"].extend(  # a value it names as not adopted is marked
                _clip(full[s:e]) + not_adopted_mark(full[s:e]) for s, e in constraint_spans(full)
            )
            out["Key Decisions"].extend(
                f"(user) {_clip(s)}{replaced_mark(s)}" for s in user_decisions(text) if not anchored.has(s)
            )  # an anchored rule is stated verbatim in <anchors>
            book.user(entry.id, text, text[:RAW_REQUEST_CHARS])  # put in its line form at the end, if shown
        elif role == "assistant":
            calls = tool_calls_of(msg)
            for call in calls:
                call_tools[str(call.get("id") or "")] = str(call.get("name", ""))
            fresh_next: list[str] = []
            reported: list[str] = []
            low = text.lower()
            may_decide = any(h in low for h in _DECISION_HINTS)
            may_plan = any(h in low for h in _NEXT_HINTS)
            for kind, line in _blocks(text):
                if kind == "code":
                    if line:
                        reported.append(line)
                    continue
                if kind == "heading":
                    continue  # a heading names a part of the answer; it decides nothing
                for m in SENTENCE_RE.finditer(line):
                    sentence = m.group(0).rstrip()
                    if sentence.endswith("?"):
                        continue
                    if sentence.endswith(":"):  # introduces what follows (code, a list)
                        if may_plan and _NEXT.search(sentence):
                            fresh_next.append(_clip(sentence[:-1].rstrip() + "."))
                        continue
                    if (
                        may_decide
                        and _DECISION.search(sentence)
                        and len(sentence.split()) >= 4
                        and stance.own_decision(sentence, "assistant")  # a proposal decides nothing yet
                    ):
                        out["Key Decisions"].append(_clip(sentence))
                    elif may_plan and _NEXT.search(sentence):
                        fresh_next.append(_clip(sentence))
                    else:
                        reported.append(sentence)
            if fresh_next:
                next_steps = list(dict.fromkeys(fresh_next))  # a sentence said eight times is one step
            # ``is_answer``
            final = not calls and bool(text.strip()) and msg.get("stopReason") not in NOT_ANSWERS
            # the outcome: the final answer's report, else the last completion reported mid-turn
            progress = reported if final else [r for r in reported if _DONE.search(r)]
            if progress:
                outcome = dedupe_sentences(" ".join(progress))
            if final:
                changed = book.answer(text, outcome or "")
                turn = [
                    after for before, after in changed if before.status == "open" and after.status == "done"
                ]
                later = [after for before, after in changed if before.status == "deferred"]
                # the turn's requests: the outcome once, on the last line; a deferred one: what finished it
                done_events.extend((r, r.note if i == len(turn) - 1 else "") for i, r in enumerate(turn))
                done_events.extend((r, r.note) for r in later)
                outcome = None
            if fresh_next:  # what this answer finished is not what it plans next
                steps_from = len(done_events)
        elif role in ("toolResult", "bashExecution"):
            tool = call_tools.get(str(msg.get("toolCallId") or ""), str(msg.get("toolName") or "bash"))
            failed = bool(msg.get("isError")) or (
                role == "bashExecution" and msg.get("exitCode") not in (0, None)
            )
            if failed or "Traceback (most recent call last)" in text:
                errors = _ERROR.findall(text)
                line = errors[-1] if errors else next((ln for ln in text.splitlines() if ln.strip()), "error")
                pending_errors[tool] = _clip(f"{tool}: {line.strip()}")
            else:
                pending_errors.pop(tool, None)
            if "[entry " in text:
                out["Critical Context"].extend(_pointer_item(text, m, tool) for m in _POINTER.finditer(text))
        # what was found and decided; the user's requests are Progress lines
        if focus_words and role == "assistant":
            for sentence in _sentences(text):
                low = sentence.lower()
                if any(w in low for w in focus_words):
                    out["Critical Context"].append(_clip(sentence))
    # only the lines a checkpoint can show are put in their line form (a 200,000-entry span has tens
    # of thousands of requests): the newest Done lines and open requests; the rest are counted
    records = book.records()

    def formatted(r: RequestRecord) -> RequestRecord:
        return RequestRecord(r.entry_id, _request_line(r.text, anchored), r.status, r.note)

    # a request answered twice: once
    events = list(dict.fromkeys((r.entry_id, r.text, note) for r, note in done_events))
    shown = events[-DONE_WINDOW:]
    out["Done earlier"] = [str(len(events) - len(shown))]
    for _entry_id, text, note in shown:
        request = _request_line(text, anchored)
        line = f"{request} → {clip_sentences(note, OUTCOME_CHARS)}" if note else request
        out["Done"].append(line + replaced_mark(line))  # a value it names only to drop is history
    out["Done"].extend(f"(withdrawn) {formatted(r).text}" for r in records if r.status == "dropped")
    pending = [r for r in records if r.status in ("open", "deferred")]
    newest = pending[-CAPS["In Progress"] :]
    out["Open older"] = [r.entry_id for r in pending[: len(pending) - len(newest)]]
    out["In Progress"] = list(dict.fromkeys(_open_line(formatted(r)) for r in newest))
    out["Blocked"] = list(pending_errors.values())
    settled = _settled(next_steps, done_events[steps_from:])
    out["Next Steps"] = [step for step in next_steps if step not in settled]
    out["Settled steps"] = list(settled)
    out["Settled by"] = [clip_sentences(dedupe_sentences(r), REQUEST_CHARS) for r in settled.values()]
    return out


def _stems(text: str, skip: frozenset[str] = frozenset()) -> list[str]:
    """The distinct words of 4+ letters of ``text`` (lower-cased, less ``skip``), each cut to its
    stem so that a form of it matches by substring ("plot" finds "plotted", "means" finds "mean")."""
    return list(
        dict.fromkeys(w[: max(4, len(w) - 2)] for w in re.findall(r"\w{4,}", text.lower()) if w not in skip)
    )


PLAN_STEMS: Final = 12  # the content words of a step that are compared (a model may write a long one)
# words of an intent that say nothing about what it is about
_PLAN_WORDS: Final = frozenset(
    (
        "next",
        "then",
        "will",
        "going",
        "plan",
        "need",
        "after",
        "that",
        "this",
        "these",
        "those",
        "with",
        "from",
        "into",
        "also",
        "first",
        "have",
        "want",
        "would",
        "should",
        "could",
        "them",
        "they",
        "their",
        "there",
        "here",
        "once",
        "done",
        "step",
        "steps",
    )
)


def _settled(steps: Sequence[str], done: Sequence[tuple[RequestRecord, str]]) -> dict[str, str]:
    """The steps a finished request (in ``done``, with its outcome, in log order) did → that
    request's text: at least two thirds of a step's content words, each by its stem ("plot" finds
    "plotted"), appear in the request and its outcome. Why: a plan the next turns carried out is
    stale ("Next I will plot it." after the plot was made), and Next Steps must say what is still
    to do. One pass over ``done``, each text lower-cased once: linear in the span."""
    wanted: dict[str, tuple[list[str], int]] = {}
    for step in steps:
        stems = _stems(step, _PLAN_WORDS)[:PLAN_STEMS]
        if stems:
            wanted[step] = (stems, -(-2 * len(stems) // 3))
    out: dict[str, str] = {}
    for record, note in done if wanted else ():
        low = f"{record.text} {note}".lower()
        for step, (stems, need) in list(wanted.items()):
            if sum(stem in low for stem in stems) >= need:
                out[step] = record.text
                del wanted[step]
        if not wanted:
            break
    return out


def superseded_by(entries: Sequence[Entry], previous_summary: str) -> list[tuple[str, str]]:
    """(earlier, later): the previous checkpoint's decisions and constraints that a statement of
    ``entries`` replaces (``core.facts.supersedes``), and the planned next steps (the previous
    checkpoint's or the span's) that a request finished after them carried out ("done: the
    request"), for a summarizer that rewrites the checkpoint itself (a model is told so in its
    update prompt)."""
    prev = parse_checkpoint(previous_summary)
    old = [
        without_note(i).removeprefix("(user) ")
        for i in (*prev.get("Key Decisions", []), *prev.get("Constraints & Preferences", []))
    ]
    steps = prev.get("Next Steps", [])
    if not old and not steps:
        return []
    found = _extract(entries, None, steps_before=steps)
    pairs = [
        (step, f"done: {by}") for step, by in zip(found["Settled steps"], found["Settled by"], strict=True)
    ]
    new = [
        without_note(i).removeprefix("(user) ")
        for i in (*found["Key Decisions"], *found["Constraints & Preferences"])
    ][-200:]  # bounded: linear in the span
    for earlier in old:
        later = next((n for n in reversed(new) if supersedes(n, earlier, loose="strict")), None)
        if later is not None:
            pairs.append((earlier, later))
    return pairs


def _fit(
    kind: SummaryKind, sections: dict[str, list[str]], max_chars: int, refs: Mapping[str, str] | None = None
) -> str:
    text = _render(kind, sections, refs)
    guard = 0
    while len(text) > max_chars and guard < 10000:
        guard += 1
        for name in SHRINK_ORDER:
            items = sections.get(name)
            if not items:
                continue
            m = _EARLIER_DONE.match(items[0]) if name == "Done" else None
            if m is None:
                items.pop(0)
            elif len(items) > 1:  # fold the oldest listed line into the count
                items[:2] = [
                    f"({int(m.group(1)) + 1} earlier finished request(s) not listed; the log has them)"
                ]
            else:
                items.pop(0)
            break
        else:
            break
        text = _render(kind, sections, refs)
    if len(text) > max_chars:
        text = text[: max(0, max_chars - 1)] + "…" if max_chars > 0 else ""
    return text


def _roll_done(previous: Sequence[str], found: Sequence[str], cap: int, found_earlier: int = 0) -> list[str]:
    """Done lines in log order, newest ``cap`` kept; the ones that leave (and ``found_earlier``,
    the span's older ones that were only counted, and the older requests of a line said again
    later) are counted in a first line, so listed plus counted is every finished request. An
    outcome sentence that a newer kept line's outcome replaces ("the best run is run-17" / "the
    best run is now run-23") leaves the older line; the newer line says what it replaced."""
    earlier = found_earlier
    items: list[str] = []
    for item in previous:
        m = _EARLIER_DONE.match(item)
        if m:
            earlier += int(m.group(1))
        else:
            items.append(item)
    merged = _in_log_order([*items, *found])
    keep = merged[-cap:] if cap > 0 else []
    # every finished request is listed or counted: a repeated line's older requests are counted
    earlier += len(items) + len(found) - len(keep)
    head = [f"({earlier} earlier finished request(s) not listed; the log has them)"] if earlier else []
    return head + _current_outcomes(keep)


def _current_outcomes(lines: Sequence[str]) -> list[str]:
    out = list(lines)
    newer: list[tuple[int, str]] = []  # (line index, outcome sentence) of lines already walked, newest first
    for i in range(len(out) - 1, -1, -1):
        request, sep, outcome = out[i].partition(" → ")
        if not sep:
            continue
        sentences = [m.group(0).strip() for m in SENTENCE_RE.finditer(without_note(outcome))]
        kept = []
        for sentence in sentences:
            by = next((j for j, s in newer if supersedes(s, sentence, values_only=True)), None)
            if by is None:
                kept.append(sentence)
            elif " — replaced: " not in out[by]:
                out[by] += replaced_note(sentence)
        if len(kept) < len(sentences):
            out[i] = (
                f"{request} → {' '.join(kept)}"
                if kept
                else (f"{request} (its result was replaced by a later one)")
            )
        newer.extend((i, s) for s in kept)
    return out


def offline_summary(
    entries: Sequence[Entry],
    *,
    previous_summary: str | None = None,
    focus: str | None = None,
    max_chars: int = 12000,
    kind: SummaryKind = "history",
    anchors: Sequence[str] = (),
    superseded: Sequence[str] = (),
) -> str:
    """The checkpoint for ``entries`` (folded into ``previous_summary`` when given).

    ``previous_summary`` must already be stripped of machine blocks (``core.drift``); for
    ``kind="turn_prefix"`` it is ignored (a turn prefix stands alone, as with the model prompts).
    ``anchors`` are texts the checkpoint carries verbatim in its ``<anchors>`` block; the sections
    refer to them instead of repeating them (empty: the sections state goal and constraints).
    ``superseded`` are texts that later statements replaced (a revised constraint, the earlier
    goal): no section states them as current.
    """
    anchored = _Anchored(anchors)
    gone = _Anchored(superseded)
    prev = parse_checkpoint(previous_summary or "") if kind != "turn_prefix" else {}
    # requests still open or deferred; a split turn's request (summarized last time as the turn prefix) is
    # open
    open_before = _open_records(prev.get("In Progress", [])) + [
        RequestRecord(r.entry_id, _request_line(r.text, anchored), "open")
        for r in _open_records(prev.get("Original Request", [])[:1])
    ]
    found = _extract(entries, focus, open_before, anchored, prev.get("Next Steps", []))
    if kind == "turn_prefix":
        original = found["Goal"][:1]
        within = _Anchored(original)  # the request is shown whole: do not repeat its parts
        if original and anchored.has(original[0]):
            original = [ANCHORED_REQUEST]
        elif original and found["First request entry"]:  # its recall id, carried when it stays open
            original = [f"{original[0]} (entry {found['First request entry'][0]})"]
        in_progress = [r for r in found["In Progress"] if not within.has(_OPEN_LINE.match(r).group("text"))]  # type: ignore[union-attr]
        sections = {
            "Original Request": original,
            "Early Progress": (
                found["Done"]
                + [f"(in progress) {r}" for r in in_progress]
                + [f"(blocked) {b}" for b in found["Blocked"]]
            )[-CAPS["Early Progress"] :],
            "Context for Suffix": (
                [c for c in found["Constraints & Preferences"] if not within.has(without_note(c))]
                + found["Key Decisions"]
                + found["Next Steps"]
                + found["Critical Context"]
            )[-CAPS["Context for Suffix"] :],
        }
        return _fit(kind, sections, max_chars)
    # the goal: a span's goal statement replaces the earlier goal; else the earlier goal stays
    goal = prev.get("Goal", [])[:3] or found["Goal"]
    if found["Goal statement"]:
        old = [
            without_note(g) for g in prev.get("Goal", []) if without_note(g) != found["Goal statement"][0]
        ][:1]
        goal = [found["Goal statement"][0] + (replaced_note(old[0]) if old else "")]

    def current(items: Sequence[str], cap: int) -> list[str]:
        return newest_current(
            [i for i in items if not gone.has(without_note(i).removeprefix("(user) "))], cap
        )

    constraints = current(
        [*prev.get("Constraints & Preferences", []), *found["Constraints & Preferences"]],
        CAPS["Constraints & Preferences"],
    )
    refs: dict[str, str] = {}
    if anchored:
        goal_was_anchored = (
            previous_summary is not None and ANCHORED_GOAL in previous_summary and not prev.get("Goal")
        )
        if goal_was_anchored or not goal or all(anchored.has(without_note(g)) for g in goal):
            goal, refs["Goal"] = [], ANCHORED_GOAL
        if any(anchored.has(without_note(c)) for c in constraints):
            constraints = [c for c in constraints if not anchored.has(without_note(c))]
            refs["Constraints & Preferences"] = (
                ANCHORED_REST if constraints else ANCHORED_REST.replace("other ", "")
            )
    pending = found["In Progress"]
    older_ids = found["Open older"]
    if older_ids:  # the newest in full, one line for the older ones (the newest of their ids)
        pending = pending[1:]
        first = _OPEN_LINE.match(found["In Progress"][0])
        older_ids = [*older_ids, (first.group("id") or "") if first else ""]
        ids = [i for i in older_ids if i][-OLDER_OPEN_IDS:]
        listed = f": entries {', '.join(ids)}; recall by id" if ids else "; the log has them"
        pending = [f"({len(older_ids)} older open or deferred request(s){listed})", *pending]
    done = _roll_done(prev.get("Done", []), found["Done"], CAPS["Done"], int(found["Done earlier"][0]))
    said = "\n".join(done)  # a focus sentence that a Done line already says is not repeated
    merged = {
        "Goal": goal,
        "Constraints & Preferences": constraints,
        "Done": done,
        "In Progress": pending,
        "Blocked": _merge([], found["Blocked"], CAPS["Blocked"])
        if entries
        else prev.get("Blocked", [])[-CAPS["Blocked"] :],
        "Key Decisions": current(
            [*prev.get("Key Decisions", []), *found["Key Decisions"]], CAPS["Key Decisions"]
        ),
        "Next Steps": found["Next Steps"][-CAPS["Next Steps"] :],
        "Critical Context": _merge(
            [],
            [c for c in (*prev.get("Critical Context", []), *found["Critical Context"]) if c not in said],
            CAPS["Critical Context"],
        ),
    }
    # a line that states what a later decision replaced is history: marked, never current
    revised = [*superseded, *replaced_texts([*merged["Key Decisions"], *merged["Constraints & Preferences"]])]
    for name in ("Goal", "Done", "In Progress", "Next Steps"):
        merged[name] = mark_revised(merged[name], revised)
    return _fit(kind, merged, max_chars, refs)
