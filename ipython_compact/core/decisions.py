"""Decisions with a lifetime: the current revision of every decision, built by code from the raw log.

Why: on the LLM path only the model's summary carried decisions. A model that drops a section,
paraphrases a value ("threshold of 0.x") or never notices that the user changed their mind
leaves the agent without the user's current choice, and nothing deterministic after the summary
said it (the anchors carry the user's *constraints*, the ledger its requests). So the ledger
folds every decision of the summarized span through this book and shows, after the summary,
each current decision that the text before it (anchors and summary) does not already state
(issue 18, items 1 and 2).

Rules (log order):
- A decision is a user sentence that decides (``core.anchors.user_decisions``: "let's go with
  X", "X instead of Y", "from now on ...", "switch to X", "set X to Y", or one that starts with
  "use": "Use a decision threshold of 0.42 for the retention list.") or an assistant sentence that
  chooses (``assistant_decisions``: "I'll use X", "we decided", "switching the model to X",
  "going with X", "X instead of Y", "settled on X"). An explanation alone ("because ...", "the root cause is
  ...") is a finding, not a decision; a question decides nothing.
- A later statement that supersedes a current decision (``core.facts.supersedes``: it names what
  it replaces, or says the same with one value changed) replaces it: the old one leaves the
  current list and the new one carries its history mark ("— replaced: A (entry X)"). A user
  constraint sentence (``core.anchors``) that supersedes a decision replaces it the same way
  (the anchors block states that constraint). A restatement (same text, or naming the same
  replaced thing, or the same values and most of the same words: "Let's use X." / "I'll use X as
  you asked.") is one decision: the first statement is kept.
- Bounded: the newest ``MAX_DECISIONS`` current decisions are kept.

Showing (``shown_lines``): a decision is left out when a line of the text before it states it
(its exact words, or every value-like word and three quarters of its content words on one line,
history marks ignored), or when a line there states a *newer* revision of it that this book did
not see (a line that supersedes it, is none of its known earlier texts and has no value blurred
to a placeholder such as "0.x"): the model's updated
summary is never contradicted, and no superseded statement is re-asserted.

What must hold: pure and deterministic; ``fold(fold(b, x), y) == fold(b, x + y)``; linear in the
span (each decision sentence is compared with at most ``MAX_DECISIONS`` kept ones).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ipython_compact.core import history_marks, stance
from ipython_compact.core.entries import Entry, entry_text, text_of_content, tool_calls_of
from ipython_compact.core.facts import (
    SENTENCE_RE,
    clip_sentences,
    content_words,
    replaced_note,
    restates,
    supersedes,
    without_note,
)
from ipython_compact.core.user_statements import constraint_spans, user_decisions

Speaker = Literal["user", "assistant"]

MAX_DECISIONS: Final = 40  # current decisions kept (newest)
SHOW_DECISIONS: Final = 12  # shown after the summary (newest first)
DECISION_CHARS: Final = 240
MAX_EARLIER: Final = 4  # earlier texts a decision remembers (to tell a stale line from a newer one)
COVERED: Final = 0.75  # share of a decision's content words a line must hold to state it

# an assistant sentence that chooses (no bare "because", "root cause" or "decision": findings)
_ASSISTANT_DECISION: Final = re.compile(
    r"(?i)\b(?:decided|chose|choos(?:e|ing)|opted|settled on|going with|go with|"
    r"(?:i|we)(?:'ll| will| am going to|'m going to) (?:use|switch|go with|stick with|keep using)|let'?s use|"
    r"switch(?:ed|ing)? (?:[\w -]{1,30} )?(?:to|from)|instead of|rather than|in favou?r of)\b"
)
_ASSISTANT_HINTS: Final = (
    "decid",
    "chose",
    "choos",
    "opted",
    "settled",
    "go with",
    "going with",
    "'ll use",
    "will use",
    "going to use",
    "let's use",
    "lets use",
    "switch",
    "stick",
    "keep using",
    "instead",
    "rather",
    "favo",
)
_ASSISTANT_HINT: Final = re.compile("|".join(re.escape(h) for h in _ASSISTANT_HINTS))  # one scan, not 20
# a value a paraphrase blurred: "0.x", "12.x", "1.2.x"
_PLACEHOLDER: Final = re.compile(r"\d[.,]x$|^x+$")
_SPEAKER: Final = re.compile(r"^\((?:user|assistant)\) ")
_ITEM_PREFIX: Final = re.compile(r"^(?:[-*+]\s+(?:\[[ xX-]\]\s+)?|\d+[.)]\s+)")


def _sentences(text: str) -> Iterable[str]:
    for line in text.split("\n"):
        for m in SENTENCE_RE.finditer(line):
            yield m.group(0).rstrip()


def assistant_decisions(text: str) -> list[str]:
    """The sentences of an assistant message that choose something ("I'll use X", "switching to Y")."""
    # one scan of the whole text decides whether to read it sentence by sentence (the common case: no)
    if not _ASSISTANT_HINT.search(text.lower()) or not _ASSISTANT_DECISION.search(text):
        return []
    return [
        s
        for s in _sentences(text)
        if _ASSISTANT_DECISION.search(s) and not s.endswith(("?", ":")) and len(s.split()) >= 4
    ]


@dataclass(frozen=True)
class DecisionRecord:
    """One current decision: who stated it where, and the statements it replaced (newest last)."""

    entry_id: str
    speaker: Speaker
    text: str
    earlier: tuple[tuple[str, str], ...] = ()  # (text, entry id) of the revisions it replaced

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"entry_id": self.entry_id, "speaker": self.speaker, "text": self.text}
        if self.earlier:
            out["earlier"] = [list(e) for e in self.earlier]
        return out

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> DecisionRecord:
        speaker = obj.get("speaker")
        if speaker not in ("user", "assistant"):
            raise ValueError(f"decision {obj!r}: speaker must be user or assistant")
        return DecisionRecord(
            str(obj["entry_id"]),
            speaker,
            str(obj["text"]),
            tuple((str(t), str(i)) for t, i in obj.get("earlier") or []),
        )

    @property
    def replaced(self) -> tuple[str, str] | None:
        """(text, entry id) of the statement this one replaced, if any."""
        return self.earlier[-1] if self.earlier else None

    def line(self) -> str:
        """How the ledger shows it: the statement, who said it where, and what it replaced."""
        old = self.replaced
        mark = replaced_note(old[0], old[1]) if old else ""
        mark = mark or history_marks.replaced_mark(self.text)  # it names the old value it replaced
        return f"- {self.text}  ({self.speaker}, entry {self.entry_id}){mark}"


def fold(current: Sequence[DecisionRecord], entries: Iterable[Entry]) -> tuple[DecisionRecord, ...]:
    """The current decisions after ``entries`` (log order), oldest first (see the module doc)."""
    kept = list(current)
    # (sentence, speaker, only as a revision) tried against the kept list as it is now, that changed
    # nothing: a sentence repeated across a span (a rule restated in every request) is compared once
    tried: set[tuple[str, Speaker, bool]] = set()
    proposals: list[str] = []  # the assistant's last suggestions: a decision once the user takes one
    for entry in entries:
        msg = entry.message
        role = msg.get("role") if msg is not None else None
        if msg is None or role not in ("user", "assistant", "toolResult"):
            continue
        if role == "toolResult":  # a diff an output shows (``git diff``) changed values in code
            output = text_of_content(msg.get("content"))
            if "\n@@" in output or output.startswith(("diff --git", "@@")):
                _code_changed(kept, entry.id, "", stance.code_changes(output), output)
            continue
        # a user message as the anchors read it (the same text: one constraint scan per compaction);
        # an assistant's words to the user, not its tool calls or thinking
        text = entry_text(entry) if role == "user" else text_of_content(msg.get("content"))
        if role == "assistant":
            for call in tool_calls_of(msg):
                args = call.get("arguments")
                if isinstance(args, Mapping):
                    path = next((str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str)), "")
                    source = "\n".join(str(v) for v in args.values() if isinstance(v, str))
                    _code_changed(kept, entry.id, path, stance.code_changes(args), source)
        if not text.strip():
            continue
        if role == "user":
            found = user_decisions(text)
            taken = proposals if stance.accepts(text) else []
            proposals = []
            # a constraint can only revise a decision already kept
            revisions = [text[a:b] for a, b in constraint_spans(text)] if kept else []
            said: list[tuple[str, Speaker, bool]] = [
                (s, "user", s not in found) for s in dict.fromkeys([*found, *revisions])
            ]
            said[:0] = [(p, "user", False) for p in taken]
        else:
            chosen = assistant_decisions(text)
            proposals = [s for s in _sentences(text) if stance.stance(s, "assistant") == "proposed"]
            said = [
                (s, "assistant", False) for s in dict.fromkeys(chosen) if stance.own_decision(s, "assistant")
            ]
        for key in said:
            if key in tried:
                continue
            if _add(kept, entry.id, key[1], key[0], only_if_revision=key[2]):
                tried.clear()  # the kept list changed: every sentence may decide again
            else:
                tried.add(key)
        if len(kept) > 2 * MAX_DECISIONS:
            del kept[: len(kept) - MAX_DECISIONS]
    return tuple(kept[-MAX_DECISIONS:])


_PATH_KEYS: Final = ("path", "file_path", "filePath", "filename", "file")


def _code_changed(
    kept: list[DecisionRecord],
    entry_id: str,
    path: str,
    changes: Sequence[tuple[str, str, str]],
    source: str = "",
) -> None:
    """A value changed in code (an edit, ``sed``, a diff) is a decision (assistant): it replaces
    each kept decision that stated its old value about its key, and carries that history."""
    for key, old, new in changes:
        replaced = [k for k in kept if stance.replaced_by_code(k.text, key, old, new)]
        earlier: list[tuple[str, str]] = []
        for k in replaced:
            kept.remove(k)
            earlier.extend((*k.earlier, (k.text, k.entry_id)))
        text = clip_sentences(stance.change_statement(path, key, new, source), DECISION_CHARS)
        earlier = earlier or [(stance.change_statement("", key, old, source), entry_id)]  # its history mark
        kept.append(DecisionRecord(entry_id, "assistant", text, tuple(earlier[-MAX_EARLIER:])))


def _add(
    kept: list[DecisionRecord],
    entry_id: str,
    speaker: Speaker,
    sentence: str,
    *,
    only_if_revision: bool,
) -> bool:
    """Fold one statement into ``kept``; whether ``kept`` changed."""
    text = clip_sentences(sentence, DECISION_CHARS)
    if any(k.text == text or restates(text, k.text) for k in kept):
        return False  # said before: one decision
    replaced = [k for k in kept if supersedes(text, k.text) or stance.value_changed(text, k.text)]
    if not replaced and stance.revises_newest(text):
        # "scratch that, use NATS": the user's newest decision in force, also from an earlier
        # compaction (an assistant's reply about it, or a "noted" between, is not what it revises)
        replaced = [k for k in kept if k.speaker == "user"][-1:]
    if not replaced and any(_same(text, k.text) for k in kept):
        return False  # the same choice in other words ("Let's use X." / "I'll use X as you asked.")
    if only_if_revision and not replaced:
        return False  # a constraint that revises no decision: the anchors carry it
    earlier: list[tuple[str, str]] = []
    for old in replaced:
        kept.remove(old)
        earlier.extend((*old.earlier, (old.text, old.entry_id)))
    kept.append(DecisionRecord(entry_id, speaker, text, tuple(earlier[-MAX_EARLIER:])))
    return True


# the content words of a statement; a span restates the same few decisions many times
_words_of: Final = functools.lru_cache(maxsize=1024)(content_words)


def _same(a: str, b: str) -> bool:
    """Whether two statements say the same choice: the same values, and most content words shared."""
    wa, wb = _words_of(a), _words_of(b)
    return (
        bool(wa and wb)
        and len(wa & wb) >= COVERED * max(len(wa), len(wb))
        and _key_words(wa) == _key_words(wb)
    )


def replacements(records: Iterable[DecisionRecord], entry_ids: Iterable[str]) -> list[tuple[str, str]]:
    """(earlier, later) for each decision stated in ``entry_ids`` (a span) that replaced one."""
    ids = set(entry_ids)
    return [(r.earlier[-1][0], r.text) for r in records if r.earlier and r.entry_id in ids]


def _key_words(found: set[str]) -> set[str]:
    """Value-like words (a digit, or an identifier's ``_ . / -``): the part a paraphrase loses."""
    return {w for w in found if any(c.isdigit() for c in w) or any(c in w for c in "_./-")}


class _Shown:
    """The lines of the text before the ledger, read once: each line without its history mark."""

    def __init__(self, text: str) -> None:
        self.lines = [
            _SPEAKER.sub("", _ITEM_PREFIX.sub("", without_note(ln.strip())).strip())
            for ln in text.splitlines()
            if ln.strip()
        ]
        self.folded = [" ".join(ln.lower().split()) for ln in self.lines]
        self.words = [content_words(ln) for ln in self.lines]

    def states(self, record: DecisionRecord) -> bool:
        want = " ".join(record.text.lower().split()).rstrip(".")
        found = content_words(record.text)
        keys = _key_words(found)
        for folded, have in zip(self.folded, self.words, strict=True):
            if want in folded:
                return True
            if found and keys <= have and len(found & have) >= COVERED * len(found):
                return True
        return False

    def newer(self, record: DecisionRecord) -> bool:
        """Whether a line states a revision of ``record`` that is none of its earlier texts (so a
        newer one this book did not see): what the line says beyond ``record`` is in no earlier
        text."""
        mine = content_words(record.text)
        earlier = [content_words(t) for t, _ in record.earlier]
        for line, have in zip(self.lines, self.words, strict=True):
            extra = have - mine
            if any(_PLACEHOLDER.search(w) for w in extra):
                continue  # a value paraphrased away ("0.x"), not a new one
            if extra and not any(extra <= e for e in earlier) and supersedes(line, record.text, loose=False):
                return True
        return False


def replaced_pairs(records: Sequence[DecisionRecord]) -> list[tuple[str, str]]:
    """(key, value) of each value a later decision replaced on the same key (``compression:
    snappy`` before ``compression: zstd``) that no current decision holds: history."""

    def pairs(text: str) -> list[tuple[str, str]]:
        return stance.key_values(_WHERE.sub("", text))

    now = {v.lower() for r in records for _k, v in pairs(r.text)}
    old: dict[tuple[str, str], None] = {}
    for r in records:
        keys = {k for k, _v in pairs(r.text)}
        for text, _id in r.earlier:
            old.update(((k, v), None) for k, v in pairs(text) if k in keys and v.lower() not in now)
    return list(old)


def replaced_values(records: Sequence[DecisionRecord]) -> list[str]:
    """The values of ``replaced_pairs``: a line naming one names history. Values of one or two
    characters ("8", "16") are left out: they name too many other things."""
    return list(dict.fromkeys(v for _k, v in replaced_pairs(records) if len(v) > 2))


_WHERE: Final = re.compile(r" in \S+$")


def shown_lines(records: Sequence[DecisionRecord], shown: str = "") -> list[str]:
    """The ledger's decision lines: the newest ``SHOW_DECISIONS`` current decisions that ``shown``
    (the checkpoint text before the ledger) does not state, newest first; empty when none. A line
    naming a value a later decision replaced, and not marked yet, says so."""
    before = _Shown(shown)
    stale = replaced_values(records)
    out = [
        line if "replaced" in line else line + history_marks.value_replaced_mark(r.text, stale)
        for r in reversed(records)
        if not before.states(r) and not before.newer(r)
        for line in [r.line()]
    ][:SHOW_DECISIONS]
    if not out:
        return []
    return [
        "decisions in force, newest first (from the log; the text above does not state them; each holds "
        "until revised):",
        *out,
    ]
