"""Reading transcript files: pi session files (v1–v3) and our own JSONL export.

Reading and storing are separate steps: ``load_transcript`` reads and validates a whole file
(every error names the file and the 1-based line) and returns entries; ``import_file`` then
writes them in one transaction. So a malformed file never leaves anything behind.

What must hold:
- pi files keep their order and ids (v1 files get pi's migration: ids, a linear chain,
  ``firstKeptEntryIndex`` → id), via ``core.pi_format.parse_pi_session``.
- Our JSONL round-trips losslessly: ids, parents, timestamps, data and the leaf.
- Importing into a session that already has entries appends after its leaf; ids that clash
  with the session's are replaced by fresh ones (references inside the data follow).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ipython_compact.core.entries import KINDS, Entry, path_to
from ipython_compact.core.pi_format import PiFormatError, parse_pi_session
from ipython_compact.store.errors import ImportFormatError, UnknownSessionError
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


def read_json_lines(path: Path) -> list[tuple[int, Any]]:
    """Every non-blank line of ``path`` decoded as JSON, with its 1-based line number."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ImportFormatError(f"{path}: no such file", path=path) from None
    except IsADirectoryError:
        raise ImportFormatError(f"{path}: is a directory, expected a .jsonl file", path=path) from None
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read ({exc.strerror})", path=path) from exc
    out: list[tuple[int, Any]] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportFormatError(f"{path}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start})", path=path, line=number) from exc
        try:
            out.append((number, json.loads(text)))
        except json.JSONDecodeError as exc:
            raise ImportFormatError(
                f"{path}:{number}: invalid JSON ({exc.msg} at column {exc.colno})", path=path, line=number
            ) from exc
    if not out:
        raise ImportFormatError(f"{path}: the file is empty", path=path, line=1)
    return out


def detect_format(path: Path, objects: Sequence[tuple[int, Any]]) -> Literal["pi", "jsonl"]:
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


def load_transcript(path: Path | str, format: Format = "auto") -> Transcript:
    """Read and validate a whole transcript file; nothing is written anywhere."""
    path = Path(path)
    if format not in FORMATS:
        raise ImportFormatError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}", path=path)
    objects = read_json_lines(path)
    chosen = detect_format(path, objects) if format == "auto" else format
    if chosen == "pi":
        return _load_pi(path, objects)
    return _load_jsonl(path, objects)


def _load_pi(path: Path, objects: list[tuple[int, Any]]) -> Transcript:
    try:
        session = parse_pi_session(objects)
    except PiFormatError as exc:
        raise ImportFormatError(f"{path}:{exc.line_number}: {exc.message}", path=path, line=exc.line_number) from exc
    name = None
    # parse_pi_session keeps one entry per line after the header; fall back to "line 0" otherwise.
    lines = [line for line, _ in objects[1:]] if len(objects) - 1 == len(session.entries) else [0] * len(session.entries)
    for line, entry in zip(lines, session.entries, strict=True):
        _check_storable(path, line, entry)
        if entry.kind == "session_info" and isinstance(entry.data.get("name"), str):
            name = entry.data["name"]
    return Transcript(path, "pi", list(session.entries), session.leaf_id, name, dict(session.header))


def _load_jsonl(path: Path, objects: list[tuple[int, Any]]) -> Transcript:
    line, header = objects[0]
    if not isinstance(header, dict) or header.get("type") != JSONL_TYPE:
        raise ImportFormatError(f"{path}:{line}: first line must be the {JSONL_TYPE!r} header", path=path, line=line)
    if header.get("version") != JSONL_VERSION:
        raise ImportFormatError(
            f"{path}:{line}: unsupported export version {header.get('version')!r} (this version reads {JSONL_VERSION})",
            path=path,
            line=line,
        )
    entries: list[Entry] = []
    seen: set[str] = set()
    for number, obj in objects[1:]:
        where = f"{path}:{number}"
        if not isinstance(obj, dict):
            raise ImportFormatError(f"{where}: expected a JSON object, got {type(obj).__name__}", path=path, line=number)
        for key, kinds in (("id", (str,)), ("kind", (str,)), ("timestamp", (str,)), ("data", (dict,))):
            if not isinstance(obj.get(key), kinds) or (key != "data" and not obj[key]):
                raise ImportFormatError(f"{where}: entry needs a non-empty {key!r}", path=path, line=number)
        parent = obj.get("parent_id")
        if parent is not None and (not isinstance(parent, str) or parent not in seen):
            raise ImportFormatError(f"{where}: parent_id {parent!r} does not name an earlier entry", path=path, line=number)
        if obj["id"] in seen:
            raise ImportFormatError(f"{where}: duplicate entry id {obj['id']!r}", path=path, line=number)
        seen.add(obj["id"])
        entry = Entry.from_json(obj)
        _check_storable(path, number, entry)
        entries.append(entry)
    leaf = header.get("leaf_id")
    if leaf is not None and leaf not in seen:
        raise ImportFormatError(f"{path}:{line}: header leaf_id {leaf!r} is not an entry of the file", path=path, line=line)
    name = header.get("name") if isinstance(header.get("name"), str) else None
    return Transcript(path, "jsonl", entries, leaf, name, dict(header))


def _check_storable(path: Path, line: int, entry: Entry) -> None:
    """Refuse, with file and line, what the store would refuse later without them."""
    if entry.kind not in KINDS:
        raise ImportFormatError(
            f"{path}:{line}: unknown entry kind {entry.kind!r} (expected one of {', '.join(sorted(KINDS))})",
            path=path,
            line=line,
        )
    try:
        json.dumps(dict(entry.data), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ImportFormatError(f"{path}:{line}: entry data cannot be stored ({exc})", path=path, line=line) from exc


def with_fresh_ids(entries: Sequence[Entry], avoid: set[str], new_id: Callable[[], str] = random_entry_id) -> tuple[list[Entry], dict[str, str]]:
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


def import_transcript(store: SessionStore, transcript: Transcript, session: str | None = None) -> ImportResult:
    """Store a loaded transcript in ``session`` (default: its own name or the file's stem)."""
    name = session or transcript.name or transcript.source.stem
    existing: set[str] = set()
    created = True
    try:
        store.get_session(name)
        created = False
        existing = store.entry_ids(name)
    except UnknownSessionError:
        pass
    entries, renamed = with_fresh_ids(transcript.entries, existing)
    leaf = None if transcript.leaf_id is None else renamed.get(transcript.leaf_id, transcript.leaf_id)
    stored = store.import_entries(name, entries, leaf_id=leaf, create=created)
    return ImportResult(
        session=name,
        format=transcript.format,
        imported=len(stored),
        leaf_id=store.leaf(name),
        created=created,
        renamed_ids=len(renamed),
    )


def import_file(store: SessionStore, path: Path | str, *, session: str | None = None, format: Format = "auto") -> ImportResult:
    """Read ``path`` whole, then store it in one transaction (nothing written on any error)."""
    return import_transcript(store, load_transcript(path, format), session)

