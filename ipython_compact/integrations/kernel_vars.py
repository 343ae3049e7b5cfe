"""Kernel side: an engine's variable listing backed by the ipython-compact probe.

Why: engines list the REPL's variables with their own ad-hoc rules (rlms' ``SHOW_VARS`` lists
everything without a leading underscore, its own scaffolding included). The probe applies the
``%who`` rule, runs no user code (no ``__repr__``, no ``__len__`` override) and is bounded in time.

What must hold: engine scaffolding names passed to ``hide`` never appear in the listing (nor in
snapshots, which use the same rule); the listing never raises into the model's cell.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ipython_compact.namespace.probe import probe_namespace

MAX_LISTED = 200


def hide(shell: Any, names: Iterable[str]) -> str:
    """Put the current values of ``names`` in ``user_ns_hidden`` (scaffolding, not user state)."""
    for name in names:
        if name in shell.user_ns:
            shell.user_ns_hidden[name] = shell.user_ns[name]
    return "ok"


def describe_names(shell: Any, *, limit: int = MAX_LISTED) -> str:
    """The user's names with their type and length (the probe's ``%who`` rule)."""
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
