"""The call tree under a session: the sub-agent sessions it started, theirs, and so on.

Why here: the panel's timeline shows it (the ``calls`` op, and the server extension's persisted
session before the kernel has loaded the extension); the CLI's ``sessions --tree`` reads the
same link. A child session's first entry is a ``custom`` entry of type ``parent_link`` naming the
session (and entry) that started it, and the name it was given (``agent/sub_agents.py``).

What must hold: read only; every session under the root appears once, depth first, children in
the order they were started; a cycle of links (hand-edited data) cannot loop; a session without
children gives a tree of one node.
"""

from __future__ import annotations

from typing import Any

from ipython_compact.core.comm_protocol import CallNode

PARENT_LINK = "parent_link"

#: The most sessions one tree lists (a runaway fan-out still answers quickly).
MAX_NODES = 500


def parent_link(store: Any, session: str) -> tuple[str | None, str | None]:
    """``(parent session, name given)`` from ``session``'s first entries, or ``(None, None)``."""
    for entry in store.children(session, None):
        data = entry.data
        if data.get("custom_type") == PARENT_LINK and isinstance(data.get("parent_session"), str):
            name = data.get("name")
            return str(data["parent_session"]), name if isinstance(name, str) else None
    return None, None


def call_tree(store: Any, root: str, *, max_nodes: int = MAX_NODES) -> list[CallNode]:
    """``root`` and every session under it, depth first (see the module docstring)."""
    infos = {info.name: info for info in store.sessions()}
    kids: dict[str, list[tuple[str, str | None]]] = {}
    for name in infos:
        if name == root:
            continue
        parent, given = parent_link(store, name)
        if parent is not None:
            kids.setdefault(parent, []).append((name, given))
    out: list[CallNode] = []
    seen: set[str] = set()

    def node(session: str, parent: str | None, given: str | None, depth: int) -> CallNode:
        info = infos.get(session)
        return {
            "session": session,
            "parent": parent,
            "name": given,
            "depth": depth,
            "entries": int(info.entry_count) if info is not None else 0,
            "created_at": None if info is None else _text(info.created_at),
            "last_timestamp": None if info is None else _text(info.last_timestamp),
        }

    stack: list[tuple[str, str | None, str | None, int]] = [(root, None, None, 0)]
    while stack and len(out) < max_nodes:
        session, parent, given, depth = stack.pop()
        if session in seen:
            continue
        seen.add(session)
        out.append(node(session, parent, given, depth))
        children = sorted(kids.get(session, []), key=lambda c: (_text(infos[c[0]].created_at) or "", c[0]))
        stack.extend((child, session, name, depth + 1) for child, name in reversed(children))
    return out


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
