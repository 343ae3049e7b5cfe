"""A notebook renamed, moved or saved under another name keeps its session (issue 35.1).

Why: a kernel bound to its notebook's path (``JPY_SESSION_NAME``) and Jupyter Server gives a
restarted kernel the *new* path. After ``Untitled.ipynb`` became ``trip.ipynb``, a restart bound to
an empty session: Restore said "Restored 0 names", the timeline "No compactions yet". Jupyter
Server reports each rename or move (its contents service emits a ``rename`` event, a folder's
too), and the panel reports a path change of an open notebook (which a Save As is); both land
here, and ``binding.move_binding`` records the new path's session. Reported twice, a move is
recorded once.

What must hold: only paths whose session holds something are moved; a folder's move moves every
session at or below it; nothing is written outside ``bindings.json``; a failure is logged and
never breaks the server's rename.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: The contents service's event schema (jupyter_server emits ``rename`` with ``path``/``source_path``).
CONTENTS_EVENTS = "https://events.jupyter.org/jupyter_server/contents_service/v1"


def notebook_key(cwd_for_path: Callable[[str], str], path: str) -> str:
    """The natural key of the kernel Jupyter Server starts for API path ``path`` (as ``binding``
    derives it from ``JPY_SESSION_NAME``, which the server sets to this joined path)."""
    from ipython_compact.kernel.binding import from_environment  # deferred for start-up

    joined = os.path.join(cwd_for_path(os.path.dirname(path) or ""), os.path.basename(path))
    return f"notebook:{from_environment(os.path.abspath(joined))}"


def follow_move(
    old_path: str,
    new_path: str,
    cwd_for_path: Callable[[str], str],
    data_dir: Path,
    database: Path,
    now: datetime | None = None,
) -> list[tuple[str, str, str]]:
    """Record that ``old_path`` (a notebook or a folder, API paths) is now ``new_path``:
    ``[(old key, new key, session)]`` for each session that moved."""
    from ipython_compact.kernel.binding import keys_under, move_binding  # deferred for start-up
    from ipython_compact.store import SessionStore  # deferred for start-up

    if not database.exists() or old_path.strip("/") == new_path.strip("/"):
        return []
    old_key = notebook_key(cwd_for_path, old_path.strip("/"))
    new_key = notebook_key(cwd_for_path, new_path.strip("/"))
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    store = SessionStore(database)
    try:
        known = {s.name for s in store.sessions()}
    finally:
        store.close()
    pairs = [(old_key, new_key)]
    pairs += [(k, new_key + k[len(old_key) :]) for k in keys_under(data_dir, old_key + "/", known)]
    moved: list[tuple[str, str, str]] = []
    for before, after in pairs:
        session = move_binding(
            data_dir, before, after, has_session=known.__contains__, fresh=f"{before}@{stamp}"
        )
        if session is not None:
            moved.append((before, after, session))
    return moved


def contents_listener(server_app: Any) -> Callable[..., Any]:
    """The event listener that follows the contents service's renames (files and folders)."""

    async def on_event(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        if data.get("action") != "rename":
            return
        old, new = data.get("source_path"), data.get("path")
        if not isinstance(old, str) or not isinstance(new, str):
            return
        try:
            from ipython_compact.files import paths  # deferred for start-up

            manager = server_app.kernel_manager
            for before, after, session in follow_move(
                old, new, manager.cwd_for_path, paths.data_dir(), paths.database_path()
            ):
                server_app.log.info("ipython_compact: session %s follows %s → %s", session, before, after)
        except Exception:
            server_app.log.warning("ipython_compact: could not follow the rename of %s", old, exc_info=True)

    return on_event
