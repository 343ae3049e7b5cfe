"""The loopback broker cannot be exhausted from outside (issue 31, red team four).

Found by attack: one thread per connection, no header timeout, no cap, all before the token was
checked: 1,100 idle connections without a token made the real caller fail with EMFILE (once the
host process aborted at its descriptor limit), and token-less connections that hung up left
BrokenPipe tracebacks on the host's stderr.

The broker runs in a child process with its descriptor limit lowered to 256 (a host at its
limit, reached quickly); the attack and the real caller are this process, over real sockets.
"""

from __future__ import annotations

import contextlib
import json
import resource
import select
import socket
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from ipython_compact.agent import loopback_client

pytestmark = pytest.mark.slow

BROKER = textwrap.dedent(
    """
    import json, logging, resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    from ipython_compact.agent.subcall_broker import SubcallBroker
    broker = SubcallBroker({"echo": lambda x: x}).start()
    print(json.dumps({"url": broker.url, "token": broker.token}), flush=True)
    sys.stdin.read()  # until the test closes our stdin
    broker.stop()
    """
)


@contextlib.contextmanager
def broker_process() -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", BROKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())
        yield proc, started["url"], started["token"]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def _idle_connections(port: int, count: int, established: int) -> list[socket.socket]:
    """``count`` connections that send nothing, returned once ``established`` of them are connected
    (connects do not wait: a full backlog must not hold this test; the host is then either at its
    descriptor limit with a full backlog, or has dropped the crowd)."""
    opened: list[socket.socket] = []
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        opened.append(s)
    poller = select.poll()
    for s in opened:
        poller.register(s, select.POLLOUT)
    done = 0
    give_up = time.monotonic() + 60
    while done < established and time.monotonic() < give_up:
        for fd, _ in poller.poll(1000):
            poller.unregister(fd)
            done += 1
    assert done >= established, f"only {done} of {count} connections were made"
    return opened


def test_the_real_caller_works_while_1100_idle_connections_are_open() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1400:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    with broker_process() as (proc, url, token):
        port = int(url.split(":")[2].split("/")[0])
        idle = _idle_connections(port, 1100, established=450)
        try:
            started = time.monotonic()
            assert loopback_client.call(url, token, "echo", ["still here"], timeout=20) == "still here"
            assert time.monotonic() - started < 20
            assert proc.poll() is None  # the host is alive
        finally:
            for s in idle:
                s.close()
        assert loopback_client.call(url, token, "echo", [2], timeout=20) == 2
        with pytest.raises(loopback_client.HostCallError, match="token"):
            loopback_client.call(url, "wrong", "echo", [3], timeout=20)


def test_a_silent_connection_is_dropped_after_the_header_timeout() -> None:
    with broker_process() as (proc, url, _token):
        port = int(url.split(":")[2].split("/")[0])
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.settimeout(60)
            started = time.monotonic()
            assert s.recv(1) == b""  # the broker hung up on us (never a reply)
            assert time.monotonic() - started < 60
        assert proc.poll() is None


def test_token_less_callers_that_hang_up_leave_no_tracebacks() -> None:
    with broker_process() as (proc, url, token):
        port = int(url.split(":")[2].split("/")[0])
        request = b"POST /call HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # hang up hard
            s.sendall(request)
            s.close()
        assert loopback_client.call(url, token, "echo", ["ok"], timeout=20) == "ok"
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()
        assert proc.wait(30) == 0
        err = proc.stderr.read()
        assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err, err
