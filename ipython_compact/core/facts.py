"""Facts with a lifetime: when a later statement replaces an earlier one, and how a line reads.

Why: a checkpoint is what the agent believes after a compaction. A user who changes a decision,
a quantity with a new value, a constraint revised: the later statement supersedes the earlier one,
and the checkpoint must state only the current one as current (the earlier one stays in the log,
recallable by its entry id). Every layer (anchors, the offline summary's sections, the ledger,
the drift guard) asks the same two questions, answered here once:

- ``supersedes(new, old)``: does ``new`` replace ``old``? Yes when ``new`` names what it replaces
  ("DuckDB instead of Postgres", "switch from X to Y", "replace X with Y", "no longer X",
  "X, not Y") and ``old`` says it, or when the two say the same thing about the same subject with
  one value changed ("the decision threshold is 0.5" / "... is now 0.35": one contiguous change of
  at most ``MAX_CHANGED`` words, the unchanged words at least half of the longer statement and at
  least two of them content words). Two statements that differ in several places ("the root
  cause is A in x.py" / "... is B in y.py") are two facts, not one revised.
- ``replaced_note(old, entry_id)``: the same-line history mark ("— replaced: A (entry 1a2b3c4d)").

And how a line reads (issue 18, item 5): ``dedupe_sentences`` (a text that repeats a sentence says
it once), ``clip_sentences`` (cut at a sentence boundary, a word boundary only when the first
sentence alone is too long).

What must hold: pure and deterministic; every function is linear in its input's length (the
layers call ``supersedes`` against a bounded number of kept items only).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal

from ipython_compact.core import stance

#: One sentence of a line: up to a sentence mark followed by a space or the end (anchors, the
#: offline summarizer and the clipping below split with the same rule).
SENTENCE_RE: Final = re.compile(r"\S.*?(?:[.!?。！？](?=\s|$)|$)")

MAX_CHANGED: Final = 4  # words on either side of the one change between two statements of a subject
OLD_CHARS: Final = 90  # the replaced text as it is quoted on the new line

_WORD: Final = stance.WORD_RE
_STOP: Final = stance.COMMON_WORDS
# words that only mark a revision; dropped before two statements are compared
_REVISION_WORDS: Final = frozenset(
    [
        "actually",
        "now",
        "instead",
        "anymore",
        "rather",
        "from",
        "on",
        "ok",
        "okay",
        "so",
        "please",
        "update",
        "correction",
    ]
)


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (identifiers such as ``run-7f3a`` or ``0.35`` are one word)."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry meaning (no stop words, at least 3 characters or a digit)."""
    return {w for w in words(text) if _is_content(w)}


def replaced_phrases(text: str) -> list[set[str]]:
    """The terms of each phrase ``text`` says it replaces (``core.stance.named_old``: "instead of
    X", "X is out", "statt X", "不再用 X", ...); empty when it names none."""
    return [set(p) for p in stance.named_old(text)]


# a version in a file name: v3, ver3, version3, rev3 after a separator (churn_v3.pkl, model-rev12.pt);
# a bare number is not one (ledger_01.py and ledger_02.py are two files, not two versions)
_VERSION: Final = re.compile(r"(?i)(?<![^\W_])(v|ver|version|rev)[_\-.]?\d+(?=[._\-/]|$)")


def version_key(path: str) -> str:
    """``path`` with its version numbers replaced: two versions of one artifact share the key."""
    return _VERSION.sub(lambda m: f"{m.group(1)}#", path)


def _compared(text: str) -> list[str]:
    return [w for w in words(text) if w not in _REVISION_WORDS]


def _is_content(word: str) -> bool:
    return word not in _STOP and (len(word) >= 3 or any(c.isdigit() for c in word))


def one_change(new: str, old: str, *, values_only: bool = False) -> bool:
    """Whether ``new`` says what ``old`` says with its value changed (see the module doc): one
    contiguous change of at most ``MAX_CHANGED`` words that share none, or, word for word, one
    word with a digit differs ("CUDA 12.4" / "CUDA 12.6"; with ``values_only`` several may:
    "the best run is run-17 with auc=0.81" / "... run-23 with auc=0.84"). Either way the unchanged words are
    at least half of the longer statement and at
    least two of them content words. ``values_only``: the second form only (reports such as "Here
    is the tenure view." / "... the region view." are two reports, not one value changed)."""
    a, b = _compared(new), _compared(old)
    if not a or not b or a == b:
        return False
    if len(a) == len(b):
        differ = [i for i in range(len(a)) if a[i] != b[i]]
        values = all(any(c.isdigit() for c in a[i]) and any(c.isdigit() for c in b[i]) for i in differ)
        # one value changed; several only for results ("run-17 … auc=0.81"): "keep log 7 under
        # app_7" / "log 8 under app_8" are two rules whose subject has a number in it. The subject
        # comes first: "Chunk 13 loaded; the mean is 19.5" / "Chunk 14 …" are two chunks.
        if values and (len(differ) == 1 or values_only) and sum(map(_is_content, a[: differ[0]])) >= 2:
            shared = [a[i] for i in range(len(a)) if a[i] == b[i]]
            return len(shared) * 2 >= len(a) and sum(map(_is_content, shared)) >= 2
    if values_only:
        return False
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    j = 0
    while j < n - i and a[-1 - j] == b[-1 - j]:
        j += 1
    changed_a, changed_b = a[i : len(a) - j], b[i : len(b) - j]
    if not changed_a or not changed_b or max(len(changed_a), len(changed_b)) > MAX_CHANGED:
        return False
    if set(changed_a) & set(changed_b):
        return False  # a word both keep inside the change: two changes ("A in x.py" / "B in y.py")
    shared = a[:i] + (a[len(a) - j :] if j else [])
    if len(shared) * 2 < max(len(a), len(b)):
        return False
    return sum(map(_is_content, shared)) >= 2


def supersedes(
    new: str, old: str, *, values_only: bool = False, loose: bool | Literal["strict"] = True
) -> bool:
    """Whether the later statement ``new`` replaces the earlier ``old`` (``core.stance.replaces``:
    only a statement that affirms replaces anything; it names what it replaces, sets the same key
    to another value, or says the same with one value changed; ``values_only``: see
    ``one_change``; ``loose`` (not with ``values_only``): or it sets the same subject to another
    value, ``stance.value_changed``)."""
    if new == old:
        return False
    return stance.replaces(
        new,
        old,
        one_change=lambda a, b: one_change(a, b, values_only=values_only),
        loose=False if values_only else loose,
    )


def replaced_note(old: str, entry_id: str | None = None) -> str:
    """The history mark on the line of the statement that replaced ``old``."""
    where = f" (entry {entry_id})" if entry_id else ""
    return f" — replaced: {clip_sentences(old, OLD_CHARS)}{where}"


_NOTE: Final = re.compile(
    r" — replaced: .*$| — \((?:what it names as dropped is replaced|not adopted: [^()]*)\)$"
)


def without_note(line: str) -> str:
    """``line`` without its history marks (what the statement itself says; a line can carry two:
    "— (what it names as dropped is replaced) — replaced: …")."""
    while True:
        bare = _NOTE.sub("", line)
        if bare == line:
            return bare
        line = bare


REVISED_MARK: Final = " — since revised"
_KEY_CHARS: Final = 48


def mark_revised(lines: Iterable[str], replaced: Iterable[str]) -> list[str]:
    """``lines`` with each one that says a statement from ``replaced`` (its first words) marked
    ``— since revised``: a Done line, an open request or the goal that states a value a later
    decision replaced is history, not what holds. Linear: one key per replaced statement, each
    line lower-cased once."""
    keys = {
        key
        for r in replaced
        if len(
            key := " ".join(without_note(r).removeprefix("(user) ").rstrip("…").lower().split())[:_KEY_CHARS]
        )
        >= 20
    }
    if not keys:
        return list(lines)
    out = []
    for line in lines:
        low = " ".join(line.lower().split())
        stale = " — replaced" not in line and REVISED_MARK not in line and any(k in low for k in keys)
        out.append(line + REVISED_MARK if stale else line)
    return out


def replaced_texts(lines: Iterable[str]) -> list[str]:
    """The statements the history marks of ``lines`` name (``— replaced: A (entry X)`` → A)."""
    out = []
    for line in lines:
        at = line.find(" — replaced: ")
        if at >= 0:
            old = line[at + len(" — replaced: ") :]
            out.append(re.sub(r" \(entry [^)]*\)(?:, superseded\))?$", "", old).strip('"'))
    return out


def dedupe_sentences(text: str) -> str:
    """``text`` with each sentence said once (whitespace collapsed): a request pasted eight times
    reads as one request."""
    one = " ".join(text.split())
    if len(one) < 40:
        return one
    parts = one.split(". ")
    if len(parts) == len(set(parts)) and "!" not in one and "?" not in one and "。" not in one:
        return one  # no sentence ending in ". " said twice (the common case, one C-level split)
    seen: set[str] = set()
    out: list[str] = []
    for m in SENTENCE_RE.finditer(one):
        sentence = m.group(0).strip()
        key = sentence.lower()
        if key not in seen:
            seen.add(key)
            out.append(sentence)
    return " ".join(out)


def clip_sentences(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, cut after the last whole sentence that
    fits; when the first sentence alone is longer, cut at a word boundary with an ellipsis."""
    one = " ".join(text.split())
    if len(one) <= limit:
        return one
    if limit <= 1:
        return "…"[:limit]
    end = 0
    for m in SENTENCE_RE.finditer(one):
        if m.end() > limit:
            break
        if m.group(0).rstrip()[-1:] in ".!?。！？":
            end = m.end()
    if end:
        return one[:end].rstrip()
    cut = one[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def restates(new: str, old: str) -> bool:
    """Whether two statements name the same thing they replace ("switch to DuckDB instead of
    Postgres" / "Switching storage to DuckDB instead of Postgres"): the same decision, said twice."""
    a = replaced_phrases(new)
    return bool(a) and any(p in a for p in replaced_phrases(old))


_SPEAKER: Final = re.compile(r"^\((?:user|assistant)\) ")


def newest_current(items: Iterable[str], cap: int) -> list[str]:
    """The newest ``cap`` of ``items`` (oldest first in, oldest first out), each older item that a
    newer kept one supersedes left out: a restatement silently, a replaced statement as the
    newer one's mark ``— replaced: old``. Linear: every item is compared with at most ``cap``
    kept ones."""
    kept: list[str] = []  # newest first
    for item in reversed(list(items)):
        if len(kept) >= cap:
            break
        plain = _SPEAKER.sub("", without_note(item))
        current = [_SPEAKER.sub("", without_note(k)) for k in kept]
        if plain in current or any(restates(k, plain) for k in current):
            continue
        by = next(
            (i for i, k in enumerate(current) if supersedes(k, plain) or stance.value_changed(k, plain)), None
        )
        if by is None and current and stance.revises_newest(current[-1]) and " — replaced: " not in kept[-1]:
            by = len(current) - 1  # "scratch that, use NATS" replaces the statement just before it
        if by is None:
            kept.append(item)
        elif " — replaced: " not in kept[by]:
            kept[by] += replaced_note(plain)
    return list(reversed(kept))
