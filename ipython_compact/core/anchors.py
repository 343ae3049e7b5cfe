"""ANCHOR layer: the goal, user constraints and preferences, and pinned spans, copied verbatim.

Why: task invariants are short, sit near the start, and must not change by a single character.
Passing them through a summary of a summary is how "Use CUDA 12.4" becomes "use a recent CUDA".
So an anchor is stored as a *reference* into the raw log — entry id plus character span — and its
text is re-copied from that raw entry at every compaction (``resolve_anchors``), never taken from
the previous checkpoint.

What must hold:
- ``Anchor.text == entry_text(raw_entry)[start:end]`` for every anchor with an entry id.
- The goal is the user's goal: the newest user message that says what the goal is ("our goal is
  ...", "Goal: ...", ``is_goal_statement``), else the first user request on the path (a bare
  ``/command`` is not a request); later compactions re-copy it. A per-step request never is.
- Constraint sentences are user statements (not questions, not reports of a bug, not pasted
  text) with a constraint or preference marker, in log order, without duplicates. Precision and
  recall are measured on labelled user messages by ``bench/bench_fidelity_anchors.py``.
- Anchors are verbatim while they stand, not forever: a later user sentence that revises one
  (``core.facts.supersedes``: it names what it replaces, or says the same with one value changed)
  takes its place, and the old one moves to ``superseded`` (``replaced_by`` names the new one);
  the block shows it only as a same-line history mark of the new one. A user *decision* that
  revises a constraint ("Let's switch to DuckDB instead of Postgres.", ``decision_spans``) takes
  its place the same way, though it has no constraint marker. A redefined goal likewise.
- Pins: a ``pin`` entry pins its ``text`` (its own entry is the raw source) or another entry; an
  ``unpin`` with the same ``pin_id`` (or the same text/entry id) removes it.
- Pure: no I/O; the caller passes the raw entries the references need.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, ParamSpec, TypeVar

from ipython_compact.core import stance
from ipython_compact.core.drift import render_block
from ipython_compact.core.entries import PIN, Entry, entry_text, text_of_content
from ipython_compact.core.facts import OLD_CHARS, SENTENCE_RE, clip_sentences, dedupe_sentences, supersedes
from ipython_compact.core.stance import replaced_mark, revises_newest

AnchorKind = Literal["goal", "constraint", "pin"]

GOAL_MAX_CHARS: Final = 2000
CONSTRAINT_MAX_CHARS: Final = 400
PIN_MAX_CHARS: Final = 4000
MAX_SUPERSEDED: Final = 8  # superseded anchors kept (for the same-line history mark), newest last

_CONSTRAINT_RE: Final = re.compile(
    r"(?i)\b(must|must not|mustn't|never|always|avoid|only use|use only|prefer|preferably|"
    r"should not|shouldn't|make sure|ensure|required?|requirement|constraint|no more than|at most|at least|"
    r"keep (?:it|the|all|every)|stick to|only want|from now on|(?:should|must) stay|without using|not "
    r"allowed|forbidden|please use|use exactly|pin(?:ned)? to|exactly|decimals?|each time|every time)\b"
    # a prohibition, not "i don't think"
    r"|(?:^|[,;:(]\s*|\b(?:and|but|so|please|just|also|then)\s+)(?:do not|don't|dont)\b"
    r"|^(?:please )?use [\w.=-]+(?: [\w.=-]+){0,3},? (?:not|instead of|rather than)\b"
    # "use rgb values in the themes, no rgb indices"
    r"|(?<!\bi )(?<!\bwe )(?<!\byou )(?<!\bthey )\buse\b[^.!?]{1,60},\s*(?:no|not)\s+\w"
    r"|^no (?!need\b|idea\b|problem\b|worries\b)\w+(?: \w+){0,3}[.!]*$"  # "no console logs!"
    r"|必须|不要|务必|禁止|只能|保持"
)
# a report of what happened or what seems wrong is not a rule, even when it says "should never"
_REPORT_RE: Final = re.compile(
    r"(?i)\b(?:i (?:do not|don'?t) (?:think|tink|know|understand|see)|i "
    r"(?:think|guess|noticed|selected|saw)\b.*\b(?:doesn'?t|isn'?t|does not|is not|wasn'?t|got)\b|"
    r"got a crash|crashed|looked odd|(?:doesn'?t|does not|isn'?t|is not) work(?:ing)?|works? correctly|"
    r"never ?mind)"  # a withdrawal ("never mind the PDF export") takes a request back; it sets no rule
)
# pasted material: JSON, error lines, stack frames; a numbered diff paste is skipped whole
_PASTED_LINE_RE: Final = re.compile(
    r'\{"|":\s*["{\[\d]|^\s*(?:[\w.]*(?:Error|Exception)\b|at \S+ \(|File '
    r'"|Traceback \(|[>$] )'
)
_DIFF_LINE_RE: Final = re.compile(r"^\s*[+-] ?\d+\b")
_PASTED_SENTENCE_RE: Final = re.compile(r"^(?:[\w.]*(?:Error|Exception)\b|Traceback\b)")


@dataclass(frozen=True)
class Anchor:
    """One verbatim anchor: its kind, text, and where in the raw log it came from."""

    kind: AnchorKind
    text: str
    entry_id: str | None
    start: int = 0
    end: int = 0
    pin_id: str | None = None
    replaced_by: str | None = None  # a superseded anchor: the ``key`` of the anchor that replaced it

    @property
    def key(self) -> str:
        """Where the anchor's text is in the log (entry id and start), or its pin id."""
        return f"{self.entry_id}:{self.start}" if self.entry_id else f"pin:{self.pin_id}"

    def to_json(self) -> dict[str, Any]:
        out = {
            "kind": self.kind,
            "text": self.text,
            "entry_id": self.entry_id,
            "start": self.start,
            "end": self.end,
            "pin_id": self.pin_id,
        }
        if self.replaced_by:
            out["replaced_by"] = self.replaced_by
        return out

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> Anchor:
        kind = obj.get("kind")
        if kind not in ("goal", "constraint", "pin"):
            raise ValueError(f"anchor {obj!r}: kind must be goal, constraint or pin")
        return Anchor(
            kind=kind,
            text=str(obj.get("text", "")),
            entry_id=None if obj.get("entry_id") is None else str(obj["entry_id"]),
            start=int(obj.get("start", 0)),
            end=int(obj.get("end", 0)),
            pin_id=None if obj.get("pin_id") is None else str(obj["pin_id"]),
            replaced_by=None if obj.get("replaced_by") is None else str(obj["replaced_by"]),
        )


@dataclass(frozen=True)
class AnchorSet:
    """The anchor layer at one compaction."""

    goal: Anchor | None = None
    constraints: tuple[Anchor, ...] = ()
    pins: tuple[Anchor, ...] = ()
    dropped: int = field(default=0)  # constraints dropped by the size cap (oldest first)
    # the goal or constraints a later user statement replaced, newest last
    superseded: tuple[Anchor, ...] = ()

    def all(self) -> tuple[Anchor, ...]:
        return ((self.goal,) if self.goal else ()) + self.constraints + self.pins

    def texts(self) -> list[str]:
        """The anchors' texts as the block states them (the goal as ``goal_text``)."""
        return [self.goal_text() if a is self.goal else a.text for a in self.all()]

    def goal_text(self) -> str:
        """The goal verbatim, except a constraint sentence inside it that the user revised since:
        that one reads ``[revised: see entry X]`` (the goal message often states the first rules)."""
        if self.goal is None:
            return ""
        goal, text = self.goal, self.goal.text
        inside = sorted(
            (
                a
                for a in self.superseded
                if a.kind == "constraint"
                and a.entry_id == goal.entry_id
                and goal.start <= a.start
                and a.end <= goal.end
            ),
            key=lambda a: a.start,
            reverse=True,
        )
        for a in inside:
            by = (a.replaced_by or "").rsplit(":", 1)[0]
            text = text[: a.start - goal.start] + f"[revised: see entry {by}]" + text[a.end - goal.start :]
        once = dedupe_sentences(text)
        return once if len(once) < 0.7 * len(text) else text  # a request pasted eight times reads once

    def to_json(self) -> dict[str, Any]:
        return {
            "goal": None if self.goal is None else self.goal.to_json(),
            "constraints": [a.to_json() for a in self.constraints],
            "pins": [a.to_json() for a in self.pins],
            "dropped": self.dropped,
            "superseded": [a.to_json() for a in self.superseded],
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any] | None) -> AnchorSet:
        if not obj:
            return AnchorSet()
        goal = obj.get("goal")
        return AnchorSet(
            goal=None if not goal else Anchor.from_json(goal),
            constraints=tuple(Anchor.from_json(a) for a in obj.get("constraints") or []),
            pins=tuple(Anchor.from_json(a) for a in obj.get("pins") or []),
            dropped=int(obj.get("dropped", 0)),
            superseded=tuple(Anchor.from_json(a) for a in obj.get("superseded") or []),
        )

    def replacements(self) -> list[tuple[str, str]]:
        """(superseded text, the current text that replaced it) for each superseded anchor whose
        replacement still stands."""
        current = {a.key: a.text for a in ((self.goal,) if self.goal else ()) + self.constraints}
        return [(a.text, current[a.replaced_by]) for a in self.superseded if a.replaced_by in current]

    def replaced_by_entry(self) -> dict[str, str]:
        """Superseded text -> the entry id of the statement that replaced it."""
        return {a.text: (a.replaced_by or "").rsplit(":", 1)[0] for a in self.superseded if a.replaced_by}

    def _replaced(self, anchor: Anchor) -> str:
        """The history mark of a current anchor that replaced earlier ones (empty if none)."""
        olds = [a for a in self.superseded if a.replaced_by == anchor.key]
        return "".join(
            f' — replaced: "{clip_sentences(a.text, OLD_CHARS)}" (entry {a.entry_id}, superseded)'
            for a in olds[-2:]
        )

    def render(self) -> str:
        """The ``<anchors>`` machine block (verbatim texts, each with its source)."""
        lines: list[str] = []
        if self.goal is not None:
            lines.append(f"[goal · entry {self.goal.entry_id}]{self._replaced(self.goal)}")
            lines.append(self.goal_text())
        if self.constraints:
            lines.append(
                "[constraints and preferences, verbatim from the user; each holds until the user revises it]"
            )
            lines.extend(
                f"- {a.text}  (entry {a.entry_id}){self._replaced(a) or replaced_mark(a.text)}"
                for a in self.constraints
            )
        if self.dropped:
            lines.append(
                f"({self.dropped} older constraint sentence(s) left this block to keep it small; "
                f"they stay in the log)"
            )
        for pin in self.pins:
            source = f"entry {pin.entry_id}" if pin.entry_id else "pinned text"
            lines.append(f"[pinned {pin.pin_id} · {source}]")
            lines.append(pin.text)
        return render_block("anchors", lines, attrs={"note": "verbatim from the raw log; authoritative"})


def user_text(entry: Entry) -> str | None:
    """The text of a user message entry, else None."""
    msg = entry.message
    if msg is None or msg.get("role") != "user":
        return None
    return text_of_content(msg.get("content"))


def constraint_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences in ``text`` that state a constraint or preference.

    A sentence counts when it has a constraint or preference marker, is not a question, and is
    not a report ("i don't think X works correctly", "got a crash, that should never happen").
    Pasted material is skipped: a line with JSON, an error line or a stack frame and the lines
    after it up to the next blank line, the span of a numbered diff, a sentence that starts with
    an error name. It quotes someone else's text, not the user's rules.

    Inside ``remembered_constraints()`` each text is scanned once (the anchors, the offline
    summary and the compactor all ask about the same user texts of a span).
    """
    memo = _MEMO.get()
    if memo is None:
        return list(_constraint_spans(text))
    found = memo.get(text)
    if found is None:
        found = memo[text] = _constraint_spans(text)
    return list(found)


_MEMO: Final[ContextVar[dict[str, tuple[tuple[int, int], ...]] | None]] = ContextVar(
    "constraint_spans_memo", default=None
)


_GOAL_MEMO: Final[ContextVar[dict[str, bool] | None]] = ContextVar("goal_statement_memo", default=None)
_DECISION_MEMO: Final[ContextVar[dict[tuple[str, bool], tuple[tuple[int, int], ...]] | None]] = ContextVar(
    "decision_spans_memo", default=None
)


@contextmanager
def remembered_constraints() -> Iterator[None]:
    """Remember ``constraint_spans``, ``decision_spans`` and ``is_goal_statement`` answers until the
    block ends (per thread or task, so concurrent compactions never share one; nested blocks reuse
    the outer memo)."""
    token = _MEMO.set({}) if _MEMO.get() is None else None
    goal_token = _GOAL_MEMO.set({}) if _GOAL_MEMO.get() is None else None
    decision_token = _DECISION_MEMO.set({}) if _DECISION_MEMO.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _MEMO.reset(token)
        if goal_token is not None:
            _GOAL_MEMO.reset(goal_token)
        if decision_token is not None:
            _DECISION_MEMO.reset(decision_token)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def one_scan_per_text(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` run inside ``remembered_constraints()`` (the Compactor's plan, prepare and
    compact: its anchors, offline summary and ledger settling read the same user texts)."""

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with remembered_constraints():
            return function(*args, **kwargs)

    return wrapper


# every text ``_CONSTRAINT_RE`` matches holds one of these (lower-cased): a text without any is
# skipped in one pass of substring tests instead of a regex scan per sentence
_CONSTRAINT_HINTS: Final = (
    "must",
    "never",
    "always",
    "avoid",
    "only",
    "prefer",
    "should",
    "make sure",
    "ensure",
    "requir",
    "constraint",
    "no more",
    "at most",
    "at least",
    "keep",
    "stick",
    "stay",
    "without",
    "allowed",
    "forbidden",
    "use",
    "pin to",
    "pinned to",
    "exactly",
    "decimal",
    "each time",
    "every time",
    "do not",
    "don",
    "no ",
    "from now on",
    "必须",
    "不要",
    "务必",
    "禁止",
    "只能",
    "保持",
)


def _constraint_spans(text: str) -> tuple[tuple[int, int], ...]:
    low = text.lower()
    if not any(hint in low for hint in _CONSTRAINT_HINTS):
        return ()
    spans: list[tuple[int, int]] = []
    quoted = stance.quoted_spans(text)  # someone else's text sets no rule of the user's
    lines = text.split("\n")
    diff = [i for i, line in enumerate(lines) if _DIFF_LINE_RE.match(line)]
    pasted = range(diff[0], diff[-1] + 1) if len(diff) >= 3 else range(0)
    offset = 0
    in_paste = False  # a pasted block runs to the next blank line (a wrapped error message)
    for i, line in enumerate(lines):
        in_paste = bool(line.strip()) and (in_paste or i in pasted or bool(_PASTED_LINE_RE.search(line)))
        if in_paste:
            offset += len(line) + 1
            continue
        for m in SENTENCE_RE.finditer(line):
            sentence = m.group(0).rstrip()
            if (
                _CONSTRAINT_RE.search(sentence)
                and not _PASTED_SENTENCE_RE.match(sentence)
                and len(sentence) <= CONSTRAINT_MAX_CHARS
                and not sentence.endswith(("?", "？"))
                and not _REPORT_RE.search(sentence)
                and not stance.inside(quoted, offset + m.start(), offset + m.start() + len(sentence))
                and stance.stance(sentence) not in _NOT_A_RULE
            ):
                start = offset + m.start()
                spans.append((start, start + len(sentence)))
        offset += len(line) + 1
    return tuple(spans)


# stances of a sentence that state no rule of the user's (a rejection can: "don't switch X")
_NOT_A_RULE: Final = frozenset(["asked", "hypothetical", "quoted", "historical"])


# a user sentence that decides (stricter than the assistant's: "because" alone is a report)
_USER_DECISION: Final = re.compile(
    r"(?i)\b(?:(?:we|i)(?:'ve| have)? decided|let'?s (?:use|go with|switch|keep|stick with|make)|go "
    r"with|switch(?:ed|ing)? (?:to|from)|"
    r"instead of|rather than|from now on|we(?:'ll| will) use|(?:change|set) (?:the )?[\w -]{2,30} to)\b"
)
# every text ``_USER_DECISION`` matches holds one of these (lower-cased; "what changes" does not)
_USER_DECISION_HINTS: Final = (
    "decided",
    "let's",
    "lets",
    "go with",
    "switch",
    "instead",
    "rather",
    "from now on",
    "we'll",
    "we will",
    "change ",
    "set ",
)
_USER_DECISION_HINT: Final = re.compile("|".join(re.escape(h) for h in _USER_DECISION_HINTS))
# "Use X for Y." said by the user: a choice, the same as "let's use X"
_USE: Final = re.compile(r"(?i)^(?:(?:ok(?:ay)?|so|now|then|and|also|please),? )*use\s+\S")


def _says_use(low: str) -> bool:
    """Whether the lower-cased ``low`` has the word "use" followed by a space (a sentence that
    ``_USE`` matches has one; "because " does not count): a plain substring search, no regex."""
    at = low.find("use ")
    while at != -1:
        if at == 0 or low[at - 1] in " \n\t\"'(":
            return True
        at = low.find("use ", at + 1)
    return False


def decision_spans(text: str, *, leading_use: bool = True) -> list[tuple[int, int]]:
    """Character spans of the sentences of a user message that decide something ("let's go with
    X", "X instead of Y", "from now on ...", "switch to X", "set X to Y"; with ``leading_use`` also
    a sentence that starts with "use": "Use a threshold of 0.4 for the list."). Not a question,
    at least four words. A decision that revises a constraint is the constraint now
    (``extract_anchors``); every one is folded by ``core.decisions``."""
    memo = _DECISION_MEMO.get()
    key = (text, leading_use)
    if memo is not None and key in memo:
        return list(memo[key])
    found = _decision_spans(text, leading_use)
    if memo is not None:
        memo[key] = found
    return list(found)


def _decision_spans(text: str, leading_use: bool) -> tuple[tuple[int, int], ...]:
    low = text.lower()
    # one scan of the whole text decides whether to read it sentence by sentence (the common case: no)
    decides = bool(_USER_DECISION_HINT.search(low)) and bool(_USER_DECISION.search(text))
    uses = leading_use and _says_use(low)
    if not decides and not uses and not stance.sets_value(text):
        return ()
    quoted = stance.quoted_spans(text)
    spans: list[tuple[int, int]] = []
    offset = 0
    for line in text.split("\n"):
        for m in SENTENCE_RE.finditer(line):
            sentence = m.group(0).rstrip()
            start = offset + m.start()
            if (
                (
                    _USER_DECISION.search(sentence)
                    or (leading_use and _USE.match(sentence))
                    or stance.sets_value(sentence)
                )
                and (len(sentence.split()) >= 4 or stance.has_cjk(sentence))
                and stance.own_decision(sentence)
                and not stance.inside(quoted, start, start + len(sentence))
            ):
                spans.append((start, start + len(sentence)))
        offset += len(line) + 1
    return tuple(spans)


def user_decisions(text: str, *, leading_use: bool = True) -> list[str]:
    """The sentences ``decision_spans`` finds, in order."""
    return [text[a:b] for a, b in decision_spans(text, leading_use=leading_use)]


_COMMAND_RE: Final = re.compile(r"^\s*/[\w:-]+(?:\s+\S+)?\s*$")


_GOAL_STATEMENT_RE: Final = re.compile(
    r"(?i)(?:\b(?:my|our|the) (?:overall |main |real |end |new |actual )?(?:goal|objective|aim|mission) "
    r"(?:is|here is|now is|has changed|changes)\b|"
    r"^\s*(?:new )?(?:goal|objective)\s*:|\bnew goal\b|\bthe project is to\b|\bwe(?:'re| are) (?:now "
    r")?building\b)"
)


_GOAL_HINTS: Final = ("goal", "objective", "aim", "mission", "project", "building")


def is_goal_statement(text: str) -> bool:
    """True for a user message that says what the goal is ("our goal is ...", "Goal: ...",
    "new goal: ..."): it becomes the goal, replacing an earlier one; a per-step request never does.
    Inside ``remembered_constraints()`` each text is tested once (anchors, summary and ledger ask)."""
    memo = _GOAL_MEMO.get()
    if memo is None:
        return _is_goal_statement(text)
    found = memo.get(text)
    if found is None:
        found = memo[text] = _is_goal_statement(text)
    return found


def _is_goal_statement(text: str) -> bool:
    head = text[:GOAL_MAX_CHARS]
    low = head.lower()
    return any(h in low for h in _GOAL_HINTS) and bool(_GOAL_STATEMENT_RE.search(head))


def is_request(text: str) -> bool:
    """True for a user message that states a request (not empty, not a bare ``/command``)."""
    return bool(text.strip()) and not _COMMAND_RE.match(text)


def _goal_from(entry: Entry) -> Anchor | None:
    text = entry_text(entry)
    if not is_request(text):
        return None
    end = min(len(text), GOAL_MAX_CHARS)
    return Anchor("goal", text[:end], entry.id, 0, end)


def _pin_anchor(pin: Entry, lookup: Callable[[str], Entry | None]) -> Anchor | None:
    pin_id = str(pin.data.get("pin_id") or pin.id)
    text = pin.data.get("text")
    if isinstance(text, str) and text:  # the pin entry itself is the raw source
        end = min(len(text), PIN_MAX_CHARS)
        return Anchor("pin", text[:end], None, 0, end, pin_id)
    target = pin.data.get("entry_id")
    if isinstance(target, str):
        raw = lookup(target)
        if raw is None:
            return None
        text = entry_text(raw)
        end = min(len(text), PIN_MAX_CHARS)
        return Anchor("pin", text[:end], raw.id, 0, end, pin_id)
    return None


def apply_pins(
    current: Sequence[Anchor], pin_entries: Iterable[Entry], lookup: Callable[[str], Entry | None]
) -> tuple[Anchor, ...]:
    """Fold pin/unpin entries (log order) into the active pins."""
    pins = list(current)
    for entry in pin_entries:
        if entry.kind != PIN:
            continue
        action = entry.data.get("action", "pin")
        pin_id = entry.data.get("pin_id")
        if action == "unpin":
            text = entry.data.get("text")
            target = entry.data.get("entry_id")
            pins = [
                p
                for p in pins
                if not (
                    (pin_id and p.pin_id == pin_id)
                    or (text and p.text == text and p.entry_id is None)
                    or (target and p.entry_id == target)
                )
            ]
        else:
            anchor = _pin_anchor(entry, lookup)
            if anchor is not None and all(p.pin_id != anchor.pin_id for p in pins):
                pins.append(anchor)
    return tuple(pins)


def resolve_anchors(previous: AnchorSet, lookup: Callable[[str], Entry | None]) -> AnchorSet:
    """Re-copy every anchor's text from its raw entry (never from a summary).

    Raises ValueError naming the anchor whose raw entry is missing, since a vanished source means
    the log was altered. Text-pins carry their own raw text (their pin entry) and are kept.
    """

    def recopy(anchor: Anchor) -> Anchor:
        if anchor.entry_id is None:
            return anchor
        raw = lookup(anchor.entry_id)
        if raw is None:
            raise ValueError(
                f"{anchor.kind} anchor refers to entry {anchor.entry_id!r}, which is not in the log"
            )
        return replace(anchor, text=entry_text(raw)[anchor.start : anchor.end])

    return AnchorSet(
        goal=None if previous.goal is None else recopy(previous.goal),
        constraints=tuple(recopy(a) for a in previous.constraints),
        pins=tuple(recopy(a) for a in previous.pins),
        dropped=previous.dropped,
        superseded=tuple(recopy(a) for a in previous.superseded),
    )


def _replaced_constraints(
    sentence: str, constraints: Sequence[Anchor], last_user: str | None
) -> list[Anchor]:
    """The constraints ``sentence`` replaces (``facts.supersedes``); "scratch that, use NATS"
    replaces the newest one when the user said it in their message just before."""
    replaced = [old for old in constraints if supersedes(sentence, old.text)]
    if not replaced and constraints and constraints[-1].entry_id == last_user and revises_newest(sentence):
        replaced = [constraints[-1]]
    return replaced


def _revised_by_decisions(
    full: str,
    entry_id: str,
    spans: Sequence[tuple[int, int]],
    constraints: list[Anchor],
    superseded: list[Anchor],
    seen: set[str],
    last_user: str | None = None,
) -> list[Anchor]:
    """A user decision sentence without a constraint marker that revises a constraint ("Let's
    switch storage to DuckDB instead of Postgres." after "Always use Postgres for storage.") is the
    constraint now: the old one moves to ``superseded`` (else the block would state it as
    authoritative after the user changed it)."""
    for start, end in decision_spans(full):  # the spans the decision book reads too (remembered)
        sentence = full[start:end]
        if (start, end) in spans or sentence in seen:
            continue
        replaced = _replaced_constraints(sentence, constraints, last_user)
        if not replaced:
            continue
        anchor = Anchor("constraint", sentence, entry_id, start, end)
        for old in replaced:
            superseded.append(replace(old, replaced_by=anchor.key))
            seen.discard(old.text)
        seen.add(sentence)
        constraints = [*(c for c in constraints if c not in replaced), anchor]
    return constraints


def extract_anchors(
    previous: AnchorSet,
    entries: Sequence[Entry],
    lookup: Callable[[str], Entry | None],
    *,
    max_chars: int = 12000,
) -> AnchorSet:
    """The anchor layer after a span: previous anchors re-copied from the raw log, plus the goal
    (if none yet), new constraint sentences and pin changes found in ``entries`` (log order).

    ``lookup`` returns a raw entry by id (the store's ``get``); entries in ``entries`` are found
    without it. Constraints beyond ``max_chars`` in total drop oldest-first and are counted in
    ``dropped`` (pins and the goal are never dropped).
    """
    local = {e.id: e for e in entries}

    def find(entry_id: str) -> Entry | None:
        return local.get(entry_id) or lookup(entry_id)

    base = resolve_anchors(previous, find)
    goal = base.goal
    constraints = list(base.constraints)
    superseded = list(base.superseded)
    seen = {a.text for a in constraints}
    pin_entries: list[Entry] = []
    last_user: str | None = None  # the user message before this one ("scratch that" revises it)
    for entry in entries:
        if entry.kind == PIN:
            pin_entries.append(entry)
            continue
        msg = entry.message
        if msg is None or msg.get("role") != "user":
            continue
        text = text_of_content(msg.get("content"))
        if goal is None or (is_goal_statement(text) and goal.entry_id != entry.id):
            new_goal = _goal_from(entry)
            if goal is not None and new_goal is not None and new_goal.text != goal.text:
                superseded.append(replace(goal, replaced_by=new_goal.key))
            goal = new_goal or goal
        full = entry_text(entry)
        spans = constraint_spans(full)
        for start, end in spans:
            sentence = full[start:end]
            if sentence in seen or (
                goal is not None
                and goal.entry_id == entry.id
                and sentence == goal.text
                and is_goal_statement(text)
            ):
                continue  # said before, or a goal statement (the goal line states it)
            seen.add(sentence)
            anchor = Anchor("constraint", sentence, entry.id, start, end)
            # a revision: the earlier constraints this one replaces leave the block, marked superseded
            gone = _replaced_constraints(sentence, constraints, last_user)
            for old in gone:
                superseded.append(replace(old, replaced_by=anchor.key))
                seen.discard(old.text)
            constraints = [*(c for c in constraints if c not in gone), anchor]
        if constraints:
            constraints = _revised_by_decisions(
                full, entry.id, spans, constraints, superseded, seen, last_user
            )
        last_user = entry.id
    pins = apply_pins(base.pins, pin_entries, find)
    dropped = base.dropped
    total = sum(len(a.text) for a in constraints)
    while constraints and total > max_chars:
        total -= len(constraints[0].text)
        constraints.pop(0)
        dropped += 1
    return AnchorSet(
        goal=goal,
        constraints=tuple(constraints),
        pins=pins,
        dropped=dropped,
        superseded=tuple(superseded[-MAX_SUPERSEDED:]),
    )
