"""The kernel's ``status`` reply: where the context stands, with the figures of whoever compacts it.

Split from ``kernel/service.py`` by role (``KernelService.status`` answers with ``status_of``).
What must hold: status always answers (a misconfigured window or a bad snapshot folder is reported
in the reply, not raised), and the figures it shows are the ones that decide compactions.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from ipython_compact.compaction.context_figures import (
    AGENTS_COUNT,
    FIGURES_KEY,
    agents_kept_count,
    model_sees,
)
from ipython_compact.core.comm_protocol import StatusReply
from ipython_compact.core.entries import COMPACTION, MESSAGE
from ipython_compact.namespace.snapshot import SnapshotError
from ipython_compact.version import __version__

if TYPE_CHECKING:
    from ipython_compact.kernel.service import KernelService

__all__ = ["AGENTS_COUNT", "FIGURES_KEY", "agents_kept_count", "model_sees", "status_of"]


def status_of(self: KernelService) -> StatusReply:
    """Where the context stands, with the figures of whoever compacts it (fields:
    ``comm_protocol.StatusReply``).

    With a live ``%%agent`` the window, both lines and the token estimate are the agent's own
    (its ``--window``, its per-model settings, its stale-usage guard): the same numbers that
    trigger its compactions. Otherwise they come from ``CompactConfig``, except the window and lines: until
    the user states one, it is the one the session's agent last reported (``_agents_kept_figures``).
    ``conversation`` says whether the context holds any model conversation (messages or a compaction); a plain
    notebook has none, and there is nothing to compact.
    """
    from ipython_compact.compaction.context_figures import estimator_words  # start-up: status only
    from ipython_compact.core.thresholds import threshold_lines  # start-up: status only
    from ipython_compact.core.tokens import estimate_context  # start-up: status only

    agent = self.live_agent()
    session = self.context_session()
    view = self.store.context_view(session)
    conversation = any(e.kind in (MESSAGE, COMPACTION) for e in view.entries)
    seen = model_sees(view.entries)
    problem, remembered, counted = None, False, None
    if agent is not None:
        figures = agent.status()
        tokens, window, model = figures["tokens"], int(figures["window"]), figures.get("model")
        estimate = str(figures.get("estimate") or "")
        lines: Any = None
        blocking, background = figures["blocking_line"], figures["background_line"]
    else:
        settings = self.settings()
        # pi's rule, as the compaction plan and the agent use it: the newest usage anchor plus
        # estimates after it — not a plain sum, which disagreed with `%compact preview`.
        tokens = estimate_context(
            view.entries, settings.estimator, tokens=view.tokens(settings.estimator)
        ).tokens
        kept, model = _agents_kept_figures(self, session), None
        estimate = estimator_words(settings.estimator)
        counted = agents_kept_count(self.store, session, seen)
        if counted is not None:  # the context the last live agent counted, unchanged since
            tokens, estimate = counted
        remembered = kept is not None
        if kept is not None:  # the agent's own window and lines, as it last reported them
            window, blocking, background = kept["window"], kept["blocking_line"], kept["background_line"]
        else:
            window = int(self.config.context_window)
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
    figures = {
        "window": window,
        "blocking_line": blocking,
        "background_line": background,
        "source": "agent" if agent is not None else ("remembered" if remembered else "config"),
    }
    if agent is not None:  # its count of this context, kept until the context the model sees changes
        figures.update({"tokens": tokens, "estimate": estimate, "context_leaf": seen})
    elif counted is not None:
        kept_count = self.store.status_get(session, FIGURES_KEY, {}) or {}
        figures.update({k: kept_count.get(k) for k in ("tokens", "estimate", "context_leaf")})
    _remember_figures(self, session, figures)
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
        "estimate": estimate,
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


def _agents_kept_figures(self: KernelService, session: str) -> dict[str, Any] | None:
    """The window and lines the session's agent last reported (kept in ``FIGURES_KEY``), while no
    ``%%agent`` is live and the user has not stated ``CompactConfig.context_window``
    (ipython_config.py or ``%config``, even at the default's value); None: use the configuration.

    Why: before ``%load_ext`` the panel draws the gauge from those kept figures (say 8,192); the
    kernel must not then swap in the default 128,000 for the same model — one number for one thing.
    """
    if "context_window" in self.config.config.get("CompactConfig", {}):
        return None
    with contextlib.suppress(Exception):  # an unreadable row: the configured window
        kept = self.store.status_get(session, FIGURES_KEY, {}) or {}
        window = kept.get("window")
        if kept.get("source") in ("agent", "remembered") and type(window) is int and window > 0:
            return {
                "window": window,
                "blocking_line": kept.get("blocking_line"),
                "background_line": kept.get("background_line"),
            }
    return None


def _remember_figures(self: KernelService, session: str, figures: dict[str, Any]) -> None:
    """Keep the window and lines in the session's status table (only when they change), so the
    panel can draw the gauge from the log after a restart, before the extension is loaded
    (``server_extension`` serves it). Best effort: status must answer even if this fails."""
    if self._figures_written == (session, figures):
        return
    with contextlib.suppress(Exception):
        self.store.status_set(session, FIGURES_KEY, figures)
        self._figures_written = (session, figures)
