"""Shared helpers for tests that drive real IPython kernels through jupyter_client."""

from __future__ import annotations

import ast
import json
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager


@contextmanager
def running_kernel(data_dir: Path, **env: str) -> Iterator[KernelManager]:
    """A real ipykernel with ``IPYTHON_COMPACT_DIR`` pointing at ``data_dir``; shut down on exit."""
    km = KernelManager(kernel_name="python3")
    kernel_env = {
        k: v for k, v in os.environ.items() if k not in ("IPYTHON_COMPACT_SESSION", "JPY_SESSION_NAME")
    }
    kernel_env.update({"IPYTHON_COMPACT_DIR": str(data_dir), "PYDEVD_DISABLE_FILE_VALIDATION": "1", **env})
    km.start_kernel(env=kernel_env)
    try:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        kc.stop_channels()
        yield km
    finally:
        km.shutdown_kernel(now=True)


def execute(km: KernelManager, code: str, timeout: float = 60.0) -> dict[str, Any]:
    """Run ``code`` on the main shell of ``km`` and return the execute_reply content."""
    kc = km.client()
    kc.start_channels()
    try:
        reply = kc.execute_interactive(code, timeout=timeout, output_hook=lambda msg: None)
        return dict(reply["content"])
    finally:
        kc.stop_channels()


def start_cell(km: KernelManager, code: str) -> Any:
    """Send ``code`` to the main shell without waiting; returns the client (stop its channels later)."""
    kc = km.client()
    kc.start_channels()
    msg_id = kc.execute(code)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the cell has started once the kernel says busy for it
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "execute_input":
            return kc
    raise AssertionError("the kernel did not start the cell within 30 s")


def start_held_cell(km: KernelManager, release: Path) -> Any:
    """``start_cell`` with a cell that runs until the file ``release`` exists (create it, then read
    the cell's reply from the returned client). Why not a cell that sleeps for some seconds: on a
    loaded machine the test's own steps can take longer than the sleep, and the cell would end
    before the moment it was meant to be running."""
    return start_cell(
        km, f"import os, time\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.01)"
    )


def evaluate(km: KernelManager, code: str, expr: str, timeout: float = 120.0) -> Any:
    """Run ``code`` on the main shell, then the JSON value of ``expr`` (a ``json.dumps(...)`` string)."""
    kc = km.client()
    kc.start_channels()
    try:
        reply = kc.execute_interactive(
            code, user_expressions={"r": expr}, timeout=timeout, output_hook=lambda m: None
        )
        content = reply["content"]
        assert content["status"] == "ok", content
        result = content["user_expressions"]["r"]
        assert result["status"] == "ok", result
        return json.loads(ast.literal_eval(result["data"]["text/plain"]))
    finally:
        kc.stop_channels()


def magic(km: KernelManager, line: str) -> Any:
    """The data of ``%compact LINE``'s result (a mapping, rows or text), with its title line."""
    return evaluate(
        km,
        f"__r = get_ipython().run_line_magic('compact', {line!r})",
        "__import__('json').dumps({'title': __r.bundle['text/plain'].splitlines()[0], 'data': __r.data}, "
        "default=str)",
    )


def _thread_states(pid: int) -> list[str]:
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return states


@contextmanager
def stopped_process(pid: int, deadline: float = 60.0) -> Iterator[None]:
    """Hold ``pid`` stopped (SIGSTOP) until the block ends, and only enter the block once every
    thread of it is seen stopped.

    Why the wait: ``kill`` returns before the signal lands; on a loaded machine a kernel answered a
    request sent right after it (CI at load 20: a "stopped" kernel listed its names).
    """
    os.kill(pid, signal.SIGSTOP)
    try:
        end = time.monotonic() + deadline
        while not all(s in ("T", "t") for s in _thread_states(pid)):
            assert time.monotonic() < end, f"process {pid} not stopped within {deadline} s"
            time.sleep(0.005)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
