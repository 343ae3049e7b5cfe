"""The ``ipython_compact`` comm protocol's payloads, declared once.

Why a module of its own: every reply the kernel sends over the comm (``kernel/comm_handler.py``),
and the persisted session the server extension serves, used to be ``dict[str, Any]`` with the
meaning of each field in a trailing comment, written again in ``docs/protocol.md`` and in
``labextension/src/protocol.ts``. Here each payload is a ``TypedDict``: the producers are
annotated with it (mypy checks them), and ``tests/test_protocol.py`` checks that protocol.ts
declares an interface ``I<Name>`` with the same keys for each class in ``PAYLOADS``, and that the
docs' row for each op names every key of its reply.

What must hold: only the standard library is imported (it lives in the pure core: the kernel side, the server
extension and the host client may all use it); a key added here is added to protocol.ts and the
docs in the same change, or the test fails.
"""

from typing import Any, Literal, NotRequired, TypedDict

#: The comm target the kernel registers when the extension loads.
TARGET = "ipython_compact"
#: The protocol version this package speaks (the envelope's ``v``).
PROTOCOL = 1


# ---------------------------------------------------------------------- envelope


class ErrorBody(TypedDict):
    code: str
    """``bad_request``, ``unsupported_version``, ``unknown_op``, ``nothing_to_compact``, ``failed``,
    ``busy``."""
    message: str


class ErrorReply(TypedDict):
    v: int
    id: str | None
    """The request's id; None only when the request had no usable id."""
    ok: Literal[False]
    error: ErrorBody


# ---------------------------------------------------------------------- hello


class HelloReply(TypedDict):
    protocol: int
    version: str
    session: str
    subshell: bool
    """The request arrived on a subshell thread (answered while a cell runs)."""
    ops: list[str]


# ---------------------------------------------------------------------- names


class NameRow(TypedDict):
    """One user name as the probe saw it, without running user code."""

    name: str
    type: str
    kind: str
    """``module``, ``function``, ``class``, ``data`` or ``object``."""
    module: NotRequired[str]
    shape: NotRequired[list[int]]
    dtype: NotRequired[str]
    length: NotRequired[int]
    bytes: NotRequired[int]
    bytes_approx: NotRequired[bool]
    """``bytes`` is an estimate (a container sampled, a DataFrame with object columns)."""
    dtypes: NotRequired[str]
    """A DataFrame's column dtypes, e.g. ``"int64 ×2, float64"``."""
    restart: NotRequired[str]
    """Why the value cannot survive a kernel restart (open file, generator, lock, ...)."""
    preview: NotRequired[str]
    """A one-line preview (namespace/preview.py): a scalar's repr, a container's, array's or series'
    first items, a frame's size and first columns; absent for other objects (never user code)."""


class NamesReply(TypedDict):
    """One page of the namespace, sorted by name."""

    names: list[NameRow]
    truncated: bool
    """More names follow (the page stopped at ``limit`` or the probe's time budget)."""
    next: str | None
    """The name to pass as ``after`` for the next page; None on the last page."""
    elapsed_ms: float
    total: int
    """All user names, not only this page's."""


class InspectReply(TypedDict):
    """``inspect``: the head of one name's value as a grid of cell texts (namespace/preview.py)."""

    name: str
    kind: str
    """``frame``, ``series``, ``array``, ``records``, ``rows``, ``list``, ``dict`` or ``set``."""
    columns: list[str]
    index: list[str]
    rows: list[list[str]]
    shape: list[int]
    """The whole value's (rows, columns); ``rows`` holds at most the requested head."""
    truncated: bool
    """The time budget stopped the table before its last row."""


# ---------------------------------------------------------------------- status


class InFlight(TypedDict):
    task_id: str
    reason: str
    blocking: bool
    started_at: Any


class FullVerification(TypedDict):
    generation: int
    timestamp: str | None


class StatusSnapshot(TypedDict):
    """The newest snapshot, as ``status`` summarizes it."""

    generation: int | None
    timestamp: str | None
    names: int
    skipped: list[Any]
    bytes: int | None
    origin: str | None
    """``explicit`` or ``automatic``."""
    provisional: bool | None
    verification: str | None
    """``sampled`` or ``full`` for the newest generation; None if written before verification modes."""
    last_full_verification: FullVerification | None


class CellState(TypedDict):
    """The user's cell on the main shell, as the kernel's own hooks saw it.

    Why: in an output flood Jupyter can drop the cell's ``idle`` status message, and a client that
    tracks cells from IOPub alone then thinks the cell still runs. ``running`` and ``finished``
    carry the ``execute_request`` ids, so a client can tell that the very cell it saw start has
    ended (its id is in ``finished`` and nothing runs).
    """

    running: str | None
    """The ``msg_id`` of the ``execute_request`` whose cell runs now, or None."""
    finished: list[str]
    """The ``msg_id``s of the last 16 cells that ended, oldest first."""


class StatusReply(TypedDict):
    """Where the context stands, with the figures of whoever compacts it."""

    session: str
    """The session whose context is compacting: a live ``%%agent``'s, else the kernel's binding."""
    binding: str
    """How the session was chosen: config, env, switched, moved (the notebook was renamed or moved and
    its session followed it), notebook, connection or terminal."""
    binding_key: str
    """What the session is tied to (notebook, kernel, terminal: cwd + profile)."""
    snapshot_dir: str
    restore_pending: bool | None
    """An earlier kernel's snapshot waits to be restored; None when unknown."""
    snapshot_problem: str | None
    """Why snapshots cannot be used (e.g. a damaged key), with what to do; else None."""
    last_snapshot_error: str | None
    """Why the last snapshot (automatic ones included) was not written; None once one is."""
    bookkeeping_pending: int
    """Log entries waiting in the journal because the database was locked."""
    source: str
    """``agent`` (the live agent's window, lines and estimate) or ``config`` (``CompactConfig``)."""
    model: str | None
    """The live agent's ``provider/model``, or None."""
    conversation: bool
    """The context holds model messages or a compaction (False in a plain notebook)."""
    tokens: int
    estimate: str
    """Which estimate counted ``tokens``: the live agent's (``tokenizer (<route>)``, ``calibrated
    ×F after N requests`` or ``default (density)``), else ``default (<CompactConfig's estimator>)``."""
    window: int
    blocking_line: int | None
    background_line: int | None
    """None when disabled or misconfigured."""
    problem: str | None
    entries: int
    compactions: int
    in_flight: list[InFlight]
    last_failure: Any
    snapshot: StatusSnapshot | None
    cell: CellState
    version: str


# ---------------------------------------------------------------------- summaries, preview, compact


class CompactionSummary(TypedDict):
    """One compaction as the timeline shows it (``summaries``, and the summary MIME type)."""

    id: str
    timestamp: Any
    reason: str
    tokens_before: int | None
    tokens_after: int | None
    """The compaction's own estimate: its checkpoint and kept tail."""
    context_after: int | None
    """The context right after it as ``status`` counted it (with the kernel-state notice placed
    after it): the figure the gauge showed then, and the one the timeline leads with."""
    estimate: str
    """Which estimate counted ``context_after``, in ``status``'s words (``calibrated ×3.80 after 4
    requests``: a live agent's, learned from the model's usage; ``default (density)``: read off the log)."""
    summary: str
    first_kept_entry_id: str | None
    kept_entries: int
    """Messages kept verbatim: from the first kept entry up to this compaction."""
    focus: str | None
    """The text the compaction was asked to keep in particular, or None."""


class SummariesReply(TypedDict):
    compactions: list[CompactionSummary]
    """Oldest first, of the same session as ``status``."""


class LayerCount(TypedDict):
    entries: int
    tokens: int


class PreviewReply(TypedDict):
    """The dry run of the next compaction; nothing is written."""

    session: str
    focus: str | None
    tokens_before: int
    first_kept_entry_id: str
    is_split_turn: bool
    summarize: LayerCount
    turn_prefix: LayerCount
    keep: LayerCount
    encode: LayerCount
    externalize: list[Any]
    discard: list[Any]
    anchors: dict[str, Any]
    previous_summary: bool
    text: str
    """A readable rendering of the plan."""


class CompactionRecord(TypedDict):
    """The compaction ``compact`` just appended."""

    id: str
    timestamp: Any
    reason: str | None
    summary: str
    first_kept_entry_id: str | None
    tokens_before: int
    tokens_after: int
    """The compaction's own estimate: its checkpoint and kept tail."""
    context_after: int
    """The context as ``status`` counts it once the compaction and its notice are in."""
    estimate: str
    """Which estimate counted ``context_after`` (``StatusReply.estimate``)."""
    kept_entries: int
    summarizer: Any


class CompactReply(TypedDict):
    compaction: CompactionRecord
    notice: str | None
    """The ``<ipython_state>`` text appended to the log, or None."""


# ---------------------------------------------------------------------- snapshot, restore


class Skipped(TypedDict):
    name: str
    reason: str


class SnapshotPayload(TypedDict):
    """What one snapshot wrote (``SnapshotReport.to_json``)."""

    generation: int
    saved: list[str]
    unchanged: list[str]
    skipped: list[Skipped]
    bytes: int
    written_bytes: int
    path: str
    elapsed_ms: float
    verified_bytes: int
    verification: str
    sampled: list[str]
    last_full_verification: FullVerification | None
    manifest_digest: str


class SnapshotReply(TypedDict):
    snapshot: SnapshotPayload


class RestoreReply(TypedDict):
    """What a restore brought back (``RestoreReport.to_json``)."""

    generation: int | None
    restored: list[str]
    failed: list[Skipped]
    quarantined: list[Skipped]
    refused: list[str]
    warnings: list[str]
    process: str | None
    available: list[str]
    kept: list[str]
    """Names defined since with another value: not overwritten."""


# ---------------------------------------------------------------------- recall


class RecallHit(TypedDict):
    id: str
    kind: str
    role: str | None
    text: str
    timestamp: Any


class RecallReply(TypedDict):
    hits: list[RecallHit]


# ---------------------------------------------------------------------- call tree


class CallNode(TypedDict):
    """One session of a call tree: the root, or a sub-agent a parent session started."""

    session: str
    parent: str | None
    """The session that started this one (None for the root)."""
    name: str | None
    """The name the parent gave the sub-agent, when it gave one."""
    depth: int
    entries: int
    created_at: str | None
    last_timestamp: str | None


class CallsReply(TypedDict):
    """The call tree under a session, depth first, children in the order they were started."""

    root: str
    calls: list[CallNode]


# ---------------------------------------------------------------------- the server extension


class PersistedSnapshot(TypedDict):
    """One snapshot generation on disk, read from its signed manifest (no value is unpickled)."""

    generation: int
    timestamp: str | None
    origin: str | None
    names: list[NameRow]
    """The names it holds, with the type recorded when it was saved."""
    bytes: int


class PersistedSession(TypedDict):
    """``GET /ipython-compact/session?path=NOTEBOOK``: what the log holds, before the kernel loads the
    extension."""

    notebook: str
    session: str
    exists: bool
    status: NotRequired[dict[str, Any]]
    """``status``-shaped: the log's figures (``source: "log"``)."""
    compactions: NotRequired[list[CompactionSummary]]
    snapshots: NotRequired[list[PersistedSnapshot]]
    """Newest first; empty when none can be verified."""
    calls: NotRequired[list[CallNode]]


#: Each op's reply payload (without the envelope's ``v``, ``id``, ``ok``).
OPS: dict[str, type] = {
    "hello": HelloReply,
    "names": NamesReply,
    "inspect": InspectReply,
    "status": StatusReply,
    "summaries": SummariesReply,
    "preview": PreviewReply,
    "compact": CompactReply,
    "snapshot": SnapshotReply,
    "restore": RestoreReply,
    "recall": RecallReply,
    "calls": CallsReply,
}

#: Every payload protocol.ts must declare (as ``I<Name>``, with the same keys).
PAYLOADS: tuple[type, ...] = (
    ErrorBody,
    HelloReply,
    NameRow,
    NamesReply,
    InspectReply,
    InFlight,
    FullVerification,
    StatusSnapshot,
    CellState,
    StatusReply,
    CompactionSummary,
    SummariesReply,
    LayerCount,
    PreviewReply,
    CompactionRecord,
    CompactReply,
    Skipped,
    SnapshotPayload,
    SnapshotReply,
    RestoreReply,
    RecallHit,
    RecallReply,
    CallNode,
    CallsReply,
    PersistedSnapshot,
    PersistedSession,
)


def keys_of(payload: type) -> frozenset[str]:
    """Every key a payload may carry (required and optional)."""
    return frozenset(getattr(payload, "__annotations__", {}))


def required_keys_of(payload: type) -> frozenset[str]:
    """The keys a payload always carries."""
    return frozenset(getattr(payload, "__required_keys__", frozenset()))
