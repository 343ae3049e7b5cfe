"""An REPL engine's steps in our session log, and compaction of them with our engine.

Why: RLM engines keep their REPL history as a list of steps (reasoning, code, output) that grows
until the model's window overflows. This records each step in the ``SessionStore`` as a pi-shaped
assistant message (reasoning + a ``python`` tool call) and its tool result, so the log holds every
step verbatim and ``Compactor`` can summarize them like any agent transcript. The adapter then
shows the model the ``Checkpoint``: the summary, the live ``<ipython_state>`` notice, and the steps
from ``first_kept_step`` on, verbatim.

What must hold:
- ``record`` is called once per step, in order; step ``i``'s two entries map back to ``i``.
- ``should_compact`` is true only when ``core.thresholds.decide`` says ``"blocking"`` for the
  estimated prompt; a compaction appends the compaction entry and a ``kernel_state`` entry (the
  notice, from the names the caller probed just then) and never touches earlier entries.
- ``first_kept_step`` is never before the previous checkpoint's: compaction only moves forward.
- ``recall`` answers from the log (source entries, never summaries), by entry id or by words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ipython_compact.compaction.compactor import Compactor, NothingToCompact
from ipython_compact.core.entries import KERNEL_STATE, MESSAGE
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.state_notice import SnapshotOutcome, state_notice
from ipython_compact.core.thresholds import decide
from ipython_compact.store import SessionStore
from ipython_compact.store.database import utc_now

TOOL_NAME = "python"


@dataclass(frozen=True)
class Checkpoint:
    """What replaces steps ``[0, first_kept_step)`` in the model's view."""

    summary: str
    state: str
    first_kept_step: int
    entry_id: str
    tokens_before: int
    tokens_after: int
    names: tuple[str, ...] | None


class IterationLog:
    """One engine run in one session of ``store``; compaction by ``compactor`` at ``window_tokens``."""

    def __init__(
        self,
        store: SessionStore,
        session: str,
        *,
        window_tokens: int,
        settings: CompactionSettings | None = None,
        compactor: Compactor | None = None,
    ) -> None:
        self.store = store
        self.session = session
        self.window_tokens = window_tokens
        self.settings = (
            settings
            if settings is not None
            else CompactionSettings(
                reserve_tokens=max(1, window_tokens // 4), keep_recent_tokens=max(1, window_tokens // 4)
            )
        )
        self.compactor = compactor if compactor is not None else Compactor(store, settings=self.settings)
        decide(0, window_tokens, self.settings)  # validates window against the reserve, early
        self.store.ensure_session(session)
        self.checkpoint: Checkpoint | None = None
        self.checkpoints: list[Checkpoint] = []
        self.steps = 0
        self.peak_prompt_tokens = 0
        self._step_of: dict[str, int] = {}

    # ---- writing ---------------------------------------------------------------------------
    def begin(self, task: str) -> None:
        """Record the task as the run's user message (the goal the summaries anchor on)."""
        self.store.append(
            self.session, MESSAGE, {"message": {"role": "user", "content": task, "timestamp": utc_now()}}
        )

    def record(self, reasoning: str, code: str, output: str, *, is_error: bool = False) -> int:
        """Append step ``self.steps`` (assistant + tool result); returns its index."""
        step = self.steps
        call_id = f"step-{step + 1}"
        assistant = {
            "role": "assistant",
            "content": [
                *([{"type": "text", "text": reasoning}] if reasoning else []),
                {"type": "toolCall", "id": call_id, "name": TOOL_NAME, "arguments": {"code": code}},
            ],
            "stopReason": "toolUse",
            "timestamp": utc_now(),
        }
        result = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": TOOL_NAME,
            "content": [{"type": "text", "text": output or "(no output)"}],
            "isError": is_error,
            "timestamp": utc_now(),
        }
        first, second = self.store.append_many(
            self.session, [(MESSAGE, {"message": assistant}), (MESSAGE, {"message": result})]
        )
        self._step_of[first.id] = step
        self._step_of[second.id] = step
        self.steps += 1
        return step

    def note_prompt(self, tokens: int) -> None:
        """Record the size of a prompt actually sent (for the peak)."""
        self.peak_prompt_tokens = max(self.peak_prompt_tokens, tokens)

    # ---- compaction ------------------------------------------------------------------------
    def should_compact(self, prompt_tokens: int) -> bool:
        return decide(prompt_tokens, self.window_tokens, self.settings) == "blocking"

    def compact(
        self,
        *,
        names: Sequence[str] | None,
        kernel_alive: bool = True,
        snapshot: SnapshotOutcome | None = None,
        reason: str = "manual",
        keep_recent_tokens: int | None = None,
    ) -> Checkpoint | None:
        """Summarize the older steps now (keeping ``keep_recent_tokens`` of recent steps verbatim,
        default: the settings'); None when there is nothing to summarize."""
        try:
            result = self.compactor.compact(
                self.session, reason=reason, keep_recent_tokens=keep_recent_tokens
            )
        except NothingToCompact:
            return None
        first_kept = str(result.entry.data.get("first_kept_entry_id"))
        step = self._first_step_from(first_kept)
        if self.checkpoint is not None:
            step = max(step, self.checkpoint.first_kept_step)
        notice = state_notice(
            kernel_alive=kernel_alive, names=None if names is None else list(names), snapshot=snapshot
        )
        if notice is not None:
            self.store.append(self.session, KERNEL_STATE, {"content": notice})
        self.checkpoint = Checkpoint(
            summary=result.summary,
            state=notice or "The Python kernel is not running: nothing true can be said about its state.",
            first_kept_step=step,
            entry_id=result.entry.id,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            names=None if names is None else tuple(names),
        )
        self.checkpoints.append(self.checkpoint)
        return self.checkpoint

    def _first_step_from(self, entry_id: str) -> int:
        """The first step kept verbatim when the log is kept from ``entry_id`` on: that entry's step,
        else the first step recorded after it (the cut may fall on a notice or an earlier
        compaction), else ``steps`` (every step was summarized)."""
        if entry_id in self._step_of:
            return self._step_of[entry_id]
        ids = [e.id for e in self.store.entries(self.session)]
        if entry_id not in ids:
            return 0
        later = (self._step_of[i] for i in ids[ids.index(entry_id) :] if i in self._step_of)
        return next(later, self.steps)

    # ---- reading ---------------------------------------------------------------------------
    def recall(self, query: str, limit: int = 3) -> str:
        """Entries of this run's log, verbatim: the entry with id ``query``, else the best matches."""
        query = query.strip()
        if not query:
            return "recall needs an entry id or some words to search for."
        try:
            hits = self.compactor.recall(self.session, entry_id=query)
        except ValueError:
            hits = self.compactor.recall(self.session, query=query, limit=max(1, limit))
        if not hits:
            return f"Nothing in this run's log matches {query!r}."
        return "\n\n".join(f"[entry {h.id} · {h.role or h.kind}]\n{h.text}" for h in hits)
