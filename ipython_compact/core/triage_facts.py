"""What triage reads of an entry (its facts), and the decisions it makes from them alone.

Why: triage decides discards and externalizations over every entry of the span, and a first
preview of a long session parsed every entry of it to do so (issue 37). The decisions need only a
few facts per entry: its role, its tool calls (id, tool, target), the result's call id and error
flag, the identity of its text, and its output's size. ``facts_of`` reads them from an entry;
``outline_of`` keeps them (texts as digests) with the entry when it is written, so a preview
reads the small outline instead of the entry, and ``decide`` makes the same decisions from
either.

What must hold:
- ``decide`` over ``facts_of`` of the entries is the decision triage makes (triage uses it).
- ``decide`` over ``facts_from_outline(outline_of(e))`` is the same decision: only the texts
  become digests (64 bits of SHA-1; equal texts give equal digests, two different texts of one
  span the same one with a chance of about n²/2⁶⁵).
- ``skeleton_of(kind, outline)`` is an entry the cut point, the context estimate and the view
  read as they read the entry itself (role, stop reason, usage, whether it is in the context).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from ipython_compact.core.entries import (
    BRANCH_SUMMARY,
    MESSAGE,
    Entry,
    canonical_json,
    entry_text,
    text_of_content,
    tool_calls_of,
)

_TARGET_KEYS: Final = ("path", "file_path", "filePath", "filename", "command", "cmd", "code", "url", "query")
#: The message fields a skeleton keeps: what the cut point, the estimate and triage read.
_SKELETON_KEYS: Final = ("role", "stopReason", "usage", "toolCallId", "isError", "toolName", "command")
OUTLINE_VERSION: Final = 1


def call_target(call: Mapping[str, Any]) -> str:
    """What a tool call acts on: its first target argument's first line, else its arguments."""
    args = call.get("arguments")
    if not isinstance(args, Mapping):
        return ""
    for key in _TARGET_KEYS:
        value = args.get(key)
        if isinstance(value, str):
            return f"{key}={value.strip().splitlines()[0] if value.strip() else ''}"
    return canonical_json(args)


def call_line_of(target: str) -> str:
    """The one line a pointer names its call by (its subject is read from it)."""
    return target.split("=", 1)[-1].strip().split("\n", 1)[0]


def output_text(message: Mapping[str, Any]) -> str | None:
    """The output of a tool result or a shell run (what externalizing moves out), else None."""
    role = message.get("role")
    if role == "toolResult":
        return text_of_content(message.get("content"))
    if role == "bashExecution":
        return str(message.get("output", ""))
    return None


class Call(NamedTuple):
    """One tool call: ``target`` compares (the target, or its digest), ``line`` names it.
    (Named tuples: a preview makes one per entry of the span, a frozen dataclass costs 4x.)"""

    call_id: str
    tool: str
    target: Hashable
    line: str


class Facts(NamedTuple):
    """What triage reads of one message entry. ``text`` and ``args`` compare only (a text or its
    digest); ``output`` is the output's (characters, newlines)."""

    role: Any
    calls: tuple[Call, ...] = ()
    single: bool = False  # one call and no text: a run that can repeat
    args: Hashable = None  # the single call's arguments
    call_id: str = ""  # a tool result's call
    error: bool = False
    text: Hashable = None
    blank: bool = True
    output: tuple[int, int] | None = None
    tool: str = "bash"  # what produced the output (tool name or command)
    command: str = ""


def digest(text: str) -> str:
    return _digest_bytes(text.encode("utf-8", "surrogatepass"))


def _digest_bytes(data: bytes) -> str:
    """64 bits of SHA-1: identity, not security (nobody gains by making two outputs collide in
    a preview); SHA-1 runs in hardware here, 2.5x BLAKE2b's speed on a tool output."""
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()[:16]


def args_digest(args: Any, dumps: Callable[[Any], bytes | None] | None = None) -> str:
    """The digest of a call's arguments: equal for equal arguments, as ``canonical_json`` is.
    ``dumps`` (the store passes orjson's printer with sorted keys; the stdlib's was a sixth of an
    import's time on large arguments) must print each JSON value one way and no two alike, as
    ``canonical_json`` does, so both tell the same arguments apart; None from it (an integer
    past 64 bits) takes ``canonical_json``, whose text then holds a digit run no orjson text
    holds. Stored outlines and outlines made on reading must use the same ``dumps``."""
    printed = dumps(args) if dumps is not None else None
    return _digest_bytes(printed) if printed is not None else digest(canonical_json(args))


def _facts(entry: Entry, key: Any) -> Facts | None:
    msg = entry.message
    if msg is None:
        return None
    role = msg.get("role")
    calls: tuple[Call, ...] = ()
    single, args = False, None
    if role == "assistant":
        blocks = tool_calls_of(msg)
        if blocks:
            calls = tuple(
                Call(str(c.get("id") or ""), str(c.get("name", "")), key(t), call_line_of(t))
                for c in blocks
                for t in (call_target(c),)
            )
            single = len(blocks) == 1 and not text_of_content(msg.get("content"), joiner="")
            args = key(canonical_json(blocks[0].get("arguments"))) if single else None
            return Facts(role, calls, single, args)
    text = entry_text(entry)
    output = output_text(msg)
    return Facts(
        role,
        call_id=str(msg.get("toolCallId") or ""),
        error=bool(msg.get("isError")),
        text=key(text),
        blank=not text or text.isspace(),
        output=None if output is None else (len(output), output.count("\n")),
        tool=str(msg.get("toolName") or msg.get("command") or "bash"),
        command=str(msg.get("command") or ""),
    )


def facts_of(entry: Entry) -> Facts | None:
    """The facts of ``entry`` (None unless it is a message), texts compared as they are."""
    return _facts(entry, _same)


def _same(text: str) -> str:
    return text


def outline_of(entry: Entry, dumps: Callable[[Any], bytes | None] | None = None) -> dict[str, Any]:
    """What is kept with ``entry`` when it is written: its skeleton message and its facts with
    digests for texts (a few hundred bytes whatever the entry's size). Written out rather than
    through ``Facts``: every append and every imported entry pays for it. ``dumps``: see
    ``args_digest``."""
    out: dict[str, Any] = {"v": OUTLINE_VERSION}
    kind = entry.kind
    if kind == BRANCH_SUMMARY:
        summary = entry.data.get("summary")
        out["s"] = isinstance(summary, str) and bool(summary)
        return out
    msg = entry.data.get("message") if kind == MESSAGE else None
    if not isinstance(msg, dict):
        return out
    out["m"] = {k: msg[k] for k in _SKELETON_KEYS if k in msg}
    if msg.get("role") == "assistant":
        blocks = tool_calls_of(msg)
        if blocks:
            calls = []
            for call in blocks:
                target = call_target(call)
                calls.append(
                    [
                        str(call.get("id") or ""),
                        str(call.get("name", "")),
                        digest(target),
                        call_line_of(target),
                    ]
                )
            out["c"] = calls
            single = len(blocks) == 1 and not text_of_content(msg.get("content"), joiner="")
            out["1"] = single
            if single:
                out["a"] = args_digest(blocks[0].get("arguments"), dumps)
            return out
    text, output = _texts(entry, msg)
    out["k"] = digest(text)
    out["b"] = not text or text.isspace()
    if output is not None:
        out["o"] = [len(output), output.count("\n")]
    return out


def _texts(entry: Entry, msg: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(entry_text(entry), output_text(msg))``, taken at once where the content is a string or
    one text block (most messages): the same strings without joining the text twice."""
    role = msg.get("role")
    if role != "bashExecution" and "summary" not in msg:
        content = msg.get("content")
        text: Any = None
        if isinstance(content, str):
            text = content
        elif isinstance(content, list) and len(content) == 1:
            block = content[0]
            if isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text")
        if isinstance(text, str):
            return text, text if role == "toolResult" else None
    return entry_text(entry), output_text(msg)


def facts_from_outline(outline: Mapping[str, Any]) -> Facts | None:
    """The facts an ``outline_of`` kept (texts as digests); None for an entry without a message.
    ``outline`` is JSON as read (dicts and lists): one of these is read per entry of a preview."""
    msg = outline.get("m")
    if msg.__class__ is not dict:
        return None
    assert isinstance(msg, dict)
    role = msg.get("role")
    calls = outline.get("c")
    if calls:
        single = bool(outline.get("1"))
        return Facts(
            role,
            tuple(Call(str(c[0]), str(c[1]), str(c[2]), str(c[3])) for c in calls),
            single,
            outline.get("a") if single else None,
        )
    output = outline.get("o")
    return Facts(
        role,
        (),
        False,
        None,
        str(msg.get("toolCallId") or ""),
        bool(msg.get("isError")),
        outline.get("k"),
        bool(outline.get("b", True)),
        None if output is None else (int(output[0]), int(output[1])),
        str(msg.get("toolName") or msg.get("command") or "bash"),
        str(msg.get("command") or ""),
    )


def skeleton_of(entry_id: str, parent_id: str | None, kind: str, outline: Mapping[str, Any]) -> Entry:
    """An entry with only what planning reads of the entry the outline was made from (no text):
    a message's role, stop reason, usage and call fields; whether a branch summary has text."""
    data: dict[str, Any] = {}
    if kind == MESSAGE:
        message = outline.get("m")
        if message.__class__ is dict:
            data["message"] = message
    elif kind == BRANCH_SUMMARY and outline.get("s"):
        data["summary"] = "…"
    return Entry(entry_id, parent_id, kind, "", data)


@dataclass(frozen=True)
class Decision:
    """What triage decided for a span: why each discarded entry goes (by id), and which entries
    are externalized: index → (lines, characters, tool, call line)."""

    discard: Mapping[str, str]
    externalize: Mapping[int, tuple[int, int, str, str]]


def decide(
    ids: Sequence[str],
    facts: Sequence[Facts | None],
    externalize_lines: int,
    externalize_chars: int,
) -> Decision:
    """The triage decisions (``core.triage`` documents the rules) from the facts alone."""
    discard: dict[str, str] = {}
    first_seen: dict[tuple[Any, Hashable], str] = {}  # (role, text)
    # call id -> (assistant entry id, tool, target, call line, calls in that entry)
    calls: dict[str, tuple[str, str, Hashable, str, int]] = {}
    results: dict[str, int] = {}
    failed: list[tuple[str, str, Hashable, int]] = []
    succeeded_after: dict[tuple[str, Hashable], list[int]] = {}
    single_calls: list[tuple[str, int]] = []  # (call id, position of the calling entry)
    asked = False  # a user message came after the last assistant text
    for position, f in enumerate(facts):
        if f is None:
            continue
        role = f.role
        if f.calls:  # an assistant's tool calls
            for call in f.calls:
                if call.call_id:
                    calls[call.call_id] = (ids[position], call.tool, call.target, call.line, len(f.calls))
            if f.single:
                single_calls.append((f.calls[0].call_id, position))
            continue
        if role == "toolResult":
            cid = f.call_id
            if cid in calls:
                results[cid] = position
                _, tool, target, _line, _n = calls[cid]
                if f.error:
                    failed.append((cid, tool, target, position))
                else:
                    succeeded_after.setdefault((tool, target), []).append(position)
            continue
        if f.blank:
            continue
        key = (role, f.text)
        # an answer to a new request is kept though it says what an earlier one said ("Done."):
        # the request ledger settles the request by it
        answers = role == "assistant" and asked
        asked = role == "user" or (asked and role != "assistant")
        if key in first_seen and not answers:
            discard[ids[position]] = f"duplicate of {first_seen[key]}"
        else:
            first_seen.setdefault(key, ids[position])

    for cid, tool, target, at in failed:
        later = next((i for i in succeeded_after.get((tool, target), []) if i > at), None)
        if later is None:
            continue
        call_entry, _, _, _, count = calls[cid]
        if count != 1:  # discard the pair only if the assistant entry made no other call
            continue
        winner = ids[later]
        discard.setdefault(call_entry, f"superseded by {winner}")
        discard.setdefault(ids[results[cid]], f"superseded by {winner}")

    # repeated identical runs: same single call (tool + arguments) and the same output as before
    seen_runs: dict[tuple[str, Hashable, bool, Hashable], str] = {}
    for cid, at in single_calls:
        result_at = results.get(cid)
        if result_at is None:
            continue
        call_entry, tool, _, _, _ = calls[cid]
        caller, result = facts[at], facts[result_at]
        if caller is None or result is None:
            continue
        run_key = (tool, caller.args, result.error, result.text)
        if run_key in seen_runs:
            discard.setdefault(call_entry, f"duplicate of {seen_runs[run_key]}")
            discard.setdefault(ids[result_at], f"duplicate of {seen_runs[run_key]}")
        else:
            seen_runs[run_key] = call_entry

    externalize: dict[int, tuple[int, int, str, str]] = {}
    for position, f in enumerate(facts):
        if f is None or f.output is None or ids[position] in discard:
            continue
        chars, newlines = f.output
        if newlines + 1 > externalize_lines or chars > externalize_chars:
            line = calls[f.call_id][3] if f.call_id in calls else call_line_of_command(f.command)
            externalize[position] = (newlines + 1, chars, f.tool, line)
    return Decision(discard, externalize)


def call_line_of_command(command: str) -> str:
    return command.strip().split("\n", 1)[0]
