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

from ipython_compact.compaction.results import NothingToCompact
from ipython_compact.core.comm_protocol import (
    CompactionRecord,
    CompactionSummary,
    CompactReply,
    PreviewReply,
    StatusReply,
)
from ipython_compact.core.entries import (
    COMPACTION,
    CUSTOM,
    KERNEL_FILE_OPS,
    KERNEL_STATE,
    MESSAGE,
    SNAPSHOT,
    Entry,
    canonical_json,
    entry_text,
)
from ipython_compact.core.readable import entry_gist
from ipython_compact.core.state_notice import SnapshotOutcome, state_notice
from ipython_compact.files import paths
from ipython_compact.files.safety import write_private_file
from ipython_compact.kernel import binding
from ipython_compact.kernel.bookkeeping import BookkeepingLog
from ipython_compact.kernel.config import CompactConfig
from ipython_compact.kernel.fileops import FileOpsRecorder
from ipython_compact.namespace.preview import table_preview
from ipython_compact.namespace.probe import ProbeResult, probe_namespace, user_names
from ipython_compact.namespace.snapshot import (
    RestoreReport,
    SnapshotError,
    SnapshotReport,
    load_or_create_key,
)
from ipython_compact.namespace.snapshot.background import BackgroundSave, fork_available, history_writing
from ipython_compact.namespace.snapshot.keys import load_shared_key
from ipython_compact.namespace.snapshot.locking import WriterLocks
from ipython_compact.store.errors import UnknownEntryError, UnknownSessionError
from ipython_compact.store.pending import PendingJournal
from ipython_compact.store.writer_locks import writer_locks
from ipython_compact.version import __version__

if TYPE_CHECKING:
    from ipython_compact.compaction.compactor import Compactor
    from ipython_compact.namespace.snapshot import SnapshotStore
    from ipython_compact.store import SessionStore

FILE_OPS_TYPE = KERNEL_FILE_OPS  # the Compactor folds these entries into the ledger
FIGURES_KEY = "panel_figures"  # the session status row holding the last window and lines status() reported

log = logging.getLogger(__name__)

#: The tail budget as a kernel user sets it (``%config CompactConfig.compaction = {...}``).
KEEP_SETTING = "CompactConfig.compaction['keep_recent_tokens']"


def _now() -> str:
    """The store's timestamp (``store.database.utc_now``), imported on first use: start-up."""
    from ipython_compact.store.database import utc_now

    return utc_now()


_NOT_A_NAME = object()


class NotAName(LookupError):
    """``inspect`` was asked for a name the namespace does not list (the message says which)."""


class Busy(Exception):
    """The operation cannot run now (a cell is running, or the same operation is in progress)."""


class Unavailable(Exception):
    """A part the operation needs is not installed or not configured; the message says which."""


class KernelService:
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
        """Where the context stands, with the figures of whoever compacts it (fields:
        ``comm_protocol.StatusReply``).

        With a live ``%%agent`` the window, both lines and the token estimate are the agent's own
        (its ``--window``, its per-model settings, its stale-usage guard): the same numbers that
        trigger its compactions. Otherwise they come from ``CompactConfig``. ``conversation``
        says whether the context holds any model conversation (messages or a compaction); a plain
        notebook has none, and there is nothing to compact.
        """
        from ipython_compact.core.thresholds import threshold_lines  # start-up: status only
        from ipython_compact.core.tokens import estimate_context  # start-up: status only

        agent = self.live_agent()
        session = self.context_session()
        view = self.store.context_view(session)
        conversation = any(e.kind in (MESSAGE, COMPACTION) for e in view.entries)
        problem = None
        if agent is not None:
            figures = agent.status()
            tokens, window, model = figures["tokens"], int(figures["window"]), figures.get("model")
            lines: Any = None
            blocking, background = figures["blocking_line"], figures["background_line"]
        else:
            settings = self.settings()
            # pi's rule, as the compaction plan and the agent use it: the newest usage anchor plus
            # estimates after it — not a plain sum, which disagreed with `%compact preview`.
            tokens = estimate_context(
                view.entries, settings.estimator, tokens=view.tokens(settings.estimator)
            ).tokens
            window, model = int(self.config.context_window), None
            try:
                lines = threshold_lines(window, settings)
            except ValueError as exc:  # a misconfigured window: report it instead of failing the status
                lines, problem = None, str(exc)
            blocking = None if lines is None else lines.blocking
            background = None if lines is None else lines.background
        if problem is None and tokens > window:
            problem = (
                f"{tokens:,} tokens are more than the {window:,}-token window: a model call with this "
                "context would be refused. `%compact now` brings it under the window."
            )
        elif problem is None and blocking is not None and tokens > blocking:
            problem = (
                f"over the blocking line ({blocking:,}): the next agent turn compacts before it calls "
                "the model; `%compact now` compacts now."
            )
        for said in (self.bookkeeping.failure, self.bookkeeping.waiting_text()):
            if said is not None:  # never silent: a dropped or waiting bookkeeping entry is a problem
                problem = f"{problem} Also: {said}." if problem else f"{said}."
        self._remember_figures(
            session,
            {
                "window": window,
                "blocking_line": blocking,
                "background_line": background,
                "source": "agent" if agent is not None else "config",
            },
        )
        live = self.store.live_status(session)
        snap: dict[str, Any] | None = None
        pending: bool | None = None
        snapshot_problem = None
        try:
            snap, pending = self.snapshots.latest_manifest(), self.snapshots.pending
        except SnapshotError as exc:  # a bad key or folder: status still answers, and says what is wrong
            snapshot_problem = str(exc)
        return {
            "session": session,
            "binding": self.binding.source,
            "binding_key": self.binding.key,
            "snapshot_dir": str(self.snapshot_dir),
            "restore_pending": pending,
            "snapshot_problem": snapshot_problem,
            "last_snapshot_error": self.last_snapshot_error,
            "bookkeeping_pending": self.bookkeeping.pending,
            "source": "agent" if agent is not None else "config",
            "model": model,
            "conversation": conversation,
            "tokens": tokens,
            "window": window,
            "blocking_line": blocking,
            "background_line": background,
            "problem": problem,
            "entries": self.store.path_length(session),  # stored depth: no walk
            "compactions": self.store.count_on_path(session, (COMPACTION,)),  # stored running count: one row
            "in_flight": [
                {"task_id": c.task_id, "reason": c.reason, "blocking": c.blocking, "started_at": c.started_at}
                for c in live.in_flight
            ],
            "last_failure": live.last_failure,
            "snapshot": None
            if snap is None
            else {
                "generation": snap.get("generation"),
                "timestamp": snap.get("timestamp"),
                "names": len(snap.get("names", {})),
                "skipped": snap.get("skipped", []),
                "bytes": snap.get("bytes"),
                "origin": snap.get("origin"),
                "provisional": snap.get("provisional"),
                "verification": snap.get("verification"),
                "last_full_verification": snap.get("last_full_verification"),
            },
            "cell": {"running": self.cell_request, "finished": list(self.finished_requests)},
            "version": __version__,
        }

    def _remember_figures(self, session: str, figures: dict[str, Any]) -> None:
        """Keep the window and lines in the session's status table (only when they change), so the
        panel can draw the gauge from the log after a restart, before the extension is loaded
        (``server_extension`` serves it). Best effort: status must answer even if this fails."""
        if self._figures_written == (session, figures):
            return
        with contextlib.suppress(Exception):
            self.store.status_set(session, FIGURES_KEY, figures)
            self._figures_written = (session, figures)

    # ------------------------------------------------------------------ log views
    def summaries(self, limit: int = 20) -> list[CompactionSummary]:
        return summaries_of(self.store, self.context_session(), limit)

    def log(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest ``limit`` entries (0: all); an entry without text is described (``entry_gist``)."""
        path = self.store.path_tail(self.session, limit) if limit > 0 else self.store.path(self.session)
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
        entry = self.store.get(entry_id, self.session)
        return dict(entry.to_json())

    def tree(self) -> list[dict[str, Any]]:
        leaf = self.store.leaf(self.session)
        return [
            {
                "id": e.id,
                "kind": e.kind,
                "timestamp": e.timestamp,
                "leaf": e.id == leaf,
                "text": entry_text(e)[:80],
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
        hits = self._compactor().recall(self.session, entry_id=entry_id, query=query, limit=limit)
        return [h.to_json() for h in hits]

    def pin(self, text: str) -> dict[str, Any]:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("pin needs non-empty text")
        entry = self._compactor().pin(self.session, text=text)
        return {"pin_id": entry.data.get("pin_id"), "entry_id": entry.id}

    def unpin(self, pin_id: str) -> dict[str, Any]:
        entry = self._compactor().unpin(self.session, pin_id)
        return {"pin_id": pin_id, "entry_id": entry.id}

    def pins(self) -> dict[str, str]:
        return {str(a.pin_id): a.text for a in self._compactor().active_pins(self.session)}

    # ------------------------------------------------------------------ compaction
    def _compactor(self) -> Compactor:
        # start-up: the compactor pulls in the whole summarizing core; %load_ext must not pay for it
        from ipython_compact.compaction.compactor import Compactor  # start-up

        return Compactor(self.store, self._summarizer(), self.compaction_settings()[0])

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
            return {"compaction": cast(CompactionRecord, payload), "notice": notice}
        finally:
            lock.release()

    def after_compaction(self) -> str | None:
        """Append the ``<ipython_state>`` notice from a live probe (and a fresh snapshot when allowed)."""
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
            self.store.append(self.session, KERNEL_STATE, {"content": notice}, timestamp=_now())
        return notice

    # ------------------------------------------------------------------ snapshots
    def automatic_snapshot(self, *, background: bool = False) -> SnapshotReport | BackgroundSave | None:
        """The debounced snapshot after cells; None (nothing written) while no user name is defined.

        An automatic snapshot of an empty namespace would only bury the previous kernel's work.
        With ``background`` (the kernel's timer) and ``CompactConfig.background_snapshots`` it is
        written by a forked child (``namespace/snapshot/background.py``): the main thread only lists
        the names and forks. Returns the running ``BackgroundSave`` then (None while another one
        runs: the caller tries again later).
        """

        def items() -> list[tuple[str, Any]]:
            return user_names(self.shell.user_ns, self.shell.user_ns_hidden, exclude_ids=self.exclude_ids)

        if background and self.config.background_snapshots and fork_available():
            if self.background_busy:
                return None
            self._main_and_idle("snapshot")
            if history_writing(self.shell):  # a fork now would wait for IPython's history thread
                self.background_deferred = True
                return None
            verify = self.snapshots.automatic_verification(
                self.config.verify_unchanged, self.config.full_verify_every
            )
            try:  # the child lists the names (and finds none: nothing written) on its copy
                self._background = BackgroundSave(
                    self.snapshots,
                    items,
                    verify=verify,
                    timestamp=_now(),
                    on_done=self._background_done,
                    objects=lambda: self.shell.user_ns,
                )
            except OSError as exc:  # fork refused (memory, process limits): the main thread does it
                log.debug("background snapshot not started (%s); writing it in the foreground", exc)
            else:
                return self._background
        if not items():
            return None
        return self.snapshot(record=False, automatic=True)

    @property
    def last_background(self) -> BackgroundSave | None:
        """The newest background snapshot (running or finished), or None."""
        return self._background

    @property
    def background_busy(self) -> bool:
        """A background snapshot is being written now."""
        return self._background is not None and not self._background.done

    def _background_done(self, job: BackgroundSave) -> None:
        if job.empty:
            return
        if job.report is not None:
            self.last_snapshot, self.last_snapshot_error = job.report, None
        else:
            self.last_snapshot_error = job.error or "the background snapshot ended without a report"

    def settle_background(self, timeout: float | None = None) -> None:
        """Wait for a background snapshot to finish (a foreground save, restore or unload first
        lets it land, so their views of the folder and the store's state agree); a child paused
        for the running cell is let go on first, or this would wait for nothing."""
        job = self._background
        if job is not None:
            job.resume()
            job.wait(timeout if timeout is not None else 600.0)

    def pause_background(self) -> None:
        """While the user's cell runs the snapshot child takes no CPU (``BackgroundSave.pause``)."""
        job = self._background
        if job is not None and not job.done:
            job.pause()

    def resume_background(self) -> None:
        job = self._background
        if job is not None:
            job.resume()

    def snapshot(self, *, full: bool = False, record: bool = True, automatic: bool = False) -> SnapshotReport:
        """Write a snapshot generation; ``record`` adds a ``snapshot`` entry to the session log.

        Explicit snapshots (the default) always verify fully. ``automatic`` (the debounced one after
        cells) follows ``CompactConfig.verify_unchanged`` / ``full_verify_every``: sampled checks,
        with every Nth automatic snapshot verifying fully (``SnapshotStore.automatic_verification``);
        while an earlier kernel's snapshot waits to be restored they are provisional.
        """
        self._main_and_idle("snapshot")
        self.settle_background()
        lock = self._lock("snapshot")
        if not lock.acquire(blocking=False):
            raise Busy("a snapshot is already being written")
        try:
            items = user_names(self.shell.user_ns, self.shell.user_ns_hidden, exclude_ids=self.exclude_ids)
            try:
                verify = (
                    self.snapshots.automatic_verification(
                        self.config.verify_unchanged, self.config.full_verify_every
                    )
                    if automatic and not full
                    else "full"
                )
                report = self.snapshots.save(
                    items, full=full, timestamp=_now(), verify=verify, automatic=automatic
                )
            except (OSError, SnapshotError) as exc:
                self.last_snapshot_error = f"{type(exc).__name__}: {exc}"
                raise
            self.last_snapshot, self.last_snapshot_error = report, None
            if not record:
                return report
            self.append_or_report(
                SNAPSHOT,
                {
                    "generation": report.generation,
                    "saved": len(report.saved),
                    "skipped": [s.to_json() for s in report.skipped],
                    "bytes": report.bytes,
                    "manifest_digest": report.manifest_digest,
                },
            )
            return report
        finally:
            lock.release()

    def restore(
        self, names: list[str] | None = None, generation: int | None = None, *, overwrite: bool = False
    ) -> RestoreReport:
        """Bind names from the newest snapshot holding user work (or ``generation``) into the namespace.

        A name defined since with another value is not overwritten (``report.kept``) unless
        ``overwrite`` or it is among ``names``. A restore that brings back nothing carries a warning
        saying where it looked, what is available, and how to point it elsewhere — it is never
        reported as a success.
        """
        self._main_and_idle("restore")
        self.settle_background()
        lock = self._lock("snapshot")
        if not lock.acquire(blocking=False):
            raise Busy("a snapshot is being written; restore after it finishes")
        try:
            report = self.snapshots.restore_into(
                self.shell.user_ns, names=names, generation=generation, overwrite=overwrite
            )
            if not report.restored and not report.kept:
                report.warnings.append(self._nothing_restored(report))
            return report
        finally:
            lock.release()

    def _nothing_restored(self, report: RestoreReport) -> str:
        where = (
            f"looked in {self.snapshot_dir} for session {self.session!r} (bound by "
            f"{self.binding.source}: "
            f"{self.binding.key})"
        )
        elsewhere = (
            "to use another session's snapshots, `%compact session NAME` (remembered across "
            "restarts) or "
            "set IPYTHON_COMPACT_SESSION before starting the kernel"
        )
        if report.generation is None:
            listed = [g.generation for g in self.snapshots.generations_info() if g.verified]
            if listed:
                return (
                    f"restored nothing: {where}; no snapshot could be used automatically, but "
                    f"generations "
                    f"{', '.join(map(str, listed))} are listed by `%compact snapshots` — pick one with "
                    f"`%compact restore --generation N`; {elsewhere}"
                )
            found = self._sessions_with_snapshots()
            others = (
                f"sessions with snapshots there: {', '.join(found)}"
                if found
                else "no other session has snapshots there"
            )
            return (
                f"restored nothing: {where} and found no snapshot (take one with `%compact snapshot`); "
                f"{others}; {elsewhere}"
            )
        return (
            f"restored nothing from generation {report.generation}: it holds "
            f"{', '.join(report.available) or 'no names'}; `%compact snapshots` lists the others"
        )

    def _sessions_with_snapshots(self, limit: int = 5) -> list[str]:
        """Other sessions of the log whose snapshot folder exists beside this one's, most recently
        written first (at most ``limit``, then ``+N more``): what an empty restore can point to."""
        base = self.snapshot_base
        if isinstance(base, str):  # object storage: not listed here
            return []
        found = [
            s.name
            for s in reversed(self.store.sessions())
            if s.name != self.session and (base / binding.snapshot_slug(s.name)).is_dir()
        ]
        return found[:limit] + ([f"+{len(found) - limit} more"] if len(found) > limit else [])

    def snapshot_list(self) -> list[dict[str, Any]]:
        """Every generation on disk (number, time, kernel process, names, size, verified or not)."""
        return [g.to_json() for g in self.snapshots.generations_info()]

    def discard_snapshots(self, generation: int) -> list[int]:
        """Delete the snapshots of the earlier kernel that wrote ``generation`` (the user chose not to
        restore it)."""
        self.settle_background()
        return self.snapshots.discard(generation)

    # ------------------------------------------------------------------ bookkeeping appends
    def append_or_report(self, kind: str, data: Mapping[str, Any]) -> Entry | None:
        """Append a bookkeeping entry (a snapshot record, a cell's file operations) to the bound
        session. It runs after a cell, so it must neither raise into the user's work nor hold up
        the next cell, and it must not vanish: a locked database queues it for the retry thread
        (``kernel/bookkeeping.py``); giving up is logged and shown in ``status()``'s problem line."""
        entry: Entry | None = self.bookkeeping.append(self.session, kind, data, _now())
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


def summaries_of(store: SessionStore, session: str, limit: int = 20) -> list[CompactionSummary]:
    """The ``summaries`` op's compactions of ``session``, oldest first (also served without a kernel
    by ``server_extension``: they are read from the session log alone)."""
    compactions = store.path(session, kinds=(COMPACTION,))  # mark chain only
    out: list[CompactionSummary] = []
    for e in compactions[-limit:] if limit > 0 else compactions:
        details = e.data.get("details")
        details = details if isinstance(details, dict) else {}
        out.append(
            {
                "id": e.id,
                "timestamp": e.timestamp,
                "reason": e.data.get("reason", "manual"),
                "tokens_before": e.data.get("tokens_before"),
                "tokens_after": details.get("tokens_after"),
                "summary": e.data.get("summary", ""),
                "first_kept_entry_id": e.data.get("first_kept_entry_id"),
                "focus": details.get("focus"),
                "kept_entries": _kept_messages(store, session, e),
            }
        )
    return out


def _kept_messages(store: SessionStore, session: str, compaction: Entry) -> int:
    """Messages from the compaction's first kept entry up to it (a walk over that span only)."""
    first_kept = compaction.data.get("first_kept_entry_id")
    if not isinstance(first_kept, str):
        return 0
    try:
        return int(store.count_on_path(session, (MESSAGE,), leaf=compaction.id, from_id=first_kept))
    except KeyError:  # not on the path (a damaged log): nothing counted as kept
        return 0


class LogLedger:
    """Manifest digests recorded in the session database, outside the snapshot folder.

    Every snapshot's digest goes into the session's status table (``snapshot_digests``: the
    newest 64 generations, so a save costs one small upsert); explicit snapshots also carry it in
    their ``snapshot`` entry of the hash-chained log. ``recorded`` merges both. A database that
    cannot be written must not stop a snapshot: recording is best effort, and restore compares
    against whatever was recorded.
    """

    KEY = "snapshot_digests"
    KEEP = 64

    def __init__(self, service: KernelService) -> None:
        self._service = service

    def record(self, generation: int, digest: str) -> None:
        """Through the bookkeeping log: a locked database journals the digest instead of losing it
        (lost digests once weakened the rollback check)."""
        with contextlib.suppress(Exception):
            self._service.bookkeeping.add(
                {
                    "op": "merge_status",
                    "session": self._service.session,
                    "key": self.KEY,
                    "values": {str(generation): digest},
                }
            )

    def recorded(self) -> dict[int, str]:
        out: dict[int, str] = {}
        with contextlib.suppress(Exception):
            store, session = self._service.store, self._service.session
            for e in store.entries(session, kinds=(SNAPSHOT,)):
                if isinstance(e.data.get("manifest_digest"), str) and type(e.data.get("generation")) is int:
                    out[e.data["generation"]] = e.data["manifest_digest"]
            for g, d in (store.status_get(session, self.KEY, {}) or {}).items():
                out[int(g)] = str(d)
        with contextlib.suppress(Exception):  # digests that wait in the journal count as recorded
            for record in PendingJournal(self._service.store.db_path).records():
                if (
                    record.get("op") == "merge_status"
                    and record.get("key") == self.KEY
                    and record.get("session") == self._service.session
                ):
                    out.update({int(g): str(d) for g, d in dict(record["values"]).items()})
        return out


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
