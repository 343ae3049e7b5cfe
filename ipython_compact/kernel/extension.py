"""``load(ip)`` / ``unload(ip)``: register and remove everything the extension adds.

Loading adds: the ``CompactConfig`` configurable, the ``%compact`` line magic, the ``%%agent`` cell
magic, ``pre_run_cell`` / ``post_run_cell`` hooks (automatic snapshot, file tracking, end-of-cell
compaction requests), the ``ipython_compact`` comm target, and the hidden ``compact`` helper.
Unloading removes each of them (every line and cell magic bound to one of our ``Magics`` objects,
and their registry entries), so ``%reload_ext`` leaves exactly one of everything and
``%unload_ext`` leaves none. A magic someone else registered under the same name later is not ours
and is left alone.

Automatic snapshots are debounced on the main thread's event loop and skipped while a cell runs,
so nothing is pickled while user code mutates the namespace.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import sys
import threading
import time
from typing import Any

from ipython_compact.kernel import fileops
from ipython_compact.kernel.agent_magic import AgentMagics, register_agent_magic
from ipython_compact.kernel.comm_handler import TARGET, CommHandler
from ipython_compact.kernel.config import CompactConfig
from ipython_compact.kernel.helper import CompactHelper
from ipython_compact.kernel.magics import CompactMagics
from ipython_compact.kernel.service import KernelService

log = logging.getLogger(__name__)
HELPER_NAME = "compact"


class Extension:
    """Everything one load registered, so unload can remove exactly that."""

    def __init__(self, ip: Any) -> None:
        self.ip = ip
        self.config = CompactConfig(parent=ip)
        self.service = KernelService(ip, self.config)
        self.comm = CommHandler(self.service)
        self.helper = CompactHelper(self.service)
        self.magics = CompactMagics(ip, self.service)
        self._timer: Any = None
        self._depth = 0  # cells running now: 2 while a %%agent tool call runs inside its cell
        self._last_sync_snapshot = 0.0
        self._sync_pending = False  # a terminal cell's names not yet snapshotted (throttled)
        self._original_atexit_once: Any = None
        self._auto_error: str | None = None  # the last automatic-snapshot problem told to the user
        self.comm_manager: Any = None
        self.agent_magics: AgentMagics | None = None

    # ------------------------------------------------------------------ register
    def register(self) -> None:
        ip = self.ip
        ip.configurables.append(self.config)
        ip.register_magics(self.magics)
        # %%agent (ipython_compact.kernel.agent_magic)
        self.agent_magics = register_agent_magic(ip, self.service)
        # the live agent with its settings brought up to `%config CompactConfig.compaction` first
        self.service.live_agent = lambda: self.agent_magics.live() if self.agent_magics is not None else None
        ip.events.register("pre_run_cell", self.pre_run_cell)
        ip.events.register("post_run_cell", self.post_run_cell)
        self._bind_helper()
        self.comm_manager = _comm_manager(ip)
        if self.comm_manager is not None:
            self.comm_manager.register_target(TARGET, self.comm.open)
        if self.config.track_files:
            fileops.activate(self.service.fileops)
        if getattr(ip, "kernel", None) is None:
            self._hook_exit()
        if self.service.binding.problem:
            print(f"ipython_compact: {self.service.binding.problem}", file=sys.stderr)

    def _hook_exit(self) -> None:
        """Terminal IPython: write the snapshot the throttle held back before the shell exits.

        Why here: the terminal's ``mainloop`` ends with ``_atexit_once``, which clears the user
        namespace before any ``atexit`` handler or event could read it, so the extension wraps that
        method on this shell (``unregister`` puts it back); ``atexit`` covers a shell ended without
        its main loop."""
        original = getattr(self.ip, "_atexit_once", None)
        if callable(original):

            def before_reset() -> None:
                self.at_exit()
                original()

            self._original_atexit_once = original
            self.ip._atexit_once = before_reset
        atexit.register(self.at_exit)

    def at_exit(self) -> None:
        """Write the throttled snapshot, so the names of the last cells typed in quick succession
        are there for the next ``ipython`` to restore."""
        if self._sync_pending:
            self._sync_pending = False
            self._auto_snapshot()

    def _bind_helper(self) -> None:
        ns = self.ip.user_ns
        existing = ns.get(HELPER_NAME)
        if existing is not None and not isinstance(existing, CompactHelper):
            log.warning(
                "ipython_compact: the name %r is taken; the helper is available as _compact", HELPER_NAME
            )
            name = "_compact"
        else:
            name = HELPER_NAME
        self.helper_name = name
        ns[name] = self.helper
        self.ip.user_ns_hidden[name] = self.helper
        self.service.exclude_ids.add(id(self.helper))

    def unregister(self) -> None:
        ip = self.ip
        self._cancel_timer()
        atexit.unregister(self.at_exit)
        self.service.bookkeeping.wait(timeout=5.0)  # queued log entries land (or are reported) first
        if self._original_atexit_once is not None:
            with contextlib.suppress(AttributeError):
                del ip._atexit_once  # the instance wrapper; the class method shows through again
            self._original_atexit_once = None
        fileops.deactivate()
        for event, fn in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
            with contextlib.suppress(ValueError):
                ip.events.unregister(event, fn)
        for magics in (self.magics, self.agent_magics):
            if magics is not None:
                _unregister_magics(ip, magics)
        if self.agent_magics is not None:
            self.agent_magics.close()
            self.agent_magics = None
        with contextlib.suppress(ValueError):
            ip.configurables.remove(self.config)
        if self.comm_manager is not None:
            self.comm.close_all()
            with contextlib.suppress(Exception):
                self.comm_manager.unregister_target(TARGET, self.comm.open)
        name = self.helper_name
        if ip.user_ns.get(name) is self.helper:
            del ip.user_ns[name]
        if ip.user_ns_hidden.get(name) is self.helper:
            del ip.user_ns_hidden[name]
        self.service.close()

    # ------------------------------------------------------------------ cell hooks
    def pre_run_cell(self, info: Any = None) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._depth += 1  # a %%agent tool call is a cell run inside the %%agent cell
        self.service.executing = True
        if self._depth == 1:
            self.service.cell_request = self._request_id()
        self.service.pause_background()  # the snapshot child waits while the user's cell runs
        self.service.fileops.cells_by = self.config.cells_by
        self.service.fileops.begin_cell()
        self._cancel_timer()

    def _request_id(self) -> str | None:
        """The ``msg_id`` of the ``execute_request`` that runs this cell (None outside a kernel)."""
        kernel = getattr(self.ip, "kernel", None)
        try:
            parent = kernel.get_parent("shell") if kernel is not None else None
        except Exception:  # an old or foreign kernel: clients fall back on IOPub alone
            return None
        msg_id = (parent or {}).get("header", {}).get("msg_id")
        return msg_id if isinstance(msg_id, str) and msg_id else None

    def post_run_cell(self, result: Any = None) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._depth = max(0, self._depth - 1)
        self.service.executing = self._depth > 0  # still busy while the outer cell runs
        if self._depth == 0:
            self.service.resume_background()
            if self.service.cell_request is not None:
                self.service.finished_requests.append(self.service.cell_request)
            self.service.cell_request = None
        self.service.fileops.end_cell()
        try:
            self.service.flush_file_ops()
            if self._depth > 0:
                return  # the end of a tool call, not of the user's cell
            pending = self.helper.take_pending()
            if pending is not None:
                self._run_requested(pending)
            if self.config.auto_snapshot:
                self._schedule_snapshot()
        except Exception:
            log.debug("ipython_compact post_run_cell failed", exc_info=True)

    def _run_requested(self, pending: dict[str, Any]) -> None:
        from IPython import display as ipy_display  # start-up: only when a summary is shown

        show: Any = ipy_display.display
        try:
            result = self.service.compact(focus=pending.get("instructions"), reason="requested")
            # start-up: only when a summary is shown
            from ipython_compact.kernel.display import summary_bundle

            show(summary_bundle(result["compaction"], result.get("notice")))
        except Exception as exc:
            print(f"ipython_compact: the requested compaction did not run: {exc}")

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            with contextlib.suppress(Exception):
                self._timer.cancel()
            self._timer = None

    def _schedule_snapshot(self) -> None:
        self._cancel_timer()
        loop = None
        if getattr(self.ip, "kernel", None) is not None:  # only a kernel's loop runs between cells
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
        # Terminal IPython: no loop to defer to (a loop that looks running there belongs to a
        # library such as Playwright's sync API and runs only when that library does); throttle.
        if loop is None:
            if time.monotonic() - self._last_sync_snapshot >= self.config.snapshot_debounce:
                self._sync_pending = False
                self._auto_snapshot()
                self._last_sync_snapshot = time.monotonic()
            else:
                self._sync_pending = True  # written by the next cell past the throttle, or at exit
            return
        self._timer = loop.call_later(self.config.snapshot_debounce, self._auto_snapshot)

    def _auto_snapshot(self) -> None:
        self._timer = None
        if self.service.executing or threading.current_thread() is not threading.main_thread():
            return
        in_kernel = getattr(self.ip, "kernel", None) is not None
        if in_kernel and self.service.background_busy:  # the last one is still being written: try after it
            self._schedule_snapshot()
            return
        job = self.service.last_background  # a background save's failure, said once like any other
        if job is not None and job.error and not job.told:
            job.told = True
            text = f"ipython_compact: the automatic snapshot was not written: {job.error}"
            if text != self._auto_error:
                print(text, file=sys.stderr)
            self._auto_error = text
        try:
            # sampled checks, every Nth verifies fully; skipped while empty; in a kernel a forked
            # child writes it, so the next cell never waits (a failure is said by the next attempt)
            self.service.automatic_snapshot(background=in_kernel)
            self._auto_error = None
            if self.service.background_deferred:  # IPython's history thread was writing: a little later
                self.service.background_deferred = False
                self._schedule_snapshot()
        except Exception as exc:  # said once per distinct problem: one sentence with what to do
            text = f"ipython_compact: the automatic snapshot was not written: {exc}"
            if text != self._auto_error:
                print(text, file=sys.stderr)
            self._auto_error = text


def _unregister_magics(ip: Any, magics: Any) -> None:
    """Remove every line and cell magic bound to ``magics`` and its registry entry.

    Only entries that are still ours are removed: a magic of the same name registered later by
    someone else stays.
    """
    manager = ip.magics_manager
    for table in manager.magics.values():
        for name in [n for n, fn in table.items() if getattr(fn, "__self__", None) is magics]:
            del table[name]
    key = type(magics).__name__
    if manager.registry.get(key) is magics:
        del manager.registry[key]
    with contextlib.suppress(ValueError):
        ip.configurables.remove(magics)


def _comm_manager(ip: Any) -> Any:
    kernel = getattr(ip, "kernel", None)
    manager = getattr(kernel, "comm_manager", None)
    if manager is not None:
        return manager
    try:
        import comm  # optional: the comm package exists only in a kernel

        return comm.get_comm_manager()
    except Exception:
        return None


_EXTENSIONS: dict[int, Extension] = {}


def load(ip: Any) -> None:
    """Register everything on ``ip``; a second load without unload is a no-op."""
    if id(ip) in _EXTENSIONS:
        return
    try:
        ext = Extension(ip)
    except OSError as exc:  # the data directory cannot be created: say so, without a traceback
        from IPython.core.error import UsageError  # start-up: only on a load error

        from ipython_compact.files.paths import ENV_DIR  # start-up: only on a load error

        raise UsageError(
            f"ipython_compact: cannot create the data directory {exc.filename}: "
            f"{exc.strerror or exc}. "
            f"Point {ENV_DIR} at a writable directory, then `%load_ext ipython_compact` "
            f"again."
        ) from None
    ext.register()
    _EXTENSIONS[id(ip)] = ext


def unload(ip: Any) -> None:
    ext = _EXTENSIONS.pop(id(ip), None)
    if ext is not None:
        ext.unregister()


def extension_for(ip: Any) -> Extension | None:
    return _EXTENSIONS.get(id(ip))
