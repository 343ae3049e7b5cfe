"""The marks a line gets when it names values that do not hold: dropped, replaced, not adopted.

Why: a checkpoint line may hold an old value beside the new one ("PgBouncer is out; RDS Proxy from
now on"), or name a value only to reject it ("we are not moving to GCP", "we are not adding
Temporal"). The line stays (its current part is true), but a reader must not take the other value
as what holds, so the line carries a mark saying which kind of value it names. Every layer that
writes a line (anchors, the decision book, the ledger, the offline summary) marks it here.

What must hold: pure; a mark never changes the line's text, only follows it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from ipython_compact.core import stance

NAMES_REPLACED: Final = " — (what it names as dropped is replaced)"


# a move that is said not to happen: "we are not moving to GCP", "won't switch to Yarn",
# "wir wechseln nicht zu X", "不迁移到 X"; group "value" is what is not adopted
_NOT_MOVING: Final = re.compile(
    r"\b(?i:not|never|won'?t|aren'?t|isn'?t|no plans? (?:for|of)) (?i:be )?(?i:moving|migrating|switching|"
    r"going|changing|move|migrate|switch|change|adopt(?:ing)?)(?i: over| away)? (?i:to|onto) (?i:the )?"
    r"(?P<value>[A-Z0-9](?:[\w.+/-]*[\w+/-])?(?: [A-Z0-9](?:[\w.+/-]*[\w+/-])?)?)"
    r"|\b(?i:wechseln|migrieren|ziehen) (?i:wir )?nicht (?i:zu|auf|nach) (?P<de>[\w.+/-]+)"
    r"|(?:不迁移到|不迁到|不换成|不改用|不会迁移到)\s*(?P<cjk>[A-Za-z0-9][\w.+/-]*)"
    # "we are not adding Temporal", "won't introduce Kafka", "not using Redis": a capitalised object
    r"|\b(?i:not|never|won'?t) (?i:be )?(?i:adding|add|introducing|introduce|using|use|bringing in|"
    r"taking on)(?i: the)? (?P<obj>[A-Z][\w.+/-]*[\w+])"
)


def not_adopted(text: str) -> list[str]:
    """The values ``text`` says it will not move to (a negated move: "We are not moving to GCP"):
    named, but never what holds."""
    return list(dict.fromkeys(next(v for v in m.groups() if v) for m in _NOT_MOVING.finditer(text)))


def replaced_mark(text: str) -> str:
    """The mark a current line gets when it names the old value it replaced ("PgBouncer is out;
    RDS Proxy from now on", a ``sed s/a/b/``): the old value on it is history, not current; or
    when it names a value only to say it is not adopted ("not moving to GCP")."""
    if stance.dropped_values(text) or (("s/" in text or "\n-" in text) and stance.code_changes(text)):
        return NAMES_REPLACED
    return not_adopted_mark(text)


def not_adopted_mark(text: str) -> str:
    """The mark a line gets when it names values only to say they are not adopted."""
    rejected = not_adopted(text)
    return f" — (not adopted: {', '.join(rejected)})" if rejected else ""


def value_replaced_mark(line: str, replaced: Sequence[str]) -> str:
    """The mark for a line that names one of the ``replaced`` values (``decisions.replaced_values``:
    values a later decision replaced on the same key), else ""."""
    named = [v for v in replaced if re.search(rf"(?<![\w.]){re.escape(v)}(?![\w.])", line, re.IGNORECASE)]
    return f" — (names a value since replaced: {', '.join(named)})" if named else ""
