"""The compaction scheduler on its own: a fake engine, a fake clock, a real SQLite log.

No kernel and no model: what is placed, queued, settled, guarded and escalated follows from the
engine's answers and the numbers the scheduler is handed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from ipython_compact.agent.events import AgentError, AgentEvent
from ipython_compact.agent.scheduler import CompactionScheduler
from ipython_compact.agent.session_log import SessionLog
from ipython_compact.core.entries import COMPACTION, COMPACTION_OUTCOME, MESSAGE, SYSTEM
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore

# lines 2000 / 1500
SETTINGS = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=400, background_tokens=500)


class FakeEngine:
    """Cuts at the newest user message; raises while ``fail`` is positive; can hold a worker."""

    def __init__(self, store: SessionStore, session: str) -> None:
        self.store, self.session = store, session
        self.fail = 0
        self.asked: list[tuple[str, str | None, int | None]] = []
        self.gate: threading.Event | None = None

    def prepare(
        self, session: str, *, reason: str, focus: str | None, keep_recent_tokens: int | None
    ) -> dict[str, Any] | None:
        self.asked.append((reason, focus, keep_recent_tokens))
        if self.gate is not None:
            assert self.gate.wait(10)
        if self.fail > 0:
            self.fail -= 1
            raise RuntimeError("summarizer down")
        users = [e for e in self.store.context_path(session) if e.role == "user"]
        if len(users) < 2:
            return None
        return {
            "summary": f"summary by {reason}",
            "first_kept_entry_id": users[-1].id,
            "tokens_before": 10,
            "reason": reason,
            "details": {},
        }


class Rig:
    def __init__(self, tmp_path: Path) -> None:
        self.store = SessionStore(tmp_path / "s.db")
        self.store.create_session("s")
        self.events: list[AgentEvent] = []
        self.log = SessionLog(self.store, "s", self.events.append)
        self.engine = FakeEngine(self.store, "s")
        self.tokens = 0
        self.now = 100.0
        self.placed_after = 0

        def after() -> None:
            self.placed_after += 1
            self.log.append(SYSTEM, {"content": "baseline"})

        self.sched = CompactionScheduler(
            self.log,
            self.engine,
            settings=lambda: SETTINGS,
            window=lambda: 3000,
            tokens=lambda: self.tokens,
            model_label=lambda: "p/m",
            after_place=after,
            cooldown_seconds=30.0,
            clock=lambda: self.now,
        )

    def say(self, n: int) -> None:
        for i in range(n):
            self.store.append("s", MESSAGE, {"message": {"role": "user", "content": f"q{i}"}})
            self.store.append(
                "s",
                MESSAGE,
                {"message": {"role": "assistant", "content": [{"type": "text", "text": f"a{i}"}]}},
            )

    def kinds(self) -> list[str]:
        return [e.kind for e in self.store.path("s")]


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def test_idle_manual_compaction_is_placed_now_with_what_follows_it(rig: Rig) -> None:
    rig.say(3)
    rec = rig.sched.compact("keep the list")
    assert rec.state == "placed" and rec.entry is not None
    assert rig.kinds()[-2:] == [COMPACTION, SYSTEM] and rig.placed_after == 1
    details = rec.entry.data["details"]
    assert details == {"blocking": True, "model": "p/m", "focus": "keep the list"}
    assert rig.engine.asked == [("manual", "keep the list", None)]


def test_nothing_to_compact_is_recorded_as_skipped(rig: Rig) -> None:
    rig.say(1)
    assert rig.sched.compact().state == "skipped"
    assert [e.data["outcome"] for e in rig.store.path("s") if e.kind == COMPACTION_OUTCOME] == ["skipped"]


def test_busy_manual_compaction_queues_and_lands_at_the_turn_boundary(rig: Rig) -> None:
    rig.say(3)
    rig.sched.start_turn()
    rec = rig.sched.compact(wait=True)
    assert rec.state == "queued" and COMPACTION not in rig.kinds()
    assert [i.state for i in rig.store.inbox_items("s")] == ["pending"]
    assert rig.sched.finish_turn(requested=None, aborted=False) is True
    assert rec.state == "placed" and rig.kinds().count(COMPACTION) == 1 and not rig.sched.busy


def test_a_second_turn_while_one_runs_is_refused(rig: Rig) -> None:
    rig.sched.start_turn()
    with pytest.raises(AgentError, match="already running"):
        rig.sched.start_turn()
    rig.sched.finish_turn(requested=None, aborted=False)
    rig.sched.start_turn()  # free again


@pytest.mark.parametrize(("tokens", "expected"), [(1400, None), (1600, "background"), (2100, "blocking")])
def test_the_threshold_check_picks_the_path_by_the_lines(rig: Rig, tokens: int, expected: str | None) -> None:
    rig.say(3)
    rig.tokens = tokens
    rig.sched.before_request()
    rig.sched.wait()
    placed = [r.blocking for r in rig.sched.records if r.state == "placed"]
    assert placed == ([] if expected is None else [expected == "blocking"])


def test_at_most_one_compaction_per_request(rig: Rig) -> None:
    rig.say(3)
    rig.tokens = 2100
    rig.sched.start_turn()
    rig.sched.before_request()
    rig.sched.before_request()  # same request: guarded
    assert len(rig.sched.records) == 1
    assert any(ev.data.get("guard") == "once_per_request" for ev in rig.events)
    rig.sched.request_sent()
    rig.sched.before_request()
    assert len(rig.sched.records) == 2


def test_a_failure_cools_down_then_the_ladder_keeps_less_and_success_resets(rig: Rig) -> None:
    rig.say(3)
    rig.engine.fail = 2
    rig.tokens = 2100
    rig.sched.before_request()
    assert rig.sched.consecutive_failures == 1
    rig.sched.request_sent()
    rig.now += 10  # inside the cooldown: no attempt
    rig.sched.before_request()
    assert len(rig.engine.asked) == 1 and any(ev.data.get("guard") == "cooldown" for ev in rig.events)
    rig.now += 30
    rig.sched.before_request()  # second failure, with half the tail
    rig.sched.request_sent()
    rig.now += 31
    rig.sched.before_request()  # succeeds with a quarter
    assert [a[2] for a in rig.engine.asked] == [None, 200, 100]
    assert rig.sched.consecutive_failures == 0
    fails = [e.data["consecutive_failures"] for e in rig.store.path("s") if e.kind == COMPACTION_OUTCOME]
    assert fails == [1, 2]


def test_the_models_request_runs_at_turn_end_and_is_dropped_when_aborted(rig: Rig) -> None:
    rig.say(3)
    rig.sched.start_turn()
    assert rig.sched.finish_turn(requested={"instructions": "keep x"}, aborted=True) is False
    assert any(ev.kind == "compaction_dropped" for ev in rig.events)
    rig.sched.start_turn()
    assert rig.sched.finish_turn(requested={"instructions": "keep x"}, aborted=False) is True
    assert rig.engine.asked[-1] == ("requested", "keep x", None)


def test_a_queued_summary_whose_cut_is_gone_settles_stale(rig: Rig) -> None:
    rig.say(3)
    rig.sched.start_turn()
    rig.engine.gate = threading.Event()
    queued = rig.sched.compact()  # worker waits at the gate
    rig.engine.gate.set()
    rig.sched.wait()
    rig.engine.gate = None
    rig.say(2)
    assert rig.sched.compact_blocking("threshold", None).state == "placed"  # a newer cut wins
    rig.sched.finish_turn(requested=None, aborted=False)
    assert queued.state == "stale"
    assert any(ev.kind == "compaction_stale" for ev in rig.events)


def test_a_manual_summary_outranks_an_automatic_one_queued_at_the_same_cut(rig: Rig) -> None:
    """Found in the travel example: a background threshold compaction and the user's manual one
    (with focus) both finished while the turn ran, planned at the same cut; the older automatic
    one was placed and the user's settled as stale, so the focus was lost."""
    rig.say(3)
    rig.tokens = 1600  # past the background line
    rig.sched.start_turn()
    rig.sched.before_request()
    rig.sched.wait()
    manual = rig.sched.compact("keep the hotels", wait=True)
    automatic = next(r for r in rig.sched.records if r.reason == "threshold")
    assert [i.payload["reason"] for i in rig.store.inbox_items("s")] == ["threshold", "manual"]
    rig.sched.finish_turn(requested=None, aborted=False)
    assert (manual.state, automatic.state) == ("placed", "stale")
    (placed,) = [e for e in rig.store.path("s") if e.kind == COMPACTION]
    assert placed.data["reason"] == "manual" and placed.data["details"]["focus"] == "keep the hotels"
