"""Host-side client for programs that drive a kernel (RLM agents, the CLI, tests).

It talks to the ``ipython_compact`` comm target over jupyter_client. When the kernel advertises
``"kernel subshells"`` in ``kernel_info_reply.supported_features`` (ipykernel ≥ 7) it creates a
subshell on the control channel and opens the comm there (``subshell_id`` in the message header),
so requests are answered while a cell runs on the main shell. Otherwise it falls back to the main
shell, where requests wait behind running cells.

What must hold:
- Every request returns within its timeout (default 5 s). A kernel that is dead or silent yields a
  ``Result`` with ``status == "unknown"`` and the reason; never a guessed answer.
- The client uses its own connection (own sockets), so it never consumes another client's IOPub.
- The client executes nothing in the kernel on its own: only ``%load_ext ipython_compact`` in
  ``ensure_extension``, and whatever code a caller passes to ``execute`` itself.
"""

from __future__ import annotations

import itertools
import queue
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from ipython_compact.core.state_notice import SnapshotOutcome
from ipython_compact.core.state_notice import state_notice as build_notice

TARGET = "ipython_compact"
PROTOCOL = 1
DEFAULT_TIMEOUT = 5.0

Status = Literal["ok", "error", "unknown"]
NOT_LOADED = "the ipython_compact extension is not loaded in this kernel; call ensure_extension()"


@dataclass(frozen=True)
class Result:
    """One request's outcome. ``status`` is ``unknown`` when the kernel did not answer in time."""

    status: Status
    data: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    reason: str = ""
    channel: str = "none"
    elapsed_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def __getitem__(self, key: str) -> Any:
        if self.status != "ok":
            raise KeyError(
                f"{key!r}: the request did not succeed ({self.status}: {self.reason or self.error})"
            )
        return self.data[key]


class KernelClient:
    """A comm client for one kernel. Use as a context manager or call ``close()``."""

    def __init__(
        self,
        connection_info: dict[str, Any] | str,
        *,
        manager: KernelManager | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        use_subshell: bool = True,
    ) -> None:
        self.timeout = timeout
        self.manager = manager
        self.use_subshell = use_subshell
        self._connection = connection_info
        self.kc: BlockingKernelClient | None = None
        self.subshell_id: str | None = None
        self.comm_id: str | None = None
        self.supports_subshells: bool | None = None
        self._ids = itertools.count(1)
        self._connect()

    @classmethod
    def for_manager(cls, km: KernelManager, **kw: Any) -> KernelClient:
        return cls(dict(km.get_connection_info(session=False)), manager=km, **kw)

    # ------------------------------------------------------------------ connection
    def _connect(self) -> None:
        kc = BlockingKernelClient()
        if isinstance(self._connection, str):
            kc.load_connection_file(self._connection)
        else:
            kc.load_connection_info(self._connection)  # type: ignore[arg-type]
        kc.start_channels()
        self.kc = kc
        self.subshell_id = None
        self.comm_id = None
        self.supports_subshells = None

    def close(self) -> None:
        kc = self.kc
        if kc is None:
            return
        try:
            if self.comm_id is not None and self.alive():
                self._send_shell("comm_close", {"comm_id": self.comm_id, "data": {}})
            if self.subshell_id is not None and self.alive():
                msg = kc.session.msg("delete_subshell_request", {"subshell_id": self.subshell_id})
                kc.control_channel.send(msg)
                self._control_reply(msg["header"]["msg_id"], 1.0)
        finally:
            kc.stop_channels()
            self.kc = None

    def __enter__(self) -> KernelClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def alive(self) -> bool:
        if self.manager is not None:
            try:
                return bool(self.manager.is_alive())
            except Exception:
                return False
        kc = self.kc
        return kc is not None and bool(kc.hb_channel.is_beating())

    # ------------------------------------------------------------------ low level
    @property
    def _kc(self) -> BlockingKernelClient:
        if self.kc is None:
            raise RuntimeError("the client is closed")
        return self.kc

    def _send_shell(self, msg_type: str, content: dict[str, Any], *, subshell: bool = True) -> str:
        kc = self._kc
        msg = kc.session.msg(msg_type, content)
        if subshell and self.subshell_id is not None:
            msg["header"]["subshell_id"] = self.subshell_id
        kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    @staticmethod
    def _reply(channel: Any, msg_id: str, timeout: float) -> dict[str, Any] | None:
        """The reply to ``msg_id`` on ``channel`` (replies to other requests are dropped); None on timeout."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                reply = channel.get_msg(timeout=left)
            except queue.Empty:
                return None
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                return dict(reply)
        return None

    def _control_reply(self, msg_id: str, timeout: float) -> dict[str, Any] | None:
        return self._reply(self._kc.control_channel, msg_id, timeout)

    def _shell_reply(self, msg_id: str, timeout: float) -> dict[str, Any] | None:
        return self._reply(self._kc.shell_channel, msg_id, timeout)

    def kernel_info(self, timeout: float | None = None) -> dict[str, Any] | None:
        msg_id = self._send_shell("kernel_info_request", {}, subshell=False)
        reply = self._shell_reply(msg_id, timeout or self.timeout)
        return None if reply is None else dict(reply["content"])

    def detect_subshells(self) -> bool:
        """True when kernel_info lists ``"kernel subshells"``; cached."""
        if self.supports_subshells is None:
            info = self.kernel_info()
            self.supports_subshells = bool(info and "kernel subshells" in info.get("supported_features", []))
        return self.supports_subshells

    def _create_subshell(self) -> str | None:
        msg = self._kc.session.msg("create_subshell_request", {})
        self._kc.control_channel.send(msg)
        reply = self._control_reply(msg["header"]["msg_id"], self.timeout)
        if reply is None or reply["content"].get("status") != "ok":
            return None
        sid = reply["content"].get("subshell_id")
        return str(sid) if sid else None

    # ------------------------------------------------------------------ comm
    def open(self) -> str:
        """Open the comm (on a subshell when supported); returns the channel used."""
        if self.comm_id is not None:
            return "subshell" if self.subshell_id else "main"
        if self.use_subshell and self.detect_subshells():
            self.subshell_id = self._create_subshell()
        self.comm_id = uuid.uuid4().hex
        self._send_shell("comm_open", {"comm_id": self.comm_id, "target_name": TARGET, "data": {}})
        return "subshell" if self.subshell_id else "main"

    def request(self, op: str, *, timeout: float | None = None, **args: Any) -> Result:
        """Send one request and wait for its reply; ``unknown`` on timeout or a dead kernel."""
        start = time.monotonic()
        limit = self.timeout if timeout is None else timeout
        if not self.alive():
            return Result("unknown", reason="the kernel is not running", elapsed_ms=0.0)
        channel = self.open()
        rid = f"req-{next(self._ids)}-{uuid.uuid4().hex[:8]}"
        data = {"v": PROTOCOL, "id": rid, "op": op, **args}
        self._send_shell("comm_msg", {"comm_id": self.comm_id, "data": data})
        deadline = start + limit
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = self._kc.iopub_channel.get_msg(timeout=min(left, 0.5))
            except queue.Empty:
                if not self.alive():
                    return Result(
                        "unknown",
                        reason="the kernel died while the request was pending",
                        channel=channel,
                        elapsed_ms=(time.monotonic() - start) * 1000,
                    )
                continue
            content = msg.get("content", {})
            if msg.get("msg_type") == "comm_close" and content.get("comm_id") == self.comm_id:
                self.comm_id = None  # the kernel has no such target: the extension is not loaded
                return Result(
                    "error",
                    error={"code": "not_loaded", "message": NOT_LOADED},
                    reason=NOT_LOADED,
                    channel=channel,
                    elapsed_ms=(time.monotonic() - start) * 1000,
                )
            if msg.get("msg_type") != "comm_msg":
                continue
            reply = content.get("data", {})
            if content.get("comm_id") != self.comm_id or reply.get("id") != rid:
                continue
            elapsed = (time.monotonic() - start) * 1000
            if reply.get("ok"):
                body = {k: v for k, v in reply.items() if k not in ("v", "id", "ok")}
                return Result("ok", body, channel=channel, elapsed_ms=elapsed)
            return Result(
                "error",
                error=reply.get("error"),
                reason=str((reply.get("error") or {}).get("message")),
                channel=channel,
                elapsed_ms=elapsed,
            )
        reason = f"the kernel did not answer within {limit:.1f} s"
        if not self.alive():
            reason = "the kernel is not running"
        return Result("unknown", reason=reason, channel=channel, elapsed_ms=(time.monotonic() - start) * 1000)

    # ------------------------------------------------------------------ conveniences
    def names(self, **kw: Any) -> Result:
        return self.request("names", **kw)

    def status(self, **kw: Any) -> Result:
        return self.request("status", **kw)

    def all_names(self, *, timeout: float | None = None, page: int | None = None) -> Result:
        """Every user name, walking the probe's pages (each page answered within the kernel's
        budget, also while a cell runs): ``names`` (all of them, sorted), ``total``, ``pages``.

        ``unknown`` when the whole walk takes longer than ``timeout`` (with how far it got)."""
        limit = self.timeout if timeout is None else timeout
        start = time.monotonic()
        names: list[dict[str, Any]] = []
        after: str | None = None
        pages = 0
        while True:
            left = limit - (time.monotonic() - start)
            if left <= 0:
                return Result(
                    "unknown",
                    reason=f"listing the names took over {limit:g} s ({len(names):,} listed so far)",
                    elapsed_ms=(time.monotonic() - start) * 1000,
                )
            args: dict[str, Any] = {} if after is None else {"after": after}
            if page is not None:
                args["limit"] = page
            got = self.request("names", timeout=left, **args)
            if not got.ok:
                return got
            pages += 1
            names.extend(got["names"])
            after = got.data.get("next")
            if not after:
                return Result(
                    "ok",
                    {"names": names, "total": got["total"], "pages": pages, "truncated": False},
                    channel=got.channel,
                    elapsed_ms=(time.monotonic() - start) * 1000,
                )

    def execute(
        self, code: str, *, timeout: float = 30.0, subshell: bool = False, silent: bool = False
    ) -> dict[str, Any] | None:
        """Run code on the main shell (or the subshell) and wait for its reply; None on timeout."""
        msg_id = self._send_shell(
            "execute_request",
            {
                "code": code,
                "silent": silent,
                "store_history": False,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": not silent,
            },
            subshell=subshell,
        )
        reply = self._shell_reply(msg_id, timeout)
        return None if reply is None else dict(reply["content"])

    def ensure_extension(self, timeout: float = 30.0) -> bool:
        """Load the extension (idempotent) and check it answers ``hello``.

        The load runs on the subshell when there is one, so it does not wait behind a running cell.
        """
        if self.use_subshell and self.detect_subshells() and self.subshell_id is None:
            self.subshell_id = self._create_subshell()
        code = "get_ipython().extension_manager.load_extension('ipython_compact')"
        if self.execute(code, timeout=timeout, subshell=True, silent=True) is None:
            return False
        self.comm_id = None  # a comm opened before the target existed was closed by the kernel
        return self.request("hello", timeout=timeout).ok

    def state_notice(self, *, snapshot: bool = True, timeout: float | None = None) -> str | None:
        """The ``<ipython_state>`` notice from a live probe, for a host that compacted its own log.

        None when the kernel is gone (nothing true can be said); when the probe does not answer,
        the notice says the names are unknown. With ``snapshot`` a snapshot is taken first (a
        busy kernel keeps its last one, reported as such).
        """
        if not self.alive():
            return None
        outcome: SnapshotOutcome | None = None
        if snapshot:
            snap = self.request("snapshot", timeout=timeout)
            if snap.ok:
                skipped = [(s["name"], s["reason"]) for s in snap["snapshot"]["skipped"]]
                outcome = SnapshotOutcome(True, skipped)
            else:
                why = snap.reason or (snap.error or {}).get("message") or snap.status
                outcome = SnapshotOutcome(False, error=str(why))
        names = self.all_names(timeout=timeout)
        if names.status == "unknown" and not self.alive():
            return None
        listed = [n["name"] for n in names["names"]] if names.ok else None
        return build_notice(kernel_alive=True, names=listed, snapshot=outcome)

    def restart_and_restore(self, timeout: float = 60.0) -> Result:
        """Restart the kernel (needs a manager), reload the extension and restore the snapshot."""
        if self.manager is None:
            return Result("unknown", reason="restart needs the KernelManager that started the kernel")
        self.manager.restart_kernel(now=False)
        self._kc.stop_channels()
        self._connect()
        self._kc.wait_for_ready(timeout=timeout)
        if not self.ensure_extension(timeout=timeout):
            return Result("unknown", reason="the extension did not load after the restart")
        return self.request("restore", timeout=timeout)
