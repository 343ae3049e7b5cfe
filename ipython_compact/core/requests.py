"""Requests have a state: open, deferred, done, dropped (issue 18, item 3).

Why: "any final answer settles every open request" lost the requests the assistant explicitly
put off ("I'll add the ROC plot once the backfill is done"), so a compacted agent believed them
done. The ledger (the record carried across compactions) and the offline summary (its Progress
section) both fold a span's messages through this one state machine, so their counts agree.

Rules, in log order:
- A user message states a request (``open``) unless all it says is a withdrawal, or it states
  the goal (``anchors.is_goal_statement``: the goal is not a request an answer settles).
- A user sentence that withdraws ("never mind the ROC plot", "forget about X", "drop X",
  "cancel X", "no need for X", "scratch that") drops the open or deferred request it names (the
  newest that ``names`` matches); a bare "never mind" drops the newest one (``dropped``); one
  that names something no open request is about drops nothing.
- A final answer (assistant text, no tool calls, not cut short) answers the requests of its turn
  (the ones still ``open``) that it is about: the turn's newest, and an older one only when the
  answer names it (else it stays open for the next answer). Each becomes ``done`` with the answer
  as its outcome, unless a
  sentence of the answer puts it off ("later", "once X is done", "after X", "waiting on X",
  "blocked on", "postpone", "not yet", "next week", ...) and names it (content words in common),
  or refers back to it ("I'll do that later": the turn's newest request): it becomes ``deferred``
  with that sentence as its reason. "I'll wait for your review" defers nothing.
- A deferred request is ``done`` when a later final answer reports it finished (a sentence with a
  completion word naming it: at least two content words in common, or all of a short request's).
- Requests from before the span come in with their state (a split turn's request is ``open``).

What must hold: pure, deterministic, linear in the span (an answer looks only at its turn's
requests and at most ``MATCH_WINDOW`` newest deferred ones).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ipython_compact.core.anchors import is_goal_statement
from ipython_compact.core.facts import SENTENCE_RE, content_words

RequestStatus = Literal["open", "deferred", "done", "dropped"]
STATUSES: Final = ("open", "deferred", "done", "dropped")
MATCH_WINDOW: Final = 50  # deferred / open requests an answer or a withdrawal is matched against

_DEFER: Final = re.compile(
    r"(?i)\b(?:later(?: on| today| this week)?|once (?:the |it |we |you )?\w+|after (?:the |we |you |it )\w+|"
    r"wait(?:ing)? (?:on|for|until)|blocked (?:on|by)|until (?:the |we |you |it "
    r")?\w+|postpon\w*|defer\w*|put (?:it |that |this )?off|"
    r"hold(?:ing)? off|not yet|next (?:week|sprint|session|time)|tomorrow|come back to|park(?:ed|ing)? "
    r"(?:it|that|this)|"
    r"when (?:the |that |it |we |you )\w+ (?:is|are) (?:done|ready|finished|back|in)|depends on)\b"
)
_BACKREF: Final = re.compile(r"(?i)\b(?:that|this|it|them|those|the rest)\b")
_COMPLETED: Final = re.compile(
    r"(?i)\b(?:done|fixed|implemented|created|wrote|written|added|passed|passes|works "
    r"now|completed|resolved|verified|"
    r"confirmed|succeeded|finished|here is|here's|saved|plotted|updated|ready)\b"
)
_WITHDRAW: Final = re.compile(
    r"(?i)\b(?:never ?mind|forget (?:about )?|scratch that|drop (?:the |my |that )|cancel (?:the |my |that "
    r")?|no need (?:for|to)|"
    r"don'?t bother|do not bother|no longer need|skip the|ignore my (?:earlier |previous |last "
    r")?(?:request|question|ask))"
)


@dataclass(frozen=True)
class RequestRecord:
    """One user request: where it was asked, its text (one line), its state, and why (the
    outcome when done, the deferring sentence when deferred, the withdrawal when dropped)."""

    entry_id: str
    text: str
    status: RequestStatus
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"entry_id": self.entry_id, "text": self.text, "status": self.status}
        if self.note:
            out["note"] = self.note
        return out

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> RequestRecord:
        status = obj["status"]
        if status not in STATUSES:
            raise ValueError(f"request {obj!r}: status must be one of {', '.join(STATUSES)}")
        return RequestRecord(str(obj["entry_id"]), str(obj["text"]), status, str(obj.get("note") or ""))


# every text the patterns above match holds one of these (lower-cased): cheap tests first
_DEFER_HINTS: Final = (
    "later",
    "once",
    "after",
    "wait",
    "blocked",
    "until",
    "postpon",
    "defer",
    " off",
    "not yet",
    "next week",
    "next sprint",
    "next session",
    "next time",
    "tomorrow",
    "come back",
    "park",
    "when",
    "depends",
)
_WITHDRAW_WORDS: Final = frozenset(
    [
        "never",
        "mind",
        "nevermind",
        "forget",
        "about",
        "scratch",
        "drop",
        "cancel",
        "need",
        "bother",
        "longer",
        "skip",
        "ignore",
        "earlier",
        "previous",
        "last",
        "request",
        "question",
        "ask",
    ]
)
_WITHDRAW_HINTS: Final = (
    "never",
    "forget",
    "scratch",
    "drop",
    "cancel",
    "no need",
    "bother",
    "no longer",
    "skip",
    "ignore",
)


def _hinted(text: str, hints: tuple[str, ...]) -> bool:
    low = text.lower()
    return any(h in low for h in hints)


def deferring_sentences(text: str) -> list[str]:
    """The sentences of an answer that put something off."""
    if not _hinted(text, _DEFER_HINTS) or not _DEFER.search(text):
        return []
    return [s for s in _sentences(text) if _DEFER.search(s) and not s.endswith("?")]


def withdrawing_sentences(text: str) -> list[str]:
    """The sentences of a user message that withdraw an earlier request."""
    if not _hinted(text, _WITHDRAW_HINTS) or not _WITHDRAW.search(text):
        return []
    return [s for s in _sentences(text) if _WITHDRAW.search(s) and not s.endswith("?")]


def completing_sentences(text: str) -> list[str]:
    """The sentences of an answer that report something finished (and put nothing off)."""
    if not _COMPLETED.search(text):
        return []
    return [s for s in _sentences(text) if _COMPLETED.search(s) and not _DEFER.search(s)]


def _sentences(text: str) -> Iterator[str]:
    for line in text.split("\n"):
        for m in SENTENCE_RE.finditer(line):
            yield m.group(0).strip()


def names(request: str, sentence: str) -> bool:
    """Whether ``sentence`` is about ``request``: two content words in common, or every content
    word of a request that has fewer than three."""
    req = content_words(request)
    shared = len(req & content_words(sentence))
    return shared >= 2 or (0 < len(req) < 3 and shared == len(req))


class RequestBook:
    """The requests of a session, folded message by message (see the module doc)."""

    def __init__(self, records: Iterable[RequestRecord] = ()) -> None:
        self._records: dict[str, RequestRecord] = {}
        self._order = 0
        self._turn: list[str] = []  # keys of the open requests of the current turn, oldest first
        self._deferred: dict[str, None] = {}  # keys of deferred requests, oldest first
        for record in records:
            key = self._add(record)
            if record.status == "open":
                self._turn.append(key)
            elif record.status == "deferred":
                self._deferred[key] = None

    def _add(self, record: RequestRecord) -> str:
        self._order += 1
        key = f"{self._order}"
        self._records[key] = record
        return key

    def _set(self, key: str, status: RequestStatus, note: str) -> None:
        r = self._records[key]
        self._records[key] = RequestRecord(r.entry_id, r.text, status, note)

    def records(self) -> list[RequestRecord]:
        """Every request, in the order asked."""
        return list(self._records.values())

    # ---- messages ---------------------------------------------------------------------------
    def user(self, entry_id: str, text: str, line: str, *, withdrawals: bool = True) -> RequestRecord | None:
        """A user message; ``line`` is its one-line form. Returns the new request, if any
        (``withdrawals=False``: its withdrawing sentences are not applied)."""
        withdrawals_ = withdrawing_sentences(text) if withdrawals else []
        for sentence in withdrawals_:
            self._withdraw(sentence)
        if withdrawals_ and sum(len(s) for s in withdrawals_) >= 0.8 * len(" ".join(text.split())):
            return None  # all it says is a withdrawal
        if is_goal_statement(text):
            return None  # the goal is what the work is for, not a request an answer settles
        record = RequestRecord(entry_id, line, "open")
        self._turn.append(self._add(record))
        return record

    def _withdraw(self, sentence: str) -> None:
        candidates = [*self._turn[-MATCH_WINDOW:], *list(self._deferred)[-MATCH_WINDOW:]]
        if not candidates:
            return
        named = [k for k in candidates if names(self._records[k].text, sentence)]
        if named:
            best = max(named, key=int)
        elif not content_words(sentence) - _WITHDRAW_WORDS:
            best = max(candidates, key=int)  # a bare "never mind": the newest request
        else:
            return  # it names something no open request is about (done already, or never asked)
        self._set(best, "dropped", sentence)
        if best in self._deferred:
            del self._deferred[best]
        else:
            self._turn.remove(best)

    def answer(self, text: str, outcome: str) -> list[tuple[RequestRecord, RequestRecord]]:
        """A final answer: settles its turn's open requests and the deferred ones it reports
        finished. Returns (before, after) for every request it changed."""
        changed: list[tuple[RequestRecord, RequestRecord]] = []
        turn, self._turn = self._turn, []
        deferring = deferring_sentences(text) if turn else []
        put_off: dict[str, str] = {}
        for sentence in deferring:
            named = [k for k in turn if names(self._records[k].text, sentence)]
            if not named and _BACKREF.search(sentence):
                named = turn[-1:]  # "I'll do that once the backfill is done": the newest request
            for key in named:
                put_off.setdefault(key, sentence)
        unanswered: list[str] = []
        for i, key in enumerate(turn):
            before = self._records[key]
            if key in put_off:
                self._set(key, "deferred", put_off[key])
                self._deferred[key] = None
            elif i == len(turn) - 1 or names(before.text, text):
                self._set(key, "done", outcome)
            else:
                unanswered.append(key)  # asked earlier in the turn and not what this answer is about
                continue
            changed.append((before, self._records[key]))
        self._turn = unanswered
        if self._deferred:
            completed = completing_sentences(text)
            for key in list(self._deferred)[-MATCH_WINDOW:]:
                if key in put_off:
                    continue
                finished = next((s for s in completed if names(self._records[key].text, s)), None)
                if finished is not None:
                    before = self._records[key]
                    self._set(key, "done", finished)
                    del self._deferred[key]
                    changed.append((before, self._records[key]))
        return changed


def counts(records: Iterable[RequestRecord]) -> dict[str, int]:
    """How many requests are in each state."""
    out = dict.fromkeys(STATUSES, 0)
    for r in records:
        out[r.status] += 1
    return out
