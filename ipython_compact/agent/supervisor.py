"""The kernel supervisor: runs the model's code, keeps snapshots, and brings a dead kernel back.

Why a component: a tool call touches the kernel three ways — it runs code, it may leave a
``compact.run()`` request behind, and it may kill the process. The supervisor owns what that
needs (the restart budget and its clock, the last snapshot's outcome, whether a turn is open in
the kernel) behind its own lock, and reports each restart as a ``KernelReset`` the turn loop logs.
The wording and the budget are pure (``kernel_reset``); the kernel is anything with the
``KernelTool`` methods, so the supervisor is tested with a fake kernel.

What must hold:
- After a successful cell the kernel is snapshotted when ``snapshot_dir`` is set.
- A dead kernel is restarted within the budget (``max_restarts`` per ``restart_window_seconds``),
  restored from its snapshot, told again that a turn is open, and ``after_restart`` hooks run;
  the reset text says exactly what came back. Past the budget, or when the restart fails, the
  reset is ``stopped`` with a clear message.
- Kernel questions that fail (probe, turn markers, requests) never raise into the turn; a
  snapshot or restore report of the wrong shape is a failed snapshot or restore, said so.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ipython_compact.agent.kernel_reset import budget_exhausted, reset_notice, restart_budget, restart_failed
from ipython_compact.agent.kernel_tool import ExecResult, KernelTool
from ipython_compact.core.state_notice import SnapshotOutcome, state_notice

_REPORT_CHARS = 500  # of an error text a kernel reports


def snapshot_outcome(report: Any) -> SnapshotOutcome:
    """The kernel's snapshot report (``kernel_state.snapshot_json``), checked: kernel code can
    replace the kernel side, so anything but the expected shape is a failed snapshot, never a crash."""
    if not isinstance(report, dict):
        return SnapshotOutcome(False, (), "the kernel did not answer, or its snapshot report was unreadable")
    try:
        skipped = tuple((str(n), str(r)) for n, r in report.get("skipped") or [])
    except (TypeError, ValueError):
        return SnapshotOutcome(False, (), "the kernel's snapshot report was unreadable")
    error = report.get("error")
    return SnapshotOutcome(
        report.get("ok") is True, skipped, None if error is None else str(error)[:_REPORT_CHARS]
    )


@dataclass(frozen=True)
class KernelReset:
    """What a restart attempt means for the model: ``text`` to show, ``stopped`` when the turn must end."""

    text: str
    stopped: bool
    restored: tuple[str, ...] = ()


class KernelSupervisor:
    """Owns the agent's kernel (see the module docstring).

    ``snapshot_outcome`` reports snapshots someone else keeps (the notebook extension) when the
    supervisor keeps none itself (``snapshot_dir`` unset).
    """

    def __init__(
        self,
        kernel: KernelTool,
        *,
        snapshot_dir: str | None = None,
        snapshot_outcome: Callable[[], SnapshotOutcome | None] | None = None,
        max_restarts: int = 3,
        restart_window_seconds: float = 3600.0,
        tool_timeout: float | None = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kernel = kernel
        self.snapshot_dir = snapshot_dir
        self.snapshot_outcome = snapshot_outcome
        self.max_restarts = max_restarts
        self.restart_window_seconds = restart_window_seconds
        self.tool_timeout = tool_timeout
        self._clock = clock
        self._lock = threading.RLock()
        self._restart_times: list[float] = []
        self._restarts = 0
        self._last_snapshot: SnapshotOutcome | None = None
        self._turn_open = False
        self.after_restart: list[Callable[[], None]] = []

    @property
    def restarts(self) -> int:
        with self._lock:
            return self._restarts

    @property
    def last_snapshot(self) -> SnapshotOutcome | None:
        with self._lock:
            return self._last_snapshot

    # ------------------------------------------------------------------ running code
    def alive(self) -> bool:
        try:
            return bool(self.kernel.is_alive())
        except Exception:
            return False

    def execute(self, code: str) -> ExecResult:
        """Run ``code`` within the tool timeout; snapshot after a clean run when configured."""
        result = self.kernel.execute(code, timeout=self.tool_timeout)
        if result.status == "ok" and self.snapshot_dir is not None:
            self.snapshot()
        return result

    def interrupt(self) -> None:
        with contextlib.suppress(Exception):
            self.kernel.interrupt()

    # ------------------------------------------------------------------ the turn, as the kernel sees it
    def begin_turn(self) -> None:
        """Tell the kernel a turn runs (``compact.run()`` is accepted until it ends)."""
        with self._lock:
            self._turn_open = True
        with contextlib.suppress(Exception):
            self.kernel.begin_turn()

    def end_turn(self) -> None:
        with self._lock:
            self._turn_open = False
        with contextlib.suppress(Exception):
            self.kernel.end_turn()

    def take_request(self) -> dict[str, Any] | None:
        """The model's pending ``compact.run()`` request, handed over once (None when none or unknown)."""
        try:
            return self.kernel.take_compaction_request()
        except Exception:
            return None

    # ------------------------------------------------------------------ state, snapshots, restarts
    def notice(self) -> str | None:
        """The ``<ipython_state>`` notice from a live probe and what snapshots can promise."""
        alive = self.alive()
        names: list[str] | None = None
        if alive:
            try:
                names = self.kernel.probe_names()
            except Exception:
                names = None
        if self.snapshot_dir is not None:
            snapshot = self.last_snapshot
        elif self.snapshot_outcome is not None:
            try:
                snapshot = self.snapshot_outcome()
            except Exception as exc:
                snapshot = SnapshotOutcome(False, (), f"snapshot state unknown: {type(exc).__name__}")
        else:
            snapshot = None
        return state_notice(kernel_alive=alive, names=names, snapshot=snapshot)

    def snapshot(self) -> SnapshotOutcome | None:
        """Save the kernel's names into ``snapshot_dir`` (a kernel without snapshots: None)."""
        snap = getattr(self.kernel, "snapshot", None)
        if snap is None or self.snapshot_dir is None:
            return None
        outcome = snapshot_outcome(snap(self.snapshot_dir))
        with self._lock:
            self._last_snapshot = outcome
        return outcome

    def recover(self, why: str) -> KernelReset:
        """Restart within the budget, restore the snapshot, say what came back; else stop."""
        restart = getattr(self.kernel, "restart", None)
        with self._lock:
            now = self._clock()
            allowed, recent = restart_budget(
                self._restart_times, now, self.max_restarts, self.restart_window_seconds
            )
            if restart is None or not allowed:
                return KernelReset(
                    budget_exhausted(why, self.max_restarts, self.restart_window_seconds), True
                )
            self._restarts += 1
            self._restart_times = [*recent, now]
            number = len(self._restart_times)
            turn_open = self._turn_open
        try:
            restart()
        except Exception as exc:
            return KernelReset(restart_failed(why, f"{type(exc).__name__}: {exc}"), True)
        if turn_open:
            self.begin_turn()  # the new process has not heard of the running turn
        for hook in list(self.after_restart):
            with contextlib.suppress(Exception):
                hook()
        restored, failed = self._restore()
        text = reset_notice(
            why,
            number=number,
            max_restarts=self.max_restarts,
            window_seconds=self.restart_window_seconds,
            snapshots=self.snapshot_dir is not None,
            restored=restored,
            failed=failed,
        )
        return KernelReset(text, False, tuple(restored))

    def _restore(self) -> tuple[list[str], list[tuple[str, str]]]:
        """(names restored, (name, reason) that failed) from the snapshot, if one is configured."""
        restore = getattr(self.kernel, "restore", None)
        if restore is None or self.snapshot_dir is None:
            return [], []
        report = restore(self.snapshot_dir)
        if not isinstance(report, dict):
            return [], [("(snapshot)", "the kernel did not answer, or its restore report was unreadable")]
        try:
            restored = [str(n) for n in report.get("restored") or []]
            failed = [(str(n), str(r)) for n, r in report.get("failed") or []]
        except (TypeError, ValueError):
            return [], [("(snapshot)", "the kernel's restore report was unreadable")]
        if report.get("error"):
            failed.append(("(snapshot)", str(report["error"])[:_REPORT_CHARS]))
        return restored, failed
