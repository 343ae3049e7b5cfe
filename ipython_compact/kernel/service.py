"""The kernel side's operations, shared by ``%compact``, the comm handler and the ``compact`` helper.

Why one place: the magics, the comm ops and the helper object are three front doors to the same
actions (probe, status, compact, snapshot, restore, recall, pin); keeping them here means the
three never disagree.

What must hold:
- Snapshots and restores run only on the main thread while no user cell runs; asked for from
  another thread (a subshell comm) while a cell runs, they raise ``Busy`` and change nothing.
- The session log is opened lazily, so loading the extension costs nothing until it is used.
- Nothing here executes text from a request.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from ipython_compact.compaction.context_figures import ContextFigure
from ipython_compact.compaction.context_figures import record as record_figure
from ipython_compact.compaction.results import NothingToCompact
from ipython_compact.core.comm_protocol import (
    CompactionRecord,
    CompactionSummary,
    CompactReply,
    PreviewReply,
    StatusReply,
)
from ipython_compact.core.entries import (
    CUSTOM,
    KERNEL_FILE_OPS,
    KERNEL_STATE,
    Entry,
    canonical_json,
    entry_text,
)
from ipython_compact.core.readable import entry_gist, one_line
from ipython_compact.core.state_notice import SnapshotOutcome, state_notice
from ipython_compact.files import paths
from ipython_compact.files.safety import write_private_file
from ipython_compact.kernel import binding
from ipython_compact.kernel.bookkeeping import BookkeepingLog
from ipython_compact.kernel.config import CompactConfig
from ipython_compact.kernel.errors import Busy, NotAName, Unavailable, log_now
from ipython_compact.kernel.fileops import FileOpsRecorder
from ipython_compact.kernel.session_summaries import summaries_of
from ipython_compact.kernel.snapshot_ledger import LogLedger
from ipython_compact.kernel.snapshot_ops import SnapshotOperations
from ipython_compact.kernel.status_report import FIGURES_KEY, status_of
from ipython_compact.namespace.preview import table_preview
from ipython_compact.namespace.probe import ProbeResult, probe_namespace, user_names
from ipython_compact.namespace.snapshot import (
    SnapshotReport,
    load_or_create_key,
)
from ipython_compact.namespace.snapshot.background import BackgroundSave
from ipython_compact.namespace.snapshot.keys import load_shared_key
from ipython_compact.namespace.snapshot.locking import WriterLocks
from ipython_compact.store.errors import UnknownEntryError, UnknownSessionError
from ipython_compact.store.pending import PendingJournal
from ipython_compact.store.writer_locks import writer_locks

if TYPE_CHECKING:
    from ipython_compact.compaction.compactor import Compactor
    from ipython_compact.namespace.snapshot import SnapshotStore
    from ipython_compact.store import SessionStore

FILE_OPS_TYPE = KERNEL_FILE_OPS  # the Compactor folds these entries into the ledger

# Callers import these from here, as before the split by role (errors, status_report,
# session_summaries, snapshot_ledger, snapshot_ops).
__all__ = [
    "FIGURES_KEY",
    "FILE_OPS_TYPE",
    "KEEP_SETTING",
    "Busy",
    "KernelService",
    "LogLedger",
    "NotAName",
    "Unavailable",
    "summaries_of",
]

log = logging.getLogger(__name__)

#: The tail budget as a kernel user sets it (``%config CompactConfig.compaction = {...}``).
KEEP_SETTING = "CompactConfig.compaction['keep_recent_tokens']"


_NOT_A_NAME = object()


class KernelService(SnapshotOperations):
    """State of the extension inside one kernel."""

    def __init__(self, shell: Any, config: CompactConfig) -> None:
        self.shell = shell
        self.config = config
        self.exclude_ids: set[int] = set()
        self.executing = False
        # The user's cell as the hooks saw it (``comm_protocol.CellState``): a client whose IOPub
        # lost the cell's ``idle`` in a flood learns from ``status`` that the cell has ended.
        self.cell_request: str | None = None
        self.finished_requests: collections.deque[str] = collections.deque(maxlen=16)
        self._store: SessionStore | None = None
        self._snapshots: SnapshotStore | None = None
        self._op_locks: dict[str, threading.Lock] = {}
        self.last_snapshot: SnapshotReport | None = None
        self.last_snapshot_error: str | None = None
        self._background: BackgroundSave | None = None  # the automatic snapshot a forked child writes
        self.background_deferred = False  # the last automatic snapshot waited for IPython's history thread
        self._figures_written: tuple[str, dict[str, Any]] | None = None
        # The live `%%agent` of this kernel, if any (the extension wires it): its window, lines and
        # estimate are the ones that decide compactions, so `status` reports those.
        self.live_agent: Callable[[], Any] = lambda: None
        self.bookkeeping = BookkeepingLog(self._apply_record, lambda: PendingJournal(self.store.db_path))
        self.fileops = FileOpsRecorder(ignore_prefixes=(str(paths.data_dir()),), cells_by=config.cells_by)
        self.binding = self._resolve()

    # ------------------------------------------------------------------ binding
    def _resolve(self) -> binding.Binding:
        conn = None
        kernel = getattr(self.shell, "kernel", None)
        with contextlib.suppress(Exception):
            from ipykernel.kernelapp import IPKernelApp  # optional: only inside an ipykernel kernel

            if IPKernelApp.initialized():
                conn = IPKernelApp.instance().abs_connection_file
        if conn is None and kernel is not None:
            conn = getattr(getattr(kernel, "parent", None), "abs_connection_file", None)
        return binding.resolve(
            configured=self.config.session,
            env=os.environ,
            user_ns=self.shell.user_ns,
            connection_file=conn,
            data_dir=paths.data_dir(),
            profile=str(getattr(self.shell, "profile", "default") or "default"),
        )

    @property
    def session(self) -> str:
        return self.binding.session

    def switch(self, session: str) -> binding.Binding:
        """Bind to ``session`` and remember it for this kernel's natural key (survives restarts)."""
        session = session.strip()
        if not session:
            raise ValueError("session name must not be empty")
        binding.remember_switch(paths.data_dir(), self.binding.key, session)
        self.binding = binding.Binding(session, "switched", self.binding.key)
        self._snapshots = None
        self.store.ensure_session(session)
        return self.binding

    # ------------------------------------------------------------------ adapters
    @property
    def store(self) -> SessionStore:
        if self._store is None:
            from ipython_compact.store import SessionStore  # start-up: opened on first use, not at %load_ext

            # None: $IPYTHON_COMPACT_DB or the data dir
            self._store = SessionStore(self.config.database or None)
            self._store.ensure_session(self.session)
            if PendingJournal(self._store.db_path).count():  # an earlier kernel's writes still wait
                self.bookkeeping.start()
        return self._store

    @property
    def snapshot_base(self) -> str | Path:
        """Where every session's snapshots live: ``CompactConfig.snapshots``, else
        ``$IPYTHON_COMPACT_SNAPSHOTS``, else ``<data dir>/snapshots`` (a folder or a URL)."""
        chosen = self.config.snapshots.strip()
        if not chosen:
            return paths.snapshot_location()
        return chosen if "://" in chosen else Path(chosen).expanduser()

    @property
    def snapshot_dir(self) -> str | Path:
        """Where this session's snapshots live (shown when a restore finds nothing)."""
        base = self.snapshot_base
        slug = binding.snapshot_slug(self.session)
        return f"{str(base).rstrip('/')}/{slug}" if isinstance(base, str) else base / slug

    @property
    def snapshots(self) -> SnapshotStore:
        if self._snapshots is None:
            from ipython_compact.namespace.snapshot import SnapshotStore  # start-up: first snapshot

            c = self.config
            data = paths.data_dir()
            base = self.snapshot_base
            if isinstance(base, str):  # a malformed URL is said here, before a slug is joined to it
                from ipython_compact.namespace.snapshot.objects import object_scheme  # start-up

                object_scheme(base)
            where = self.snapshot_dir
            if isinstance(where, str):  # object storage: the writer lock lives in the session store
                key = load_shared_key(paths.key_path(), where)
                locks: WriterLocks | None = writer_locks(c.database or paths.database_location())
            else:
                key, locks = load_or_create_key(paths.key_path()), None
            self._snapshots = SnapshotStore(
                where,
                key,
                session=self.session,
                root=data if isinstance(where, Path) and where.is_relative_to(data) else None,
                locks=locks,
                ledger=LogLedger(self),
                max_name_bytes=c.snapshot_max_name_bytes,
                max_total_bytes=c.snapshot_max_total_bytes,
                generations=c.snapshot_generations,
                durable=c.snapshot_durable,
                name_timeout=c.snapshot_name_timeout or None,
            )
        return self._snapshots

    def close(self) -> None:
        self.settle_background(5.0)  # its digest is recorded through the store closed below
        if self._store is not None:
            with contextlib.suppress(Exception):
                self._store.close()
            self._store = None

    def _lock(self, op: str) -> threading.Lock:
        return self._op_locks.setdefault(op, threading.Lock())

    def _main_and_idle(self, op: str) -> None:
        if threading.current_thread() is not threading.main_thread() and self.executing:
            raise Busy(
                f"{op} waits for the running cell to finish (the namespace is in use); try again when it ends"
            )

    # ------------------------------------------------------------------ probe
    def names(self, limit: int | None = None, after: str | None = None) -> ProbeResult:
        """One page of the probe (``after``: the previous page's ``next``)."""
        return probe_namespace(
            self.shell.user_ns,
            self.shell.user_ns_hidden,
            exclude_ids=self.exclude_ids,
            limit=limit,
            deadline_s=self.config.probe_deadline,
            after=after,
        )

    def inspect(self, name: str, rows: int, cols: int) -> dict[str, Any]:
        """The head of user name ``name`` as a table (``namespace/preview.table_preview``).

        ``name`` is looked up as a key among the names the probe lists (never evaluated, no
        attribute path); ``NotAName`` when it is not one, ``NoTable`` (a ``ValueError``) when the
        value has no table view."""
        value = dict(
            user_names(self.shell.user_ns, self.shell.user_ns_hidden, exclude_ids=self.exclude_ids)
        ).get(name, _NOT_A_NAME)
        if value is _NOT_A_NAME:
            raise NotAName(f"{name!r} is not a name in this kernel's namespace")
        return {"name": name, **table_preview(value, rows=rows, cols=cols).to_json()}

    # ------------------------------------------------------------------ status
    def settings(self) -> Any:
        # start-up: read when the settings are first asked for
        from ipython_compact.core.settings import CompactionSettings

        return CompactionSettings.from_mapping(self.config.settings_mapping())

    def context_session(self) -> str:
        """The session whose context is compacting: the live agent's, else the kernel's binding."""
        agent = self.live_agent()
        return str(agent.session) if agent is not None else self.session

    def status(self) -> StatusReply:
        """Where the context stands (``kernel/status_report.status_of``)."""
        return status_of(self)

    # ------------------------------------------------------------------ log views
    def summaries(self, limit: int = 20) -> list[CompactionSummary]:
        return summaries_of(self.store, self.context_session(), limit, self.settings().estimator)

    def log(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest ``limit`` entries (0: all) of the session whose context is compacting (a live
        agent's own, as ``status`` names it); an entry without text is described (``entry_gist``)."""
        session = self.context_session()
        path = self.store.path_tail(session, limit) if limit > 0 else self.store.path(session)
        return [
            {
                "id": e.id,
                "kind": e.kind,
                "role": e.role,
                "timestamp": e.timestamp,
                "text": entry_text(e)[:160] or entry_gist(e.to_json()),
            }
            for e in path[-limit:]
        ]

    def show(self, entry_id: str) -> dict[str, Any]:
        entry = self.store.get(entry_id, self.context_session())
        return dict(entry.to_json())

    def tree(self) -> list[dict[str, Any]]:
        leaf = self.store.leaf(self.session)
        return [
            {
                "id": e.id,
                "kind": e.kind,
                "timestamp": e.timestamp,
                "leaf": e.id == leaf,
                # cut at a character with an ellipsis, as `log` cuts, never silently mid-word
                "text": one_line(entry_text(e), 80) or entry_gist(e.to_json()),
            }
            for e in self.store.branch_tips(self.session)
        ]

    def branch(self, entry_id: str, *, summarize: bool = True) -> dict[str, Any]:
        """Move the leaf to ``entry_id``; with ``summarize`` the abandoned branch is summarized there."""
        self.store.get(entry_id, self.session)  # raises when unknown
        if summarize:
            try:
                entry = self._compactor().summarize_branch(self.session, entry_id)
                return {"leaf": entry.id, "branch_summary": entry.id}
            except NothingToCompact:
                pass
        self.store.set_leaf(self.session, entry_id)
        return {"leaf": str(self.store.leaf(self.session)), "branch_summary": None}

    def import_transcript(
        self, source: Path, *, new_ids: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        """Append a pi or ipython-compact JSONL transcript to the bound session (fresh ids on clashes;
        entries the session already holds raise ``DuplicateImportError`` unless ``new_ids``);
        ``progress(written, total)`` after each stored batch."""
        # start-up: only %compact import reads transcripts
        from ipython_compact.store.importers import import_file

        result = import_file(self.store, source, session=self.session, new_ids=new_ids, progress=progress)
        return {
            "session": result.session,
            "format": result.format,
            "imported": result.imported,
            "leaf_id": result.leaf_id,
        }

    def export(self, target: Path) -> int:
        entries = self.store.path(self.session)

        def write(f: TextIO) -> int:
            for e in entries:
                f.write(canonical_json(e.to_json()) + "\n")
            return len(entries)

        return write_private_file(target, write, what="the export target")

    # ------------------------------------------------------------------ recall and pins
    def recall(
        self, entry_id: str | None = None, query: str | None = None, limit: int = 5
    ) -> list[dict[str, Any]]:
        """Original text of logged entries (compaction summaries are excluded from query hits)."""
        hits = self._compactor().recall(self.context_session(), entry_id=entry_id, query=query, limit=limit)
        return [h.to_json() for h in hits]

    def pin(self, text: str) -> dict[str, Any]:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("pin needs non-empty text")
        entry = self._compactor().pin(self.context_session(), text=text)
        return {"pin_id": entry.data.get("pin_id"), "entry_id": entry.id}

    def unpin(self, pin_id: str) -> dict[str, Any]:
        entry = self._compactor().unpin(self.context_session(), pin_id)
        return {"pin_id": pin_id, "entry_id": entry.id}

    def pins(self) -> dict[str, str]:
        return {str(a.pin_id): a.text for a in self._compactor().active_pins(self.context_session())}

    # ------------------------------------------------------------------ compaction
    def _compactor(self) -> Compactor:
        # start-up: the compactor pulls in the whole summarizing core; %load_ext must not pay for it
        from ipython_compact.compaction.compactor import Compactor  # start-up

        compactor = Compactor(self.store, self._summarizer(), self.compaction_settings()[0])
        agent = self.live_agent()
        if agent is not None:  # its cut in the model's tokens, and its figure for "context now"
            # start-up: only with a live agent (its own module is loaded by then)
            from ipython_compact.agent.context_report import attach_estimate

            attach_estimate(agent, compactor)
        return compactor

    def compaction_settings(self) -> tuple[Any, str]:
        """``(settings, whose)``: the live ``%%agent``'s own settings (its window, per-model
        overrides) when there is one — the ones that decide its compactions — else CompactConfig's.
        ``preview`` and ``now`` use these, so they never disagree with ``status``."""
        agent = self.live_agent()
        if agent is not None:
            settings = agent.settings
            return settings, (
                f"the live %%agent's settings ({int(agent.context_window):,}-token window, "
                f"{KEEP_SETTING} {settings.keep_recent_tokens:,})"
            )
        settings = self.settings()
        return settings, (
            f"CompactConfig ({int(self.config.context_window):,}-token window, "
            f"{KEEP_SETTING} {settings.keep_recent_tokens:,})"
        )

    def keep_setting_form(self) -> str:
        """How to set the tail budget, exactly as it works: ``CompactConfig.compaction`` is one
        dict, so the form repeats the user's other overrides (assigning replaces the whole dict)."""
        others = {k: v for k, v in dict(self.config.compaction).items() if k != "keep_recent_tokens"}
        shown = "".join(f"{k!r}: {v!r}, " for k, v in others.items())
        return f"set it with `%config CompactConfig.compaction = {{{shown}'keep_recent_tokens': N}}`"

    def _refusal(self, exc: NothingToCompact) -> NothingToCompact:
        """The same refusal, with the tail budget named as it is set here, and whose settings
        decided it."""
        why = exc.why
        text = why.render(KEEP_SETTING) if why is not None else str(exc)
        told = f"{text} — decided with {self.compaction_settings()[1]}"
        if why is not None and why.case not in ("no_conversation", "ends_in_compaction"):
            told += f"; {self.keep_setting_form()}"
        return NothingToCompact(told, why=why)

    def _summarizer(self) -> Any:
        """The configured summarizer (``CompactConfig.summarizer``: ``offline``, the default, or
        ``openai``)."""
        # start-up: the summarizers are needed only when a compaction runs
        from ipython_compact.summarizers.registry import make_summarizer  # start-up

        return make_summarizer(
            self.config.summarizer, model=self.config.model or None, base_url=self.config.base_url or None
        )

    def preview(self, focus: str | None = None) -> PreviewReply:
        try:
            plan = self._compactor().plan(self.context_session(), focus=focus)
        except NothingToCompact as exc:
            raise self._refusal(exc) from None
        return cast(PreviewReply, {**_jsonable(plan), "text": plan.render()})

    def compact(self, focus: str | None = None, *, reason: str = "manual") -> CompactReply:
        lock = self._lock("compact")
        if not lock.acquire(blocking=False):
            raise Busy("a compaction is already running for this kernel")
        try:
            try:
                result = self._compactor().compact(self.context_session(), reason=reason, focus=focus)
            except NothingToCompact as exc:
                raise self._refusal(exc) from None
            payload = _jsonable(result)
            notice = self.after_compaction()
            # the context as `status` (and the panel's gauge) counts it now: the kernel-state
            # notice placed after the compaction takes room too (issue 35: one number, one thing);
            # kept beside the log, so the timeline and the CLI show this figure, not a re-estimate
            now = self.status()
            payload["context_after"] = now["tokens"]
            payload["estimate"] = now["estimate"]
            figure = ContextFigure(now["tokens"], now["estimate"])
            record_figure(self.store, self.context_session(), result.entry.id, figure)
            return {"compaction": cast(CompactionRecord, payload), "notice": notice}
        finally:
            lock.release()

    def after_compaction(self) -> str | None:
        """Append the ``<ipython_state>`` notice from a live probe (and a fresh snapshot when allowed)
        to the session just compacted (a live agent's own, which may not be the bound one)."""
        outcome: SnapshotOutcome | None
        try:
            report = self.snapshot()  # raises Busy off the main thread while a cell runs
            outcome = SnapshotOutcome(True, [(s.name, s.reason) for s in report.skipped])
        except Busy:
            last = self.last_snapshot
            outcome = (
                SnapshotOutcome(True, [(s.name, s.reason) for s in last.skipped])
                if last is not None
                else SnapshotOutcome(False, error="a cell was running")
            )
        except Exception as exc:
            outcome = SnapshotOutcome(False, error=f"{type(exc).__name__}: {exc}")
        if not self.config.auto_snapshot and self.last_snapshot is None:
            outcome = None
        try:
            names: list[str] | None = self.names().name_list
        except Exception:
            names = None
        notice = state_notice(kernel_alive=True, names=names, snapshot=outcome)
        if notice is not None:
            self.store.append(self.context_session(), KERNEL_STATE, {"content": notice}, timestamp=log_now())
        return notice

    # ------------------------------------------------------------------ bookkeeping appends
    def append_or_report(self, kind: str, data: Mapping[str, Any]) -> Entry | None:
        """Append a bookkeeping entry (a snapshot record, a cell's file operations) to the bound
        session. It runs after a cell, so it must neither raise into the user's work nor hold up
        the next cell, and it must not vanish: a locked database queues it for the retry thread
        (``kernel/bookkeeping.py``); giving up is logged and shown in ``status()``'s problem line."""
        entry: Entry | None = self.bookkeeping.append(self.session, kind, data, log_now())
        return entry

    def _apply_record(self, record: Mapping[str, Any]) -> Any:
        """Write one bookkeeping record (``kernel/bookkeeping.py``); ``DatabaseLockedError`` while locked.

        An append whose entry id is already in the session landed before (a replay that ran
        twice) and is not appended again."""
        op, session = record.get("op"), str(record.get("session"))
        if op == "append":
            entry_id = str(record["entry_id"])
            try:
                return self.store.get(entry_id, session)
            except UnknownEntryError:
                pass
            except UnknownSessionError:
                self.store.ensure_session(session)
            return self.store.append(
                session,
                str(record["kind"]),
                dict(record["data"]),
                timestamp=str(record["timestamp"]),
                entry_id=entry_id,
            )
        if op == "merge_status":
            key = str(record["key"])
            known = self.store.status_get(session, key, {}) or {}
            known.update({str(k): v for k, v in dict(record["values"]).items()})
            newest = sorted(known, key=lambda g: int(g) if g.isdigit() else -1)[-LogLedger.KEEP :]
            self.store.status_set(session, key, {g: known[g] for g in newest})
            return None
        raise ValueError(f"unknown bookkeeping record {str(record)[:120]}")

    # ------------------------------------------------------------------ file ops
    def flush_file_ops(self) -> list[dict[str, Any]]:
        """Record the files the last cell read/modified as ``custom`` entries (data for the ledger),
        one per actor: ``by`` is ``"agent"`` (an agent's tool call) or ``"user"`` (a person's cell)."""
        recorded = []
        for actor, (read, modified) in sorted(self.fileops.take().items()):
            data = {"read": read, "modified": modified, "by": actor}
            self.append_or_report(CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": data})
            recorded.append(data)
        return recorded


def _jsonable(obj: Any) -> dict[str, Any]:
    """A dataclass / mapping / object result as a JSON-ready dict (unknown values become strings)."""
    import dataclasses  # start-up: used by one helper

    if hasattr(obj, "to_json"):
        obj = obj.to_json()
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if not isinstance(obj, Mapping):
        obj = {"value": obj}

    def conv(v: Any) -> Any:
        if isinstance(v, Entry):
            return v.to_json()
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: conv(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, Mapping):
            return {str(k): conv(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        return v

    result: dict[str, Any] = json.loads(json.dumps(conv(dict(obj)), default=str))
    return result
