"""A jupyter_server extension: keep the kernel's busy/idle status honest, and serve a notebook's
persisted session to the panel.

Persisted session (``GET /ipython-compact/session?path=NOTEBOOK``): after a kernel restart the
new kernel has not loaded the extension yet, but what the session log holds — the context's
tokens, the window and lines the kernel last reported, the compactions — is on disk. The panel
shows it from here as soon as the notebook is open; only the live names need the kernel. The
session is found as the kernel finds it (``kernel/binding.py``: ``$IPYTHON_COMPACT_SESSION``, a
remembered ``%compact session`` switch, else the notebook's path); nothing is written.

Why: the panel talks to the kernel over a comm on a subshell (JEP 91), so it is answered while a
cell runs. ipykernel publishes a ``busy`` → ``idle`` pair of IOPub ``status`` messages for every
request it handles, subshell requests included, with that request as the parent. Neither
JupyterLab (``KernelConnection._handleMessage``) nor jupyter_server's activity tracking looks at
which (sub)shell a status came from, so the subshell's ``idle`` became the kernel's status: the
status bar read "Idle" while a cell ran, and the server's ``execution_state`` (what the culler
and ``/api/kernels`` read) said ``idle`` too.

Both honour ``MappingKernelManager.untracked_message_types``: a status whose parent's type is
listed is ignored (JupyterLab reads the list from the page config, which JupyterLab's server
extension fills from the kernel manager). Loading this extension *adds* the comm and subshell
message types to whatever the list already holds (jupyter_server's defaults or the user's own
config), for the kernel manager and for the page config.

Trade-off (docs/kernel-status.md): the statuses of *every* comm request are ignored, not only the
subshell ones. A widget callback that runs long on the main shell (commsOverSubshells
``disabled``) then no longer shows "Busy", and comm traffic alone no longer counts as activity for
the idle culler. The exact fix (ignore statuses whose parent ran on another subshell) belongs
upstream and is written up there. Opting out: ``jupyter server extension disable
ipython_compact.jupyter.server_extension``.

What must hold: nothing the list held before is dropped; loading twice adds nothing twice.

The persisted-session request never runs on the server's event loop: reading the log and listing
snapshots (object storage included) happens on a worker thread of this extension's own, under a
deadline (``$IPYTHON_COMPACT_SERVER_TIMEOUT`` seconds, default 10). Why: it ran on the loop, and
with snapshots on a stalled bucket ``/api/status`` got no answer for over 10 s: every user and
every kernel of the server froze with one panel's request (a healthy 100,000-entry session held
the loop for 1.0 s). A request past its deadline gets a 504 naming what was slow; its thread is
left to finish (the object-storage calls have deadlines of their own) and a request still queued
is dropped.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ipython_compact.core.comm_protocol import NameRow, PersistedSession, PersistedSnapshot

#: Requests the panel sends (comm traffic on its subshell, and the control requests that manage
#: the subshell) whose busy/idle must not become the kernel's status.
STATUS_UNTRACKED = (
    "comm_open",
    "comm_msg",
    "comm_close",
    "create_subshell_request",
    "create_subshell_reply",
    "delete_subshell_request",
    "delete_subshell_reply",
    "list_subshell_request",
    "list_subshell_reply",
)


ENV_TIMEOUT = "IPYTHON_COMPACT_SERVER_TIMEOUT"
DEFAULT_TIMEOUT = 10.0
"""Seconds a persisted-session request may take before it is answered with a 504."""
WORKERS = 4
"""Threads that read sessions for the panel: a stalled request holds one, the loop none."""

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def request_timeout(env: Any) -> float:
    """The deadline of one persisted-session request (``$IPYTHON_COMPACT_SERVER_TIMEOUT``); a value
    that is not a positive number falls back to the default."""
    try:
        value = float(str(env.get(ENV_TIMEOUT, "")).strip() or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if 0 < value < float("inf") else DEFAULT_TIMEOUT


def _workers() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="ipython-compact-session")
        return _executor


def with_untracked(current: list[str] | tuple[str, ...]) -> list[str]:
    """``current`` followed by each of ``STATUS_UNTRACKED`` it lacks (order kept, nothing dropped)."""
    merged = list(current)
    merged.extend(t for t in STATUS_UNTRACKED if t not in merged)
    return merged


def notebook_session(root_dir: str, cwd_for_path: Any, path: str, env: Any, data_dir: Any) -> tuple[str, str]:
    """``(session, binding source)`` of the kernel Jupyter Server starts for notebook ``path``: it sets
    ``JPY_SESSION_NAME`` to the notebook's directory joined with its name (``SessionManager``)."""
    from ipython_compact.kernel import binding  # deferred for start-up: only a panel request needs it

    name = os.path.join(cwd_for_path(os.path.dirname(path) or ""), os.path.basename(path))
    found = binding.resolve(
        configured="",
        env={**env, "JPY_SESSION_NAME": name},
        user_ns={},
        connection_file=None,
        data_dir=data_dir,
    )
    return found.session, found.source


def persisted_session(
    path: str, session: str, source: str, progress: Callable[[str], None] | None = None
) -> PersistedSession:
    """What the session log holds for ``session``: a ``status``-shaped object, its compactions, the
    snapshots on disk and the call tree under it (``comm_protocol.PersistedSession``).

    ``progress`` is told each step as it starts (what a timed-out request names as slow)."""
    from ipython_compact.compaction.context_figures import (  # deferred for start-up
        agents_kept_count,
        model_sees,
    )
    from ipython_compact.core.entries import COMPACTION, MESSAGE  # deferred for start-up
    from ipython_compact.core.tokens import estimate_context  # deferred for start-up
    from ipython_compact.files import paths  # deferred for start-up: only a panel request needs them
    from ipython_compact.kernel.binding import snapshot_slug  # deferred for start-up
    from ipython_compact.kernel.call_tree import call_tree  # deferred for start-up
    from ipython_compact.kernel.service import FIGURES_KEY, summaries_of  # deferred for start-up
    from ipython_compact.store import SessionStore  # deferred for start-up

    say = progress if progress is not None else (lambda step: None)
    database = paths.database_path()
    say(f"reading the session log {database}")
    if not database.exists():
        return {"notebook": path, "session": session, "exists": False}
    store = SessionStore(database)
    try:
        try:
            store.get_session(session)
        except KeyError:
            return {"notebook": path, "session": session, "exists": False}
        view = store.context_view(session)
        figures = store.status_get(session, FIGURES_KEY, {}) or {}
        # the last live agent's count of this very context, else the log's density estimate
        counted = agents_kept_count(store, session, model_sees(view.entries))
        tokens, estimate = counted or (
            estimate_context(view.entries, "density", tokens=view.tokens("density")).tokens,
            "default (density)",
        )
        status: dict[str, Any] = {
            "session": session,
            "binding": source,
            "source": "log",
            "conversation": any(e.kind in (MESSAGE, COMPACTION) for e in view.entries),
            "tokens": tokens,
            "estimate": estimate,
            "window": figures.get("window"),
            "blocking_line": figures.get("blocking_line"),
            "background_line": figures.get("background_line"),
            "entries": store.path_length(session),
            "compactions": store.count_on_path(session, (COMPACTION,)),
            "in_flight": [],
            "last_failure": None,
            "problem": None,
        }
        base = paths.snapshot_location()  # the folder, or an object-storage URL (docs/team.md)
        where = (
            f"{str(base).rstrip('/')}/{snapshot_slug(session)}"
            if isinstance(base, str)
            else base / snapshot_slug(session)
        )
        say(f"listing the snapshots at {where}")
        snapshots = persisted_snapshots(where, paths.key_path(), session)
        say(f"reading the session log {database}")
        return {
            "notebook": path,
            "session": session,
            "exists": True,
            "status": status,
            "compactions": summaries_of(store, session, 50),
            "snapshots": snapshots,
            "calls": call_tree(store, session),
        }
    finally:
        store.close()


def persisted_snapshots(directory: Path | str, key_path: Path, session: str) -> list[PersistedSnapshot]:
    """The verified snapshot generations in ``directory`` (a folder, or objects at a URL), newest
    first, from their signed manifests.

    Read only: nothing is unpickled and nothing is created — a missing folder or signing key means
    no snapshots (the key is never made here). A manifest that fails its signature or names another
    session is left out, as a restore would refuse it.
    """
    from ipython_compact.namespace.snapshot.keys import load_or_create_key  # deferred for start-up
    from ipython_compact.namespace.snapshot.manifests import ManifestReader  # deferred for start-up
    from ipython_compact.namespace.snapshot.reports import SnapshotError  # deferred for start-up

    if isinstance(directory, str):  # object storage: listed and read, never locked or written
        from ipython_compact.namespace.snapshot.object_files import (  # deferred for start-up
            ObjectManifestReader,
        )
        from ipython_compact.namespace.snapshot.objects import open_objects  # deferred for start-up

        if not key_path.is_file():
            return []
        try:
            key = load_or_create_key(key_path)  # exists (checked above): read, never created
            scan = ObjectManifestReader(open_objects(directory), key, session).scan()
        except (SnapshotError, OSError):
            return []
    else:
        if not directory.is_dir() or not key_path.is_file():
            return []
        try:
            key = load_or_create_key(key_path)  # exists (checked above): read, never created
            scan = ManifestReader(directory, key, session).scan()
        except (SnapshotError, OSError):
            return []
    out: list[PersistedSnapshot] = []
    for manifest in reversed(scan.valid):
        data = manifest.data
        rows: list[NameRow] = []
        for name, entry in sorted(manifest.names.items()):
            row: NameRow = {"name": name, "type": str(entry.get("type") or "?"), "kind": "data"}
            if isinstance(entry.get("bytes"), int):
                row["bytes"] = entry["bytes"]
            rows.append(row)
        timestamp, origin = data.get("timestamp"), data.get("origin")
        out.append(
            {
                "generation": manifest.generation,
                "timestamp": None if timestamp is None else str(timestamp),
                "origin": None if origin is None else str(origin),
                "names": rows,
                "bytes": int(data.get("bytes") or 0),
            }
        )
    return out


def _handlers() -> tuple[Any, Any]:
    from jupyter_server.base.handlers import APIHandler  # deferred for start-up: the server's own classes
    from tornado import web  # deferred for start-up

    class SessionHandler(APIHandler):  # type: ignore[misc]
        """``GET ?path=NOTEBOOK``: the persisted session (see the module docstring); read only."""

        @web.authenticated  # type: ignore[misc]
        async def get(self) -> None:
            from ipython_compact.files import paths  # deferred for start-up: only a panel request needs it

            path = self.get_query_argument("path", "")
            if not path or path.startswith("/") or ".." in path.split("/"):
                raise web.HTTPError(400, "path must be a notebook path relative to the server root")
            manager = self.settings["kernel_manager"]
            timeout = request_timeout(os.environ)
            doing = ["waiting for a worker (earlier session requests are still running)"]

            def read() -> PersistedSession:  # on a worker thread: never on the server's loop
                doing.append("finding the notebook's session")
                session, source = notebook_session(
                    manager.root_dir, manager.cwd_for_path, path, os.environ, paths.data_dir()
                )
                return persisted_session(path, session, source, doing.append)

            job = _workers().submit(read)
            try:
                found = await asyncio.wait_for(asyncio.wrap_future(job), timeout)
            except asyncio.TimeoutError:
                job.cancel()  # a request still queued never starts
                raise web.HTTPError(
                    504,
                    f"the persisted session of {path} took over {timeout:g} s ({doing[-1]}); "
                    f"the panel shows the live kernel only (deadline: ${ENV_TIMEOUT})",
                ) from None
            self.finish(found)

    class MovedHandler(APIHandler):  # type: ignore[misc]
        """``POST {"from": OLD, "to": NEW}``: an open notebook's path changed (a rename, a move, a Save
        As); its session follows it (``renames.follow_move``). Replies ``{moved: [{from, to, session}]}``."""

        @web.authenticated  # type: ignore[misc]
        def post(self) -> None:
            from ipython_compact.files import paths  # deferred for start-up: only a panel request needs it
            from ipython_compact.jupyter.renames import follow_move  # deferred for start-up

            body = self.get_json_body()
            old = body.get("from") if isinstance(body, dict) else None
            new = body.get("to") if isinstance(body, dict) else None
            if not (_relative_path(old) and _relative_path(new)):
                raise web.HTTPError(400, "'from' and 'to' must be notebook paths relative to the server root")
            assert isinstance(old, str) and isinstance(new, str)  # for the type checker: checked above
            manager = self.settings["kernel_manager"]
            moved = follow_move(old, new, manager.cwd_for_path, paths.data_dir(), paths.database_path())
            self.finish({"moved": [{"from": a, "to": b, "session": s} for a, b, s in moved]})

    return SessionHandler, MovedHandler


def _relative_path(value: Any) -> bool:
    return (
        isinstance(value, str) and bool(value) and not value.startswith("/") and ".." not in value.split("/")
    )


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "ipython_compact.jupyter.server_extension"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    manager = serverapp.kernel_manager
    merged = with_untracked(list(getattr(manager, "untracked_message_types", None) or []))
    manager.untracked_message_types = merged
    # JupyterLab copies the list into the page config when its own extension loads; whichever
    # loads first, the page ends up with the merged list.
    page_config = serverapp.web_app.settings.setdefault("page_config_data", {})
    page_config["untracked_message_types"] = list(merged)
    serverapp.log.info(
        "ipython_compact: comm and subshell requests no longer change the kernel's busy/idle status"
    )
    from jupyter_server.utils import url_path_join  # deferred for start-up: only the server needs it

    base = serverapp.web_app.settings.get("base_url", "/")
    session_handler, moved_handler = _handlers()
    serverapp.web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "ipython-compact", "session"), session_handler),
            (url_path_join(base, "ipython-compact", "moved"), moved_handler),
        ],
    )
    # A notebook renamed or moved (in the file browser too, open or not) keeps its session.
    from ipython_compact.jupyter.renames import CONTENTS_EVENTS, contents_listener  # deferred for start-up

    events = getattr(serverapp, "event_logger", None)
    if events is not None:
        events.add_listener(schema_id=CONTENTS_EVENTS, listener=contents_listener(serverapp))
