"""The registry of a parent agent's live sub-agents (``agent_query`` from the model's code).

Why on the host, recorded in the log: a sub-agent is a child session with its own kernel and its
own compaction; the model may call it again by name many turns later. Compaction rewrites only
the parent's transcript and a kernel restart only the parent's kernel, so the registry — which
lives in the host process and is written to the parent's log — survives both ("compaction is not
a completion signal"); a resumed parent rebuilds it from the log and revives a child on its next
task (the child's session log carries its conversation on).

What must hold:
- Each sub-agent is a child session linked to its parent (``parent_session``, ``parent_entry``,
  ``name``) in the session's metadata and in its first entry (``custom_type: "parent_link"``), so
  an export keeps the link; the parent's log gets a ``custom`` entry (``custom_type:
  "sub_agent"``) when one is created and when it answers, whose ``summary`` names the child (the
  line ``ipython-compact log`` and search show).
- An answer returned to the parent is bounded (``result_chars``: head and tail with the cut
  stated); the whole answer stays in the child's log.
- At most ``max_live`` children hold a kernel at once, parallel calls included: a new child takes
  a free slot or the slot of the least recently used idle child (closed first; its record stays
  and it is revived on demand); when all are busy the call waits up to ``wait_seconds`` for one
  to become idle, then is refused with the reason (its record stays). One task runs per child.
- With a ``tree`` (the call tree's ``TreeBudget``), a new child is counted against
  ``max_sub_agents`` before its session is created, and each answer's record carries the tokens
  the child (and its own children) spent on that task, which ``describe`` sums per child.
- A ``context`` value given with a task is placed in the child's kernel (``ask(context=)``).
- ``close`` stops every child this registry started; a call still waiting for a slot, or whose
  child was starting, is refused and nothing is left running.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ipython_compact.agent.caps import TreeBudget
from ipython_compact.agent.events import TurnFailed
from ipython_compact.agent.kernel_tool import cap_text
from ipython_compact.agent.session_log import SessionLog
from ipython_compact.core.entries import CUSTOM, Entry

SUB_AGENT = "sub_agent"
PARENT_LINK = "parent_link"  # a child session's first entry: which session and entry it was started from
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
WAIT_SECONDS = 300.0
"""How long a call for a new sub-agent waits for a free slot when every live one is busy."""


class ChildAgent(Protocol):
    """What the registry needs from a child: answer a task, and stop its kernel."""

    def ask(self, text: str, *, context: Any = None) -> Any: ...

    def close(self) -> None: ...


ChildFactory = Callable[[str, str], ChildAgent]
"""``factory(name, session) -> child`` (the session already exists, with its parent link)."""


@dataclass
class SubAgentInfo:
    """One sub-agent as the parent's model sees it (``sub_agents()``)."""

    name: str
    session: str
    task: str
    tasks: int = 0
    state: str = "idle"  # idle | running | failed
    last_stop: str | None = None
    tokens: int = 0  # what it (and its own sub-agents) spent on the tasks it answered


class SubAgentRegistry:
    """The live sub-agents of one parent session (see the module docstring)."""

    def __init__(
        self,
        log: SessionLog,
        factory: ChildFactory,
        *,
        max_live: int = 4,
        result_chars: int = 4000,
        wait_seconds: float = WAIT_SECONDS,
        tree: TreeBudget | None = None,
    ) -> None:
        if max_live < 1 or result_chars < 100:
            raise ValueError(f"max_live must be >= 1 and result_chars >= 100, got {max_live}, {result_chars}")
        if wait_seconds < 0:
            raise ValueError(f"wait_seconds must be 0 or more, got {wait_seconds}")
        self.log = log
        self.factory = factory
        self.max_live = max_live
        self.result_chars = result_chars
        self.wait_seconds = wait_seconds
        self.tree = tree
        self._lock = threading.Lock()
        # notified when a task ends or a start gives its slot back
        self._freed = threading.Condition(self._lock)
        self._starting = 0  # children being started: they hold a slot before they are in ``_live``
        self._closed = False
        self._infos: dict[str, SubAgentInfo] = {}
        self._live: dict[str, ChildAgent] = {}  # name -> child holding a kernel, least recently used first
        self._running: dict[str, threading.Lock] = {}
        self._counter = 0

    # ------------------------------------------------------------------ state
    def restore(self, entries: Iterable[Entry]) -> None:
        """Rebuild the registry from the parent's ``sub_agent`` entries (a resumed session)."""
        with self._lock:
            for e in entries:
                if e.kind != CUSTOM or e.data.get("custom_type") != SUB_AGENT:
                    continue
                name = str(e.data.get("name"))
                if e.data.get("event") == "created":
                    self._infos[name] = SubAgentInfo(
                        name, str(e.data.get("session")), str(e.data.get("task", ""))
                    )
                    self._counter += 1
                elif name in self._infos and e.data.get("event") == "answered":
                    info = self._infos[name]
                    info.tasks += 1
                    info.last_stop = e.data.get("stopped")
                    tokens = e.data.get("tokens")
                    info.tokens += tokens if type(tokens) is int and tokens > 0 else 0
                    info.state = "failed" if info.last_stop == "error" else "idle"

    def describe(self) -> list[dict[str, Any]]:
        with self._lock:
            return [asdict(i) for i in self._infos.values()]

    def names(self) -> list[str]:
        with self._lock:
            return list(self._infos)

    # ------------------------------------------------------------------ asking
    def ask(self, task: str, name: str | None = None, *, context: Any = None) -> str:
        """Run ``task`` on the named (or a new) sub-agent, with ``context`` placed in its kernel
        first when given; its answer, bounded."""
        if not isinstance(task, str) or not task.strip():
            raise ValueError("a sub-agent task must be non-empty text")
        if name is not None and not _NAME.match(name):
            raise ValueError(f"a sub-agent name is 1-64 letters, digits, '_', '.' or '-', got {name!r}")
        info, gate = self._entry(task, name)
        try:
            with gate:  # one task per child at a time
                return self._run(info, task, context)
        finally:
            with self._freed:
                self._freed.notify_all()  # this child is idle again: a waiting call may evict it

    def _spent(self, info: SubAgentInfo) -> int:
        return 0 if self.tree is None else self.tree.spent_under(info.session)

    def _run(self, info: SubAgentInfo, task: str, context: Any = None) -> str:
        """One task on ``info``'s child (the caller holds its gate)."""
        child = self._child(info)
        with self._lock:
            info.state = "running"
        self.log.emit("sub_agent", f"{info.name}: {task}", name=info.name, session=info.session)
        before = self._spent(info)
        try:
            result = child.ask(task) if context is None else child.ask(task, context=context)
        except TurnFailed as failed:  # the child's failure is reported to the parent's code as a stop
            result = failed.result
        except Exception as exc:
            tokens = self._spent(info) - before
            with self._lock:
                info.state, info.last_stop = "failed", "error"
                info.tokens += tokens
            self._record(info, "error", 0, tokens)
            raise RuntimeError(f"sub-agent {info.name!r} failed: {type(exc).__name__}: {exc}") from exc
        stopped = str(getattr(result, "stopped", "final"))
        text = str(getattr(result, "text", result))
        tokens = self._spent(info) - before
        with self._lock:
            info.tasks += 1
            info.state = "failed" if stopped == "error" else "idle"
            info.last_stop = stopped
            info.tokens += tokens
        self._record(info, stopped, len(text), tokens)
        bounded, _ = cap_text(text, self.result_chars)
        prefix = "" if stopped == "final" else f"[sub-agent {info.name} stopped: {stopped}] "
        return prefix + bounded

    def _entry(self, task: str, name: str | None) -> tuple[SubAgentInfo, threading.Lock]:
        """The record for ``name`` (created, with its child session and parent link, when new)."""
        with self._lock:
            if name is not None and name in self._infos:
                return self._infos[name], self._running[name]
            if self.tree is not None:
                # refused before anything is made
                self.tree.start_sub_agent(name or f"sub{self._counter + 1}")
            self._counter += 1
            name = name or f"sub{self._counter}"
            session = f"{self.log.session}/{name}"
            info = SubAgentInfo(name, session, task)
            self._infos[name] = info
            gate = self._running[name] = threading.Lock()
        store = self.log.store
        link = {
            "parent_session": self.log.session,
            "name": name,
            "parent_entry": store.leaf(self.log.session),
        }
        try:
            store.create_session(session, meta=link)
        except Exception:
            store.ensure_session(session)  # a child session left by an earlier run of this parent
        store.append(session, CUSTOM, {"custom_type": PARENT_LINK, **link, "task": task})
        self.log.append(
            CUSTOM,
            {
                "custom_type": SUB_AGENT,
                "event": "created",
                "name": name,
                "session": session,
                "task": task,
                "summary": f"sub-agent {name} started ({session}): {task[:200]}",
            },
        )
        return info, gate

    def _child(self, info: SubAgentInfo) -> ChildAgent:
        """The live child for ``info``; a new one takes a free slot, or the slot of the least recently
        used idle child (closed first), or waits up to ``wait_seconds`` for one, then is refused."""
        evicted: ChildAgent | None = None
        with self._freed:
            child = self._live.pop(info.name, None)
            if child is not None:
                self._live[info.name] = child  # most recently used last
                return child
            deadline = time.monotonic() + self.wait_seconds
            while not self._closed and len(self._live) + self._starting >= self.max_live:
                idle = [n for n in self._live if not self._running[n].locked()]
                if idle:
                    evicted = self._live.pop(idle[0])
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(
                        f"sub-agent {info.name!r} was not started: all {self.max_live} live sub-agents "
                        f"(max_live_sub_agents={self.max_live}) are busy and none became free within "
                        f"{self.wait_seconds:g}s; ask again later, or give the task to a running sub-agent "
                        f"by name"
                    )
                self._freed.wait(left)
            if self._closed:
                raise RuntimeError(f"sub-agent {info.name!r} was not started: the parent agent is closing")
            self._starting += 1  # the slot is ours from here; others count it while the kernel starts
        child = None
        try:
            if evicted is not None:
                evicted.close()  # before the new kernel starts: never more than max_live at once
            child = self.factory(info.name, info.session)
        finally:
            with self._freed:
                self._starting -= 1
                late = child is not None and self._closed
                if child is not None and not late:
                    self._live[info.name] = child
                self._freed.notify_all()
        if late:  # the parent closed while this kernel started: stop it, nobody else will
            child.close()
            raise RuntimeError(f"sub-agent {info.name!r} was not started: the parent agent is closing")
        return child

    def _record(self, info: SubAgentInfo, stopped: str, chars: int, tokens: int = 0) -> None:
        self.log.append(
            CUSTOM,
            {
                "custom_type": SUB_AGENT,
                "event": "answered",
                "name": info.name,
                "session": info.session,
                "stopped": stopped,
                "chars": chars,
                "tokens": tokens,
                "summary": f"sub-agent {info.name} answered ({stopped}, {chars:,} "
                f"characters, "
                f"{tokens:,} tokens)",
            },
        )

    def close(self) -> None:
        """Stop every live child (their records and logs stay)."""
        with self._freed:
            self._closed = True
            live, self._live = list(self._live.values()), {}
            self._freed.notify_all()  # waiting calls are refused
        for child in live:
            try:
                child.close()
            except Exception:  # closing one child must not keep the others running
                continue


def forward_child_events(parent: SessionLog, name: str) -> Callable[[Any], None]:
    """A sub-agent's event listener that tells the parent's listeners how the child is doing: its
    turn ends, compactions, kernel restarts and errors, as ``sub_agent_<kind>`` events naming it."""

    def forward(event: Any) -> None:
        if event.kind in ("turn_end", "compaction_end", "kernel_restart", "error"):
            parent.emit(f"sub_agent_{event.kind}", f"[{name}] {event.text}", name=name, **event.data)

    return forward
