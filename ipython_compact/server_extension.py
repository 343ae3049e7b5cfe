"""A jupyter_server extension with one job: keep the kernel's busy/idle status honest.

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
ipython_compact.server_extension``.

What must hold: nothing the list held before is dropped; loading twice adds nothing twice.
"""

from __future__ import annotations

from typing import Any

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


def with_untracked(current: list[str] | tuple[str, ...]) -> list[str]:
    """``current`` followed by each of ``STATUS_UNTRACKED`` it lacks (order kept, nothing dropped)."""
    merged = list(current)
    merged.extend(t for t in STATUS_UNTRACKED if t not in merged)
    return merged


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "ipython_compact.server_extension"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    manager = serverapp.kernel_manager
    merged = with_untracked(list(getattr(manager, "untracked_message_types", None) or []))
    manager.untracked_message_types = merged
    # JupyterLab copies the list into the page config when its own extension loads; whichever
    # loads first, the page ends up with the merged list.
    page_config = serverapp.web_app.settings.setdefault("page_config_data", {})
    page_config["untracked_message_types"] = list(merged)
    serverapp.log.info("ipython_compact: comm and subshell requests no longer change the kernel's busy/idle status")
