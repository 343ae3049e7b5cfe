"""Seeded pi sessions whose keep walk stops on an entry that is not a user or assistant message.

Issue 36 asked whether pi 0.73.1 and ``chars4`` agree when, after an earlier compaction, the entry a
plan keeps first is a ``bashExecution``, a ``custom_message`` or a ``branch_summary``. The random
generator (tests/pi_sessions.py) makes few of those cuts: its compactions keep from whatever cut
point it draws, and its sizes are random. The two generators here make them on purpose:

- ``generate_kept_first_session``: 1-3 compactions that each keep from one of those kinds, more of
  them after, short turns between; dense budgets find the cuts by chance.
- ``generate_keep_walk_session``: one planned cut. The session is sized in pi's own units
  (``estimateTokens``: ``ceil(chars / 4)`` per message entry, nothing for other entries) so that at
  the chosen budget pi's keep walk stops exactly on the entry of the chosen kind, by one of the
  ways pi's ``findCutPoint`` gets there (``WALK_ROUTES``), with the entry either at the newest
  compaction's first kept entry — where the walk's range starts — or after the compaction entry
  (``WALK_PLACEMENTS``).

The sizes are computed here with pi's formula for the few message shapes these builders write
(ASCII text only), not with our estimator: the fuzz then checks every estimate against pi anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final

from pi_sessions import _FILES, _WORDS, JSON, PiSessionFile, _Session

__all__ = [
    "NON_MESSAGE_FIRST_KEPT",
    "WALK_BUDGETS",
    "WALK_PLACEMENTS",
    "WALK_ROUTES",
    "generate_keep_walk_session",
    "generate_kept_first_session",
    "issue_36_session",
    "walk_shapes",
]

#: The entries pi can keep first that are not user or assistant messages (issue 36's shapes).
NON_MESSAGE_FIRST_KEPT: Final = ("bashExecution", "custom_message", "branch_summary")

#: How pi's keep walk reaches the entry it keeps first:
#: ``self`` — the running total reaches the budget at the entry itself (a ``bashExecution``: the
#: walk prices ``message`` entries only); ``result`` — it reaches it at the tool result just before
#: the entry, and the first cut point at or after that is the entry; ``backscan`` — it reaches it at
#: a user or assistant message after the entry (setting changes and labels may sit between), and
#: the cut is extended back over non-message entries to the entry (not a ``bashExecution``: it is a
#: message and stops the extension); ``keep_all`` — the budget is never reached and pi keeps from
#: the first cut point of the range, the entry at the compaction's boundary.
WALK_ROUTES: Final = ("self", "result", "backscan", "keep_all")
#: ``boundary``: the entry is the newest compaction's first kept entry (the compaction entry comes
#: later, before or after the crossing); ``after``: the entry comes after the compaction entry.
WALK_PLACEMENTS: Final = ("boundary", "after")
#: Budgets the walk sessions are sized for (1,000 is the issue's; drawn more often).
WALK_BUDGETS: Final = (1, 150, 500, 1000, 1500, 3000)


def walk_shapes() -> list[tuple[str, str, str]]:
    """Every ``(kind, placement, route)`` pi can produce, as ``generate_keep_walk_session`` makes them."""
    shapes = []
    for kind in NON_MESSAGE_FIRST_KEPT:
        for placement in WALK_PLACEMENTS:
            for route in WALK_ROUTES:
                if route == "self" and kind != "bashExecution":
                    continue  # pi's walk does not price custom_message or branch_summary entries
                if route == "backscan" and kind == "bashExecution":
                    continue  # the extension stops at a message
                if route == "result" and placement == "boundary":
                    continue  # the tool result would lie before the range
                if route == "keep_all" and placement == "after":
                    continue  # the first cut point of the range lies before the compaction
                shapes.append((kind, placement, route))
    return shapes


def _append_kind(session: _Session, kind: str) -> str:
    """Append one entry of ``kind`` (one of NON_MESSAGE_FIRST_KEPT) at the leaf; its id."""
    b = session.b
    if kind == "bashExecution":
        session.bash()
    elif kind == "custom_message":
        b.append(
            "custom_message",
            customType="todo-reminder",
            content=session.c.text(2, 40),
            display=session.rng.random() < 0.7,
            details={},
        )
    else:
        details = {"readFiles": session.rng.sample(_FILES, 1), "modifiedFiles": []}
        b.branch_with_summary(b.leaf_id, "Branch summary: " + session.c.text(5, 60), details, False)
    assert b.leaf_id is not None
    return b.leaf_id


def generate_kept_first_session(seed: int) -> PiSessionFile:
    """A session shaped so that, after 1-3 compactions on the path, pi's keep walk often stops on a
    ``bashExecution``, a ``custom_message`` or a ``branch_summary``.

    Each compaction keeps from one of those kinds (so the next plan's boundary starts there), and
    the entries after it mix more of them between short turns, so that keep budgets from a few
    tokens to a few thousand land the cut on each kind, at the boundary and after it.
    """
    session = _Session(10_000 + seed)
    rng, b = session.rng, session.b
    for _ in range(rng.randint(1, 4)):
        session.turn()
    kinds: list[str] = []
    for _ in range(rng.randint(1, 3)):
        for _ in range(rng.randint(0, 2)):
            rng.choice((session.turn, session.bash, session.extension))()
        kind = rng.choice(NON_MESSAGE_FIRST_KEPT)
        kinds.append(kind)
        first_kept = _append_kind(session, kind)
        for _ in range(rng.randint(0, 3)):
            rng.choice((session.turn, session.turn, session.bash, session.extension))()
        b.append(
            "compaction",
            summary="## Goal\n" + session.c.text(10, 60),
            firstKeptEntryId=first_kept,
            tokensBefore=session.context,
            details={"readFiles": rng.sample(_FILES, rng.randint(0, 2)), "modifiedFiles": []},
            fromHook=False,
        )
        for _ in range(rng.randint(0, 3)):
            kind = rng.choice(NON_MESSAGE_FIRST_KEPT)
            kinds.append(kind)
            _append_kind(session, kind)
            if rng.random() < 0.6:
                session.turn()
    session.turn()  # the file's leaf is its last entry
    return PiSessionFile(session.seed, b.header, b.entries, {"kept_first_kinds": kinds})


# ---------------------------------------------------------------------------------------------
# Planned keep walks
# ---------------------------------------------------------------------------------------------

_ASCII_WORDS: Final = tuple(w for w in _WORDS if w.isascii())
_COMMAND: Final = "ls -la"


class _Walk:
    """Appends entries of an exact pi size (``ceil(chars / 4)``, ASCII text) to a ``_Session``."""

    def __init__(self, session: _Session) -> None:
        self.s = session
        self.rng = session.rng

    def text(self, chars: int) -> str:
        words: list[str] = []
        size = -1
        while size < chars:
            words.append(self.rng.choice(_ASCII_WORDS))
            size += len(words[-1]) + 1
        return " ".join(words)[:chars]

    def user(self, tokens: int) -> None:
        b = self.s.b
        b.message({"role": "user", "content": self.text(4 * tokens), "timestamp": b.now_ms()})

    def assistant(self, tokens: int) -> None:
        blocks = [{"type": "text", "text": self.text(4 * tokens)}] if tokens else []
        self.s.b.message(self.s.assistant(blocks, "stop"))

    def bash(self, tokens: int) -> str:
        """A user ``!`` command of ``tokens`` (2 at least: the command alone is 6 characters)."""
        b = self.s.b
        output = self.text(max(4 * tokens - len(_COMMAND), 0))
        return b.message(
            {
                "role": "bashExecution",
                "command": _COMMAND,
                "output": output,
                "exitCode": 0,
                "cancelled": False,
                "truncated": False,
                "timestamp": b.now_ms(),
            }
        )

    def tool_round(self, result_tokens: int) -> None:
        """An assistant tool call and its result of ``result_tokens``."""
        b, s = self.s.b, self.s
        s.c.calls += 1
        arguments = {"path": self.rng.choice(_FILES[:5])}
        call = {
            "type": "toolCall",
            "id": f"call_w{s.seed}_{s.c.calls}",
            "name": "read",
            "arguments": arguments,
        }
        b.message(s.assistant([call], "toolUse"))
        b.message(
            {
                "role": "toolResult",
                "toolCallId": call["id"],
                "toolName": "read",
                "content": [{"type": "text", "text": self.text(4 * result_tokens)}],
                "isError": False,
                "timestamp": b.now_ms(),
            }
        )

    def text_message(self, tokens: int) -> None:
        """A user or an assistant message of ``tokens``."""
        (self.user if self.rng.random() < 0.5 else self.assistant)(tokens)

    def note(self) -> None:
        """An extension's custom message: a cut point, but pi's walk does not price it."""
        self.s.b.append("custom_message", customType="note", content=self.text(9))

    def unpriced(self) -> None:
        """One entry pi's walk does not price (and that is no cut point)."""
        b, rng = self.s.b, self.rng
        roll = rng.random()
        if roll < 0.3:
            b.label(rng.choice(b.entries)["id"], rng.choice(("here", "bug")))
        elif roll < 0.55:
            b.append("model_change", provider="openai", modelId=rng.choice(("gpt-test", "gpt-big")))
        elif roll < 0.75:
            b.append("thinking_level_change", thinkingLevel=rng.choice(("off", "high")))
        elif roll < 0.9:
            b.append("custom", customType="plan-state", data={"step": rng.randint(0, 9)})
        else:
            b.append("session_info", name=self.text(12))

    def priced(self, total: int) -> list[Callable[[], None]]:
        """Steps appending message entries whose pi sizes add up to exactly ``total``, with unpriced
        entries (and now and then an unpriced cut point) between them."""
        rng = self.rng
        parts: list[int] = []
        left = total
        while left > 0:
            part = left if rng.random() < 0.4 else rng.randint(1, left)
            parts.append(part)
            left -= part
        steps: list[Callable[[], None]] = []
        for part in parts:
            steps.append(partial(self.text_message, part))
            if rng.random() < 0.3:
                steps.append(self.unpriced)
            if rng.random() < 0.15:
                steps.append(self.note)
        if not steps or rng.random() < 0.3:
            steps.append(self.unpriced)
        return steps


def _compaction(session: _Session, first_kept: str) -> None:
    rng = session.rng
    session.b.append(
        "compaction",
        summary="## Goal\n" + session.c.text(10, 60),
        firstKeptEntryId=first_kept,
        tokensBefore=session.context,
        details={"readFiles": rng.sample(_FILES, rng.randint(0, 2)), "modifiedFiles": []},
        fromHook=False,
    )


def _append_first_kept(walk: _Walk, kind: str, bash_tokens: int) -> str:
    b = walk.s.b
    if kind == "bashExecution":
        return walk.bash(bash_tokens)
    if kind == "custom_message":
        content: Any = walk.text(walk.rng.randint(8, 400))
        b.append("custom_message", customType="todo-reminder", content=content, display=True, details={})
    else:
        details: JSON = {"readFiles": walk.rng.sample(_FILES, 1), "modifiedFiles": []}
        b.branch_with_summary(
            b.leaf_id, "Branch summary: " + walk.text(walk.rng.randint(8, 400)), details, False
        )
    assert b.leaf_id is not None
    return b.leaf_id


def generate_keep_walk_session(seed: int) -> PiSessionFile:
    """A session where pi's plan at ``notes["budget"]`` keeps first the entry ``notes["first_kept_id"]``,
    of kind ``notes["kind"]``, placed and reached as ``notes["placement"]`` and ``notes["route"]``
    say. Seeds cycle through ``walk_shapes()``, then through the budgets (1,000 three times in
    eight; 1 only where the entry can be kept with nothing after it priced)."""
    shapes = walk_shapes()
    kind, placement, route = shapes[seed % len(shapes)]
    session = _Session(20_000 + seed)
    rng, b = session.rng, session.b
    walk = _Walk(session)
    budgets = [x for x in (*WALK_BUDGETS, 1000, 1000) if x > 1 or route in ("self", "backscan")]
    budget = budgets[seed // len(shapes) % len(budgets)]

    for _ in range(rng.randint(1, 3)):
        session.turn()
    if rng.random() < 0.4:  # an older compaction too
        session.compact()
        session.turn()

    if placement == "after":
        if not session.compact():
            _compaction(session, b.entries[0]["id"])
        for _ in range(rng.randint(0, 2)):
            session.turn()  # ends on an assistant message: the extension back stops there

    # what follows the crossing entry must add up to less than the budget, and with it to more
    kept_size = 0  # the first kept entry's own size when it comes after the crossing
    if route in ("result", "keep_all") and kind == "bashExecution":
        kept_size = rng.randint(2, min(budget // 3, 200))
    tail = rng.randint(0, budget - 1 - kept_size)
    crossing = budget - kept_size - tail + rng.randint(0, 300)
    compaction_from = 0  # where in ``after`` the boundary compaction may go
    if route == "self":
        first_kept = walk.bash(crossing)
        after = walk.priced(tail)
    elif route == "result":
        for _ in range(rng.randint(0, 1)):
            walk.unpriced()
        walk.tool_round(crossing)
        first_kept = _append_first_kept(walk, kind, kept_size)
        after = walk.priced(tail)
    elif route == "backscan":
        first_kept = _append_first_kept(walk, kind, 0)
        after = [walk.unpriced for _ in range(rng.randint(0, 2))]
        after.append(partial(walk.text_message, crossing))
        compaction_from = len(after)  # the extension back stops at a compaction entry
        after += walk.priced(tail)
    else:  # keep_all: everything from the boundary on adds up to less than the budget
        first_kept = _append_first_kept(walk, kind, kept_size)
        after = walk.priced(tail)

    if placement == "boundary":  # the compaction keeps from the entry and comes anywhere after it
        at = rng.randint(compaction_from, len(after))
        after.insert(at, partial(_compaction, session, first_kept))
    for step in after:
        step()
    if b.entries[-1]["type"] == "compaction":
        walk.unpriced()  # pi plans nothing on a path that ends in a compaction
    notes = {
        "kind": kind,
        "placement": placement,
        "route": route,
        "budget": budget,
        "first_kept_id": first_kept,
    }
    return PiSessionFile(session.seed, b.header, b.entries, notes)


def issue_36_session(kind: str) -> PiSessionFile:
    """The shape issue 36 reported, by hand: after a compaction, a 1,000-token keep walk stops on
    an entry of ``kind`` (index 7 of the branch, the header not counted; the compaction keeps from
    index 2). pi 0.73.1 plans it as a split turn starting at that entry, with an empty prefix."""
    session = _Session(36)
    b, walk = session.b, _Walk(session)
    walk.user(400)
    walk.assistant(400)
    walk.user(300)
    first_kept = b.entries[-1]["id"]
    walk.assistant(300)
    walk.tool_round(50)
    _compaction(session, first_kept)
    _append_first_kept(walk, kind, 100)  # index 7
    if kind == "bashExecution":
        walk.user(500)  # 400 + 500 + the command's 100 reach 1,000 at the command itself
    else:
        walk.unpriced()  # a setting change, label, custom entry or session name
        walk.user(600)  # 400 + 600 reach 1,000 here; the cut moves back to the entry
    walk.assistant(400)
    return PiSessionFile(36, b.header, b.entries, {"kind": kind, "first_kept_index": 7})
