"""The sub-agent registry's cap on live children under parallel ``agent_query`` calls (issue 17, item 8).

Why these children are small objects of the test's own: the cap is about how many children hold a
kernel at once, which the registry alone decides; a child here counts itself alive from its
creation to its ``close`` and answers when the test releases it, so the test waits on events, not
on the clock. The log is a real SQLite session store. ``test_agent_rlm.py`` runs real child agents.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ipython_compact import SessionStore
from ipython_compact.agent.session_log import SessionLog
from ipython_compact.agent.sub_agents import SubAgentRegistry

SAFETY = 60.0  # a bound on every wait, so a broken registry fails the test instead of hanging it


class Census:
    """How many children are alive now and at most; children answer once ``release`` is set."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.alive = 0
        self.peak = 0
        self.started = 0
        self.release = threading.Event()

    def factory(self, name: str, session: str) -> Child:
        with self.cond:
            self.alive += 1
            self.started += 1
            self.peak = max(self.peak, self.alive)
            self.cond.notify_all()
        return Child(self, name)

    def wait_started(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.started >= n, SAFETY), (
                f"only {self.started} children started"
            )


class Child:
    def __init__(self, census: Census, name: str) -> None:
        self.census = census
        self.name = name

    def ask(self, text: str) -> str:
        assert self.census.release.wait(SAFETY)
        return f"{self.name} did {text}"

    def close(self) -> None:
        with self.census.cond:
            self.census.alive -= 1


@pytest.fixture()
def log(tmp_path: Path) -> SessionLog:
    store = SessionStore(tmp_path / "sessions.db")
    store.create_session("parent")
    return SessionLog(store, "parent")


def ask_all(registry: SubAgentRegistry, count: int) -> tuple[list[threading.Thread], dict[int, str]]:
    results: dict[int, str] = {}

    def one(i: int) -> None:
        try:
            results[i] = registry.ask(f"task {i}", f"a{i}")
        except RuntimeError as exc:
            results[i] = f"refused: {exc}"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    return threads, results


def test_parallel_calls_never_hold_more_children_than_the_cap(log: SessionLog) -> None:
    census = Census()
    registry = SubAgentRegistry(log, census.factory, max_live=2, wait_seconds=SAFETY)
    threads, results = ask_all(registry, 6)
    census.wait_started(2)
    census.release.set()
    for t in threads:
        t.join(SAFETY)
    registry.close()
    assert results == {i: f"a{i} did task {i}" for i in range(6)}
    assert census.peak == 2 and census.started == 6 and census.alive == 0


def test_a_call_past_the_cap_is_refused_with_the_reason_when_no_child_frees_up(log: SessionLog) -> None:
    census = Census()
    registry = SubAgentRegistry(log, census.factory, max_live=1, wait_seconds=0)
    first, results = ask_all(registry, 1)
    census.wait_started(1)
    with pytest.raises(RuntimeError) as refused:
        registry.ask("another task", "b")
    census.release.set()
    for t in first:
        t.join(SAFETY)
    again = registry.ask("the task again", "b")  # it can be asked once a slot is free
    registry.close()
    assert str(refused.value) == (
        "sub-agent 'b' was not started: all 1 live sub-agents (max_live_sub_agents=1) are busy and none "
        "became free within 0s; ask again later, or give the task to a running sub-agent by name"
    )
    assert results == {0: "a0 did task 0"} and census.peak == 1
    assert [i["name"] for i in registry.describe()] == ["a0", "b"]  # the refused one is recorded, not lost
    assert again == "b did the task again" and census.alive == 0


def test_wait_seconds_must_not_be_negative(log: SessionLog) -> None:
    with pytest.raises(ValueError, match="wait_seconds"):
        SubAgentRegistry(log, Census().factory, wait_seconds=-1)


def created(log: SessionLog, name: str) -> bool:
    return any(
        e.data.get("custom_type") == "sub_agent"
        and e.data.get("event") == "created"
        and e.data.get("name") == name
        for e in log.store.entries(log.session)
    )


def test_a_call_waiting_for_a_slot_is_refused_when_the_parent_closes(log: SessionLog) -> None:
    census = Census()
    registry = SubAgentRegistry(log, census.factory, max_live=1, wait_seconds=SAFETY)
    first, _ = ask_all(registry, 1)
    census.wait_started(1)
    late: list[str] = []

    def ask_b() -> None:
        try:
            late.append(registry.ask("late task", "b"))
        except RuntimeError as exc:
            late.append(f"refused: {exc}")

    waiting = threading.Thread(target=ask_b)
    waiting.start()
    never = threading.Event()
    for _ in range(int(SAFETY * 100)):  # until the waiting call has recorded its sub-agent (then it waits)
        if created(log, "b"):
            break
        never.wait(0.01)
    registry.close()
    census.release.set()
    for t in [*first, waiting]:
        t.join(SAFETY)
    assert late == ["refused: sub-agent 'b' was not started: the parent agent is closing"]
    assert census.started == 1 and census.alive == 0  # nothing started after close, nothing left running
