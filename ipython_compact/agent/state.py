"""The agent's state and the few things every part of the loop does: log, report, size the context.

Why a base of its own: the loop is split by concern (``scheduling`` decides when a compaction
runs and where it lands, ``recovery`` handles an overflowing prompt, ``model_request`` sends the
context, ``tool_calls`` runs code and revives a dead kernel, ``loop`` sequences a turn). Each part
is a mixin over this class, so the shared attributes are declared once, with their meaning.
The parts depend on each other in one direction: ``model_request`` builds on ``recovery``;
``recovery`` and ``model_request`` reach ``scheduling`` only through ``_compact_blocking``,
declared below; ``loop.Agent`` mixes them all in.

What must hold:
- Every entry goes through ``_append`` (the session log is the single record; nothing is kept
  only in memory that a resumed session would need, except counters that restart at zero).
- ``_emit`` never lets a display bug break a turn.
- ``context_tokens`` never rests on usage reported before the newest compaction.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ipython_compact.agent.events import AgentEvent, CompactionRecord
from ipython_compact.agent.kernel_tool import KernelTool
from ipython_compact.agent.openai_chat import to_openai_messages
from ipython_compact.core.context import build_context
from ipython_compact.core.entries import COMPACTION, MESSAGE, Entry
from ipython_compact.core.overflow import RecoveryState
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.state_notice import SnapshotOutcome
from ipython_compact.core.tokens import estimate_context, usage_of
from ipython_compact.core.triggers import usage_is_stale
from ipython_compact.store.sqlite_store import utc_now


class CompactionEngine(Protocol):
    """What the loop needs from the compaction pipeline: compute a compaction without placing it.

    ``prepare`` returns the ``compaction`` entry payload (``summary``, ``first_kept_entry_id``,
    ``tokens_before``, ``reason``, ``details``) or None when there is nothing to compact; it must
    not write to the log (the loop places the entry itself, now or at a turn boundary).
    """

    def prepare(self, session: str, *, reason: str, focus: str | None, keep_recent_tokens: int | None) -> dict[str, Any] | None: ...


def now_iso() -> str:
    """The wall-clock timestamp stored on messages: the store's own format (UTC, milliseconds, ``Z``)."""
    return utc_now()


class AgentState:
    """Shared attributes of the agent and the helpers every part uses.

    Attributes set by ``Agent.__init__`` (see there for the public ones):
    ``_recovery`` is the overflow episode state (idle / attempted / reported);
    ``consecutive_failures`` and ``_last_failure_at`` drive the cooldown and the failure ladder;
    ``_busy`` / ``_abort`` say whether a turn runs and whether it must stop; ``_bg_*`` track
    background compaction workers; ``_requested`` is the model's pending ``compact.run()``;
    ``_pending_records`` pairs queued inbox payloads with the records callers hold;
    ``_compacted_for_request`` enforces "at most one compaction per request".
    """

    store: Any
    session: str
    client: Any
    engine: CompactionEngine
    kernel: KernelTool
    provider: str
    model: str
    context_window: int
    _base_settings: CompactionSettings
    system_prompt: str
    tool_timeout: float | None
    cooldown_seconds: float
    max_restarts: int
    restart_window_seconds: float
    _restart_times: list[float]
    autonomous: bool
    snapshot_dir: str | None
    on_event: Callable[[AgentEvent], None] | None
    request_timeout: float
    snapshot_outcome: Callable[[], SnapshotOutcome | None] | None
    stream: bool
    restarts: int
    compactions: list[CompactionRecord]
    consecutive_failures: int
    _last_failure_at: float | None
    _recovery: RecoveryState
    _state_lock: threading.RLock
    _busy: bool
    _abort: threading.Event
    _bg_threads: list[threading.Thread]
    _bg_in_flight: int
    _requested: dict[str, Any] | None
    _continuations: list[str]
    _last_snapshot: SnapshotOutcome | None
    _goal: str | None
    _pending_records: list[CompactionRecord]
    _compacted_for_request: bool

    # ------------------------------------------------------------------ settings
    @property
    def settings(self) -> CompactionSettings:
        """The compaction settings for the current model (``model_overrides`` applied)."""
        return self._base_settings.for_model(self.provider, self.model)

    # ------------------------------------------------------------------ log and events
    def _emit(self, kind: str, text: str = "", **data: Any) -> None:
        if self.on_event is not None:
            with contextlib.suppress(Exception):  # a display bug must never break the turn
                self.on_event(AgentEvent(kind, text, data))

    def _append(self, kind: str, data: Mapping[str, Any], *, move_leaf: bool = True) -> Entry:
        entry: Entry = self.store.append(self.session, kind, dict(data), move_leaf=move_leaf)
        return entry

    def _append_message(self, message: Mapping[str, Any], *, move_leaf: bool = True) -> Entry:
        return self._append(MESSAGE, {"message": dict(message)}, move_leaf=move_leaf)

    def _baseline_text(self) -> str:
        """The system prompt, plus the goal kept outside the transcript when there is one."""
        text = self.system_prompt
        if self._goal:
            text += f"\n\nCurrent goal (kept outside the transcript; still in force): {self._goal}"
        return text

    def log_entries(self) -> list[Entry]:
        """Every entry of the session, in append order (branches included)."""
        entries: list[Entry] = self.store.entries(self.session)
        return entries

    # ------------------------------------------------------------------ context
    def context_messages(self) -> list[dict[str, Any]]:
        """The provider-ready messages the next request would carry (system baseline first)."""
        return build_context(self.store.context_path(self.session))

    def _request_messages(self) -> list[dict[str, Any]]:
        messages = self.context_messages()
        # The newest system baseline supersedes older ones and goes first.
        systems = [m for m in messages if m.get("role") == "system"]
        rest = [m for m in messages if m.get("role") != "system"]
        head = [systems[-1]] if systems else [{"role": "system", "content": self._baseline_text()}]
        return to_openai_messages(head + rest)

    def context_tokens(self) -> tuple[int, bool]:
        """(estimated tokens of the next request, whether a stale usage anchor was ignored).

        The estimate never uses usage reported before the newest compaction (it describes a
        context that no longer exists); the core's path estimate applies that guard and falls back
        to per-message estimates. The flag says that this happened, for status displays.
        """
        view = self.store.context_view(self.session)
        est = estimate_context(view.entries, self.settings.estimator, tokens=view.tokens(self.settings.estimator))
        newest = max((i for i, e in enumerate(view.entries) if e.kind == COMPACTION), default=None)
        anchors = [i for i, e in enumerate(view.entries) if usage_of(e.message) is not None]
        ignored = bool(anchors) and usage_is_stale(anchors[-1], newest)
        return est.tokens, ignored

    # ------------------------------------------------------------------ provided by scheduling
    def _compact_blocking(self, reason: str, why: str | None, **data: Any) -> CompactionRecord:
        """Compact now, under the state lock, and place the result (``scheduling`` defines it).

        Declared here so ``recovery`` and ``model_request`` can call it without importing the
        scheduler; ``Agent`` always mixes ``CompactionScheduling`` in.
        """
        raise NotImplementedError
