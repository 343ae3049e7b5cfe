"""How an ``Agent``'s collaborators are made from its arguments: the store, its own kernel, the
compactor, the session it resumes and the call tree's budget.

Why out of ``Agent.__init__``: each of these is a decision with its own rule (who closes what,
where snapshots go, what a resumed session carries on), and the constructor read as one long
list of them. Here each is one function with its rule in its docstring; the constructor only
calls them in order.

What must hold:
- What a function starts for the agent is registered in ``closers`` (stopped by ``Agent.close``,
  in order); what the caller passed in is never closed here.
- The agent's own kernel talks over IPC sockets in a private (0700) temporary directory, bound
  to the agent's session without automatic snapshots: the supervisor keeps snapshots under the
  data directory's ``agent-snapshots/`` (created owner-only).
- A resumed session's spending counts: the tree budget starts from what the log says the root
  and its children already spent, and from the sub-agents it already started.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ipython_compact.agent.caps import TreeBudget, logged_child_tokens, logged_tokens
from ipython_compact.agent.kernel_tool import JupyterKernel, KernelTool
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.drift import MAX_TRACKED_CHARS
from ipython_compact.core.entries import COMPACTION, CUSTOM, GOAL, MESSAGE, SYSTEM, Entry
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.files import paths
from ipython_compact.store import SessionStore
from ipython_compact.summarizers.registry import make_summarizer

Closers = list[Callable[[], None]]


def open_store(store: SessionStore | str | Path | None, closers: Closers) -> SessionStore:
    """``store`` as given (a ``SessionStore``), or one opened on a path or URL, else on
    ``$IPYTHON_COMPACT_DB`` or the data directory's database (then closed with the agent)."""
    if store is None or isinstance(store, str | Path):
        opened = SessionStore(store)
        closers.append(opened.close)
        return opened
    return store


def start_own_kernel(
    owner: object, session: str, snapshot_dir: str | None, closers: Closers, store: SessionStore | None = None
) -> tuple[KernelTool, str]:
    """Start a kernel for ``owner`` (stopped by its closers, or at exit if it is never closed);
    (the kernel, the snapshot directory: ``snapshot_dir`` or ``agent-snapshots/<session>``).

    IPC sockets rather than TCP: only this user can reach them, and ipykernel does not print
    "Kernel is running over TCP without encryption" on every run."""
    base = paths.data_dir()
    if snapshot_dir is None:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session)
        (base / "agent-snapshots").mkdir(parents=True, exist_ok=True, mode=0o700)
        snapshot_dir = str(base / "agent-snapshots" / safe)
    sockets = tempfile.mkdtemp(prefix="ipython-compact-ipc-")
    try:
        # The kernel writes to the agent's log: a server's URL travels to it (a file is found by the dir).
        env = {paths.ENV_DIR: str(base)}
        if store is not None and store.engine != "sqlite":
            env[paths.ENV_DB] = store.url
        kernel = JupyterKernel(
            env=env, session=session, auto_snapshot=False, ipc_path=os.path.join(sockets, "kernel")
        ).start()
    except BaseException:
        shutil.rmtree(sockets, ignore_errors=True)
        raise
    closers.append(kernel.shutdown)
    closers.append(lambda: shutil.rmtree(sockets, ignore_errors=True))
    weakref.finalize(owner, kernel.shutdown)  # a forgotten close() still stops the process at exit
    weakref.finalize(owner, shutil.rmtree, sockets, True)
    return kernel, snapshot_dir


def default_compactor(
    store: Any,
    summarizer: str,
    settings: CompactionSettings,
    *,
    model: str,
    base_url: str | None,
    api_key: str | None,
    window: int | None = None,
) -> Compactor:
    """A ``Compactor`` with the named summarizer (``openai`` summarizes with this model on this server).

    With a ``window``, the exact strings a checkpoint carries take at most a quarter of it even when
    every character is a token (digits through small models' tokenizers): the default budget of
    4,800 characters alone overflowed a 2,048-token window after a session of numeric outputs.
    """
    made = make_summarizer(
        summarizer, model=model if summarizer != "offline" else None, base_url=base_url, api_key=api_key
    )
    if window is None:
        return Compactor(store, made, settings)
    return Compactor(store, made, settings, identifier_chars=min(MAX_TRACKED_CHARS, max(0, window // 4)))


def open_session(store: Any, session: str) -> list[Entry]:
    """Make sure ``session`` exists; its messages, compactions and custom entries so far (a resume)."""
    try:
        store.get_session(session)
    except KeyError:
        store.ensure_session(session)  # the kernel's extension, bound to it, may have opened it meanwhile
    entries: list[Entry] = store.entries(session, kinds=(MESSAGE, COMPACTION, CUSTOM))
    return entries


def root_tree(
    session: str, logged: list[Entry], *, token_budget: int | None, max_sub_agents: int | None
) -> TreeBudget:
    """The call tree's budget and fan-out cap for a root agent, counting what its log already spent."""
    started = sum(
        1 for e in logged if e.data.get("custom_type") == "sub_agent" and e.data.get("event") == "created"
    )
    return TreeBudget(
        root=session,
        token_budget=token_budget,
        max_sub_agents=max_sub_agents,
        spent=logged_tokens(logged) + logged_child_tokens(logged),
        started=started,
    )


def resumed_goal(store: Any, session: str) -> tuple[str | None, bool]:
    """(the active goal a resumed session carries on, or None; whether it has a system baseline)."""
    path = store.path(session, kinds=(GOAL, SYSTEM))  # marked kinds: cost follows their count
    goal = next((e for e in reversed(path) if e.kind == GOAL), None)
    active = str(goal.data.get("goal")) if goal is not None and goal.data.get("active") else None
    return active, any(e.kind == SYSTEM for e in path)
