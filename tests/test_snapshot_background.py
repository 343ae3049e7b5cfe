"""The forked snapshot child's hygiene (issue 21): what it may keep of the kernel it was forked from.

Real ``os.fork`` and real sockets: the child closes every inherited socket (the kernel's ZMQ
sockets must never outlive the kernel in an orphaned child, nor be written by it), closing its
copies costs the parent's sockets nothing, and the descriptor the child reports through stays open.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from ipython_compact.namespace.snapshot.background import close_sockets, fork_available, history_writing

pytestmark = pytest.mark.skipif(not fork_available(), reason="needs os.fork")


def test_the_child_closes_inherited_sockets_and_the_parents_keep_working() -> None:
    left, right = socket.socketpair()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe and leaves
            code = 1
            try:
                closed = close_sockets(keep=write_fd)
                still = [fd for fd in (left.fileno(), right.fileno(), listener.fileno()) if _is_open(fd)]
                os.write(write_fd, f"{closed} {still}".encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        report = os.read(read_fd, 1000).decode()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        closed, still = report.split(" ", 1)
        assert int(closed) >= 3 and still == "[]"
        left.sendall(b"ping")  # the child's close sent nothing: the pair still talks
        assert right.recv(4) == b"ping"
        with socket.create_connection(listener.getsockname(), timeout=5):
            pass  # and the listener still accepts
    finally:
        os.close(read_fd)
        left.close()
        right.close()
        listener.close()


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_the_kept_descriptor_and_plain_files_stay_open() -> None:
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            code = 1
            try:
                close_sockets(keep=write_fd)
                os.write(write_fd, b"ok" if _is_open(read_fd) else b"closed")
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        assert os.read(read_fd, 10) == b"ok"  # a pipe is not a socket: left alone
        os.waitpid(pid, 0)
    finally:
        os.close(read_fd)


def test_a_history_write_in_progress_defers_the_fork(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """IPython joins its history thread before every fork; while that thread writes (a locked
    history database can hold it for seconds) the kernel must not fork. A real shell's manager."""
    from IPython.core.history import HistoryManager
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))  # a history database of its own
    shell = InteractiveShell()
    hm = shell.history_manager
    assert isinstance(hm, HistoryManager)
    hm._restart_thread_if_stopped()
    if hm.save_thread is None:
        pytest.skip("this IPython writes history without a thread")
    assert hm.save_flag is not None
    hm.save_flag.clear()
    assert history_writing(shell) is False
    for lock in (hm.db_input_cache_lock, hm.db_output_cache_lock):
        with lock:  # what writeout_cache holds while it writes
            assert history_writing(shell) is True
    assert history_writing(shell) is False
    assert history_writing(object()) is False  # no history manager: nothing to wait for
