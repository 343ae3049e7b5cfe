"""Deciding a compaction: what would be summarized, kept, externalized and discarded, and the
anchors re-copied from the log — everything before a summarizer runs. ``plan()`` is this alone.

The base of ``Compactor`` (``compaction/compactor.py``), which adds summarizing, appending,
branch summaries, recall and pins. What must hold: deciding writes nothing; a decision is the
same however often it is made on the same view (so the last one is remembered per store).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from ipython_compact.compaction.results import (
    CompactionError,
    LayerCount,
    NothingToCompact,
    Plan,
)
from ipython_compact.core.anchors import AnchorSet, apply_pins, extract_anchors
from ipython_compact.core.drift import MAX_TRACKED, MAX_TRACKED_CHARS
from ipython_compact.core.entries import (
    COMPACTION,
    MESSAGE,
    PIN,
    Entry,
    entry_text,
)
from ipython_compact.core.identifiers import Identifier
from ipython_compact.core.ledger import Ledger
from ipython_compact.core.preparation import Preparation, prepare_compaction
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.tokens import estimate_context, estimate_entry_tokens
from ipython_compact.core.triage import Triage, assemble, forget_gists, triage
from ipython_compact.core.triage_facts import decide, facts_from_outline
from ipython_compact.core.user_statements import (
    constraint_spans,
    is_goal_statement,
    is_request,
    one_scan_per_text,
    user_text,
)
from ipython_compact.store import SessionStore
from ipython_compact.store.records import OutlineView
from ipython_compact.summarizers.base import Summarizer
from ipython_compact.summarizers.offline import OfflineSummarizer

_P = ParamSpec("_P")
_R = TypeVar("_R")


def collector_paused(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` run with Python's cyclic garbage collector paused (re-enabled after, when it
    was on). Why: a compaction loads the whole span (200,000 entries are millions of small
    objects) and then allocates per entry in every stage; each automatic full collection
    re-scans everything loaded, which cost a quarter to a half of a large compaction and grew
    faster than the span. The stages make no reference cycles worth collecting meanwhile."""

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        was_on = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if was_on:
                gc.enable()

    return wrapper


@dataclass(frozen=True)
class Carried:
    """What the previous compaction carries forward, parsed once. ``had_anchors`` is False for a
    compaction made without an anchor layer (a pi import), whose anchors must come from the log."""

    anchors: AnchorSet = field(default_factory=AnchorSet)
    had_anchors: bool = False
    ledger: Ledger = field(default_factory=Ledger)
    identifiers: tuple[Identifier, ...] = ()
    externalized: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Work:
    """Everything decided before the summarizer runs. ``path`` is the context view it was decided
    on (``prep``'s indices point into it); ``span`` is the summarized part, turn prefix included."""

    prep: Preparation
    path: tuple[Entry, ...]
    span: tuple[Entry, ...]
    triage: Triage
    history: tuple[Entry, ...]
    prefix: tuple[Entry, ...]
    anchors: AnchorSet
    carried: Carried
    view_tokens: Mapping[str, int]
    leaf_id: str | None = None
    """The leaf the plan was made against: the compaction is appended only if it still is."""
    tokens_before: int = 0
    """The context before the compaction, as whoever compacts counts it (``Decider._context_now``)."""
    outlined: bool = False
    """Decided from outlines (a preview): ``path``, ``span`` and the triage hold skeletons and
    ``prep`` has no file lists; never for a summarizer (``_work`` decides anew for one)."""


def _tokens_of(view_entries: Sequence[Entry], counts: Sequence[int]) -> dict[str, int]:
    return {e.id: c for e, c in zip(view_entries, counts, strict=True)}


class Decider:
    """The deciding half of ``Compactor`` (its constructor and ``plan``); ``Compactor`` documents
    the parameters."""

    def __init__(
        self,
        store: SessionStore,
        summarizer: Summarizer | None = None,
        settings: CompactionSettings | None = None,
        *,
        anchors: bool = True,
        drift_guard: bool = True,
        ledger: bool = True,
        externalize_lines: int = 200,
        externalize_chars: int = 8000,
        max_identifiers: int = MAX_TRACKED,
        identifier_chars: int = MAX_TRACKED_CHARS,
        judge_summaries: bool = True,
    ) -> None:
        self.store = store
        self.judge_summaries = judge_summaries
        self.count_correction: Callable[[Entry, int], int] | None = None
        """When set (the agent sets its ``TokenLearner``'s), turns each entry's estimate into what
        the model's tokenizer makes of it, so the kept tail and the cut are sized in the model's
        tokens; a plan made with it is not remembered (what it learns moves between plans)."""
        self.context_count: Callable[[], int] | None = None
        """When set (the agent sets its own context estimate), the context now as whoever compacts
        counts it, the figure its gauge shows: a plan's "context now", a refusal's "the context
        holds" and the entry's ``tokens_before`` use it, so no surface reads a second figure for
        the same moment (issue 35). None: the estimate of the view with ``settings.estimator``."""
        self.summarizer: Summarizer = summarizer or OfflineSummarizer()
        self.settings = settings or CompactionSettings()
        self.use_anchors = anchors
        self.use_drift_guard = drift_guard
        self.use_ledger = ledger
        self.externalize_lines = externalize_lines
        self.externalize_chars = externalize_chars
        if max_identifiers < 0 or identifier_chars < 0:
            raise ValueError(
                f"identifier budget must be non-negative, got {max_identifiers} identifiers / "
                f"{identifier_chars} chars"
            )
        self.max_identifiers = max_identifiers
        self.identifier_chars = identifier_chars

    # ------------------------------------------------------------------ deciding
    def _lookup(self, session: str) -> Any:
        def lookup(entry_id: str) -> Entry | None:
            try:
                return self.store.get(entry_id, session)
            except Exception:
                return None

        return lookup

    def _work(
        self, session: str, keep_recent_tokens: int | None = None, *, gists: bool = True
    ) -> Work | None:
        """The decision on the session's view; ``gists=False`` (a preview) only counts what the
        triage externalizes (``core.triage.triage``), deciding from the entries' stored outlines
        (``SessionStore.context_outline``: skeletons in place of most entries, issue 37). A later
        call that needs the gists triages the remembered span again when it holds the entries,
        and decides anew when it holds skeletons."""
        settings = self.settings
        if keep_recent_tokens is not None:
            settings = dataclasses.replace(settings, keep_recent_tokens=max(0, int(keep_recent_tokens)))
        memo_key = (session, settings, self.use_anchors, self.externalize_lines, self.externalize_chars)
        remembered = _LAST_WORK.get(self.store)
        learned = self.count_correction is not None or self.context_count is not None
        if remembered is not None and remembered[0] == memo_key and not learned:
            last = remembered[1]
            # one indexed read: the view is fixed by its leaf, so an unmoved leaf means the same view
            if last.leaf_id is not None and last.leaf_id == self.store.leaf(session):
                if not gists or last.triage.gists:
                    return last
                if not last.outlined:
                    last = self._with_gists(last, settings)
                    _LAST_WORK[self.store] = (memo_key, last)
                    return last
        outlined = not gists and not learned  # a learned count reads whole entries
        view = self.store.context_outline(session) if outlined else self.store.context_view(session)
        path = tuple(view.entries)
        counts = view.tokens(settings.estimator)
        correct = self.count_correction
        if correct is not None:
            counts = [correct(e, c) for e, c in zip(path, counts, strict=True)]
        prep = prepare_compaction(path, settings, tokens=counts, files=not outlined)
        if prep is None:
            return None
        tokens = _tokens_of(path, counts)
        carried = Carried()
        if prep.previous_compaction_index >= 0:
            carried = carried_from(path[prep.previous_compaction_index])
        span = (*prep.messages_to_summarize, *prep.turn_prefix)
        if isinstance(view, OutlineView):
            outline_of_id = {e.id: o for e, o in zip(path, view.outlines, strict=True)}
            decided = decide(
                [e.id for e in span],
                [facts_from_outline(outline_of_id[e.id]) for e in span],
                self.externalize_lines,
                self.externalize_chars,
            )
            tri = assemble(span, prep.kept, decided, lambda e: tokens.get(e.id, 0), False)
        else:
            tri = self._triage(span, prep, tokens, settings, gists)
        history, prefix = _split_prefix(tri, prep)
        anchor_set = AnchorSet()
        if self.use_anchors:
            lookup = self._lookup(session)
            sources: Sequence[Entry] = span
            if prep.previous_compaction_index >= 0 and not carried.had_anchors:
                # a compaction made without anchors (pi import): read the goal etc. from the raw log
                ids = {e.id for e in span}
                sources = [
                    *anchor_history(self.store, session, path[0]),
                    *(e for e in path if e.kind != COMPACTION and e.id not in ids),
                    *span,
                ]
            if outlined:  # what anchors are read from; the skeletons in between have no text
                sources = [e for e in sources if e.kind == PIN or e.role == "user"]
            try:
                anchor_set = extract_anchors(carried.anchors, sources, lookup)
            except ValueError as exc:
                raise CompactionError(
                    f"cannot re-copy the anchors from the log: {exc}; nothing was written"
                ) from exc
            pins = [e for e in path[prep.boundary_start :] if e.kind == PIN]
            anchor_set = dataclasses.replace(anchor_set, pins=apply_pins(anchor_set.pins, pins, lookup))
        before = prep.tokens_before if self.context_count is None else self._context_now(path, counts)
        work = Work(
            prep,
            path,
            span,
            tri,
            history,
            prefix,
            anchor_set,
            carried,
            tokens,
            view.leaf_id,
            tokens_before=before,
            outlined=outlined,
        )
        if not learned:
            _LAST_WORK[self.store] = (memo_key, work)
        return work

    def _triage(
        self,
        span: Sequence[Entry],
        prep: Preparation,
        tokens: Mapping[str, int],
        settings: CompactionSettings,
        gists: bool,
    ) -> Triage:
        return triage(
            span,
            prep.kept,
            tokens=lambda e: tokens.get(e.id, 0) or estimate_entry_tokens(e, settings.estimator),
            externalize_lines=self.externalize_lines,
            externalize_chars=self.externalize_chars,
            gists=gists,
        )

    def _with_gists(self, work: Work, settings: CompactionSettings) -> Work:
        """``work`` (decided by a preview) with its span triaged again, gists made: the same
        decisions, now with what a summarizer reads (view, cut and anchors are reused)."""
        tri = self._triage(work.span, work.prep, work.view_tokens, settings, True)
        history, prefix = _split_prefix(tri, work.prep)
        return dataclasses.replace(work, triage=tri, history=history, prefix=prefix)

    def _work_or_raise(self, session: str, keep_recent_tokens: int | None, *, gists: bool = True) -> Work:
        work = self._work(session, keep_recent_tokens, gists=gists)
        if work is None:
            raise self._why_nothing(session, keep_recent_tokens)
        if not any(work.view_tokens.get(e.id, 0) for e in work.span):
            raise NothingToCompact(
                f"nothing to summarize in session {session!r}: the {len(work.span)} entries before the "
                f"recent tail "
                "hold 0 tokens of conversation"
            )
        return work

    def _why_nothing(self, session: str, keep_recent_tokens: int | None) -> NothingToCompact:
        """Why there is nothing to compact, naming the entry and the numbers that decided it."""
        from ipython_compact.compaction.refusals import why_nothing  # start-up: only on a refusal

        settings = self.settings
        if keep_recent_tokens is not None:
            settings = dataclasses.replace(settings, keep_recent_tokens=max(0, int(keep_recent_tokens)))
        view = self.store.context_view(session)
        path = tuple(view.entries)
        counts = view.tokens(settings.estimator)
        if self.count_correction is not None:  # the tail sized in the model's tokens, as the cut was
            counts = [self.count_correction(e, c) for e, c in zip(path, counts, strict=True)]
        tokens = self._context_now(path, counts)
        why = why_nothing(session, path, counts, settings, tokens)
        if why.tail_tokens > tokens:
            # the tail is part of the context: per-entry learned estimates summed past the
            # usage-anchored count read as "the context holds 2,754; the 3,101 tokens … fill the tail"
            why = dataclasses.replace(why, tail_tokens=tokens, entry_tokens=min(why.entry_tokens, tokens))
        return NothingToCompact(why.render(), why=why)

    def _context_now(self, path: Sequence[Entry], counts: Sequence[int]) -> int:
        """The context's size now: whoever compacts counts it (``context_count``), else the view's
        estimate (the newest usage anchor plus estimates after it, as ``status`` counts it)."""
        if self.context_count is not None:
            return int(self.context_count())
        return int(estimate_context(path, self.settings.estimator, tokens=counts).tokens)

    @collector_paused
    @one_scan_per_text
    def plan(self, session: str, focus: str | None = None, *, keep_recent_tokens: int | None = None) -> Plan:
        """The dry run: what would be summarized, kept, externalized and discarded. Writes nothing.

        Raises ``NothingToCompact`` when there is nothing to summarize.
        """
        # a preview counts what would be externalized; the gists are made when compacting
        return self._plan_of(session, focus, self._work_or_raise(session, keep_recent_tokens, gists=False))

    def _plan_of(self, session: str, focus: str | None, work: Work) -> Plan:
        prep, tri = work.prep, work.triage
        tok = work.view_tokens

        def count(entries: Sequence[Entry]) -> LayerCount:
            return LayerCount(len(entries), sum(tok.get(e.id, 0) for e in entries))

        return Plan(
            session=session,
            focus=focus,
            tokens_before=work.tokens_before,
            first_kept_entry_id=prep.first_kept_entry_id,
            is_split_turn=prep.is_split_turn,
            summarize=count(prep.messages_to_summarize),
            turn_prefix=count(prep.turn_prefix),
            keep=count(prep.kept),
            encode=LayerCount(len(tri.encode), int(tri.tokens.get("encode", 0))),
            externalize=tri.externalized,
            discard=tuple(d.to_json() for d in tri.discarded),
            anchors=work.anchors,
            previous_summary=prep.previous_summary is not None,
        )


def _split_prefix(tri: Triage, prep: Preparation) -> tuple[tuple[Entry, ...], tuple[Entry, ...]]:
    """The triaged span as (history, turn prefix): what each of the two summaries reads."""
    if not prep.turn_prefix:
        return tri.encode, ()
    prefix_ids = {e.id for e in prep.turn_prefix}
    history = tuple(e for e in tri.encode if e.id not in prefix_ids)
    prefix = tuple(e for e in tri.encode if e.id in prefix_ids)
    return history, prefix


_LAST_WORK: weakref.WeakKeyDictionary[SessionStore, tuple[tuple[object, ...], Work]] = (
    weakref.WeakKeyDictionary()
)
"""The last decision made per store, with what it was made on (session, settings and triage
limits; the decision holds the leaf it was made against). Why: ``%compact preview`` then
``%compact`` (and a repeated preview) decide on the same view, and deciding reads and triages
the whole span (seconds at 100,000 entries, issue 37). Exact: a view is fixed by its leaf in an
append-only tree, so a remembered decision for the same key is the decision that would be made
again. One per store (a new Compactor per magic shares it); gone with the store."""

_ANCHOR_HISTORY: dict[tuple[str, str, str, int], tuple[Entry, ...]] = {}
_ANCHOR_HISTORY_SLOTS = 16


def forget_remembered() -> None:
    """Forget every remembered decision, anchor history and gist, as a new process starts: what a
    benchmark's cold round needs (results never depend on what is remembered)."""
    _LAST_WORK.clear()
    _ANCHOR_HISTORY.clear()
    forget_gists()


def anchor_history(store: SessionStore, session: str, head: Entry) -> tuple[Entry, ...]:
    """The entries before the context view's ``head`` that anchor extraction can use (pins and
    user messages that can give the goal or a constraint, compactions left out), oldest first.

    Only needed while the newest compaction carries no anchors (a pi import); reading them costs
    one walk over the history, so the result is kept per (database, session, head): the ancestors
    of an entry never change in an append-only tree, so a kept result stays exact. Other entries
    are dropped because ``extract_anchors`` takes nothing from them: it reads pins, the goal from
    the first user request (none is carried: the compaction had no anchors) and constraint
    sentences of user messages, each sentence from its first occurrence only — same anchors, far
    less to keep and to re-read.
    """
    if head.parent_id is None:
        return ()
    key = (str(getattr(store, "db_path", id(store))), session, head.id, store.path_length(session, head.id))
    found = _ANCHOR_HISTORY.pop(key, None)
    if found is None:
        kept: list[Entry] = []
        goal_seen = False
        sentences: set[str] = set()
        # roles read in SQL
        for e in store.path(session, head.parent_id, kinds=(PIN, MESSAGE), roles=("user",)):
            if e.kind == PIN:
                kept.append(e)
            elif user_text(e) is not None:
                text = entry_text(e)
                new = {text[a:b] for a, b in constraint_spans(text)} - sentences
                if new or (not goal_seen and is_request(text)) or is_goal_statement(text):
                    goal_seen = goal_seen or is_request(text)
                    sentences |= new
                    kept.append(e)
        found = tuple(kept)
    _ANCHOR_HISTORY[key] = found  # newest last
    while len(_ANCHOR_HISTORY) > _ANCHOR_HISTORY_SLOTS:
        del _ANCHOR_HISTORY[next(iter(_ANCHOR_HISTORY))]
    return found


def carried_from(compaction: Entry) -> Carried:
    """Parse what a compaction carries forward; a malformed record is reported, never guessed around."""
    raw = compaction.data.get("details")
    details: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    try:
        return Carried(
            anchors=AnchorSet.from_json(details.get("anchors")),
            had_anchors="anchors" in details,
            ledger=Ledger.from_json(details.get("ledger")),
            identifiers=tuple(Identifier.from_json(item) for item in details.get("identifiers") or []),
            externalized=tuple(p for p in details.get("externalized") or [] if isinstance(p, Mapping)),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CompactionError(
            f"the previous compaction (entry {compaction.id}) has malformed details ({exc}); nothing was "
            f"written"
        ) from exc
