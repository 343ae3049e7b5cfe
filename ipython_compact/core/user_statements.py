"""Which parts of a user message are rules, decisions, a goal or a request.

Why: the anchors (``core.anchors``) keep the goal and the user's rules verbatim; the decision
book, the offline summary and the ledger ask the same questions of a user message. The readers
live apart from the anchor set. A sentence that only asks, supposes, quotes or tells history is
no rule and no decision (``core.stance``). Split out of ``anchors`` (issue 32: no core module
over 650 lines).

What must hold: pure, deterministic, stdlib only; one scan per text while remembered.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final, ParamSpec, TypeVar

from ipython_compact.core import stance
from ipython_compact.core.entries import Entry, text_of_content
from ipython_compact.core.facts import SENTENCE_RE

GOAL_MAX_CHARS: Final = 2000
CONSTRAINT_MAX_CHARS: Final = 400

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


# "<subject> is / stays / keeps / : / = <value>": a statement of what holds now
_STATES: Final = re.compile(
    r"(?i)^\W*(?:[\w.+-]+\s+){0,3}[\w.+-]+\s*(?::|(?<![=!<>])=(?!=))\s*(?P<after>\S+(?:\s+\S+)?)|\b(?:is|are|stays?|remains?|keep|bleibt|ist|sind|est|reste|"
    r"garde|gardons|sigue|es)\b|[はが].{0,20}(?:にします|に変更|です)|(?:是|为|用)\s*[A-Za-z0-9]"
)


_PRONOUN_SUBJECT: Final = re.compile(r"(?i)^\W*(?:this|that|it|these|those|es|das|c'est|ce|ceci|cela)\b")


def _states_value(sentence: str) -> bool:
    """Whether a sentence says what a subject's value is ("Max zoom is zoom 18.", "Region stays
    eu-central-1.", "Threshold again: 0.72"): a value, a subject beside it, a stating form, short.
    Its stance (not asked, hypothetical, historical) is checked by the caller."""
    found = stance.values(sentence)
    if not found or len(sentence.split()) > 20 or len(stance.terms(sentence) - found) < 2:
        return False  # a subject needs words of its own ("This is tracked in DATA-1004" has one)
    if _PRONOUN_SUBJECT.match(sentence) or stance.complains(sentence):
        return False  # "it is", "c'est": what it points to is not said; "16 is too much": a complaint
    # "key: value" / "key = value": a value right after the colon ("Step 3: load it" states none)
    return any(not m.group("after") or stance.values(m.group("after")) for m in _STATES.finditer(sentence))


def _decision_spans(text: str, leading_use: bool) -> tuple[tuple[int, int], ...]:
    low = text.lower()
    # one scan of the whole text decides whether to read it sentence by sentence (the common case: no)
    decides = bool(_USER_DECISION_HINT.search(low)) and bool(_USER_DECISION.search(text))
    uses = leading_use and _says_use(low)
    if not decides and not uses and not stance.sets_value(text) and not _STATES.search(text):
        return ()
    quoted = stance.quoted_spans(text)
    rules = constraint_spans(text)  # a rule stating a value ("always keep the seed at 1337") is the anchors'
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
                    or (_states_value(sentence) and not any(a <= start < b for a, b in rules))
                )
                and (len(sentence.split()) >= 3 or stance.has_cjk(sentence))
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
