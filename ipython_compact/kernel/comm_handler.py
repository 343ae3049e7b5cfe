"""The ``ipython_compact`` comm target: versioned request/response, answered from ``on_msg`` only.

Why only from inside the handler: ipykernel 7.4 pins a comm to the thread of the last kernel-side
send; replying from the main thread (a hook, a timer) would pin a subshell comm to the main shell
and make it wait behind running cells.

What must hold (docs/protocol.md is the contract):
- Every request gets exactly one reply with the same ``id``; malformed requests and unknown ops
  get an error reply and change nothing.
- Nothing in a request is executed; arguments are type-checked before use.
- A handler failure becomes a ``failed`` error reply; it never reaches the user's cell.
- An error reply quotes at most a bounded part of the request (``echo``), the cut stated.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, cast

from ipython_compact.compaction.results import CompactionError, NothingToCompact
from ipython_compact.core import comm_protocol
from ipython_compact.kernel.call_tree import call_tree
from ipython_compact.kernel.service import Busy, KernelService, NotAName, Unavailable
from ipython_compact.namespace.preview import NoTable
from ipython_compact.version import __version__

TARGET = comm_protocol.TARGET
PROTOCOL = comm_protocol.PROTOCOL
ECHO_CHARS = 80  # of a request value quoted in an error reply
MESSAGE_CHARS = 1000  # of an error reply's message
log = logging.getLogger(__name__)


class BadRequest(Exception):
    pass


def _opt_int(
    args: Mapping[str, Any], key: str, default: int | None, lo: int = 0, hi: int = 100_000
) -> int | None:
    value = args.get(key, default)
    if value is None:
        return None
    if type(value) is not int or not lo <= value <= hi:
        raise BadRequest(f"argument {key!r} must be an integer in [{lo}, {hi}], got {echo(value)}")
    return value


def _opt_str(args: Mapping[str, Any], key: str, max_len: int = 20_000) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > max_len:
        raise BadRequest(f"argument {key!r} must be a string of at most {max_len} characters")
    return value


class CommHandler:
    """Dispatches comm requests to the kernel service."""

    def __init__(self, service: KernelService) -> None:
        self.service = service
        self.comms: dict[str, Any] = {}
        self.subshell_of: dict[str, str] = {}  # comm id -> the subshell it was opened on
        # Each op's reply payload is declared in comm_protocol.OPS (tests/test_protocol.py keeps them equal).
        self.ops: dict[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]] = {
            "hello": self._hello,
            "names": self._names,
            "inspect": self._inspect,
            "status": self._status,
            "summaries": self._summaries,
            "preview": self._preview,
            "compact": self._compact,
            "snapshot": self._snapshot,
            "restore": self._restore,
            "recall": self._recall,
            "calls": self._calls,
        }

    # ------------------------------------------------------------------ comm plumbing
    def open(self, comm: Any, open_msg: Any) -> None:
        """The comm target: remember the comm (and its subshell) and answer its messages from ``on_msg``."""
        self.comms[comm.comm_id] = comm
        subshell = _subshell_id(open_msg)
        if subshell is not None:
            self.subshell_of[comm.comm_id] = subshell
        comm.on_msg(lambda msg: self.on_msg(comm, msg))
        comm.on_close(lambda msg: self.closed(comm.comm_id))

    def closed(self, comm_id: str) -> None:
        """The frontend closed a comm: forget it, and give back its subshell once no comm of ours uses it.

        Why the kernel does it: JupyterLab asks to delete a per-target subshell only after the comm
        is disposed, by which time a closing notebook's kernel connection is gone, and a page
        reload sends nothing at all beyond the comm close the panel sends on ``pagehide``; each
        left a subshell thread behind. Deletion is deferred (``RELEASE_DELAY_S``) so the subshell
        finishes publishing the reply to this very close first, and it is skipped if the
        frontend deleted the subshell itself or a new comm of ours opened on it meanwhile.
        """
        self.comms.pop(comm_id, None)
        subshell = self.subshell_of.pop(comm_id, None)
        if subshell is not None and subshell not in self.subshell_of.values():
            _release_subshell(
                self.service.shell, subshell, still_free=lambda: subshell not in self.subshell_of.values()
            )

    def on_msg(self, comm: Any, msg: Any) -> None:
        try:
            data = msg.get("content", {}).get("data") if isinstance(msg, dict) else None
            reply = self.handle(data)
        except Exception as exc:  # defensive: handle() already catches everything
            reply = _error(None, "failed", f"{type(exc).__name__}: {exc}")
        try:
            comm.send(reply)
        except Exception:
            log.exception("ipython_compact: could not send a comm reply")

    def close_all(self) -> None:
        for comm in list(self.comms.values()):
            try:
                comm.close()
            except Exception:
                log.debug("closing comm failed", exc_info=True)
        self.comms.clear()
        self.subshell_of.clear()

    # ------------------------------------------------------------------ dispatch
    def handle(self, data: Any) -> dict[str, Any]:
        """One request → one reply (never raises)."""
        if not isinstance(data, dict):
            return _error(None, "bad_request", "a request must be a JSON object")
        rid = data.get("id")
        if not isinstance(rid, str) or not rid or len(rid) > 200:
            return _error(
                None, "bad_request", "field 'id' must be a non-empty string (at most 200 characters)"
            )
        if "v" not in data or type(data["v"]) is not int:
            return _error(rid, "bad_request", "field 'v' (protocol version, an integer) is required")
        if data["v"] != PROTOCOL:
            return _error(
                rid,
                "unsupported_version",
                f"protocol version {echo(data['v'])} is not supported; use {PROTOCOL}",
            )
        op = data.get("op")
        if not isinstance(op, str):
            return _error(rid, "bad_request", "field 'op' must be a string")
        fn = self.ops.get(op)
        if fn is None:
            return _error(rid, "unknown_op", f"unknown op {echo(op)}; known: {', '.join(sorted(self.ops))}")
        try:
            result = fn(data)
        except BadRequest as exc:
            return _error(rid, "bad_request", str(exc))
        except Busy as exc:
            return _error(rid, "busy", str(exc))
        except NothingToCompact as exc:  # a refusal with its reason, not a failure
            return _error(rid, "nothing_to_compact", str(exc))
        except (NotAName, NoTable) as exc:  # the message is the whole answer: no exception name before it
            return _error(rid, "failed", str(exc.args[0]))
        except (Unavailable, CompactionError, ValueError, KeyError, LookupError) as exc:
            return _error(rid, "failed", f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            log.debug("op %s failed", op, exc_info=True)
            return _error(rid, "failed", f"{type(exc).__name__}: {exc}")
        return {"v": PROTOCOL, "id": rid, "ok": True, **result}

    # ------------------------------------------------------------------ ops
    def _hello(self, args: Mapping[str, Any]) -> comm_protocol.HelloReply:
        return {
            "protocol": PROTOCOL,
            "version": __version__,
            "session": self.service.session,
            "subshell": threading.current_thread() is not threading.main_thread(),
            "ops": sorted(self.ops),
        }

    def _names(self, args: Mapping[str, Any]) -> comm_protocol.NamesReply:
        # cast: ProbeResult.to_json (namespace/) has NamesReply's keys, which tests/test_protocol.py checks
        return cast(
            comm_protocol.NamesReply,
            self.service.names(limit=_opt_int(args, "limit", None), after=_opt_str(args, "after")).to_json(),
        )

    def _inspect(self, args: Mapping[str, Any]) -> comm_protocol.InspectReply:
        name = _opt_str(args, "name", 300)
        if name is None:
            raise BadRequest("inspect needs 'name': the user name whose value to show as a table")
        rows = _opt_int(args, "rows", 50, 1, 200) or 50
        cols = _opt_int(args, "cols", 20, 1, 40) or 20
        # cast: the service's dict has InspectReply's keys (tests/test_protocol.py checks a real reply)
        return cast(comm_protocol.InspectReply, self.service.inspect(name, rows, cols))

    def _status(self, args: Mapping[str, Any]) -> comm_protocol.StatusReply:
        return self.service.status()

    def _summaries(self, args: Mapping[str, Any]) -> comm_protocol.SummariesReply:
        limit = _opt_int(args, "limit", 20, 1, 1000)
        return {"compactions": self.service.summaries(limit=limit or 20)}

    def _preview(self, args: Mapping[str, Any]) -> comm_protocol.PreviewReply:
        return self.service.preview(focus=_opt_str(args, "focus"))

    def _compact(self, args: Mapping[str, Any]) -> comm_protocol.CompactReply:
        return self.service.compact(focus=_opt_str(args, "focus"))

    def _snapshot(self, args: Mapping[str, Any]) -> comm_protocol.SnapshotReply:
        full = args.get("full", False)
        if type(full) is not bool:
            raise BadRequest("argument 'full' must be a boolean")
        # cast: SnapshotReport.to_json (namespace/) has SnapshotPayload's keys (tests/test_protocol.py)
        return {"snapshot": cast(comm_protocol.SnapshotPayload, self.service.snapshot(full=full).to_json())}

    def _restore(self, args: Mapping[str, Any]) -> comm_protocol.RestoreReply:
        names = args.get("names")
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise BadRequest("argument 'names' must be a list of strings")
        generation = args.get("generation")
        if generation is not None and (type(generation) is not int or generation < 1):
            raise BadRequest("argument 'generation' must be an integer of 1 or more (see %compact snapshots)")
        overwrite = args.get("overwrite", False)
        if type(overwrite) is not bool:
            raise BadRequest("argument 'overwrite' must be a boolean")
        # cast: RestoreReport.to_json (namespace/) has RestoreReply's keys (tests/test_protocol.py)
        return cast(
            comm_protocol.RestoreReply,
            self.service.restore(names=names, generation=generation, overwrite=overwrite).to_json(),
        )

    def _recall(self, args: Mapping[str, Any]) -> comm_protocol.RecallReply:
        entry_id = _opt_str(args, "entry_id", 200)
        query = _opt_str(args, "query", 2000)
        if (entry_id is None) == (query is None):
            raise BadRequest("recall needs exactly one of 'entry_id' or 'query'")
        hits = self.service.recall(
            entry_id=entry_id, query=query, limit=_opt_int(args, "limit", 5, 1, 100) or 5
        )
        # RecallHit.to_json's keys (tests/test_protocol.py)
        return {"hits": cast(list[comm_protocol.RecallHit], hits)}

    def _calls(self, args: Mapping[str, Any]) -> comm_protocol.CallsReply:
        root = self.service.context_session()
        return {"root": root, "calls": call_tree(self.service.store, root)}


#: Seconds between a comm's close and the deletion of its subshell (see ``CommHandler.closed``).
RELEASE_DELAY_S = 0.5


def _subshell_id(msg: Any) -> str | None:
    header = msg.get("header") if isinstance(msg, dict) else None
    value = header.get("subshell_id") if isinstance(header, dict) else None
    return value if isinstance(value, str) and value else None


def _release_subshell(shell: Any, subshell_id: str, still_free: Callable[[], bool]) -> None:
    """Delete ``subshell_id`` on ipykernel's shell-channel thread (where its manager must run)."""
    thread = getattr(getattr(shell, "kernel", None), "shell_channel_thread", None)
    manager = getattr(thread, "manager", None)
    loop = getattr(thread, "io_loop", None)
    if manager is None or loop is None:
        return

    def delete() -> None:
        try:
            if still_free() and subshell_id in manager.list_subshell():
                manager._delete_subshell(subshell_id)
        except Exception:
            log.debug("releasing subshell %s failed", subshell_id, exc_info=True)

    # add_callback is the loop's thread-safe entry; call_later then runs on the loop's own thread.
    loop.add_callback(lambda: loop.call_later(RELEASE_DELAY_S, delete))


def echo(value: Any, limit: int = ECHO_CHARS) -> str:
    """``repr`` of a request value for an error message, cut to ``limit`` characters with the cut
    stated: a reply must never carry a huge request back."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... [{len(value):,} characters in all]"
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return f"<a very large {type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text):,} characters in all]"


def _error(rid: str | None, code: str, message: str) -> dict[str, Any]:
    if len(message) > MESSAGE_CHARS:  # e.g. an exception that quoted its input
        message = f"{message[:MESSAGE_CHARS]}... [{len(message):,} characters in all]"
    return {"v": PROTOCOL, "id": rid, "ok": False, "error": {"code": code, "message": message}}
