"""Which session a kernel is bound to.

Order: an explicit name (config or ``IPYTHON_COMPACT_SESSION``), else the notebook's path when the
kernel knows it (``JPY_SESSION_NAME`` from Jupyter Server, ``__vsc_ipynb_file__`` from VS Code),
else one tied to the kernel's connection file (kept across ``restart_kernel``), else — terminal
IPython, which has no connection file — the working directory and IPython profile, so a new
``ipython`` started in the same directory finds the previous one's snapshots. A switch made with
``%compact session NAME`` is remembered in ``bindings.json`` under the kernel's natural key, so a
restarted kernel binds to the same session and finds its snapshots.

A notebook renamed or moved (or saved under another name) keeps its session: the server extension
sees the new path and records ``new key → session`` (``move_binding``), so the kernel restarted
under the new path binds to the session it had (source ``moved``) and finds its snapshots; the old
path gets a fresh session, so the next ``Untitled.ipynb`` does not inherit this one's history.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ipython_compact.files.safety import UnsafePathError, read_regular, replace_atomically

ENV_SESSION = "IPYTHON_COMPACT_SESSION"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Binding:
    session: str
    source: str  # config, env, switched, moved, notebook, connection, terminal
    key: str  # the natural key a switch is remembered under
    problem: str | None = None  # why remembered switches could not be read (shown once at load)
    moved_from: str | None = None  # source "moved": the key the notebook had before its rename

    def to_json(self) -> dict[str, str]:
        out = {"session": self.session, "source": self.source, "key": self.key}
        if self.problem:
            out["problem"] = self.problem
        if self.moved_from:
            out["moved_from"] = self.moved_from
        return out


def from_environment(value: str) -> str:
    """An environment value as valid text. ``os.environ`` keeps bytes that are not UTF-8 as lone
    surrogates (PEP 383), which SQLite refuses; they become U+FFFD, so the same bytes always give
    the same session name."""
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = value.encode("utf-8", "replace")
    return raw.decode("utf-8", "replace")


def natural_key(
    env: Mapping[str, str],
    user_ns: Mapping[str, Any],
    connection_file: str | None,
    profile: str = "default",
    cwd: str | None = None,
) -> tuple[str, str]:
    """``(key, source)`` from what the kernel knows about itself, most specific first.

    Without a notebook or connection file (terminal IPython) the key is the working directory
    and profile: stable across processes, unlike a process id.
    """
    nb = env.get("JPY_SESSION_NAME") or user_ns.get("__vsc_ipynb_file__")
    if isinstance(nb, str) and nb:
        return f"notebook:{from_environment(os.path.abspath(nb))}", "notebook"
    if connection_file:
        return f"kernel:{Path(connection_file).stem}", "connection"
    return (
        f"terminal:{from_environment(os.path.abspath(cwd or os.getcwd()))}:{profile or 'default'}",
        "terminal",
    )


def snapshot_slug(session: str) -> str:
    """A directory name for a session: readable prefix plus a hash so distinct names never collide."""
    digest = hashlib.sha256(session.encode()).hexdigest()[:12]
    return f"{_SAFE.sub('_', session)[-60:].strip('_') or 'session'}-{digest}"


def _bindings_path(data_dir: Path) -> Path:
    return data_dir / "bindings.json"


_MAX_BINDINGS_BYTES = 4 << 20


def _read_entries(data_dir: Path) -> dict[str, Any]:
    """``bindings.json`` as stored: ``key → session`` (a switch) or ``key → {session, moved_from}``
    (a rename followed). ``UnsafePathError`` when it is a FIFO, device, directory or too large:
    never a read that blocks (a FIFO once hung ``%load_ext``)."""
    raw = read_regular(_bindings_path(data_dir), "the session bindings file", max_bytes=_MAX_BINDINGS_BYTES)
    if raw is None:
        return {}
    with contextlib.suppress(ValueError, RecursionError):
        doc = json.loads(raw.decode("utf-8"))
        if isinstance(doc, dict):
            return {str(k): v for k, v in doc.items() if isinstance(v, str | dict)}
    return {}


def _session_of(entry: Any) -> str | None:
    if isinstance(entry, str):
        return entry or None
    if isinstance(entry, dict) and isinstance(entry.get("session"), str):
        return str(entry["session"]) or None
    return None


def _read(data_dir: Path) -> dict[str, str]:
    """Remembered sessions by key (switches and followed renames); ``{}`` when none."""
    return {k: s for k, v in _read_entries(data_dir).items() if (s := _session_of(v)) is not None}


def resolve(
    *,
    configured: str,
    env: Mapping[str, str],
    user_ns: Mapping[str, Any],
    connection_file: str | None,
    data_dir: Path,
    profile: str = "default",
) -> Binding:
    key, source = natural_key(env, user_ns, connection_file, profile)
    if configured:
        return Binding(configured, "config", key)
    named = from_environment(env.get(ENV_SESSION) or "")
    if named.strip():
        return Binding(named, "env", key)
    try:
        entry = _read_entries(data_dir).get(key)
    except UnsafePathError as exc:
        return Binding(key, source, key, problem=f"{exc}; remembered session switches are ignored")
    switched = _session_of(entry)
    if switched and isinstance(entry, dict) and isinstance(entry.get("moved_from"), str):
        return Binding(switched, "moved", key, moved_from=entry["moved_from"])
    if switched and isinstance(entry, dict):  # the notebook that was here moved away: a fresh session
        return Binding(switched, source, key)
    if switched:
        return Binding(switched, "switched", key)
    return Binding(key, source, key)


@contextlib.contextmanager
def _bindings_lock(data_dir: Path) -> Any:
    """Serialize read-modify-write of ``bindings.json`` across processes (an exclusive ``flock`` on
    the data directory itself, so no lock file can be planted or left behind)."""
    fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def remember_switch(data_dir: Path, key: str, session: str) -> None:
    """Persist ``key → session`` atomically (owner-only) so a restart keeps the switch.

    The new file gets a fresh, exclusively created temporary name (a planted ``bindings.tmp``
    symlink once had its target overwritten, and concurrent switches renamed each other's file
    away); a special file at ``bindings.json`` is refused with ``UnsafePathError``.
    """
    if not session.strip():
        raise ValueError("session name must not be empty")
    with _bindings_lock(data_dir):
        doc = _read_entries(data_dir)
        doc[key] = session
        data = json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")
        replace_atomically(_bindings_path(data_dir), data, what="the session bindings file")


def move_binding(
    data_dir: Path, old_key: str, new_key: str, *, has_session: Callable[[str], bool], fresh: str
) -> str | None:
    """A notebook moved from ``old_key``'s path to ``new_key``'s: bind ``new_key`` to the session
    ``old_key`` had, and ``old_key`` to ``fresh`` (a new, empty session for whatever notebook is
    made at the old path next). Returns the session that moved, or None when nothing moved: the
    old key's session holds nothing (``has_session`` is false), or this very move was recorded
    already (the panel and the server both report a rename; the second report changes nothing).

    Kept in ``bindings.json`` as ``new_key → {session, moved_from}`` so a kernel started under the
    new path says how it was bound (source ``moved``).
    """
    if old_key == new_key:
        return None
    with _bindings_lock(data_dir):
        doc = _read_entries(data_dir)
        now = doc.get(new_key)
        if isinstance(now, dict) and now.get("moved_from") == old_key:
            return None
        session = _session_of(doc.get(old_key)) or old_key
        if not has_session(session):
            return None
        if session == new_key:  # moved back to the path whose natural session it is
            doc.pop(new_key, None)
        else:
            doc[new_key] = {"session": session, "moved_from": old_key}
        doc[old_key] = {"session": fresh, "moved_to": new_key}
        data = json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")
        replace_atomically(_bindings_path(data_dir), data, what="the session bindings file")
    return session


def keys_under(data_dir: Path, prefix: str, sessions: Iterable[str]) -> list[str]:
    """Every key at or below a moved folder: remembered ones and sessions named by their path."""
    try:
        known = set(_read_entries(data_dir))
    except UnsafePathError:
        known = set()
    return sorted(k for k in known | set(sessions) if k.startswith(prefix))
