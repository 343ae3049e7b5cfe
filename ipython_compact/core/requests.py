"""Requests have a life cycle: asked (open), deferred, cancelled (dropped), reopened, done.

Why: "any final answer settles every open request" lost the requests the assistant explicitly
put off ("I'll add the ROC plot once the backfill is done"), so a compacted agent believed them
done. The ledger (the record carried across compactions) and the offline summary (its Progress
section) both fold a span's messages through this one state machine, so their counts agree.

Rules, in log order (issue 32: in any phrasing, not one English list):
- A user message states a request (``open``) unless all it says is a cancellation, a deferral or
  a revision of the last decision ("Scratch that, use NATS": ``core.stance.revises_newest``; a
  decision, not a cancellation), or it states the goal.
- A user sentence that cancels ("never mind the ROC plot", "forget the plot", "drop X", "no need
  for X", "brauchen wir doch nicht", "不用了") drops the open or deferred request it names (the
  one sharing the most salient terms, the newest on a tie); a bare "never mind" the newest one.
- A user sentence that defers ("later, not now", "park the export", "erst später", "以后再说")
  defers the request it names (or the newest open one): ``deferred`` by the user.
- A user message that asks again for a dropped or deferred request ("do the plot after all",
  "reopen ...") reopens it (``open``) instead of adding a new one.
- A final answer settles its turn's open requests that it is about (the turn's newest, or one it
  names): ``done`` with the answer as its outcome, only when an outcome is recorded. A sentence
  that puts it off ("later", "once X is done", "waiting on X", "next week") or only promises it
  ("I'll ... next", "I will now ...", with no completion said) makes it ``deferred``.
- A deferred request is ``done`` when a later final answer reports it finished (a completion
  sentence naming it); so is a reopened one ("Reopened: it is back on the list" records nothing).
- A request asked and put off in one message ("park the CDN purge script for now") is
  ``deferred`` from the start; an answer that only defers ("Will do once the refactor lands",
  "it needs X first") defers it.
- A bare acknowledgment ("Sure.", "わかりました。") records no outcome: a request for work stays
  open (a request that states a value or a choice is settled by it: nothing more to report).
- A dropped request asked for again (most of its salient terms, or a reopen cue) is reopened.

What must hold: pure, deterministic, linear in the span: every text is tokenized once, and the
requests a sentence names are found through an index from salient term to request (no pass over
every carried-forward request per answer).
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final, Literal

from ipython_compact.core import stance
from ipython_compact.core.facts import SENTENCE_RE
from ipython_compact.core.user_statements import is_goal_statement, user_decisions

RequestStatus = Literal["open", "deferred", "done", "dropped"]
STATUSES: Final = ("open", "deferred", "done", "dropped")
MATCH_WINDOW: Final = 50  # deferred / open requests a bare withdrawal or back reference looks at

_DEFER: Final = re.compile(
    r"(?i)\b(?:later(?: on| today| this week)?|once (?:the |it |we |you )?\w+|after (?:the |we |you |it )\w+|"
    r"wait(?:ing)? (?:on|for|until)|blocked (?:on|by)|until (?:the |we |you |it "
    r")?\w+|postpon\w*|defer\w*|put (?:it |that |this )?off|"
    r"hold(?:ing)? off|not yet|not now|next (?:week|sprint|session|time)|tomorrow|come back to|"
    r"park(?:ed|ing)? "
    r"(?:it|that|this|the)|"
    r"when (?:the |that |it |we |you )\w+ (?:is|are) (?:done|ready|finished|back|in)|depends on|"
    r"(?:erst |auf )?später|nicht jetzt|demnächst|plus tard|reporté|más tarde|luego|"
    r"(?:needs?|requires?) [\w ]{1,40}? first)\b|以后再|稍后|晚点|回头再|先不|後で|あとで"
)
# an answer that only promises ("I'll plot it next"): no outcome recorded
_PROMISE: Final = re.compile(
    r"(?i)\b(?:i'll|i will|i am going to|i'm going to|we'll|we will|let me|next,? i|i plan to|will do|"
    r"i can (?:do|add|make)|ich werde|je vais|voy a)\b|我会|我将|接下来"
)
# "I'll use X": a choice made (an outcome), not work promised
_CHOICE: Final = re.compile(
    r"(?i)\b(?:i'll|i will|we'll|we will) (?:use|go with|stick with|keep|stay with)\b"
)
_WAITS_ON_USER: Final = re.compile(r"(?i)\bwait (?:for|on) (?:your|you)\b")
_BACKREF: Final = re.compile(r"(?i)\b(?:that|this|it|them|those|the rest|das|es)\b|这个|那个")
_COMPLETED: Final = re.compile(
    r"(?i)\b(?:done|fixed|implemented|created|wrote|written|added|passed|passes|works "
    r"now|completed?|resolved|verified|"
    r"confirmed|succeeded|finished|here is|here's|saved|plotted|updated|ready|is (?:now )?(?:in|on|live)|"
    r"built|deployed|renamed|moved|removed|deleted|merged|shipped|installed|exported|sent|"
    r"fertig|erledigt|terminé|listo)\b|完成|已经"
)
_WITHDRAW: Final = re.compile(
    r"(?i)\b(?:never ?mind|forget (?:about )?|scratch that|drop (?:the |my |that\b|this\b|it\b)|"
    r"cancel (?:the |my |that )?|no need (?:for|to)|don'?t need (?:the |that |it)|"
    r"don'?t bother|do not bother|no longer need|skip the|ignore my (?:earlier |previous |last "
    r")?(?:request|question|ask)|brauchen wir (?:doch )?nicht|(?:vergiss|lass) (?:das|den|die|es)|"
    r"nicht (?:mehr )?nötig|laisse tomber|oubli(?:e|ez)\b|pas besoin|olvídalo|no hace falta)|"
    r"不用|不需要|算了|取消|(?:もう)?(?:要りません|要らない|いらない)|やめ(?:て|ます)"
)
_REOPEN: Final = re.compile(
    r"(?i)\b(?:after all|back on|reopen\w*|un-?cancel|still want|do (?:want|need) (?:the|that)|"
    r"bring back|doch (?:noch|machen)|revive|finalement|on a besoin|en fin de cuentas)\b|"
    r"还是要|还是需要|やっぱり"
)
# words of a cancellation that say nothing about what it cancels
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
        "that",
        "brauchen",
        "wir",
        "doch",
        "nicht",
        "vergiss",
        "lass",
        "das",
        "nötig",
        "mehr",
        "laisse",
        "tomber",
        "oublie",
        "oubliez",
        "pas",
        "besoin",
        "olvídalo",
        "hace",
        "falta",
        "don't",
        "dont",
    ]
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


def _sentences(text: str) -> Iterator[str]:
    for line in text.split("\n"):
        for m in SENTENCE_RE.finditer(line):
            yield m.group(0).strip()


def deferring_sentences(text: str) -> list[str]:
    """The sentences of a text that put something off."""
    if not _DEFER.search(text):
        return []
    return [s for s in _sentences(text) if _DEFER.search(s) and not s.endswith(("?", "？"))]


def withdrawing_sentences(text: str) -> list[str]:
    """The sentences of a user message that cancel an earlier request (not "scratch that, use X":
    that revises the last decision)."""
    if not _WITHDRAW.search(text):
        return []
    return [
        s
        for s in _sentences(text)
        if _WITHDRAW.search(s) and not s.endswith(("?", "？")) and not _revision(s)
    ]


def _revision(sentence: str) -> bool:
    """ "Scratch that, use NATS": a revision of the last decision, not a cancellation."""
    if not stance.revises_newest(sentence):
        return False
    rest = re.sub(r"(?i)^.*?\b(?:that|this|it)\b[,;:.!]?", "", sentence, count=1)
    return bool(stance.terms(rest) - _WITHDRAW_WORDS)


def completing_sentences(text: str) -> list[str]:
    """The sentences of an answer that report something finished (and put nothing off)."""
    if not _COMPLETED.search(text):
        return []
    return [s for s in _sentences(text) if _COMPLETED.search(s) and not _DEFER.search(s)]


def _only_promised(text: str) -> str | None:
    """The first promise of an answer that records no outcome: every sentence of three words or
    more promises ("I'll ... next") or asks; None when any reports something."""
    promise = None
    for s in _sentences(text):
        if _PROMISE.search(s) and not _WAITS_ON_USER.search(s) and not _CHOICE.search(s):
            promise = promise or s
        elif len(s.split()) >= 3 and not s.endswith(("?", "？")):
            return None
    return promise


_CJK_CHAR: Final = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
# a cancellation that points back: "drop that", "forget it", "vergiss das"
_WITHDRAW_BACK: Final = re.compile(
    r"(?i)\b(?:drop|forget|cancel|scratch|skip|vergiss|lass) (?:that|this|it|das|es)\b"
)


def acknowledges_only(text: str, request: str) -> bool:
    """Whether an answer only acknowledges ``request`` ("Sure.", "Je l'ajoute.", "わかりました。"):
    no number, nothing reported finished, and either at most three words naming nothing the
    request does not, or a short CJK reply alone. It records no outcome, so a request for work
    it answers stays open ("Emailed the report." names a new word: an outcome)."""
    if any(c.isdigit() for c in text) or completing_sentences(text):
        return False
    latin = re.findall(r"[^\W\d_]+", _CJK_CHAR.sub(" ", text))
    if _CJK_CHAR.search(text):
        return not latin and len(_CJK_CHAR.findall(text)) <= 8
    return len(latin) <= 3 and stance.terms(text) <= stance.terms(request)


def _decides(text: str) -> bool:
    """A request that states a choice or a value ("Set the tile size to 512 px."): acknowledging
    it settles it; there is no further work to report."""
    return any(c.isdigit() for c in text) or stance.sets_value(text) or bool(user_decisions(text))


# a state said to last until something ("we'll be red until the fraud call is faster"): no work put off
_STATE_UNTIL: Final = re.compile(r"(?i)\b(?:we|it|they|you|this|that)(?:'ll| will) (?:stay|be|remain)\b")


def _reopened(record: RequestRecord) -> bool:
    return record.status == "open" and record.note.startswith("reopened:")


def _names(req: frozenset[str], said: frozenset[str]) -> bool:
    shared = len(req & said)
    return shared >= 2 or (0 < len(req) < 3 and shared == len(req))


def names(request: str, sentence: str) -> bool:
    """Whether ``sentence`` is about ``request``: two salient terms in common, or every term of a
    request that has fewer than three."""
    return _names(stance.terms(request), stance.terms(sentence))


def _newest(keys: dict[int, None], count: int) -> list[int]:
    """The newest ``count`` keys of an insertion-ordered dict, oldest first (no pass over all)."""
    return list(islice(reversed(keys), count))[::-1]


class RequestBook:
    """The requests of a session, folded message by message (see the module doc)."""

    def __init__(self, records: Iterable[RequestRecord] = ()) -> None:
        self._records: dict[int, RequestRecord] = {}
        self._terms: dict[int, frozenset[str]] = {}  # each request's text tokenized once
        self._index: dict[str, set[int]] = {}  # term -> requests not done that have it
        self._order = 0
        # requests by state, oldest first (dicts: ordered, O(1) removal)
        self._turn: dict[int, None] = {}  # open: the current turn's, and earlier ones not answered
        self._deferred: dict[int, None] = {}
        self._dropped: dict[int, None] = {}
        for record in records:
            key = self._add(record)
            {"open": self._turn, "deferred": self._deferred, "dropped": self._dropped}.get(record.status, {})[
                key
            ] = None

    def _add(self, record: RequestRecord) -> int:
        self._order += 1
        key = self._order
        self._records[key] = record
        if record.status != "done":
            found = self._terms[key] = stance.terms(record.text)
            for term in found:
                self._index.setdefault(term, set()).add(key)
        return key

    def _set(self, key: int, status: RequestStatus, note: str) -> None:
        r = self._records[key]
        self._records[key] = RequestRecord(r.entry_id, r.text, status, note)
        for group in (self._turn, self._deferred, self._dropped):
            group.pop(key, None)
        if status == "open":
            self._turn[key] = None
        elif status == "deferred":
            self._deferred[key] = None
        elif status == "dropped":
            self._dropped[key] = None
        else:  # done: never matched again, out of the index
            for term in self._terms.pop(key, frozenset()):
                keys = self._index.get(term)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._index[term]

    def records(self) -> list[RequestRecord]:
        """Every request, in the order asked."""
        return list(self._records.values())

    def _named(self, said: frozenset[str], among: Container[int], *, loose: bool = False) -> list[int]:
        """The requests in ``among`` that a sentence with terms ``said`` names, most shared terms
        first, then newest; ``loose``: one shared term is enough (a cancellation names its
        object: "forget the plot"). Found through the term index: no pass over every request."""
        shared: dict[int, int] = {}
        for term in said:
            for key in self._index.get(term, ()):
                if key in among:
                    shared[key] = shared.get(key, 0) + 1
        hits = [k for k, n in shared.items() if (n >= 1 if loose else _names(self._terms[k], said))]
        return sorted(hits, key=lambda k: (shared[k], k), reverse=True)

    # ---- messages ---------------------------------------------------------------------------
    def user(self, entry_id: str, text: str, line: str, *, withdrawals: bool = True) -> RequestRecord | None:
        """A user message; ``line`` is its one-line form. Returns the new request, if any
        (``withdrawals=False``: its cancelling and deferring sentences are not applied)."""
        size = len(" ".join(text.split()))
        handled: list[str] = []
        own_deferral = ""  # a deferral naming no open request: the request it comes with is put off
        if withdrawals:
            handled += [s for s in withdrawing_sentences(text) if self._withdraw(s) or True]
            for s in deferring_sentences(text):
                if s in handled:
                    continue
                if self._defer(s):
                    handled.append(s)
                elif stance.stance(s) in stance.AFFIRMING:
                    own_deferral = own_deferral or s
        if handled and sum(len(s) for s in handled) >= 0.8 * size:
            return None  # all it says is a cancellation or a deferral
        first = next(_sentences(text), "")
        if size < 120 and stance.revises_newest(first):
            return None  # "scratch that, use NATS": a decision revised, not a request
        if is_goal_statement(text):
            return None  # the goal is what the work is for, not a request an answer settles
        if withdrawals and (self._dropped or self._deferred):
            # asked again for a dropped or deferred request: reopened, not a new one ("do the plot
            # after all"; or a dropped one asked again: most of its salient terms said again)
            gone = {
                k: None
                for k in [*_newest(self._dropped, MATCH_WINDOW), *_newest(self._deferred, MATCH_WINDOW)]
            }
            said = stance.terms(text)
            cue = bool(_REOPEN.search(text))
            again = [
                k
                for k in self._named(said, gone, loose=cue)
                if cue or (k in self._dropped and len(self._terms[k] & said) >= 0.6 * len(self._terms[k]))
            ]
            if again and (cue or not own_deferral):
                self._set(again[0], "open", f"reopened: {line}")
                return self._records[again[0]]
        record = RequestRecord(entry_id, line, "open")
        key = self._add(record)
        self._turn[key] = None
        if own_deferral:
            self._set(key, "deferred", f"(user) {own_deferral}")
        return self._records[key]

    def _withdraw(self, sentence: str) -> bool:
        candidates = {
            k: None for k in [*_newest(self._turn, MATCH_WINDOW), *_newest(self._deferred, MATCH_WINDOW)]
        }
        if not candidates:
            return False
        said = stance.terms(sentence) - _WITHDRAW_WORDS
        named = self._named(said, candidates, loose=True)
        if named:
            best = named[0]
        elif not said or _WITHDRAW_BACK.search(sentence):
            best = max(candidates)  # a bare "never mind", "drop that": the newest request
        else:
            return False  # it names something no open request is about (done already, or never asked)
        self._set(best, "dropped", sentence)
        return True

    def _defer(self, sentence: str) -> bool:
        """A user sentence that puts a request off ("later, not now"): the one it names, or the
        newest open one."""
        if not self._turn or stance.stance(sentence) not in stance.AFFIRMING:
            return False  # "if we moved to X ... not now": a hypothetical defers nothing
        named = self._named(stance.terms(sentence), self._turn, loose=True)
        if not named and len(sentence.split()) > 6 and not stance.has_cjk(sentence):
            return False  # a long sentence that names no open request is about something else
        key = named[0] if named else next(reversed(self._turn))
        self._set(key, "deferred", f"(user) {sentence}")
        return True

    def answer(self, text: str, outcome: str) -> list[tuple[RequestRecord, RequestRecord]]:
        """A final answer: settles its turn's newest open request, the open ones it names, and
        the deferred ones it reports finished. Returns (before, after) for every request it
        changed. Linear: only the requests it settles (found through the term index) are touched;
        open ones carried forward stay where they are."""
        changed: list[tuple[RequestRecord, RequestRecord]] = []
        if not self._turn and not self._deferred:
            return changed
        newest = next(reversed(self._turn)) if self._turn else None
        put_off: dict[int, str] = {}
        settle: dict[int, None] = {}
        question = newest is not None and self._records[newest].text.rstrip().endswith(("?", "？"))
        if newest is not None and not question:  # a question is answered by what the answer says
            for sentence in deferring_sentences(text):
                if stance.stance(sentence, "assistant") == "historical" or _STATE_UNTIL.search(sentence):
                    continue  # "we used Mongo until 2024", "we'll be red until X": a state, nothing put off
                named = self._named(stance.terms(sentence), self._turn)
                if not named and _BACKREF.search(sentence):
                    named = [newest]  # "I'll do that once the backfill is done": the newest request
                for key in named:
                    put_off.setdefault(key, sentence)
            if not put_off:
                promise = _only_promised(text)
                if promise is not None and not _STATE_UNTIL.search(promise):  # "I'll plot it next"
                    put_off[newest] = promise
        # no outcome: an acknowledgment of a request for work, or a reopened request (done only
        # when reported finished)
        req = self._records[newest].text if newest is not None else ""
        unsettled = newest is not None and (
            (not question and acknowledges_only(text, req) and not _decides(req))
            or (_reopened(self._records[newest]) and not completing_sentences(text))
        )
        if newest is not None and not unsettled:
            settle[newest] = None
            if len(self._turn) > 1:  # an older open request this answer is about
                settle.update(dict.fromkeys(self._named(stance.terms(text), self._turn)))
        for key in sorted({*settle, *put_off}):
            before = self._records[key]
            if key in put_off:
                self._set(key, "deferred", put_off[key])
            else:
                self._set(key, "done", outcome)
            changed.append((before, self._records[key]))
        if self._deferred:
            for sentence in completing_sentences(text):
                for key in self._named(stance.terms(sentence), self._deferred):
                    if key not in put_off and key in self._deferred:
                        before = self._records[key]
                        self._set(key, "done", sentence)
                        changed.append((before, self._records[key]))
        return changed


def counts(records: Iterable[RequestRecord]) -> dict[str, int]:
    """How many requests are in each state."""
    out = dict.fromkeys(STATUSES, 0)
    for r in records:
        out[r.status] += 1
    return out
