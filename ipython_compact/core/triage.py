"""Five-layer triage of the span being compacted: ANCHOR, RECENT TAIL, ENCODE, EXTERNALIZE, DISCARD.

Why: compaction is a design problem, not a summary problem. Every entry of history gets one
decision, in this order: first fence off what must not change (anchors, handled by
``core.anchors``; the recent tail, chosen by the cut point), then decide what goes into the
checkpoint, and only last what is thrown away.

- EXTERNALIZE: a tool output larger than a threshold is replaced, for the summarizer, by its head,
  its tail and a pointer ``[entry 123 · 24,013 lines · recall 123]``; the full text stays in the
  log and can be recalled by id. The pointer keeps a *gist* (``Gist``): a few head and tail lines
  within a small character budget (the way Prime keeps head 2000 + tail 500 characters, smaller),
  the error line of a traceback, and the identifiers found in the output (ids, paths, versions,
  hashes, metric=value pairs; ``drift.output_identifiers``, tail first). The end of an output is
  where results are: the run id and final metric of a training log, the last line of a traceback.
- DISCARD: an exact duplicate of an earlier message in the span (same role, same text; not an
  assistant's answer to a new user message, which settles that request), a repeated
  identical run (the same single tool call with the same arguments and the same output), and a
  superseded attempt: a failed tool call followed later in the span by a call of the same tool on
  the same target that did not fail. Their errors still reach the ledger, which reads raw entries.

What must hold:
- Every entry of ``to_summarize`` lands in exactly one of encode / externalized / discarded (an
  externalized entry is also in encode, in its shortened form); ``kept`` is passed through.
- A tool call and its result are discarded together or not at all.
- Pure and deterministic; token counts come from the caller's ``tokens`` function.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ipython_compact.core.drift import output_identifiers
from ipython_compact.core.entries import Entry, entry_text
from ipython_compact.core.identifiers import extract_identifiers
from ipython_compact.core.triage_facts import Decision, decide, facts_of, output_text

EXTERNALIZE_LINES: Final = 200
EXTERNALIZE_CHARS: Final = 8000
HEAD_LINES: Final = 12
# the gist a pointer carries (characters; each line clipped to GIST_LINE_CHARS)
GIST_HEAD_LINES: Final = 2
GIST_HEAD_CHARS: Final = 240
GIST_TAIL_LINES: Final = 3
GIST_TAIL_CHARS: Final = 360
GIST_LINE_CHARS: Final = 160
GIST_IDENTIFIERS: Final = 10
GIST_IDENTIFIER_CHARS: Final = 360


def pointer_text(entry_id: str, lines: int) -> str:
    """The in-context pointer to an externalized entry."""
    return f"[entry {entry_id} · {lines:,} lines · recall {entry_id}]"


def approx_tokens(entry: Entry) -> int:
    """Fallback estimate (characters / 4) when the caller has no stored estimates."""
    return (len(entry_text(entry)) + 3) // 4


# An error line (``ValueError: ...``, ``pkg.mod.Fault``), matched over the whole output at once:
# ``^``/``$`` at line ends and ``[^\S\n]`` (whitespace but no newline) keep every match inside one
# line, so the last match is the last error line, found in one C pass instead of one call per line.
_ERROR_LINE: Final = re.compile(
    r"^[^\S\n]*((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault)\b(?::.*)?)$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Gist:
    """What a pointer keeps of the output it replaces: the few lines and strings that matter.

    What must hold: ``head`` + ``tail`` stay within ``GIST_HEAD_CHARS`` + ``GIST_TAIL_CHARS``
    characters, ``identifiers`` within ``GIST_IDENTIFIERS`` strings and ``GIST_IDENTIFIER_CHARS``
    characters; every string is taken verbatim from the output (a clipped line ends in "…").
    """

    head: tuple[str, ...] = ()
    tail: tuple[str, ...] = ()
    error: str | None = None
    identifiers: tuple[str, ...] = ()
    call: str | None = None  # what produced the output: the call's first line (names its subject)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "head": list(self.head),
            "tail": list(self.tail),
            "error": self.error,
            "identifiers": list(self.identifiers),
        }
        if self.call:
            out["call"] = self.call
        return out

    @staticmethod
    def from_json(obj: Any) -> Gist:
        if not isinstance(obj, Mapping):
            return Gist()
        error, call = obj.get("error"), obj.get("call")
        return Gist(
            tuple(str(x) for x in obj.get("head") or ()),
            tuple(str(x) for x in obj.get("tail") or ()),
            None if error is None else str(error),
            tuple(str(x) for x in obj.get("identifiers") or ()),
            None if call is None else str(call),
        )

    def text(self) -> str:
        """All the gist's strings in one text (what a reader of the pointer sees)."""
        return "\n".join(
            [
                *([self.call] if self.call else []),
                *self.head,
                *self.tail,
                *([self.error] if self.error else []),
                *self.identifiers,
            ]
        )


def _gist_line(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= GIST_LINE_CHARS else line[: GIST_LINE_CHARS - 1] + "…"


def _take(lines: Sequence[str], count: int, budget: int) -> list[str]:
    out: list[str] = []
    used = 0
    for line in lines:
        if len(out) >= count:
            break
        clipped = _gist_line(line)
        if out and used + len(clipped) > budget:
            break
        out.append(clipped)
        used += len(clipped)
    return out


GIST_MEMO_SIZE: Final = 16_384
_gist_memo: dict[tuple[int, int, str | None], tuple[str, str, Gist]] = {}


def make_gist(output: str, call: str | None = None) -> Gist:
    """The gist of a large output (pure; linear in the output's length); ``call`` is the one-line
    form of what produced it (a code cell's first line, a command), clipped.

    Remembered per output (its length, hash, first and last characters, and ``call``; at most
    ``GIST_MEMO_SIZE``, oldest forgotten first): each plan of a session re-triages the same span,
    and the identifier scan of every large output was most of a 100,000-entry plan (issue 37).
    The memo holds no reference to the output, only the gist."""
    key = (len(output), hash(output), call)
    known = _gist_memo.get(key)
    if known is not None and known[0] == output[:64] and known[1] == output[-64:]:
        return known[2]
    gist = _make_gist(output, call)
    if len(_gist_memo) >= GIST_MEMO_SIZE:
        del _gist_memo[next(iter(_gist_memo))]
    _gist_memo[key] = (output[:64], output[-64:], gist)
    return gist


def forget_gists() -> None:
    """Empty ``make_gist``'s memo (a benchmark's cold round; results never depend on it)."""
    _gist_memo.clear()


def _make_gist(output: str, call: str | None) -> Gist:
    lines = [ln for ln in output.split("\n") if ln.strip()]
    head = _take(lines, GIST_HEAD_LINES, GIST_HEAD_CHARS)
    rest = lines[len(head) :]
    tail = list(reversed(_take(list(reversed(rest)), GIST_TAIL_LINES, GIST_TAIL_CHARS)))
    error: str | None = None
    if "Traceback (most recent call last)" in output or "Error" in output or "Exception" in output:
        last = None
        for last in _ERROR_LINE.finditer(output):  # noqa: B007 - the last match is the one kept
            pass
        if last is not None:
            error = _gist_line(last.group(1).strip())
    if error is not None and any(error.rstrip("…") in t for t in tail):
        error = None  # already in the tail
    idents: list[str] = []
    used = 0
    shown = "\n".join([*head, *tail])
    for _cls, value in output_identifiers(output):
        if len(idents) >= GIST_IDENTIFIERS:
            break
        if value in shown or (error and value in error) or used + len(value) > GIST_IDENTIFIER_CHARS:
            continue
        idents.append(value)
        used += len(value)
    return Gist(tuple(head), tuple(tail), error, tuple(idents), _gist_line(call) if call else None)


@dataclass(frozen=True)
class Pointer:
    """A large output moved out of the context, with the gist it keeps."""

    entry_id: str
    tool: str
    lines: int
    chars: int
    tokens: int
    gist: Gist | None = field(default_factory=Gist)
    """None when the triage only counted (a preview, ``triage(gists=False)``): no gist was made."""
    subject: str = ""  # the first identifier of the call that produced it (an index line names it)

    @property
    def text(self) -> str:
        return pointer_text(self.entry_id, self.lines)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "entry_id": self.entry_id,
            "tool": self.tool,
            "lines": self.lines,
            "chars": self.chars,
            "tokens": self.tokens,
            "gist": None if self.gist is None else self.gist.to_json(),
            "subject": self.subject,
        }
        if self.gist is None:
            del out["gist"]
        return out


# how many pointers a checkpoint carries: the newest with their gist, older ones as index items
CARRIED_WITH_GIST: Final = 6
CARRIED_INDEX: Final = 60
INDEX_SUBJECT_CHARS: Final = 40
INDEX_HEADER: Final = "older outputs (entry id, subject; recall by entry id):"


def subject_of(call: str) -> str:
    """What a call is about, in a few characters: its first identifier, else its first words."""
    found = extract_identifiers(call)
    if found:
        return found[0][1][:INDEX_SUBJECT_CHARS]
    return " ".join(call.split())[:INDEX_SUBJECT_CHARS]


def carry_pointers(
    carried: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The pointers the next checkpoint carries, oldest first: the newest ``CARRIED_WITH_GIST``
    with their gist, up to ``CARRIED_INDEX`` older ones reduced to an index item (entry id and
    subject; the gist is dropped). Why: the gist of a recent output is read, an old output only
    needs to be findable; an index item costs a few tokens, so the block reaches a fixed size.
    """
    new_ids = {str(p.get("entry_id")) for p in new}
    merged = [dict(p) for p in carried if str(p.get("entry_id")) not in new_ids] + [dict(p) for p in new]
    merged = merged[-(CARRIED_WITH_GIST + CARRIED_INDEX) :]
    for p in merged[: max(0, len(merged) - CARRIED_WITH_GIST)]:
        p.pop("gist", None)
    return merged


def externalized_lines(pointers: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ``<externalized>`` block's lines: one index line for the pointers without a gist
    (``INDEX_HEADER`` then ``ID subject`` items), then each pointer with a gist (``pointer_lines``).
    Outputs of one subject are one item, their ids oldest first (``ID, ID, ID subject``): a loop
    that calls ``load_step(k, seed=1337)`` 60 times names its subject once, not 60 times (the
    repeats were a third of the index and kept it growing for 90 compactions)."""
    index = [p for p in pointers if not p.get("gist")]
    out = []
    if index:
        groups: dict[str, list[str]] = {}
        for p in index:
            groups.setdefault(str(p.get("subject") or p.get("tool", "")), []).append(str(p.get("entry_id")))
        items = [f"{', '.join(ids)} {subject}".rstrip() for subject, ids in groups.items()]
        out.append(f"{INDEX_HEADER} " + " · ".join(items))
    for p in pointers:
        if p.get("gist"):
            out.extend(pointer_lines(p))
    return out


def pointer_lines(pointer: Mapping[str, Any]) -> list[str]:
    """The lines an ``<externalized>`` block shows for one pointer (its ``to_json`` form).

    The pointer itself, then its gist: head, tail, error line and identifiers, each prefixed so a
    model can tell them apart. A pointer stored before gists existed shows only its first line.
    """
    entry_id, lines = str(pointer.get("entry_id")), int(pointer.get("lines", 0))
    out = [
        f"{pointer_text(entry_id, lines)} {pointer.get('tool', '')} output, "
        f"{int(pointer.get('chars', 0)):,} chars"
    ]
    gist = Gist.from_json(pointer.get("gist"))
    if gist.call:
        out.append(f"  call: {gist.call}")
    out.extend(f"  head: {line}" for line in gist.head)
    out.extend(f"  tail: {line}" for line in gist.tail)
    if gist.error:
        out.append(f"  error: {gist.error}")
    if gist.identifiers:
        out.append("  ids: " + ", ".join(gist.identifiers))
    return out


@dataclass(frozen=True)
class Discarded:
    entry_id: str
    reason: str  # "duplicate of <id>" | "superseded by <id>"
    tokens: int

    def to_json(self) -> dict[str, Any]:
        return {"entry_id": self.entry_id, "reason": self.reason, "tokens": self.tokens}


@dataclass(frozen=True)
class Triage:
    encode: tuple[Entry, ...]
    externalized: tuple[Pointer, ...]
    discarded: tuple[Discarded, ...]
    kept: tuple[Entry, ...]
    tokens: Mapping[str, int] = field(default_factory=dict)  # summarize, encode, externalize, discard, keep
    gists: bool = True
    """False for a count only (``triage(gists=False)``): no gists, externalized entries not
    shortened in ``encode``; such a triage must never reach a summarizer."""

    def to_json(self) -> dict[str, Any]:
        return {
            "externalized": [p.to_json() for p in self.externalized],
            "discarded": [d.to_json() for d in self.discarded],
            "tokens": dict(self.tokens),
        }


def _clip_line(line: str, limit: int = 300) -> str:
    return line if len(line) <= limit else f"{line[:limit]}[... {len(line) - limit:,} more characters]"


def _shorten(entry: Entry, lines: list[str], pointer: str, gist: Gist | None = None) -> Entry:
    msg = dict(entry.data.get("message") or {})
    head = "\n".join(_clip_line(line) for line in lines[:HEAD_LINES])
    tail = [_clip_line(line) for line in lines[-3:]] if len(lines) > HEAD_LINES + 3 else []
    hidden = max(0, len(lines) - HEAD_LINES - len(tail))
    middle = f"\n[... {hidden:,} lines moved out of context ...]\n" if hidden else "\n"
    text = head + middle + "\n".join(tail) + f"\n{pointer}"
    if gist is not None and gist.error and all(gist.error.rstrip("…") not in t for t in tail):
        text += f"\nerror: {gist.error}"
    if gist is not None and gist.identifiers:
        text += "\nids: " + ", ".join(gist.identifiers)
    if msg.get("role") == "bashExecution":
        msg["output"] = text
    else:
        msg["content"] = [{"type": "text", "text": text}]
    data = dict(entry.data)
    data["message"] = msg
    return Entry(entry.id, entry.parent_id, entry.kind, entry.timestamp, data)


def one_line_tool(tool: str) -> str:
    """A tool name or a bash command on one short line (a multi-line command is cut)."""
    first = tool.strip().split("\n", 1)[0]
    return first if len(first) <= 60 else first[:59] + "…"


def _output_text(entry: Entry) -> str | None:
    msg = entry.message
    return None if msg is None else output_text(msg)


def triage(
    to_summarize: Sequence[Entry],
    kept: Sequence[Entry] = (),
    *,
    tokens: Callable[[Entry], int] = approx_tokens,
    externalize_lines: int = EXTERNALIZE_LINES,
    externalize_chars: int = EXTERNALIZE_CHARS,
    gists: bool = True,
) -> Triage:
    """Decide the fate of each entry in the span to summarize.

    One pass reads each entry's facts once (``triage_facts``: role, tool calls, text, output size;
    a 200,000-entry span is read once, not once per rule); ``decide`` applies the rules to them.

    ``gists=False`` only counts, for a preview: the same decisions, counts and pointers, but no
    pointer gets a gist and no externalized entry is shortened (``encode`` holds it as it is).
    Why: the gist's identifier scan of every large output was most of a first preview of a long
    session (issue 37), and a preview only shows how many entries and tokens move out."""
    decided = decide(
        [e.id for e in to_summarize],
        [facts_of(e) for e in to_summarize],
        externalize_lines,
        externalize_chars,
    )
    return assemble(to_summarize, kept, decided, tokens, gists)


def assemble(
    to_summarize: Sequence[Entry],
    kept: Sequence[Entry],
    decided: Decision,
    tokens: Callable[[Entry], int],
    gists: bool,
) -> Triage:
    """The triage of ``to_summarize`` as ``decided`` (``triage_facts.decide``): discarded entries,
    pointers (with gists and shortened entries only when ``gists``) and the token counts. Without
    gists only ids and token counts are read, so ``to_summarize`` may be skeletons
    (``triage_facts.skeleton_of``): what a preview reads instead of the entries."""
    discard = decided.discard
    encode: list[Entry] = []
    pointers: list[Pointer] = []
    discarded: list[Discarded] = []
    counts = {
        "summarize": 0,
        "encode": 0,
        "externalize": 0,
        "discard": 0,
        "keep": sum(tokens(e) for e in kept),
    }
    for position, entry in enumerate(to_summarize):
        cost = tokens(entry)
        counts["summarize"] += cost
        if entry.id in discard:
            discarded.append(Discarded(entry.id, discard[entry.id], cost))
            counts["discard"] += cost
            continue
        moved = decided.externalize.get(position)
        if moved is not None:
            line_count, chars, tool, call_line = moved
            gist: Gist | None = None
            short = entry
            if gists:
                output = _output_text(entry) or ""
                gist = make_gist(output, call_line or None)
            pointer = Pointer(
                entry.id, one_line_tool(tool), line_count, chars, cost, gist, subject_of(call_line)
            )
            if gists:
                short = _shorten(entry, output.split("\n"), pointer.text, gist)
            pointers.append(pointer)
            encode.append(short)
            counts["externalize"] += cost
            continue
        encode.append(entry)
        counts["encode"] += cost
    return Triage(tuple(encode), tuple(pointers), tuple(discarded), tuple(kept), counts, gists)
