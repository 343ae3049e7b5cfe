"""Reading transcript files: pi session files (v1–v3) and our own JSONL export.

Reading and storing are separate steps: ``load_transcript`` reads and validates a whole file
(every error names the file and the 1-based line) and returns entries; ``import_file`` then
writes them (``IMPORT_BATCH`` entries per transaction). So a malformed file never leaves anything
behind, and neither does an import of entries the session already holds.

What must hold:
- pi files keep their order and ids (v1 files get pi's migration: ids, a linear chain,
  ``firstKeptEntryIndex`` → id), via ``core.pi_format.parse_pi_session``.
- Our JSONL round-trips losslessly: ids, parents, timestamps, data and the leaf.
- Importing into a session that already has entries appends after its leaf; ids that clash
  with the session's (other content) are replaced by fresh ones (references inside the data
  follow). Entries it already holds are refused unless ``new_ids`` asks for copies.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import re
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ipython_compact.core.entries import COMPACTION, KINDS, Entry, path_to
from ipython_compact.core.pi_format import PiFormatError, json_type_name, parse_pi_session
from ipython_compact.core.surrogates import repair_value
from ipython_compact.files.safety import kind_of
from ipython_compact.store.database import check_session_name
from ipython_compact.store.errors import DuplicateImportError, ImportFormatError
from ipython_compact.store.log import (
    IMPORT_BATCH,
    Existing,
    ImportPlan,
    content_key,
    fast_json_loads,
    has_long_digit_run,
    stored_data_text,
)
from ipython_compact.store.sqlite_store import SessionStore, random_entry_id

Format = Literal["auto", "pi", "jsonl"]
FORMATS: Final = ("auto", "pi", "jsonl")
JSONL_TYPE: Final = "ipython_compact_session"
JSONL_VERSION: Final = 1
# Data keys that hold the id of another entry of the same session.
REFERENCE_KEYS: Final = ("first_kept_entry_id", "from_id", "target_id", "entry_id")


@dataclass(frozen=True)
class Transcript:
    """A whole file read into entries, parents before children."""

    source: Path
    format: Literal["pi", "jsonl"]
    entries: list[Entry]
    leaf_id: str | None
    name: str | None
    header: dict[str, Any]
    repaired_surrogates: int = 0
    """Lone UTF-16 surrogates (half an emoji, as JavaScript writes it) replaced by U+FFFD."""

    def path(self) -> list[Entry]:
        """Root → leaf (for a linear file: every entry, in file order)."""
        return path_to({e.id: e for e in self.entries}, self.leaf_id)


@dataclass(frozen=True)
class ImportResult:
    session: str
    format: str
    imported: int
    leaf_id: str | None
    created: bool
    renamed_ids: int
    repaired_surrogates: int = 0
    new_ids: bool = False
    """Every entry was stored under a fresh id (``--new-ids``)."""
    batches: int = 1
    """Transactions the import was committed in (``IMPORT_BATCH`` entries each)."""


@dataclass(frozen=True)
class ImportLimits:
    """Bounds on what one import reads, so a hostile or mistaken input fails fast and clearly
    instead of hanging or exhausting memory. Real sessions sit far below every one of them."""

    max_bytes: int = 1 << 30
    """Whole input (1 GiB; pi sessions with many images reach tens of MB)."""
    max_line_bytes: int = 256 << 20
    """One JSON line."""
    max_depth: int = 200
    """Nesting of arrays and objects (Python code that walks values recursively must never hit
    the interpreter's recursion limit, which sits near 1000)."""
    max_digits: int = 1000
    """Digits of one integer (Python refuses to convert more than 4300; JavaScript cannot write
    an integer this long at all)."""


STDIN: Final = Path("-")
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
_BOM: Final = b"\xef\xbb\xbf"


def source_name(path: Path) -> str:
    return "<stdin>" if path == STDIN else str(path)


def _too_big(where: str, limit: int, size: int | None = None) -> ImportFormatError:
    what = "larger" if size is None else f"{size:,} bytes is larger"
    return ImportFormatError(
        f"{where}: {what} than the import limit of {limit:,} bytes",
        path=where,
        hint="raise the limit if the file is a real session: --max-bytes N",
    )


def read_source(path: Path, limits: ImportLimits = ImportLimits()) -> bytes:
    """The whole input as bytes: a regular file, or stdin for ``-``; at most ``limits.max_bytes``.

    Anything else (a FIFO, a device, a socket) is refused before a byte is read: reading
    ``/dev/zero`` would never end and a FIFO would block until someone writes to it. The file is
    opened non-blocking and checked on its descriptor, so a path swapped after the check cannot
    slip through.
    """
    if path == STDIN:
        data = sys.stdin.buffer.read(limits.max_bytes + 1)
        if len(data) > limits.max_bytes:
            raise _too_big("<stdin>", limits.max_bytes)
        return data
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ImportFormatError(
            f"{path}: no such file", path=path, hint=f"check the path: ls {path}"
        ) from None
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read ({exc.strerror})", path=path) from exc
    if stat.S_ISDIR(os.fstat(fd).st_mode):  # os.fdopen would refuse it naming only the descriptor ("3")
        os.close(fd)
        raise ImportFormatError(
            f"{path}: is a directory, expected a .jsonl file", path=path, hint=f"name a file in it: ls {path}"
        )
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ImportFormatError(f"{path}: is a directory, expected a .jsonl file", path=path)
        if not stat.S_ISREG(info.st_mode):
            kind = kind_of(info.st_mode)
            raise ImportFormatError(
                f"{path}: not a regular file ({kind}); import reads session files",
                path=path,
                hint=f"save it to a file first, or pipe it in with a session name: cat {path} | "
                f"ipython-compact import - -s NAME",
            )
        if info.st_size > limits.max_bytes:
            raise _too_big(str(path), limits.max_bytes, info.st_size)
        os.set_blocking(fd, True)
        try:
            data = f.read(limits.max_bytes + 1)
        except OSError as exc:
            raise ImportFormatError(f"{path}: cannot read ({exc.strerror})", path=path) from exc
    if len(data) > limits.max_bytes:  # it grew while we read
        raise _too_big(str(path), limits.max_bytes)
    return data


class _NonFinite(ValueError):
    """NaN or Infinity in the input: the log stores strict JSON."""


class _TooManyDigits(Exception):
    def __init__(self, digits: int) -> None:
        super().__init__(digits)
        self.digits = digits


def _nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays/objects nest more than ``limit`` levels (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        children = current.values() if isinstance(current, dict) else current
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def parse_json_lines(
    where: str, raw: bytes, limits: ImportLimits = ImportLimits()
) -> tuple[list[tuple[int, Any]], int]:
    """Every non-blank line of ``raw`` decoded as JSON, with its 1-based line number, and the
    number of lone surrogates replaced. Every refusal names ``where`` and the line."""
    out: list[tuple[int, Any]] = []
    repaired = 0

    def parse_int(text: str) -> int:
        digits = len(text.lstrip("-"))
        if digits > limits.max_digits:
            raise _TooManyDigits(digits)
        return int(text)

    def parse_constant(name: str) -> float:
        raise _NonFinite(name)

    def parse_float(text: str) -> float:
        value = float(text)
        if value in (math.inf, -math.inf):  # 1e400
            raise _NonFinite(text)
        return value

    # One decoder (json.loads with arguments builds one per line). NaN and Infinity are refused
    # here, so every value read is storable and nothing needs serializing again to check it.
    decode = json.JSONDecoder(
        parse_int=parse_int, parse_constant=parse_constant, parse_float=parse_float
    ).decode

    def too_deep(number: int) -> ImportFormatError:  # built only when needed: each one parses a Path
        return ImportFormatError(
            f"{where}:{number}: JSON nested deeper than {limits.max_depth} levels", path=where, line=number
        )

    fast = fast_json_loads
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if number == 1 and line.startswith(_BOM):  # a UTF-8 byte order mark (Windows editors): no content
            line = line[len(_BOM) :]
        if len(line) > limits.max_line_bytes:
            raise ImportFormatError(
                f"{where}:{number}: line is longer than {limits.max_line_bytes:,} bytes",
                path=where,
                line=number,
            )
        if not line or line.isspace():  # blank (``strip`` would copy every line to tell)
            continue
        if fast is not None and not has_long_digit_run(line):
            # orjson is 3-4x faster; anything it refuses (NaN, 1e400, bad UTF-8, deep nesting, a
            # lone surrogate escape, which the stdlib path repairs below) takes the stdlib path,
            # which says what is wrong in our words. A line with a run of 19+ digits takes that
            # path from the start: orjson reads an integer past 64 bits as a float, the stdlib
            # keeps it exact. (Looking for surrogate escapes first cost a tenth of the read: JSON
            # text is full of backslashes, so the search stopped at every "\n".)
            try:
                value = fast(line)
            except ValueError:
                pass
            else:
                if line.count(b"[") + line.count(b"{") > limits.max_depth and _nested_deeper_than(
                    value, limits.max_depth
                ):
                    raise too_deep(number)
                out.append((number, value))
                continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportFormatError(
                f"{where}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                path=where,
                line=number,
            ) from exc
        try:
            value = decode(text)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(
                f"{where}:{number}: invalid JSON ({exc.msg} at column {exc.colno})", path=where, line=number
            ) from exc
        except RecursionError:
            raise too_deep(number) from None
        except _NonFinite as exc:
            raise ImportFormatError(
                f"{where}:{number}: entry data cannot be stored ({exc.args[0]} is not a "
                f"JSON "
                "number the log can keep)",
                path=where,
                line=number,
            ) from None
        except _TooManyDigits as exc:
            raise ImportFormatError(
                f"{where}:{number}: a number with {exc.digits:,} digits (at most {limits.max_digits:,} are "
                f"read)",
                path=where,
                line=number,
            ) from None
        # Counting brackets is cheap; only lines that could nest too deep are walked.
        if line.count(b"[") + line.count(b"{") > limits.max_depth and _nested_deeper_than(
            value, limits.max_depth
        ):
            raise too_deep(number)
        if _SURROGATE_ESCAPE.search(line):  # JSON text can carry a surrogate only as a \\u escape
            value, n = repair_value(value)  # core/surrogates.py: the one rule for half an emoji
            repaired += n
        out.append((number, value))
    if not out:
        raise ImportFormatError(f"{where}: the file is empty", path=where, line=1)
    return out, repaired


def detect_format(path: Path | str, objects: Sequence[tuple[int, Any]]) -> Literal["pi", "jsonl"]:
    line, first = objects[0]
    kind = first.get("type") if isinstance(first, dict) else None
    if kind == JSONL_TYPE:
        return "jsonl"
    if kind == "session":
        return "pi"
    raise ImportFormatError(
        f"{path}:{line}: cannot tell the format: the first line should be a pi session header "
        f'({{"type": "session"}}) or an ipython-compact export ({{"type": "{JSONL_TYPE}"}}); '
        f"got type {kind!r}",
        path=path,
        line=line,
    )


def load_transcript(
    path: Path | str, format: Format = "auto", *, limits: ImportLimits = ImportLimits()
) -> Transcript:
    """Read and validate a whole transcript file (``-`` = stdin); nothing is written anywhere."""
    path = Path(path)
    where = source_name(path)
    if format not in FORMATS:
        raise ImportFormatError(
            f"unknown format {format!r}; expected one of {', '.join(FORMATS)}", path=where
        )
    raw = read_source(path, limits)
    # JSON makes only acyclic values, so the cyclic collector finds nothing; left on, its passes
    # over the growing heap were over half the time of reading a 100k-entry file.
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        objects, repaired = parse_json_lines(where, raw, limits)
        chosen = detect_format(where, objects) if format == "auto" else format
        transcript = _load_pi(where, path, objects) if chosen == "pi" else _load_jsonl(where, path, objects)
    finally:
        if paused:
            gc.enable()
    if not transcript.entries:  # importing it would only create an empty session
        raise ImportFormatError(
            f"{where}: the file holds a session header but no entries; nothing to import",
            path=where,
            line=objects[0][0],
        )
    return dataclasses.replace(transcript, repaired_surrogates=repaired)


def _load_pi(path: str, source: Path, objects: list[tuple[int, Any]]) -> Transcript:
    try:
        session = parse_pi_session(objects)
    except PiFormatError as exc:
        raise ImportFormatError(
            f"{path}:{exc.line_number}: {exc.message}", path=path, line=exc.line_number
        ) from exc
    name = None
    # parse_pi_session keeps one entry per line after the header; fall back to "line 0" otherwise.
    lines = (
        [line for line, _ in objects[1:]]
        if len(objects) - 1 == len(session.entries)
        else [0] * len(session.entries)
    )
    for line, entry in zip(lines, session.entries, strict=True):
        _check_storable(path, line, entry)
        if entry.kind == "session_info" and isinstance(entry.data.get("name"), str):
            name = entry.data["name"]
    _check_compactions(path, lines, session.entries)
    return Transcript(source, "pi", list(session.entries), session.leaf_id, name, dict(session.header))


def _load_jsonl(path: str, source: Path, objects: list[tuple[int, Any]]) -> Transcript:
    line, header = objects[0]
    if not isinstance(header, dict) or header.get("type") != JSONL_TYPE:
        raise ImportFormatError(
            f"{path}:{line}: first line must be the {JSONL_TYPE!r} header", path=path, line=line
        )
    if header.get("version") != JSONL_VERSION:
        raise ImportFormatError(
            f"{path}:{line}: unsupported export version {header.get('version')!r} (this version reads "
            f"{JSONL_VERSION})",
            path=path,
            line=line,
        )
    for key, what in (("leaf_id", "an entry id (a string) or null"), ("name", "a string")):
        value = header.get(key)
        if value is not None and not isinstance(value, str):
            raise ImportFormatError(
                f"{path}:{line}: header {key} must be {what}, got {json_type_name(value)}",
                path=path,
                line=line,
            )
    entries: list[Entry] = []
    lines: list[int] = []
    seen: set[str] = set()
    for number, obj in objects[1:]:
        where = f"{path}:{number}"
        if not isinstance(obj, dict):
            raise ImportFormatError(
                f"{where}: expected a JSON object, got {json_type_name(obj)}", path=path, line=number
            )
        for key, kinds in (("id", (str,)), ("kind", (str,)), ("timestamp", (str,)), ("data", (dict,))):
            if not isinstance(obj.get(key), kinds) or (key != "data" and not obj[key]):
                raise ImportFormatError(f"{where}: entry needs a non-empty {key!r}", path=path, line=number)
        parent = obj.get("parent_id")
        if parent is not None and (not isinstance(parent, str) or parent not in seen):
            raise ImportFormatError(
                f"{where}: parent_id {parent!r} does not name an earlier entry", path=path, line=number
            )
        if obj["id"] in seen:
            raise ImportFormatError(f"{where}: duplicate entry id {obj['id']!r}", path=path, line=number)
        seen.add(obj["id"])
        entry = Entry.from_json(obj)
        _check_storable(path, number, entry)
        entries.append(entry)
        lines.append(number)
    _check_compactions(path, lines, entries)
    # No leaf_id at all: the last entry is the leaf, as pi takes it. An explicit null is kept (an
    # export of a session whose leaf was moved before its first entry).
    leaf = header["leaf_id"] if "leaf_id" in header else (entries[-1].id if entries else None)
    if leaf is not None and leaf not in seen:
        raise ImportFormatError(
            f"{path}:{line}: header leaf_id {leaf!r} is not an entry of the file", path=path, line=line
        )
    return Transcript(source, "jsonl", entries, leaf, header.get("name"), dict(header))


def _check_compactions(path: str, lines: Sequence[int], entries: Sequence[Entry]) -> None:
    """Every compaction's first kept entry must be on the path to it (the store's rule), checked
    here so the refusal names the file and line. Walks only from the compaction back to its first
    kept entry (depths stop the walk early), so the cost follows the kept regions."""
    parents: dict[str, str | None] = {}
    depth: dict[str, int] = {}
    for line, entry in zip(lines, entries, strict=True):
        parents[entry.id] = entry.parent_id
        depth[entry.id] = 0 if entry.parent_id is None else depth.get(entry.parent_id, -1) + 1
        if entry.kind != COMPACTION:
            continue
        first_kept = entry.data.get("first_kept_entry_id")
        where = f"{path}:{line}: compaction {entry.id!r}: first_kept_entry_id {first_kept!r}"
        hint = (
            f"line {line} of {path} is a compaction whose first kept entry must come before it on its "
            f"own "
            "branch; fix that id, or drop the compaction line"
        )
        if not isinstance(first_kept, str) or not first_kept:
            raise ImportFormatError(
                f"{path}:{line}: compaction {entry.id!r} needs a first_kept_entry_id",
                path=path,
                line=line,
                hint=hint,
            )
        if first_kept == entry.id:
            raise ImportFormatError(f"{where} is the compaction itself", path=path, line=line, hint=hint)
        if first_kept not in parents:
            raise ImportFormatError(f"{where} is not an entry of the file", path=path, line=line, hint=hint)
        current = entry.parent_id
        while current is not None and current != first_kept and depth.get(current, -1) > depth[first_kept]:
            current = parents.get(current)
        if current != first_kept:
            raise ImportFormatError(f"{where} is not on the path to it", path=path, line=line, hint=hint)


def _check_storable(path: str, line: int, entry: Entry) -> None:
    """Refuse, with file and line, what the store would refuse later without them."""
    if entry.kind not in KINDS:
        raise ImportFormatError(
            f"{path}:{line}: unknown entry kind {entry.kind!r} (expected one of {', '.join(sorted(KINDS))})",
            path=path,
            line=line,
        )
    # Data read by parse_json_lines holds only JSON values (NaN and Infinity are refused there).


def with_fresh_ids(
    entries: Sequence[Entry], avoid: set[str], new_id: Callable[[], str] = random_entry_id
) -> tuple[list[Entry], dict[str, str]]:
    """Give every entry whose id is in ``avoid`` a fresh one; parents and references follow."""
    taken = set(avoid) | {e.id for e in entries}
    renamed: dict[str, str] = {}
    for entry in entries:
        if entry.id in avoid:
            candidate = new_id()
            while candidate in taken:
                candidate = new_id()
            taken.add(candidate)
            renamed[entry.id] = candidate
    if not renamed:
        return list(entries), renamed
    return [rename_entry(e, renamed) for e in entries], renamed


def rename_entry(entry: Entry, renamed: Mapping[str, str]) -> Entry:
    data = dict(entry.data)
    for key in REFERENCE_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value in renamed:
            data[key] = renamed[value]
    parent = None if entry.parent_id is None else renamed.get(entry.parent_id, entry.parent_id)
    return Entry(renamed.get(entry.id, entry.id), parent, entry.kind, entry.timestamp, data)


def session_name_for(transcript: Transcript, session: str | None) -> str:
    """The target session: ``session`` if given, else the file's own name, else its stem.
    A blank name is refused; a blank name inside the file counts as none."""
    where = source_name(transcript.source)
    if session is not None:
        check_session_name(session, where)
        return session
    if transcript.name is not None and transcript.name.strip():
        return transcript.name
    if transcript.source == STDIN:
        raise ImportFormatError(
            "<stdin>: the input names no session",
            path=where,
            hint="name it: ipython-compact import - --session NAME",
        )
    return transcript.source.stem


def count_duplicates(entries: Sequence[Entry], existing: Existing) -> tuple[int, int]:
    """How many ``entries`` the session already holds (same kind, timestamp and data, whatever
    the id), and how many of those under the same id."""
    duplicates = same_id = 0
    for entry in entries:
        key = content_key(entry.kind, entry.timestamp, stored_data_text(entry.data))
        if key in existing.content:
            duplicates += 1
            same_id += existing.keys.get(entry.id) == key
    return duplicates, same_id


def landed_prefix(entries: Sequence[Entry], existing: Existing) -> int:
    """How many of the first ``entries`` the session holds under the same id and content (what an
    import killed after some of its batches left behind)."""
    n = 0
    for entry in entries:
        if existing.keys.get(entry.id) != content_key(
            entry.kind, entry.timestamp, stored_data_text(entry.data)
        ):
            break
        n += 1
    return n


def import_transcript(
    store: SessionStore,
    transcript: Transcript,
    session: str | None = None,
    *,
    new_ids: bool = False,
    resume: bool = False,
    batch_size: int = IMPORT_BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """Store a loaded transcript in ``session`` (default: its own name or the file's stem).

    ``resume`` finishes an import that was killed part-way: when the entries the session already
    holds are exactly the transcript's first N, under the same ids and content, and nothing else,
    only the rest is written (their parents are the entries that landed), even where later entries
    repeat earlier content. Anything else is refused as before.

    What must hold:
    - Into an existing session the entries are appended after its leaf. Entries it already holds
      (the same file imported twice, an export read back into its own session) are refused with
      ``DuplicateImportError`` and nothing is written, unless ``new_ids``: then every entry is
      stored again as a copy under a fresh id (parents and references re-linked).
    - Ids that clash with the session's but carry other content get fresh ids (as before).
    - A session created by another import meanwhile is treated as existing (no "already exists").
    - Written ``batch_size`` entries per transaction (``EntryLog.import_batched``), telling
      ``progress(written, total)`` after each.
    - The transcript's data must hold JSON values as ``load_transcript`` reads them (dicts, lists,
      strings, ints, finite floats, booleans, None): they are stored as they are, by orjson
      (``ImportPlan.json_values``), not serialized by the stdlib and read back.
    """
    name = session_name_for(transcript, session)
    where = source_name(transcript.source)
    renamed: dict[str, str] = {}

    def plan(existing: Existing) -> ImportPlan:
        renamed.clear()
        todo: Sequence[Entry] = transcript.entries
        if not existing.created and not new_ids:
            duplicates, same_id = count_duplicates(transcript.entries, existing)
            landed = landed_prefix(transcript.entries, existing)
            # what a killed import left: the session holds the file's first N entries and nothing
            # else (later entries of the file may repeat earlier content: those are the file's own)
            unfinished = same_id == landed == len(existing.ids) and 0 < landed < len(transcript.entries)
            if resume and unfinished:
                todo, duplicates = transcript.entries[landed:], 0
            if duplicates:
                total = len(transcript.entries)
                source = "-" if transcript.source == STDIN else str(transcript.source)
                raise DuplicateImportError(
                    f"{where}: {duplicates:,} of {total:,} entries are already in session {name!r} "
                    f"({same_id:,} under "
                    f"the same id, {duplicates - same_id:,} with the same content under another id); "
                    f"importing would "
                    "store them twice, so nothing was written",
                    path=where,
                    duplicates=duplicates,
                    same_id=same_id,
                    total=total,
                    hint=(
                        f"an earlier import of this file stopped after {landed:,} entries; finish it: "
                        f"ipython-compact import {source} -s {name} --resume"
                        if unfinished
                        else f"to store them again as copies under fresh ids: ipython-compact import "
                        f"{source} "
                        f"-s {name} "
                        f"--new-ids   (or import into another session: -s {name}-2)"
                    ),
                )
        avoid = set(existing.ids) | ({e.id for e in todo} if new_ids else set())
        entries, fresh = with_fresh_ids(todo, avoid)
        renamed.update(fresh)
        leaf = None if transcript.leaf_id is None else fresh.get(transcript.leaf_id, transcript.leaf_id)
        return ImportPlan(entries, leaf, json_values=True)  # read from a file by parse_json_lines

    written = store.import_batched(name, plan, batch_size=batch_size, progress=progress)
    return ImportResult(
        session=name,
        format=transcript.format,
        imported=len(written.entries),
        leaf_id=store.leaf(name),
        created=written.created,
        renamed_ids=len(renamed),
        repaired_surrogates=transcript.repaired_surrogates,
        new_ids=new_ids,
        batches=written.batches,
    )


def import_file(
    store: SessionStore,
    path: Path | str,
    *,
    session: str | None = None,
    format: Format = "auto",
    new_ids: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """Read ``path`` whole, then store it (see ``import_transcript``; nothing written when the
    file is malformed or holds entries the session already has)."""
    transcript = load_transcript(path, format)
    return import_transcript(store, transcript, session, new_ids=new_ids, progress=progress)
