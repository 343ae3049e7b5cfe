"""The bookkeeping journal under attack: a replay that cannot proceed, a journal past 64 MiB, a
last line cut short by a crash, a record written while a replay runs.

Why: the fourth red team made ``BookkeepingLog._retry`` spin (``except: continue`` skipped both
its sleep and its deadline: 100,000+ failed replays past the 15 s budget) with a folder at
``<db>.pending.replay`` or a journal over 64 MiB; new writes then skipped the journal (it counted
as empty) and the journaled records never landed. A torn last line swallowed the next record,
and a record journaled during a replay waited for the next write.

Real parts: a real ``KernelService`` on a real SQLite file writes the records (``_apply_record``);
attempts are counted on the real journal (a subclass that counts ``replay`` calls), not timed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ipython_compact.core.entries import CUSTOM
from ipython_compact.kernel.bookkeeping import BookkeepingLog
from ipython_compact.kernel.config import CompactConfig
from ipython_compact.kernel.service import FILE_OPS_TYPE, KernelService
from ipython_compact.store.pending import PendingJournal


class CountingJournal(PendingJournal):
    """The real journal, counting how often a replay was tried."""

    def __init__(self, db_path: Path) -> None:
        super().__init__(db_path)
        self.replays = 0

    def replay(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        self.replays += 1
        return super().replay(*args, **kwargs)


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KernelService:
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    return KernelService(
        SimpleNamespace(user_ns={}, user_ns_hidden={}, kernel=None), CompactConfig(session="k")
    )


def bookkeeping(
    service: KernelService, apply: Callable[[dict[str, Any]], Any] | None = None, retry_seconds: float = 5.0
) -> tuple[BookkeepingLog, CountingJournal]:
    journal = CountingJournal(service.store.db_path)
    log = BookkeepingLog(apply or service._apply_record, lambda: journal, retry_seconds=retry_seconds)
    return log, journal


def record(n: int, pad: str = "") -> dict[str, Any]:
    return {
        "op": "append",
        "session": "k",
        "kind": CUSTOM,
        "timestamp": f"2026-01-01T00:00:{n:02d}Z",
        "entry_id": f"e{n:07d}",
        "data": {"custom_type": FILE_OPS_TYPE, "data": {"n": n, "pad": pad}},
    }


def landed(service: KernelService) -> list[int]:
    return [
        e.data["data"]["n"]
        for e in service.store.entries("k", kinds=(CUSTOM,))
        if e.data.get("custom_type") == FILE_OPS_TYPE
    ]


def test_a_replay_lock_that_is_a_folder_stops_the_replay_says_so_and_keeps_the_journal(
    service: KernelService, caplog: pytest.LogCaptureFixture
) -> None:
    log, journal = bookkeeping(service)
    journal.add(record(0))
    journal.add(record(1))
    lock = journal.db_path.with_name(journal.db_path.name + ".pending.replay")
    lock.mkdir()
    with caplog.at_level(logging.WARNING, logger="ipython_compact"):
        log.start()
        assert not log.wait(30)  # the thread ended (it did not spin), and the records still wait
        assert journal.replays == 1
        # A new write still goes to the journal, behind the two (it would overtake them otherwise).
        assert (
            log.append("k", CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": {"n": 2, "pad": ""}}, "t") is None
        )
        assert not log.wait(30)
    assert journal.replays == 2 and log.pending == 3 and landed(service) == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(journal.path) in warnings[0] and "cannot be replayed" in warnings[0], (
        warnings
    )
    assert "Is a directory" in warnings[0] and "stay in the journal" in warnings[0]
    assert log.failures == 0  # nothing was refused or lost
    waiting = log.waiting_text()
    assert (
        waiting is not None and waiting.startswith("3 log entries wait") and "cannot be replayed" in waiting
    )
    lock.rmdir()  # the user removes what was in the way
    log.start()
    assert log.wait(30)
    assert landed(service) == [0, 1, 2] and log.stuck is None and not journal.path.exists()


def test_a_journal_over_64_mib_is_replayed_and_new_writes_queue_behind_it(service: KernelService) -> None:
    log, journal = bookkeeping(service)
    pad = "x" * (1 << 20)
    for n in range(66):  # 66 records of 1 MiB: past the 64 MiB the journal was refused at
        journal.add(record(n, pad))
    assert journal.path.stat().st_size > 64 << 20 and journal.count() == 66
    # A write made now queues behind them (it overtook them: the journal counted as empty).
    assert log.append("k", CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": {"n": 66, "pad": ""}}, "t") is None
    assert log.wait(120)
    assert landed(service) == list(range(67))
    assert journal.replays <= 2 and log.failures == 0 and not journal.path.exists()


def test_a_last_line_cut_short_keeps_the_next_record_whole_and_is_reported(
    service: KernelService, caplog: pytest.LogCaptureFixture
) -> None:
    log, journal = bookkeeping(service)
    journal.add(record(0))
    journal.add(record(1))
    with journal.path.open("ab") as f:  # a kernel killed in the middle of writing a record
        f.write(b'{"op":"append","session":"k","ki')
    with caplog.at_level(logging.WARNING, logger="ipython_compact"):
        assert (
            log.append("k", CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": {"n": 2, "pad": ""}}, "t") is None
        )
        assert log.wait(30)
    assert landed(service) == [0, 1, 2] and not journal.path.exists()
    assert log.failures == 1 and log.failure is not None and '{"op":"append","session":"k","ki' in log.failure
    assert any("cut short" in r.getMessage() for r in caplog.records)


def test_a_record_written_while_a_replay_runs_lands_in_that_replay(service: KernelService) -> None:
    """The kernel's next cell writes while the thread replays (here: from inside the first apply,
    so the order of events is fixed without a clock)."""
    written: list[int] = []

    def apply(rec: dict[str, Any]) -> Any:
        if not written:
            written.append(1)
            assert (
                log.append("k", CUSTOM, {"custom_type": FILE_OPS_TYPE, "data": {"n": 2, "pad": ""}}, "t")
                is None
            )
        return service._apply_record(rec)

    log, journal = bookkeeping(service, apply)
    journal.add(record(0))
    journal.add(record(1))
    log.start()
    assert log.wait(30)
    assert landed(service) == [0, 1, 2] and log.pending == 0 and journal.replays == 1


def test_a_refused_record_is_reported_and_the_rest_land_without_spinning(service: KernelService) -> None:
    log, journal = bookkeeping(service)
    journal.add(record(0))
    journal.add({"op": "no-such-op", "session": "k"})
    journal.add(record(1))
    log.start()
    assert log.wait(30)
    assert landed(service) == [0, 1] and log.failures == 1 and journal.replays == 1
    assert log.failure is not None and "unknown bookkeeping record" in log.failure
