"""Token estimates: the provider's own usage where it is trustworthy, estimates after it.

Context size = the newest valid *usage anchor* (an assistant message with usage whose
``stopReason`` is neither ``aborted`` nor ``error``) + estimates of every context message after
it. Without an anchor, everything is estimated.

Two estimators (docs/estimators.md lists every difference):

``chars4`` — pi's rules, exactly as ``@mariozechner/pi-coding-agent`` 0.73.1 computes them (the
version ``tests/test_pi_compat.py`` and the differential fuzz run), quirks included:
``ceil(chars / 4)`` where chars are JavaScript string lengths (UTF-16 code units); user → text
blocks only (**images in user messages are not counted**; pi's later estimate.ts counts them);
assistant → text + thinking + tool name + ``JSON.stringify`` of the arguments (JavaScript's
number forms, see ``core/javascript.py``), and nothing for a string ``content`` (pi iterates it as
characters); custom / toolResult → text + 4800 per image; bashExecution → command + output;
summaries → summary text; our ``system`` → its text. On a path, the anchor is the newest valid one anywhere
in the view, including the region
the newest compaction kept before itself (its usage measured a context that no longer exists,
but pi uses it for ``tokensBefore``).

``density`` (default) — prices content by what it is: ASCII prose 4 chars/token, text inside
fenced code blocks and tool-call argument JSON 3 chars/token, CJK 1.5 chars/token, any other
non-ASCII character 2 chars/token, images 1200 tokens each in every role (user images included).
On a path, the anchor must come after the newest compaction (the stale guard).

What must hold: estimates are deterministic, never negative, and 0 for entries that put nothing in
the context. A ``compaction`` entry is priced as its summary (it heads the view); the cut-point
walk skips it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, cast

from ipython_compact.core.entries import COMPACTION, MESSAGE, Entry
from ipython_compact.core.javascript import js_json, js_length
from ipython_compact.core.messages import entry_message, in_context
from ipython_compact.core.settings import ESTIMATORS, Estimator
from ipython_compact.core.view import view_indices

IMAGE_CHARS_CHARS4: Final = 4800
IMAGE_TOKENS_DENSITY: Final = 1200
PROSE_CHARS_PER_TOKEN: Final = 4.0
CODE_CHARS_PER_TOKEN: Final = 3.0
CJK_CHARS_PER_TOKEN: Final = 1.5
OTHER_CHARS_PER_TOKEN: Final = 2.0

_CJK_CLASS: Final = (
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0002fa1f]"
)


@lru_cache(maxsize=1)
def _cjk() -> re.Pattern[str]:
    """The CJK character class, compiled when first needed (4-5 ms, paid by every command's
    start-up when compiled at import, and needed only for text with characters past U+07FF)."""
    return re.compile(_CJK_CLASS)


_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_BAD_STOPS: Final = frozenset({"aborted", "error"})


def _compact_json(value: Any) -> str:
    """Compact JSON of tool-call arguments for the density estimator (Python's number forms are
    fine there; the C encoder is fast). Falls back to ``js_json`` for data nested too deep for it."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (RecursionError, ValueError):
        return js_json(value)


def _check_estimator(estimator: str) -> None:
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; expected one of {', '.join(ESTIMATORS)}")


def _text_units(text: str, *, code: bool = False) -> float:
    """Density price of ``text`` in tokens (fractional; the caller rounds once per message)."""
    if not text:
        return 0.0
    if code:
        return _plain_units(text, CODE_CHARS_PER_TOKEN)
    if "```" not in text:
        return _plain_units(text, PROSE_CHARS_PER_TOKEN)
    total = 0.0
    pos = 0
    for match in _FENCE.finditer(text):
        total += _plain_units(text[pos : match.start()], PROSE_CHARS_PER_TOKEN)
        total += _plain_units(match.group(0), CODE_CHARS_PER_TOKEN)
        pos = match.end()
    return total + _plain_units(text[pos:], PROSE_CHARS_PER_TOKEN)


def _plain_units(text: str, ascii_rate: float) -> float:
    if text.isascii():
        return len(text) / ascii_rate
    # Characters above U+007F: what an ASCII encoding drops (one C pass; a Python loop over every
    # character was most of an import's time on long non-ASCII sessions).
    non_ascii = len(text) - len(text.encode("ascii", "ignore"))
    # UTF-8 spends one byte more than one on each of those, two more from U+0800 up: with none that
    # high there is no CJK (the pattern starts at U+3040) and no need to look (``max(text)``, which
    # told the same, compared character objects one by one, several times slower).
    wide = len(text.encode("utf-8", "surrogatepass")) - len(text) - non_ascii
    cjk = len(_cjk().findall(text)) if wide else 0
    other = non_ascii - cjk
    ascii_chars = len(text) - cjk - other
    return ascii_chars / ascii_rate + cjk / CJK_CHARS_PER_TOKEN + other / OTHER_CHARS_PER_TOKEN


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, Mapping)]
    return []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


_SAFE_INT: Final = 2**53
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _printed_alike(value: Any) -> bool:
    """Whether ``JSON.stringify(value)`` and Python's compact JSON of it have the same length:
    string keys, strings, booleans, None and integers JavaScript holds exactly (key order differs,
    length does not). Floats, larger integers and other types print differently (iterative)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            if not all(type(k) is str for k in item):
                return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is int:
            if not -_SAFE_INT <= item <= _SAFE_INT:
                return False
        elif kind is not str and kind is not bool and item is not None:
            return False
    return True


def _arguments_text(arguments: Any, alike: bool, dumps: Callable[[Any], bytes] | None = None) -> str:
    """``_compact_json(arguments)``; for values ``_printed_alike``, by ``dumps`` when the caller
    has a faster printer that writes them byte for byte as the stdlib does (orjson: insertion
    order, the same escapes; the store passes it, the core stays stdlib-only)."""
    if alike and dumps is not None:
        try:
            return dumps(arguments).decode("utf-8")
        except TypeError:  # a lone surrogate, nesting past orjson's limit
            pass
    return _compact_json(arguments)


def _arguments_length(arguments: Any, known: tuple[str, bool] | None = None) -> int:
    """``js_length(js_json(arguments))``: pi's length of tool-call arguments. Where the two print
    alike (``_printed_alike``, no lone surrogate) the length of Python's compact JSON (``known``:
    that text and whether they print alike, when the caller has them), several times faster than
    printing the JavaScript way."""
    text, alike = known if known is not None else ("", _printed_alike(arguments))
    if alike:
        text = text if known is not None else _arguments_text(arguments, alike)
        if text.isascii():
            return len(text)
        if not _LONE_SURROGATE.search(text):
            return js_length(text)
    return js_length(js_json(arguments))


def _chars4(message: Mapping[str, Any], compact: Mapping[int, tuple[str, bool]] | None = None) -> int:
    role = message.get("role")
    chars = 0
    if role == "user":
        for block in _blocks(message.get("content")):
            if block.get("type") == "text":
                chars += js_length(_str(block.get("text")))
    elif role == "assistant":
        # pi iterates ``content`` as a list; a string iterates as characters and counts nothing.
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text":
                chars += js_length(_str(block.get("text")))
            elif kind == "thinking":
                chars += js_length(_str(block.get("thinking")))
            elif kind == "toolCall":
                arguments = block.get("arguments")
                known = None if compact is None else compact.get(id(arguments))
                chars += js_length(_str(block.get("name"))) + _arguments_length(arguments, known)
    elif role in ("custom", "toolResult", "system"):
        for block in _blocks(message.get("content")):
            if block.get("type") == "text":
                chars += js_length(_str(block.get("text")))
            elif block.get("type") == "image":
                chars += IMAGE_CHARS_CHARS4
    elif role == "bashExecution":
        chars = js_length(_str(message.get("command"))) + js_length(_str(message.get("output")))
    elif role in ("branchSummary", "compactionSummary"):
        chars = js_length(_str(message.get("summary")))
    else:
        return 0
    return math.ceil(chars / 4)


def _density(
    message: Mapping[str, Any],
    compact: dict[int, tuple[str, bool]] | None = None,
    dumps: Callable[[Any], bytes] | None = None,
) -> int:
    role = message.get("role")
    units = 0.0
    if role in ("user", "custom", "toolResult", "system", "assistant"):
        for block in _blocks(message.get("content")):
            kind = block.get("type")
            if kind == "text":
                units += _text_units(_str(block.get("text")))
            elif kind == "thinking":
                units += _text_units(_str(block.get("thinking")))
            elif kind == "toolCall":
                units += _text_units(_str(block.get("name")), code=True)
                arguments = block.get("arguments")
                alike = _printed_alike(arguments)
                text = _arguments_text(arguments, alike, dumps)
                if compact is not None:
                    compact[id(arguments)] = (text, alike)
                units += _text_units(text, code=True)
            elif kind == "image":
                units += IMAGE_TOKENS_DENSITY
    elif role == "bashExecution":
        units = _text_units(_str(message.get("command")), code=True) + _text_units(
            _str(message.get("output")), code=True
        )
    elif role in ("branchSummary", "compactionSummary"):
        units = _text_units(_str(message.get("summary")))
    else:
        return 0
    return math.ceil(units - 1e-9)


def estimate_message_tokens(message: Mapping[str, Any], estimator: Estimator | str = "density") -> int:
    """Estimated tokens of one agent message (see the module docstring for the rules)."""
    _check_estimator(estimator)
    return _chars4(message) if estimator == "chars4" else _density(message)


def estimate_entry_tokens(entry: Entry, estimator: Estimator | str = "density") -> int:
    """Estimated tokens of the message ``entry`` contributes to the context; 0 if none."""
    message = entry_message(entry)
    return 0 if message is None else estimate_message_tokens(message, estimator)


def estimate_entry_tokens_both(entry: Entry, dumps: Callable[[Any], bytes] | None = None) -> tuple[int, int]:
    """``(estimate_entry_tokens(entry, "density"), estimate_entry_tokens(entry, "chars4"))``, the
    two estimates every stored entry keeps, in one pass: the message is found once and each
    tool call's arguments are printed once (the store computes both at every append and import).
    ``dumps``: a compact JSON printer that writes what ``json.dumps(..., separators=(",", ":"),
    ensure_ascii=False)`` writes, faster (the store passes orjson's); the result is the same."""
    message = entry_message(entry)
    if message is None:
        return 0, 0
    compact: dict[int, tuple[str, bool]] = {}
    return _density(message, compact, dumps), _chars4(message, compact)


def calculate_context_tokens(usage: Mapping[str, Any]) -> int:
    """Context size a provider reported: ``totalTokens``, else input + output + cache read/write.

    Output counts because it becomes the next request's input.
    """
    total = usage.get("totalTokens")
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total:
        return int(total)
    parts = (usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite"))
    return int(sum(p for p in parts if isinstance(p, (int, float)) and not isinstance(p, bool)))


def usage_of(message: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The usage an assistant message may anchor an estimate with, or None.

    Aborted and errored responses never anchor: their usage does not describe a context that
    went through.
    """
    if message is None or message.get("role") != "assistant" or message.get("stopReason") in _BAD_STOPS:
        return None
    usage = message.get("usage")
    return usage if isinstance(usage, Mapping) else None


@dataclass(frozen=True)
class ContextEstimate:
    """``tokens = usage_tokens + trailing_tokens``; ``last_usage_index`` indexes the input (None: no
    anchor)."""

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None


def estimate_context(
    messages_or_path: Sequence[Mapping[str, Any]] | Sequence[Entry],
    estimator: Estimator | str = "density",
    *,
    tokens: Sequence[int] | None = None,
) -> ContextEstimate:
    """Context size of a message list or of a root→leaf entry path.

    Messages: pi's rule (newest valid anchor + estimates after it). A path: the model's view of
    the path (see ``core/view.py``); with ``density`` the anchor must come after the newest
    compaction (the stale guard), with ``chars4`` it may sit anywhere in the view, as in pi.
    ``tokens`` may give the per-entry estimates already stored for the path.
    ``last_usage_index`` is an index into the given sequence.
    """
    _check_estimator(estimator)
    if not messages_or_path or not isinstance(messages_or_path[0], Entry):
        return _estimate_messages(cast("Sequence[Mapping[str, Any]]", messages_or_path), estimator)
    path = cast("Sequence[Entry]", messages_or_path)
    if tokens is not None and len(tokens) != len(path):
        raise ValueError(f"tokens has {len(tokens)} counts for a path of {len(path)} entries")

    def cost(i: int) -> int:
        return tokens[i] if tokens is not None else estimate_entry_tokens(path[i], estimator)

    if estimator == "chars4":
        return _estimate_view_pi(path, cost)
    # Newest valid anchor after the newest compaction; the scan stops at either, so the cost of
    # an estimate grows with what came after the last response, not with the history.
    for i in range(len(path) - 1, -1, -1):
        entry = path[i]
        if entry.kind == COMPACTION:
            break
        if entry.kind != MESSAGE:
            continue
        usage = usage_of(entry.message)
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            trailing = sum(cost(k) for k in range(i + 1, len(path)) if in_context(path[k]))
            return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, i)
    trailing = sum(cost(i) for i in view_indices(path))
    return ContextEstimate(trailing, 0, trailing, None)


def _estimate_view_pi(path: Sequence[Entry], cost: Callable[[int], int]) -> ContextEstimate:
    """pi's rule on the view: the newest valid anchor anywhere in it, also in the region the
    newest compaction kept (usage measured before that compaction, so stale, but pi uses it)."""
    view = view_indices(path)
    for position in range(len(view) - 1, -1, -1):
        i = view[position]
        usage = usage_of(path[i].message) if path[i].kind == MESSAGE else None
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            trailing = sum(cost(k) for k in view[position + 1 :])
            return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, i)
    trailing = sum(cost(i) for i in view)
    return ContextEstimate(trailing, 0, trailing, None)


def _estimate_messages(messages: Sequence[Mapping[str, Any]], estimator: str) -> ContextEstimate:
    anchor = -1
    usage_tokens = 0
    for i in range(len(messages) - 1, -1, -1):
        usage = usage_of(messages[i])
        if usage is not None:
            anchor = i
            usage_tokens = calculate_context_tokens(usage)
            break
    trailing = sum(estimate_message_tokens(m, estimator) for m in messages[anchor + 1 :])
    return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, anchor if anchor >= 0 else None)
