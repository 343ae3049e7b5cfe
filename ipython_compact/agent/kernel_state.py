"""Kernel-side glue the host agent calls (through silent ``user_expressions``) to snapshot and
restore the kernel's namespace with the project's signed ``SnapshotStore``.

Why here: a host-driven kernel may run without the notebook extension's comm; the agent still
needs "save what is defined" after a successful cell and "bring it back" after the kernel died.
This module only wires the probe's ``%who`` rule to ``SnapshotStore``; it adds no format of its own.

What must hold: answers are JSON text (one string the host parses), never raise into the kernel's
output, and a refused or failed restore is reported, not hidden.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from IPython import get_ipython

from ipython_compact.files.paths import key_path
from ipython_compact.namespace.probe import user_names
from ipython_compact.namespace.snapshot import SnapshotStore, load_or_create_key

_stores: dict[str, SnapshotStore] = {}


def _store(directory: str) -> SnapshotStore:
    store = _stores.get(directory)
    if store is None:
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        store = SnapshotStore(path, load_or_create_key(key_path()))
        _stores[directory] = store
    return store


def _shell() -> Any:
    return get_ipython()


def snapshot_json(directory: str) -> str:
    """Save the user's names; JSON ``{"ok", "saved", "skipped": [[name, reason]], "error"?}``."""
    try:
        shell = _shell()
        report = _store(directory).save(user_names(shell.user_ns, shell.user_ns_hidden))
        return json.dumps({"ok": True, "saved": list(report.saved), "skipped": [[s.name, s.reason] for s in report.skipped]})
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
        return json.dumps({"ok": False, "restored": [], "failed": [], "error": f"{type(exc).__name__}: {exc}"})
