"""An automatic snapshot written by a forked child while the next cell floods output (issue 21).

The child is forked from a kernel whose IOPub thread, output streams and ZMQ sockets are live; it
must neither write to them nor take CPU from the cell. Why the CPU matters: the kernel's IOPub
socket drops messages past ZMQ's high-water mark when its reader falls behind, and under a flood
the dropped one can be the cell's ``idle`` status (the panel learns that a cell ended from it
alone). With the child running through a 20,000-line flood the ``idle`` was lost in 1 run of 3
here; a bare kernel loses it too on a loaded machine (1 of 9), so the flood is sized where a
bare kernel keeps up. What must hold, in a real ipykernel driven through jupyter_client: while
a cell runs the child is stopped; the flood delivers its lines, reply and ``idle``; after the
cell the child finishes and its snapshot is recorded.
"""

from __future__ import annotations

import ast
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import KernelManager
from kernel_fixtures import execute, running_kernel

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the child's state from /proc"),
]

SERVICE = (
    "__import__('ipython_compact.kernel.extension', fromlist=['x']).extension_for(get_ipython()).service"
)
LINES = 5_000


@pytest.fixture()
def kernel(compact_dir: Path) -> Iterator[KernelManager]:
    with running_kernel(compact_dir) as km:
        yield km


def _expression(km: KernelManager, expr: str) -> Any:
    kc = km.client()
    kc.start_channels()
    try:
        reply = kc.execute_interactive(
            "", user_expressions={"r": expr}, timeout=60, output_hook=lambda m: None
        )
        result = reply["content"]["user_expressions"]["r"]
        assert result["status"] == "ok", result
        return ast.literal_eval(result["data"]["text/plain"])
    finally:
        kc.stop_channels()


FLOOD = (
    f"job = {SERVICE}.last_background\n"
    "import time as _t\n"
    "def _stat(pid):\n"
    "    try:\n"
    "        f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()\n"
    "    except FileNotFoundError:\n"
    "        return 'gone', 0\n"
    "    return f[0], int(f[11]) + int(f[12])  # state, CPU ticks used\n"
    "_deadline = _t.monotonic() + 30\n"
    "while _stat(job.pid)[0] not in ('T', 'Z', 'gone') and _t.monotonic() < _deadline:\n"
    "    _t.sleep(0.01)  # SIGSTOP lands when a runnable child is next scheduled\n"
    "at_start = _stat(job.pid)\n"
    f"for i in range({LINES}):\n    print(i, flush=True)\n"
    "at_end = _stat(job.pid)\nflood_done = True"
)


def _flood(kernel: KernelManager) -> tuple[dict[str, Any], list[str], list[str]]:
    kc = kernel.client()
    kc.start_channels()
    printed: list[str] = []
    states: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])
        elif msg["msg_type"] == "status":
            states.append(msg["content"]["execution_state"])

    try:
        reply = kc.execute_interactive(FLOOD, timeout=300, output_hook=hook)
    finally:
        kc.stop_channels()
    return reply, states, "".join(printed).split()


def test_an_output_flood_while_a_child_writes_the_snapshot_delivers_every_line_and_idle(
    kernel: KernelManager,
) -> None:
    execute(
        kernel,
        "%load_ext ipython_compact\n%config CompactConfig.snapshot_debounce = 0.0\n"
        "%config CompactConfig.background_snapshots = True",
    )
    # Enough for the child to take a while: 200 MB of random floats and 20,000 names.
    execute(
        kernel,
        "import numpy as np\nbig = np.random.default_rng(0).random(25_000_000)\n"
        "globals().update({f'v{k}': k for k in range(20_000)})",
        timeout=120,
    )
    for _attempt in range(5):  # the child may finish before the flood cell starts: then again
        deadline = time.monotonic() + 60
        while not _expression(kernel, f"{SERVICE}.background_busy"):  # the event: the child is writing
            assert time.monotonic() < deadline, "no background snapshot started within 60 s"
        reply, states, lines = _flood(kernel)
        assert reply["content"]["status"] == "ok", reply["content"]
        assert states[-1] == "idle"  # execute_interactive returns on the idle status of its own cell
        assert lines == [str(i) for i in range(LINES)]
        at_start, at_end = _expression(kernel, "(at_start, at_end)")
        if at_start[0] == "T":
            break
        execute(kernel, "big += 1")  # a new change for the next child to write
    else:
        raise AssertionError("the child finished before the flood cell in 5 attempts")
    # The flood overlapped the child, which was stopped (state T) and used no CPU while it ran.
    # One clock tick is allowed: /proc shows T as soon as the stopping child sets its state, and
    # the runtime of its last instructions is accounted when it is switched out, just after (seen
    # once at load 15: ('T', 0) then ('T', 1)). A child that wrote during the flood uses hundreds.
    assert at_end[0] == "T" and 0 <= at_end[1] - at_start[1] <= 1, (at_start, at_end)
    outcome = json.loads(
        _expression(
            kernel,
            f"__import__('json').dumps(({SERVICE}.settle_background(120), "
            f"{SERVICE}.last_snapshot_error, sorted({SERVICE}.snapshots.recorded_digests()))[1:])",
        )
    )
    assert outcome[0] is None and outcome[1], outcome
