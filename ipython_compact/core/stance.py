"""One model of what a statement is about, where it stands, and when: subject, stance, time.

Why (issue 32): every layer (anchors, the decision book, the offline summary's sections, the
drift guard, the request ledger, the update prompt's ``<superseded>`` block) asks whether a later
statement replaces an earlier one. An English phrase list plus a one-value diff answered it, with
no idea of mood, negation, who spoke, rejection, quotation, other languages or changes made in
code, and every layer inherited its mistakes. This module answers it once, from three readings
of a statement:

- **subject**: the salient terms it shares with others (content words; identifiers; in text
  without spaces, CJK character pairs), and for a ``key = value`` / ``key: value`` line its key,
  qualified by the section it sits in (``[staging] pool_size`` is not ``[production] pool_size``).
  Code says what it changes too: an edit's old and new text, a ``sed s/a/b/``, a diff's ``-``/``+``
  lines (``code_changes``).
- **stance**: ``decided`` (the user's choice, or the assistant's own "I'll use X"), ``proposed``
  (an assistant's suggestion: not a decision until the user takes it), ``accepted`` (the user
  taking it: "yes, do that"), ``rejected`` ("no, keep cron"), ``asked`` (a question),
  ``hypothetical`` ("if we switched to X ..."), ``quoted`` (someone else's text: a quoted old
  runbook), ``historical`` ("we used to ..."), ``stated`` (a report). Only a decided or accepted
  statement changes what holds.
- **time**: log order. The latest affirmed value per subject holds; an earlier one is history,
  shown only with a mark and its entry id (``facts.replaced_note``).

``replaces(new, old)`` is the one question every layer asks (``facts.supersedes`` delegates here).

What must hold: pure, deterministic, stdlib only; every function linear in its input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

Stance = Literal[
    "decided", "proposed", "accepted", "rejected", "asked", "hypothetical", "quoted", "historical", "stated"
]
AFFIRMING: Final = frozenset(["decided", "accepted"])

_CJK: Final = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]+")

# ---- stance -------------------------------------------------------------------------------------
# a question, in any of the languages we read: a question mark, or a leading question word
_ASKED: Final = re.compile(
    r"(?i)[?？]\s*[\"')\]]*$|^(?:should we|shall we|can we|could we|do we|did we|would it|is it|are we|"
    r"what about|how about|sollen wir|können wir|sollten wir)\b|吗[。.]?$|呢[。.]?$"
)
# a hypothetical or a thought experiment: it decides nothing ("if we switched to X ... no change for now")
_HYPOTHETICAL: Final = re.compile(
    r"(?i)^(?:just )?(?:if|suppose|supposing|assuming|hypothetically|imagine|in case|what if|were we to|"
    r"wenn wir|falls wir|angenommen|如果|假如|假设)\b|"
    r"\b(?:hypothetically|for the sake of argument|thought experiment|no change for now|"
    r"nothing changes? for now|not (?:deciding|changing) (?:anything )?(?:yet|now|for now)|"
    r"(?:would|could|might) (?:we |it )?(?:in theory|theoretically)|"
    r"if we (?:ever |were to |did |switched|moved|went)|just thinking (?:out loud|aloud))\b"
)
# rejection of a proposal or of a change: "No, keep cron", "let's not", "don't switch", "nein, ..."
_REJECTED: Final = re.compile(
    r"(?i)^(?:no|nope|nah|nein)\b[,.!]?\s|^(?:no|nope|nein)[.!]?$|^(?:不要|不用|别|不)[，,。！!]|"
    r"\b(?:let'?s not|rather not|we(?:'ll| will) not|won'?t (?:switch|move|change|use)|"
    r"don'?t (?:switch|move|change|replace|migrate)|do not (?:switch|move|change|replace|migrate)|"
    r"(?:keep|stay with|stick with) (?:the )?(?:current|existing|old)|reject(?:ed)?|turn(?:ed)? down|"
    r"not (?:going|moving) (?:to|with)|bleiben (?:wir )?bei|lieber nicht)\b"
)
# someone else's text: quoted, a pasted runbook or doc, a line starting with ">"
_QUOTED: Final = re.compile(
    r"(?i)^\s*>|^\s*[\"“„«].{8,}[\"”“»][.!]?\s*$|"
    r"\b(?:the (?:old|previous|former|legacy|original) (?:runbook|doc|docs|wiki|readme|guide|page|"
    r"policy|handbook|instructions?) (?:says?|said|reads?|read|stated?)|(?:runbook|wiki|docs?|readme|"
    r"handbook) (?:says|said|reads|read)|quot(?:e|ing|ed)|as (?:it|they|he|she) (?:says|said|put it)|"
    r"according to the (?:old|previous))\b"
)
# history: what held before, told as such
_HISTORICAL: Final = re.compile(
    r"(?i)\b(?:we used to|used to be|previously|back then|originally|in the past|last (?:year|quarter|month)|"
    # CJK has no word boundaries; after a date or time ("9 月之前") 之前 bounds a time, it tells no history
    r"früher|damals|letztes jahr)\b|(?<![\d月日年号点天周])(?:以前|之前)|去年"
)
# an assistant's suggestion (not a decision until the user takes it)
_PROPOSED: Final = re.compile(
    r"(?i)\b(?:i(?: would|'d|’d)? (?:suggest|propose|recommend)|"
    r"my (?:suggestion|recommendation)|(?:we|you) (?:could|might|may want to)|"
    r"how about|what about|one option|an option|option [a-z1-9]\b|shall i|should i|want me to|"
    r"would you like|do you want|maybe (?:we|use|switch)|consider(?:ing)? (?:using|switching|moving)|"
    r"alternatively|ich schlage vor|wir könnten|(?:proposal|suggestion|vorschlag)\s*:|建议|可以考虑)"
)
# the user taking the assistant's last proposal
_ACCEPTED: Final = re.compile(
    r"(?i)^(?:yes|yep|yeah|sure|ok(?:ay)?|agreed|sounds good|good idea|go ahead|do it|let'?s do (?:it|that)|"
    r"please do|approved|ja|genau|einverstanden|好的?|可以|行)\b(?!\s*,?\s*but\b)"
)


def stance(sentence: str, speaker: str = "user") -> Stance:
    """Where ``sentence`` stands (see the module doc); ``speaker`` is ``user`` or ``assistant``."""
    s = sentence.strip()
    if not s:
        return "stated"
    if _QUOTED.search(s):
        return "quoted"
    if _ASKED.search(s) or (has_cjk(s) and ("？" in s or "要不要" in s or "吗？" in s)):
        return "asked"
    if _HYPOTHETICAL.search(s):
        return "hypothetical"
    if _HISTORICAL.search(s):
        return "historical"
    if speaker == "assistant":
        return "proposed" if _PROPOSED.search(s) else "decided"
    if _REJECTED.search(s):
        return "rejected"
    if _ACCEPTED.match(s):
        return "accepted"
    return "decided"


def affirms(sentence: str, speaker: str = "user") -> bool:
    """Whether ``sentence`` can change what holds (a decision, or a proposal taken)."""
    return stance(sentence, speaker) in AFFIRMING


def accepts(sentence: str) -> bool:
    """Whether a user sentence takes the assistant's last proposal ("yes, do that")."""
    return bool(_ACCEPTED.match(sentence.strip())) and not _REJECTED.search(sentence)


def rejects(sentence: str) -> bool:
    """Whether a user sentence turns a proposal or a change down ("No, keep cron")."""
    return bool(_REJECTED.search(sentence.strip()))


_QUOTE_PAIRS: Final = re.compile(r'"[^"\n]{6,}"|“[^”\n]{6,}”|„[^“”\n]{6,}[“”]|«[^»\n]{6,}»|「[^」\n]{2,}」')
# a line that introduces someone else's text ("Here is the old runbook, for reference:")
_INTRO: Final = re.compile(
    r"(?i)\b(?:runbook|wiki|docs?|documentation|readme|handbook|policy|guide|manual|excerpt|quot\w*|"
    r"pasted?|for reference|old|previous|legacy|original|says|said|wrote|email|ticket|message)\b"
)


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of ``text`` that quote someone else: text in quotation marks, lines that
    start with ``>``, a fenced block, and the lines a "the old runbook says:" line introduces (up
    to the next blank line). A sentence inside one states nothing of the speaker's own."""
    out = [(m.start(), m.end()) for m in _QUOTE_PAIRS.finditer(text)]
    offset = 0
    introduced = fenced = False
    for line in text.split("\n"):
        end = offset + len(line)
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            out.append((offset, end))
        elif fenced or stripped.startswith(">") or (introduced and stripped):
            out.append((offset, end))
        if not stripped:
            introduced = False
        elif stripped.endswith((":", "：")) and _INTRO.search(stripped):
            introduced = True
        offset = end + 1
    return out


def inside(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether ``start:end`` lies within one of ``spans``."""
    return any(a <= start and end <= b + 1 for a, b in spans)


def own_decision(sentence: str, speaker: str = "user") -> bool:
    """Whether a sentence can be a decision of the speaker's own: not a question, a hypothetical,
    a quotation, history, a rejection or (the assistant's) a proposal."""
    return stance(sentence, speaker) in AFFIRMING


# ---- subject ------------------------------------------------------------------------------------
#: A word: identifiers such as ``run-7f3a`` or ``0.35`` are one (facts and stance split alike).
WORD_RE: Final = re.compile(r"[\w][\w.%+/#@=-]*[\w%]|[\w]")
#: Words that name no subject in any statement (facts compares statements with these left out).
COMMON_WORDS: Final = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "our",
        "my",
        "your",
        "its",
        "their",
        "to",
        "of",
        "for",
        "in",
        "on",
        "at",
        "by",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "now",
        "new",
        "current",
        "currently",
        "and",
        "or",
        "but",
        "so",
        "we",
        "i",
        "you",
        "it",
        "let's",
        "lets",
        "please",
        "just",
        "also",
        "then",
        "actually",
        "instead",
        "anymore",
        "any",
        "will",
        "would",
        "should",
        "shall",
        "can",
        "could",
        "do",
        "does",
        "did",
        "done",
        "not",
        "no",
        "yes",
        "ok",
        "okay",
    ]
)
_WORD: Final = WORD_RE
#: Stances also leave out the verbs that only say a change is made.
_STOP: Final = COMMON_WORDS | frozenset(
    [
        "use",
        "using",
        "used",
        "keep",
        "set",
        "make",
        "go",
        "going",
        "switch",
        "switched",
        "change",
        "changed",
        "move",
        "moved",
        "always",
        "never",
        "must",
        "prefer",
        "avoid",
        "ensure",
        "sure",
        "from",
        "here",
        "there",
    ]
)


def terms(text: str) -> frozenset[str]:
    """The salient terms of ``text``: its content words (lower-cased; identifiers such as
    ``run-7f3a`` or ``0.35`` are one word; an identifier's parts too: ``max_retries`` gives
    ``max`` and ``retries``), and in CJK text every pair of adjacent characters."""
    out: set[str] = set()
    for w in _WORD.findall(text.lower()):
        if _CJK.search(w):
            for run in _CJK.findall(w):
                out.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
            w = _CJK.sub(" ", w).strip()
            if not w:
                continue
        if w in _STOP or (len(w) < 3 and not any(c.isdigit() for c in w)):
            continue
        out.add(w)
        if any(c in w for c in "_-") and not any(c.isdigit() for c in w):
            out.update(p for p in re.split(r"[_-]", w) if len(p) >= 3 and p not in _STOP)
    return frozenset(out)


def values(text: str) -> frozenset[str]:
    """The value-like terms of ``text``: a digit in them, or a capitalised/identifier word."""
    found = {w for w in _WORD.findall(text) if any(c.isdigit() for c in w)}
    found |= {w.lower() for w in re.findall(r"\b[A-Z][\w.+-]*[A-Za-z0-9]\b", text) if not _at_start(text, w)}
    found |= {w.lower() for w in re.findall(r"`([^`]{1,60})`", text)}
    found |= {w for w in _WORD.findall(text.lower()) if "+" in w.strip("+")}  # "fra+eng", "c++17"
    found |= {m.lower() for m in re.findall(r"[A-Za-z][\w.+-]*", " ".join(_CJK.split(text))) if has_cjk(text)}
    return frozenset(found - _STOP)


def _at_start(text: str, word: str) -> bool:
    return text.lstrip().startswith(word) and not any(c.isupper() for c in word[1:])


def has_cjk(text: str) -> bool:
    """Whether ``text`` has CJK characters (no spaces between its words)."""
    return bool(_CJK.search(text))


# a key = value line (config, YAML, TOML, an assignment, a flag): key and value
_KEY_VALUE: Final = re.compile(
    r"^\s*(?:export\s+|[-+]\s*)?(?P<key>[A-Za-z_][\w.-]{1,60})\s*(?::|=|:=)\s*"
    r"(?P<value>[^\s#][^#\n]{0,120}?)\s*,?(?:\s+#.*)?$"  # a trailing "# comment" is no part of it
)
_SECTION: Final = re.compile(r"^\s*\[(?P<name>[\w.\- ]{1,60})\]\s*$|^(?P<yaml>[A-Za-z_][\w.-]{0,60}):\s*$")


def key_values(text: str) -> list[tuple[str, str]]:
    """(key, value) of every ``key = value`` / ``key: value`` line of ``text``; a key under a
    ``[section]`` header or an unindented YAML ``section:`` is qualified: ``staging.pool_size``."""
    out: list[tuple[str, str]] = []
    section, indented_only = "", False
    for line in text.split("\n"):
        m = _SECTION.match(line)
        if m:
            section = (m.group("name") or m.group("yaml") or "").strip().lower()
            indented_only = m.group("yaml") is not None
            continue
        kv = _KEY_VALUE.match(line)
        if kv is None or kv.group("value").startswith(("//", "=")):
            continue
        key = kv.group("key").lower()
        if section and (line[:1].isspace() or not indented_only):
            key = f"{section}.{key}"
        elif indented_only and not line[:1].isspace():
            section = ""
        out.append((key, kv.group("value").strip().strip("\"'")))
    return out


# ---- changes in code ------------------------------------------------------------------------------
_SED: Final = re.compile(
    r"\bsed\b[^|;&\n]*?\bs(?P<d>[/|#,])(?P<old>(?:(?!(?P=d)).){1,120})(?P=d)(?P<new>(?:(?!(?P=d)).){0,120})(?P=d)"
)
_EDIT_OLD: Final = ("old_string", "old_str", "oldText", "old_text", "old", "search", "find")
_EDIT_NEW: Final = ("new_string", "new_str", "newText", "new_text", "new", "replace", "replacement")


def code_changes(args: Mapping[str, Any] | str) -> list[tuple[str, str, str]]:
    """(key, old value, new value) for each value a tool call's arguments change: an edit's old
    and new text, a ``sed s/old/new/`` in a command, a diff's ``-``/``+`` lines. ``key`` is the
    assignment's target where there is one, else the changed text's shared context."""
    if isinstance(args, str):
        texts = [args]
        old_text = new_text = None
    else:
        old_text = next((str(args[k]) for k in _EDIT_OLD if isinstance(args.get(k), str)), None)
        new_text = next((str(args[k]) for k in _EDIT_NEW if isinstance(args.get(k), str)), None)
        texts = [str(v) for v in args.values() if isinstance(v, str)]
    out: list[tuple[str, str, str]] = []
    if old_text is not None and new_text is not None:
        out.extend(_paired(key_values(old_text), key_values(new_text)))
    for text in texts:
        for m in _SED.finditer(text):
            old, new = m.group("old"), m.group("new")
            before, after = dict(key_values(old.replace("\\", ""))), dict(key_values(new.replace("\\", "")))
            pairs = _paired(list(before.items()), list(after.items()))
            out.extend(pairs or [(old.strip("^$\\ "), old.strip("^$\\ "), new.strip("^$\\ "))])
        if "\n-" in text and "\n+" in text:
            minus = [ln[1:] for ln in text.split("\n") if ln.startswith("-") and not ln.startswith("---")]
            plus = [ln[1:] for ln in text.split("\n") if ln.startswith("+") and not ln.startswith("+++")]
            out.extend(_paired(key_values("\n".join(minus)), key_values("\n".join(plus))))
    return list(dict.fromkeys(out))


def _paired(old: list[tuple[str, str]], new: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    before = dict(old)
    return [(k, before[k], v) for k, v in new if k in before and before[k] != v]


def change_statement(path: str, key: str, value: str, source: str = "") -> str:
    """How a value set in code reads as a statement (the decision book folds it): the line as
    ``source`` (the edit, command or diff) writes it ("dpi: 400"), else ``key = value``."""
    where = f" in {path}" if path else ""
    said = re.search(rf"{re.escape(key.rsplit('.', 1)[-1])}\s*[:=]\s*{re.escape(value)}", source)
    return f"{said.group(0) if said else f'{key} = {value}'}{where}"


# ---- time: does a later statement replace an earlier one -----------------------------------------
# what a statement says it replaces, in the languages we read; group "old" is the replaced thing
_OLD_NAMED: Final = re.compile(
    r"(?i)(?:\b(?:instead of|rather than|in place of|no longer(?: (?:use|using|need|want|do|keep|report))?|"
    r"switch(?:ed|ing)? (?:away )?from|replac(?:e|es|ed|ing)|drop(?:ped|ping)?(?: the)?|"
    r"moved? away from|migrat(?:e|ed|ing) (?:away )?from|mov(?:e|ed|ing)(?: it| them| the \w+)? off|"
    r"(?:get|got|getting) rid of|stop(?:ped|ping)? (?:doing|using|running)|no more|"
    r"statt|anstatt|anstelle von|nicht mehr|au lieu de|plus de|en lugar de|en vez de|ya no)\s+"
    r"(?P<old>[^.,;:!?()，。；]{1,60}?)"
    r"(?=\s+(?:with|to|for|by|in|on|because|and|but|as|since|nehmen|verwenden|wir)\b|[.,;:!?()，。；]|$)"
    r"|(?:不再用|不再使用|不用|代替|取代)\s*(?P<cjk>[^.,;:!?()，。；\s]{1,30}))"
)
_OLD_BEFORE: Final = re.compile(
    r"(?i)(?P<old>\b[\w.+-]+(?: [\w.+-]+){0,2}) (?:is|are) (?:out|gone|dead|dropped|retired|deprecated)\b"
)
# ", not today" / ", nicht jetzt" names a time, not a replaced value
_NOT_AFTER_COMMA: Final = re.compile(
    r"[,;]\s*(?:not|nicht|no)\s+(?!(?i:today|now|yet|tonight|tomorrow|jetzt|heute|maintenant|hoy|ahora)\b)"
    r"(?P<old>[^.,;:!?()]{1,40}?)(?=[.,;:!?()]|$)"
)
# the statement revises the newest decision, whatever it was about ("scratch that", "revert it")
_ANAPHORIC: Final = re.compile(
    r"(?i)^(?:actually,? |ok(?:ay)?,? |wait,? |sorry,? )?(?:scratch that|forget that|strike that|"
    r"on second thought|(?:revert|change|set|put|bump|move|make|turn) (?:it|that|this)\b|"
    r"correction\b|vergiss das|doch lieber)"
)


# a statement that sets or changes something, beyond the phrases above: "bump X to 8", "X from
# now on", "ab jetzt X", "改用 X", "换成 X", "nehmen wir X"
_SETS: Final = re.compile(
    r"(?i)\b(?:(?:bump|raise|lower|increase|decrease|reduce|revert|reset|roll back|change|set|make|"
    r"move|switch|put|turn|pin|update)\b[^.!?\n]{0,40}?\bto\b\s*\S|from now on|going forward|"
    r"from (?:today|here) on|ab (?:jetzt|sofort|heute)|von nun an|(?:nehmen|setzen|stellen|verwenden|"
    r"nutzen) wir|on passe (?:à|a|sur)|passons (?:à|a)|à partir de maintenant|desde ahora|a partir de ahora)|"
    r"改用|换成|改成|改为|以后用|今后用"
)


# an imperative that picks a value: "use X", "go with X", "setz X", "nimm X"
_USES: Final = re.compile(
    r"(?i)(?:^|[,;:.!—-]\s*)(?:use|go with|pick|take|setz(?:e|t)?|nimm|nehmt|nutze?)\s+\S"
)


def complains(text: str) -> bool:
    """Whether a sentence says a value is wrong ("0.15 ist zu lasch", "16 is too much") and sets
    none in its place: it is about to drop that value, not a statement of what holds."""
    return bool(_DROP_PREDICATE.search(text)) and not (sets_value(text) or _USES.search(text))


def sets_value(text: str) -> bool:
    """Whether a sentence sets or changes something (a change verb with its new value, a time
    marker such as "from now on", what it replaces, or "scratch that"): a decision candidate
    (its stance still decides)."""
    return bool(_SETS.search(text)) or revises_newest(text) or bool(named_old(text))


# a clause that drops the value it is about: the value, then a negated or too-much/too-little
# predicate ("APA 7 won't pass", "0.15 ist zu lasch", "0.33 误报太多了"): its subject is the old value
_DROPPED_CLAUSE: Final = re.compile(
    r"(?i)(?P<old>(?<![\w.+/-])[\w.+/-]+(?: [\w.+/-]+){0,1})\s+(?:won'?t|will not|doesn'?t|does not|didn'?t|"
    r"can'?t|cannot|isn'?t|is not|wasn'?t|was not|is too|are too|was too|were too|ist zu|sind zu|war zu|"
    r"reicht nicht|taugt nicht)\b"
    r"|(?P<cjk>[A-Za-z0-9][\w.+/-]*)\s*(?:[^\s，。,.;；]{0,3}(?:太.|不够|不行|不好用))"
)
# the predicates of the two patterns above, alone: a cheap gate before them
_DROP_PREDICATE: Final = re.compile(
    r"(?i)\b(?:won'?t|will not|doesn'?t|does not|didn'?t|don'?t|do not|can'?t|cannot|isn'?t|is not|"
    r"wasn'?t|was not|is too|are too|was too|were too|ist zu|sind zu|war zu|reicht nicht|taugt nicht)\b"
    r"|太.|不够|不行|不好用"
)
# a negated verb with the value as its object: "they won't support a second Kafka"
_NEGATED_OBJECT: Final = re.compile(
    r"(?i)\b(?:won'?t|will not|don'?t|do not|doesn'?t|does not|can'?t|cannot) "
    r"(?:support|use|run|want|need|keep|allow) (?:(?:a|an|the|any|another|second|more) )*(?P<obj>[\w.+/-]+)"
)
# a clause telling how things stand before a change ("currently X, let's move to Y", "现在是 X，建议改成 Y")
_AS_IS: Final = re.compile(
    r"(?i)\b(?:currently|right now|at the moment|as of now|today we|bisher|derzeit|momentan|aktuell|"
    r"vorher|zuvor|auparavant)\b|现在是|目前是|目前用"
)


_CLAUSES: Final = re.compile(r"[，。；;！!？?]|[.,](?=\s)")


def _shape(value: str) -> str:
    """A value's kind: a number, or a name."""
    return "number" if re.fullmatch(r"[\d.,]+%?", value) else "name"


def dropped_values(text: str) -> list[str]:
    """The values ``text`` names only to drop them, beside another value of their kind that takes
    their place: what it says it replaces (``named_old``), and a value whose own clause negates it
    or calls it too much or too little ("switch to ACM, APA 7 won't pass"; "0.15 ist zu lasch,
    setz 0.095"), and the values of a clause told as history ("we used to run 3, now 5"). A
    complaint with no other value of its kind on the line, or on a line that sets nothing (a
    report: "Python 3.12 is not supported by numba 0.58 yet"), drops nothing."""
    found = [" ".join(sorted(p)) for p in named_old(text)]
    predicate = _DROP_PREDICATE.search(text) is not None
    if not (predicate or _HISTORICAL.search(text) or _AS_IS.search(text)):
        return found  # the common line: no clause that could drop a value (values() is the cost)
    clauses = _CLAUSES.split(text)
    history = [bool(_HISTORICAL.search(c)) for c in clauses]
    as_is = [bool(_AS_IS.search(c)) for c in clauses]
    all_values = values(text)
    change = next((i for i, c in enumerate(clauses) if _SETS.search(c) or _USES.search(c)), len(clauses))
    for i, clause in enumerate(clauses):
        if not (history[i] or as_is[i]):
            continue
        old = set(values(clause))
        if change < len(clauses) and i != change and as_is[i] and old:
            found.append(" ".join(sorted(old)))  # how it stands, then a change: the change says what follows
        elif history[i] and any(_shape(o) == _shape(v) for o in old for v in all_values - old):
            found.append(" ".join(sorted(old)))  # told as history beside a value of its kind
    changes = predicate and bool(sets_value(text) or _USES.search(text))
    for m in [*_DROPPED_CLAUSE.finditer(text), *_NEGATED_OBJECT.finditer(text)] if changes else []:
        said = next((v for v in m.groupdict().values() if v), "").lower().split()
        old = {v for v in all_values if v in said}
        if not old:
            continue
        others = all_values - old
        if any(_shape(o) == _shape(v) for o in old for v in others):
            found.append(" ".join(sorted(old)))
    return list(dict.fromkeys(found))


def named_old(text: str) -> list[frozenset[str]]:
    """The terms of each thing ``text`` says it replaces; empty when it names none."""
    out: list[frozenset[str]] = []
    for m in _OLD_NAMED.finditer(text):
        found = terms(m.group("old") or m.group("cjk") or "")
        if found and found not in out:
            out.append(found)
    for rx in (_OLD_BEFORE, _NOT_AFTER_COMMA):
        for m in rx.finditer(text):
            found = terms(m.group("old"))
            if found and found not in out:
                out.append(found)
    return out


def revises_newest(text: str) -> bool:
    """Whether ``text`` revises whatever was decided last ("Scratch that, use NATS", "Revert it
    to 3"): the caller applies it to its newest affirmed statement."""
    return bool(_ANAPHORIC.search(text.strip()))


def _rest(text: str) -> frozenset[str]:
    """The terms of ``text`` outside what it says it replaces."""
    cut = _OLD_BEFORE.sub(" ", _NOT_AFTER_COMMA.sub(" ", _OLD_NAMED.sub(" ", text)))
    return terms(cut)


_INLINE_KV: Final = re.compile(r"\b([A-Za-z_][\w.-]*[A-Za-z_])=(\w[\w.+-]*)")  # "set max_retries=8 for ..."


def same_key_changed(new: str, old: str) -> bool:
    """Whether both statements set one key (same section) to different values."""
    a, b = dict(key_values(new) + _INLINE_KV.findall(new)), dict(key_values(old) + _INLINE_KV.findall(old))
    return any(k in b and b[k] != v for k, v in a.items())


def shares_subject(new: str, old: str, need: int = 2, strict: bool = False) -> bool:
    """Whether two statements are about one subject: ``need`` salient terms in common (one when
    either statement has no more than two, unless ``strict``)."""
    a, b = terms(new) - values(new), terms(old) - values(old)
    both = a & b
    cjk = sum(1 for t in both if has_cjk(t))
    shared = len(both) - cjk + cjk // 3  # character pairs overlap by chance: three count as one term
    return shared >= need or (not strict and shared >= 1 and min(len(a), len(b)) <= 2)


def value_changed(new: str, old: str, strict: bool = False) -> bool:
    """Whether two statements about one subject set it to different values: each has a value the
    other lacks, and they share at least two subject terms (``shares_subject``)."""
    va, vb = values(new), values(old)
    da, db = va - vb, vb - va
    low = new.lower()  # "0.72, the 0.85 rejects too many": the new value first, then the old one named
    named = bool(da and vb) and not db and max(low.find(v) for v in da) < min(low.find(v) for v in vb)
    if not da or (not db and not named):
        return False
    # a number inside another changed word names the subject ("log 8 under app_8"): two rules
    if any(x != y and x in y for d in (da, db) for x in d for y in d):
        return False
    return shares_subject(new, old, 1 if named else 2, strict)


def replaces(
    new: str,
    old: str,
    *,
    one_change: Any = None,
    speaker: str = "user",
    loose: bool | Literal["strict"] = True,
) -> bool:
    """Whether the later statement ``new`` replaces the earlier ``old``: ``new`` affirms (a
    decision, not a question, hypothetical, rejection or quotation) and either names what it
    replaces and ``old`` says it, or sets the same key to another value, or (``one_change``, the
    caller's word-level diff) says the same with one value changed, or (``loose``: statements of
    choices, not reports of results) sets the same subject to another value (``value_changed``;
    ``"strict"``: two subject terms in common, however short the statements)."""
    if new == old or not affirms(new, speaker):
        return False
    old_terms = None
    for phrase in named_old(new):
        old_terms = terms(old) if old_terms is None else old_terms
        if phrase <= old_terms and not phrase <= _rest(new):
            return True
    if same_key_changed(new, old):
        return True
    if one_change is not None and one_change(new, old):
        return True
    return bool(loose) and value_changed(new, old, strict=loose == "strict")


def replaced_by_code(statement: str, key: str, old: str, new: str) -> bool:
    """Whether an earlier ``statement`` stated the value a code change replaced: it says the old
    value, not the new one, and names the key (its parts: ``max_retries`` → max, retries)."""
    if not old or old == new:
        return False
    low = statement.lower()
    val = old.lower()
    if val not in low or (new and new.lower() in low):
        return False
    if not re.search(rf"(?<![\w.]){re.escape(val)}(?![\w])", low):
        return False
    key_terms = terms(key.replace(".", " ").replace("_", " ").replace("-", " "))
    return bool(key_terms) and len(key_terms & terms(statement)) >= max(1, min(2, len(key_terms)))
