"""What the work ledger records and how it reads a tool call or an output: tool classes, limits,
the command / error / artifact records, files a cell reads or writes, what an output produced,
and a request's one-line form.

Why: the ledger (``core.ledger``) folds a session into these records and renders its block; the
readers are separate from the fold and the rendering. Split out of ``ledger`` (issue 32: no core
module over 650 lines).

What must hold: pure, deterministic, stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ipython_compact.core.entries import text_of_content, tool_calls_of
from ipython_compact.core.facts import clip_sentences, dedupe_sentences
from ipython_compact.core.identifiers import extract_identifiers
from ipython_compact.core.readable import one_line

Status = Literal["ok", "error", "pending"]

READ_TOOLS: Final = re.compile(r"^(?:read|read_file|view|cat|open|open_file|ls|list_dir|glob|grep)$")
WRITE_TOOLS: Final = re.compile(
    r"^(?:edit|write|write_file|apply_patch|patch|str_replace|create|create_file|multi_edit|notebook_edit)$"
)
PATH_KEYS: Final = ("path", "file_path", "filePath", "filename", "file")
COMMAND_KEYS: Final = ("command", "cmd", "code", "source", "cell", "script")
MAX_COMMANDS: Final = 40
MAX_ERRORS: Final = 20
MAX_REQUESTS: Final = 40  # done requests kept (open and deferred ones: up to MAX_PENDING)
MAX_PENDING: Final = 100
MAX_DROPPED: Final = 10
MAX_ARTIFACTS: Final = 40
SHOW_ARTIFACTS: Final = 12
SHOW_DROPPED: Final = 3
MAX_FILES: Final = 200
MAX_NAMES: Final = 120
COMMAND_CHARS: Final = 160
REQUEST_CHARS: Final = 240
OUTCOME_CHARS: Final = 160
# what ``render`` shows (the stored lists above stay longer; totals count everything)
SHOW_OPEN: Final = 10
SHOW_DONE: Final = 4
SHOW_DONE_IDS: Final = 8
SHOW_REQUEST_CHARS: Final = 160
SHOW_NAMES: Final = 12
SHOW_FILES: Final = 20
SHOW_COMMANDS: Final = 10
SHOW_ERRORS: Final = 6

_Q = r"""['"]([^'"\n]+)['"]"""
_CODE_READS: Final = (
    re.compile(
        r"\bread_(?:csv|parquet|json|pickle|feather|excel|table|hdf|sql_table|fwf|orc|stata|sas|xml)\(\s*(?:path\s*=\s*)?"
        + _Q
    ),
    re.compile(r"\bopen\(\s*" + _Q + r"\s*(?:\)|,\s*['\"]r[bt]?['\"])"),
    re.compile(r"\b(?:np|numpy)\.(?:load|loadtxt|genfromtxt)\(\s*" + _Q),
    re.compile(r"\bPath\(\s*" + _Q + r"\s*\)\.read_(?:text|bytes)\("),
    re.compile(r"\b(?:json|yaml|pickle|dill|joblib)\.load\(\s*open\(\s*" + _Q),
)
_CODE_WRITES: Final = (
    re.compile(
        r"\.to_(?:csv|parquet|json|pickle|feather|excel|hdf|orc|stata|xml)\(\s*(?:path(?:_or_buf)?\s*=\s*)?"
        + _Q
    ),
    re.compile(r"\bopen\(\s*" + _Q + r"\s*,\s*['\"][wax]\+?[bt]?['\"]"),
    re.compile(r"\b(?:np|numpy)\.(?:save|savez|savez_compressed|savetxt)\(\s*" + _Q),
    re.compile(r"\.savefig\(\s*" + _Q),
    re.compile(r"\bPath\(\s*" + _Q + r"\s*\)\.write_(?:text|bytes)\("),
    re.compile(r"\b(?:joblib|dill|pickle|torch)\.(?:dump|save)\([^)\n]*?,\s*(?:open\(\s*)?" + _Q),
)


# per pattern above: substrings one of which every match holds (a cell without them skips the scan)
_CODE_READ_HINTS: Final = (("read_",), ("open(",), ("np.", "numpy."), ("Path(",), (".load(",))
_CODE_WRITE_HINTS: Final = (
    (".to_",),
    ("open(",),
    ("np.", "numpy."),
    (".savefig(",),
    ("Path(",),
    (".dump(", ".save("),
)


def code_file_ops(code: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(files read, files written) that a Python cell names literally (pandas/numpy/open/Path/...).

    Only string literals count: a path built at run time is not guessed at.
    """
    reads: list[str] = []
    writes: list[str] = []
    if "'" not in code and '"' not in code:
        return (), ()  # no string literal, nothing named
    for pattern, hints in zip(_CODE_WRITES, _CODE_WRITE_HINTS, strict=True):
        if any(h in code for h in hints):
            writes.extend(m.group(1) for m in pattern.finditer(code) if m.group(1) not in writes)
    for pattern, hints in zip(_CODE_READS, _CODE_READ_HINTS, strict=True):
        if any(h in code for h in hints):
            reads.extend(
                m.group(1)
                for m in pattern.finditer(code)
                if m.group(1) not in reads and m.group(1) not in writes
            )
    return tuple(reads), tuple(writes)


_ERROR_LINE: Final = re.compile(
    r"(?m)^\s*((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault))(?::[ \t]*(.*))?$"
)


@dataclass(frozen=True)
class CommandRecord:
    entry_id: str
    tool: str
    text: str
    status: Status
    call_id: str | None = None


@dataclass(frozen=True)
class ErrorRecord:
    entry_id: str
    type: str
    message: str


@dataclass(frozen=True)
class ArtifactRecord:
    """Something the work produced: a file written or a commit made (``kind``), newest version
    only (``replaced``: the earlier version's text, recallable from the log)."""

    entry_id: str
    kind: Literal["file", "commit"]
    text: str
    replaced: str = ""


_ARTIFACT_LINE: Final = re.compile(
    r"(?i)\b(?:sav(?:ed|ing)|wr(?:ote|itten|iting)|creat(?:ed|ing)|export(?:ed|ing)|committ?(?:ed|ing)?|stor(?:ed|ing)|checkpoint(?:ed)?|dump(?:ed)?)\b"
)
_ARTIFACT_HINTS: Final = ("sav", "wro", "writ", "creat", "export", "commit", "stor", "checkpoint", "dump")
ARTIFACT_LINES: Final = 3  # an output's first and last lines that may name what it produced
# what ``git commit`` prints first: "[main 1a2b3c4] message", "[main (root-commit) 1a2b3c4] ..."
_GIT_COMMIT_LINE: Final = re.compile(r"^\[[^\s\[\]]+(?: \([\w-]+\)| HEAD)? ([0-9a-f]{7,40})\] \S")


def _edge_lines(text: str, count: int) -> list[str]:
    """The first and the last ``count`` lines of ``text`` (found without splitting all of it)."""
    head: list[str] = []
    pos = 0
    while len(head) < count and pos <= len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        head.append(text[pos:end])
        pos = end + 1
    if pos > len(text):
        return head
    tail: list[str] = []
    end = len(text)
    while len(tail) < count and end > pos:
        start = text.rfind("\n", pos, end) + 1
        start = max(start, pos)
        tail.append(text[start:end])
        end = start - 1
    return head + tail[::-1]


def output_artifacts(text: str) -> list[tuple[Literal["file", "commit"], str]]:
    """Files and commits an output says it produced, on its first or last ``ARTIFACT_LINES``
    lines ("saved models/churn_v3.pkl", "[main 1a2b3c4] fix loader" as git prints it, "wrote 12
    rows to out.csv")."""
    lines = [ln for ln in _edge_lines(text, ARTIFACT_LINES) if len(ln) < 2000]
    out: list[tuple[Literal["file", "commit"], str]] = []
    edges = "\n".join(lines).lower()
    verbs = any(h in edges for h in _ARTIFACT_HINTS) and _ARTIFACT_LINE.search(edges) is not None
    for line in dict.fromkeys(lines):
        git = _GIT_COMMIT_LINE.match(line) if line.startswith("[") else None
        if git and ("commit", git.group(1)) not in out:
            out.append(("commit", git.group(1)))
        if not verbs or not _ARTIFACT_LINE.search(line):
            continue
        for cls, value in extract_identifiers(line):
            kind: Literal["file", "commit"] | None = (
                "file" if cls == "path" else "commit" if cls == "commit" else None
            )
            if kind and (kind, value) not in out:
                out.append((kind, value))
    return out


def shown_request(text: str, limit: int) -> str:
    """A request as a list line shows it: up to its last whole sentence within ``limit``
    characters, then " …" when sentences were left out (the entry id recalls the rest); a first
    sentence longer than that is cut at a word boundary (``clip_sentences``)."""
    one = " ".join(text.split())
    clipped = clip_sentences(one, limit - 2)
    return clipped if clipped == one or clipped.endswith("…") else f"{clipped} …"


RAW_CHARS: Final = 4 * REQUEST_CHARS  # a request or an answer as folded, before its one-line form


def _note(text: str) -> str:
    return clip_sentences(dedupe_sentences(text), OUTCOME_CHARS) if text else ""


def request_line(text: str) -> str:
    """A request as the ledger keeps it: each sentence once, on one line, cut at a sentence end."""
    return clip_sentences(dedupe_sentences(text), REQUEST_CHARS)


NOT_ANSWERS: Final = ("error", "aborted", "toolUse")


def is_answer(msg: Mapping[str, Any]) -> bool:
    """An assistant message that answers the requests before it: text, no tool calls, not cut
    short by an error or an abort."""
    return (
        msg.get("role") == "assistant"
        and not tool_calls_of(msg)
        and msg.get("stopReason") not in NOT_ANSWERS
        and bool(text_of_content(msg.get("content")).strip())
    )


def parse_error(text: str) -> tuple[str, str] | None:
    """(type, message) of the last exception line in ``text`` (a traceback's final line)."""
    last = None
    for m in _ERROR_LINE.finditer(text):
        last = m
    if last is None:
        return None
    return last.group(1), (last.group(2) or "").strip()[:300]


def _strs(row: Any, index: int) -> tuple[str, ...]:
    """Field ``index`` of a stored pending row as strings (absent in older records: empty)."""
    return tuple(str(x) for x in row[index]) if len(row) > index else ()


def _command_text(tool: str, args: Mapping[str, Any]) -> str | None:
    for key in COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            text = value.strip()
            cut = text.find("\n")
            head = one_line(text if cut < 0 else text[:cut], COMMAND_CHARS)
            more = 0 if cut < 0 else len(text[cut:].splitlines()) - 1  # as splitlines counts them
            return head if not more else f"{head} (+{more} lines)"
    return None


def _path_of(args: Mapping[str, Any]) -> str | None:
    for key in PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    return None
