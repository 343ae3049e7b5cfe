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

Which parts of a user message are rules, decisions, a goal or a request: ``core.user_statements``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from ipython_compact.core.drift import render_block
from ipython_compact.core.entries import PIN, Entry, entry_text, text_of_content
from ipython_compact.core.facts import OLD_CHARS, clip_sentences, dedupe_sentences, supersedes
from ipython_compact.core.history_marks import replaced_mark
from ipython_compact.core.stance import revises_newest
from ipython_compact.core.user_statements import (
    GOAL_MAX_CHARS,
    constraint_spans,
    decision_spans,
    is_goal_statement,
    is_request,
)

AnchorKind = Literal["goal", "constraint", "pin"]

PIN_MAX_CHARS: Final = 4000
MAX_SUPERSEDED: Final = 8  # superseded anchors kept (for the same-line history mark), newest last


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
