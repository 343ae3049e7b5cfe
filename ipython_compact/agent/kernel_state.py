"""Kernel-side glue the host calls (through silent ``user_expressions``, see ``kernel_calls``) to
list, snapshot and restore the kernel's namespace with the project's signed ``SnapshotStore``.

Why here: a host-driven kernel may run without the notebook extension's comm; the agent still
needs "save what is defined" after a successful cell and "bring it back" after the kernel died.
This module only wires the probe's ``%who`` rule to ``SnapshotStore``; it adds no format of its own.
Engines list the REPL's variables with their own ad-hoc rules (rlms' ``SHOW_VARS`` lists everything
without a leading underscore, its own scaffolding included): ``describe_names`` answers such a
listing from the probe instead, which runs no user code and is bounded in time, and ``hide_names``
keeps an engine's scaffolding out of it (and out of snapshots, which use the same rule).

What must hold: answers are JSON text (one string the host parses) or plain text, never raise
into the kernel's output, and a refused or failed restore is reported, not hidden.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ipython_compact.files.paths import database_location, key_path
from ipython_compact.namespace.probe import probe_namespace, user_names
from ipython_compact.namespace.snapshot import SnapshotStore, load_or_create_key
from ipython_compact.namespace.snapshot.keys import load_shared_key
from ipython_compact.store.writer_locks import writer_locks

ENV_SESSION = "IPYTHON_COMPACT_SESSION"  # kernel.binding.ENV_SESSION (the agent may not import kernel/)

_stores: dict[str, SnapshotStore] = {}

MAX_LISTED = 200
"""How many names ``describe_names`` lists (the rest are counted)."""


def _store(directory: str) -> SnapshotStore:
    """The store at ``directory``: a folder, or an object-storage URL (``s3://...``), whose writer
    lock is the session log's (``IPYTHON_COMPACT_DB``, which the agent passes to its kernel) and
    whose key every host is given (``IPYTHON_COMPACT_KEY_FILE``; docs/team.md)."""
    store = _stores.get(directory)
    if store is None:
        if "://" in directory:
            key = load_shared_key(key_path(), directory)
            store = SnapshotStore(directory, key, locks=writer_locks(database_location()))
        else:
            path = Path(directory)
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            store = SnapshotStore(path, load_or_create_key(key_path()))
        _stores[directory] = store
    return store


def _shell() -> Any:
    """The kernel's shell, imported per call for the host's start-up time: the host imports this
    module (``kernel_calls``' table) but never runs these functions, and needs no IPython."""
    from IPython import get_ipython  # deferred for the host's start-up time (see the docstring)

    return get_ipython()


def snapshot_json(directory: str) -> str:
    """Save the user's names; JSON ``{"ok", "saved", "skipped": [[name, reason]], "error"?}``."""
    try:
        shell = _shell()
        report = _store(directory).save(user_names(shell.user_ns, shell.user_ns_hidden))
        return json.dumps(
            {"ok": True, "saved": list(report.saved), "skipped": [[s.name, s.reason] for s in report.skipped]}
        )
    except Exception as exc:
        return json.dumps({"ok": False, "saved": [], "skipped": [], "error": f"{type(exc).__name__}: {exc}"})


def restore_json(directory: str) -> str:
    """Restore the newest snapshot into the namespace; JSON ``{"ok", "restored", "failed", "error"?}``."""
    try:
        store = _store(directory)
        if store.latest_manifest() is None:
            return json.dumps({"ok": True, "restored": [], "failed": [], "none": True})
        report = store.restore_into(_shell().user_ns)
        failed = [[f.name, f.reason] for f in [*report.failed, *report.quarantined]]
        failed += [[r, "refused"] for r in report.refused]
        return json.dumps({"ok": True, "restored": list(report.restored), "failed": failed})
    except Exception as exc:
        return json.dumps(
            {"ok": False, "restored": [], "failed": [], "error": f"{type(exc).__name__}: {exc}"}
        )


def user_names_json() -> str:
    """The user's names (the probe's ``%who`` rule, all of them), sorted, as a JSON list."""
    shell = _shell()
    return json.dumps([name for name, _ in user_names(shell.user_ns, shell.user_ns_hidden)])


def hide_names(shell: Any, names: Iterable[str]) -> str:
    """Put the current values of ``names`` in ``user_ns_hidden`` (scaffolding, not user state)."""
    for name in names:
        if name in shell.user_ns:
            shell.user_ns_hidden[name] = shell.user_ns[name]
    return "ok"


def describe_names(shell: Any, *, limit: int = MAX_LISTED) -> str:
    """The user's names with their type and length (the probe's ``%who`` rule), as one line."""
    try:
        result = probe_namespace(shell.user_ns, shell.user_ns_hidden, limit=limit)
    except Exception as exc:
        return f"The kernel's names could not be listed ({type(exc).__name__}: {exc})."
    if not result.names:
        return "No variables created yet. Use ```repl``` blocks to create variables."
    parts = []
    for info in result.names:
        size = f", {info.length} items" if info.length is not None else ""
        parts.append(f"{info.name} ({info.type}{size})")
    more = f" (and {result.total - len(result.names)} more)" if result.total > len(result.names) else ""
    return f"Available variables: {', '.join(parts)}{more}"


def bind_session(session: str) -> str:
    """Bind the extension loaded after this to ``session`` (the host's own), so what it records
    lands in the host's log and no ``kernel:tmp...`` session of its own is opened."""
    os.environ[ENV_SESSION] = session
    return "ok"
