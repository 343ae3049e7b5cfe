"""pi session files (JSONL, versions 1–3) as our entries, and back.

The store's importer reads the file and hands us ``(line_number, object)`` pairs; we validate,
migrate the way pi migrates, and convert. Migration facts (pi ``session-manager.ts``):

- v1 entries have no ids: each gets an id and its predecessor as parent (a linear chain), and a
  compaction's ``firstKeptEntryIndex`` (an index into the file's objects, header included) becomes
  ``firstKeptEntryId``. pi draws random ids; ours are derived with sha256 from the session id, the
  position and the entry's content, so importing the same file twice gives the same ids.
- v2 → v3: message role ``hookMessage`` becomes ``custom``.

Fork files: pi's ``createBranchedSession`` copies a path without its ``label`` entries (it
re-creates the labels at the end), so an entry whose parent was a label names a parent that is
not in the file. pi loads such files, but its path walk stops at the missing parent and the
context silently loses everything before the label. We re-link such an entry to the entry just
before it in the file — in a fork that is the label's own parent, so the whole forked path is
kept — and record the original id as ``pi_extra["danglingParentId"]`` (exported as that field; pi
ignores it). A parent that names a later entry (or the entry itself) is still an error.
pi's fork also keeps a compaction whose ``firstKeptEntryId`` named a dropped label (pi's cut
extends back over labels), and pi then shows none of the messages that compaction kept. When such
a missing id is some entry's dangling parent, the first kept entry becomes that entry (the first
one after the label), with the original id as ``pi_extra["danglingFirstKeptEntryId"]``; otherwise
(a run of several labels) the id stays as written and the view starts at the compaction.

Conversion keeps order and ids. pi's camelCase entry fields become our snake_case data keys
(compaction: ``summary``, ``first_kept_entry_id``, ``tokens_before``, ``details`` with
``read_files``/``modified_files``, ``from_hook``; model change: ``provider``, ``model_id``; ...).
Messages are kept byte-for-byte as pi wrote them. Fields we do not map are kept under
``data["pi_extra"]`` so ``entry_to_pi`` restores the original object.

Every malformed line raises ``PiFormatError(line_number, message)``; nothing is half-returned.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ipython_compact.core.entries import (
    BRANCH_SUMMARY,
    COMPACTION,
    CUSTOM,
    CUSTOM_MESSAGE,
    JSON,
    LABEL,
    MESSAGE,
    MODEL_CHANGE,
    ROLES,
    SESSION_INFO,
    THINKING_LEVEL_CHANGE,
    Entry,
    canonical_json,
)

CURRENT_PI_VERSION: Final = 3

# pi field -> our data key, per entry type. Fields not listed go to data["pi_extra"].
_FIELDS: Final[dict[str, dict[str, str]]] = {
    MESSAGE: {"message": "message"},
    COMPACTION: {
        "summary": "summary",
        "firstKeptEntryId": "first_kept_entry_id",
        "tokensBefore": "tokens_before",
        "details": "details",
        "fromHook": "from_hook",
    },
    BRANCH_SUMMARY: {
        "summary": "summary",
        "fromId": "from_id",
        "details": "details",
        "fromHook": "from_hook",
    },
    MODEL_CHANGE: {"provider": "provider", "modelId": "model_id"},
    THINKING_LEVEL_CHANGE: {"thinkingLevel": "thinking_level"},
    CUSTOM: {"customType": "custom_type", "data": "data"},
    CUSTOM_MESSAGE: {
        "customType": "custom_type",
        "content": "content",
        "display": "display",
        "details": "details",
    },
    LABEL: {"targetId": "target_id", "label": "label"},
    SESSION_INFO: {"name": "name"},
}
_DETAIL_KEYS: Final = {"readFiles": "read_files", "modifiedFiles": "modified_files"}
_BASE: Final = frozenset({"type", "id", "parentId", "timestamp"})


class PiFormatError(ValueError):
    """A pi session line that cannot be read; ``line_number`` is 1-based."""

    def __init__(self, line_number: int, message: str) -> None:
        super().__init__(f"line {line_number}: {message}")
        self.line_number = line_number
        self.message = message


@dataclass(frozen=True)
class PiSession:
    """The header object (as written, ``version`` defaulted to 1) and the converted entries."""

    header: JSON
    entries: list[Entry]

    @property
    def version(self) -> int:
        return int(self.header.get("version", 1))

    @property
    def session_id(self) -> str:
        return str(self.header.get("id", ""))

    @property
    def leaf_id(self) -> str | None:
        return self.entries[-1].id if self.entries else None


def _v1_id(session_id: str, position: int, obj: Mapping[str, Any], taken: set[str]) -> str:
    digest = hashlib.sha256(f"{session_id}\n{position}\n{canonical_json(obj)}".encode()).hexdigest()
    for width in (8, 12, 16, 64):
        if digest[:width] not in taken:
            return digest[:width]
    raise AssertionError("sha256 collision")  # pragma: no cover


def _details_in(details: Any) -> Any:
    if not isinstance(details, Mapping):
        return details
    return {_DETAIL_KEYS.get(k, k): v for k, v in details.items()}


def _details_out(details: Any) -> Any:
    if not isinstance(details, Mapping):
        return details
    back = {v: k for k, v in _DETAIL_KEYS.items()}
    return {back.get(k, k): v for k, v in details.items()}


def json_type_name(value: Any) -> str:
    """How a JSON value is called in an error message ("a list", "an object", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _require_str(obj: Mapping[str, Any], key: str, line: int, what: str, *, optional: bool = False) -> None:
    value = obj.get(key)
    if value is None and optional:
        return
    if not isinstance(value, str) or (not optional and not value):
        raise PiFormatError(line, f"{what}: '{key}' must be a non-empty string, got {value!r}")


def _validate(entry_type: str, obj: Mapping[str, Any], line: int) -> None:
    if entry_type == MESSAGE:
        message = obj.get("message")
        if type(message) is not dict and not isinstance(message, Mapping):  # dict first: ABC checks are slow
            raise PiFormatError(line, f"message entry has no 'message' object (got {type(message).__name__})")
        role = message.get("role")
        if not isinstance(role, str):
            raise PiFormatError(line, f"message role must be a string, got {json_type_name(role)}")
        if role not in ROLES:
            raise PiFormatError(line, f"message has unknown role {role!r}")
        if role in ("user", "custom", "toolResult", "assistant") and not isinstance(
            message.get("content"), (str, list)
        ):
            raise PiFormatError(line, f"{role} message needs 'content' as a string or a list of blocks")
    elif entry_type == COMPACTION:
        if not isinstance(obj.get("summary"), str):
            raise PiFormatError(line, "compaction entry needs a string 'summary'")
    elif entry_type == MODEL_CHANGE:
        _require_str(obj, "provider", line, "model_change")
        _require_str(obj, "modelId", line, "model_change")


def parse_pi_session(objects: Iterable[tuple[int, Mapping[str, Any]]]) -> PiSession:
    """Validate, migrate (v1→v2→v3) and convert a pi session.

    ``objects`` are the file's parsed JSON lines with their 1-based line numbers, blank lines
    already dropped; the first must be the ``session`` header.
    """
    items = list(objects)
    if not items:
        raise PiFormatError(1, 'empty file: a pi session starts with a {"type": "session"} header line')
    for line, obj in items:
        if type(obj) is not dict and not isinstance(obj, Mapping):  # dict first: ABC checks are slow
            raise PiFormatError(line, f"expected a JSON object, got {type(obj).__name__}")
    first_line, header_obj = items[0]
    if header_obj.get("type") != "session":
        raise PiFormatError(
            first_line,
            f"first line must be the session header (type 'session'), got type {header_obj.get('type')!r}",
        )
    header = dict(header_obj)
    version = header.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= CURRENT_PI_VERSION:
        raise PiFormatError(first_line, f"unsupported pi session version {version!r} (supported: 1-3)")
    session_id = str(header.get("id", ""))

    # Pass 1: ids and parents (v1 gets deterministic ids on a linear chain).
    ids: list[str] = []
    parents: list[str | None] = []
    dangling: dict[int, str] = {}
    taken: set[str] = set()
    in_file = {obj.get("id") for _, obj in items[1:]} if version > 1 else set()
    previous: str | None = None
    for position, (line, obj) in enumerate(items[1:], start=1):
        if not isinstance(obj.get("type"), str):
            raise PiFormatError(line, f"entry 'type' must be a string, got {json_type_name(obj.get('type'))}")
        if obj.get("type") == "session":
            raise PiFormatError(line, "a second session header inside the file")
        if version == 1:
            entry_id = _v1_id(session_id, position, obj, taken)
            parent = previous
        else:
            _require_str(obj, "id", line, f"{obj.get('type')} entry")
            entry_id = str(obj["id"])
            raw_parent = obj.get("parentId")
            if raw_parent is not None and not isinstance(raw_parent, str):
                raise PiFormatError(line, f"'parentId' must be a string or null, got {raw_parent!r}")
            parent = raw_parent
            if parent is not None and parent not in taken:
                if parent in in_file:
                    raise PiFormatError(line, f"parentId {parent!r} does not name an earlier entry")
                dangling[position - 1] = parent  # a fork's dropped label: re-link (module docs)
                parent = previous
        if entry_id in taken:
            raise PiFormatError(line, f"duplicate entry id {entry_id!r}")
        taken.add(entry_id)
        ids.append(entry_id)
        parents.append(parent)
        previous = entry_id

    # A dropped label's first child in the file, for compactions whose kept region began at it.
    label_children: dict[str, str] = {}
    for k, missing in dangling.items():
        label_children.setdefault(missing, ids[k])

    # Pass 2: convert.
    entries: list[Entry] = []
    for k, (line, obj) in enumerate(items[1:]):
        entry_type = obj.get("type")
        if entry_type not in _FIELDS:
            raise PiFormatError(line, f"unknown entry type {entry_type!r}")
        _require_str(obj, "timestamp", line, f"{entry_type} entry")
        message = obj.get("message")
        if (
            entry_type == MESSAGE
            and version < 3
            and isinstance(message, Mapping)
            and message.get("role") == "hookMessage"
        ):
            obj = {**obj, "message": {**message, "role": "custom"}}  # v2 -> v3 before validating the role
        _validate(str(entry_type), obj, line)
        mapping = _FIELDS[str(entry_type)]
        data: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in obj.items():
            if key in _BASE:
                continue
            if key in mapping:
                data[mapping[key]] = _details_in(value) if key == "details" else value
            elif key == "firstKeptEntryIndex" and version == 1 and entry_type == COMPACTION:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise PiFormatError(line, f"firstKeptEntryIndex must be an integer, got {value!r}")
                if not 1 <= value < len(items):
                    raise PiFormatError(line, f"firstKeptEntryIndex {value} points outside the file")
                data["first_kept_entry_id"] = ids[value - 1]
            else:
                extra[key] = value
        if entry_type == COMPACTION and not isinstance(data.get("first_kept_entry_id"), str):
            raise PiFormatError(line, "compaction entry has no firstKeptEntryId")
        if k in dangling:
            extra["danglingParentId"] = dangling[k]
        first_kept = data.get("first_kept_entry_id")
        if entry_type == COMPACTION and first_kept not in in_file and first_kept in label_children:
            # the kept region began at the dropped label
            data["first_kept_entry_id"] = label_children[first_kept]
            extra["danglingFirstKeptEntryId"] = first_kept
        if extra:
            data["pi_extra"] = extra
        entries.append(
            Entry(
                id=ids[k],
                parent_id=parents[k],
                kind=str(entry_type),
                timestamp=str(obj["timestamp"]),
                data=data,
            )
        )
    header["version"] = version
    return PiSession(header=header, entries=entries)


def entry_to_pi(entry: Entry) -> JSON:
    """The pi v3 object for ``entry`` (the inverse of ``parse_pi_session`` for pi kinds).

    Raises ValueError for our own kinds, which pi has no type for.
    """
    mapping = _FIELDS.get(entry.kind)
    if mapping is None:
        raise ValueError(f"entry {entry.id!r} has kind {entry.kind!r}, which pi session files cannot hold")
    back = {ours: theirs for theirs, ours in mapping.items()}
    obj: JSON = {
        "type": entry.kind,
        "id": entry.id,
        "parentId": entry.parent_id,
        "timestamp": entry.timestamp,
    }
    for key, value in entry.data.items():
        if key == "pi_extra" and isinstance(value, Mapping):
            obj.update(value)
        elif key in back:
            obj[back[key]] = _details_out(value) if key == "details" else value
        else:
            obj[key] = value
    return obj
