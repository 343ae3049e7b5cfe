"""Red team 3, items 2 and 7: files the package writes are never written through a planted link,
concurrent writers never rename each other's temporary file away, and a FIFO, device, directory
or dangling symlink where a file belongs is refused in one line instead of hanging or creating
something elsewhere. Real files, real subprocesses."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ipython_compact.files.safety import UnsafePathError, check_regular, read_regular, replace_atomically
from ipython_compact.kernel import binding
from ipython_compact.store import SessionStore, StoreError

SCRIPT = Path(sys.executable).parent / "ipython-compact"


def cli(data: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(data)}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=timeout)


# ---------------------------------------------------------------- the primitives, table-driven


def _make(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(path.parent / "nowhere" / "target")
    elif kind == "file":
        path.write_text("{}")
    elif kind == "link-to-file":
        (path.parent / "real").write_text("{}")
        path.symlink_to(path.parent / "real")


@pytest.mark.parametrize(
    ("kind", "result"),
    [
        ("absent", False),
        ("file", True),
        ("link-to-file", True),
        ("fifo", "a FIFO"),
        ("directory", "a directory"),
        ("dangling", "does not exist"),
    ],
)
def test_check_regular_says_what_lies_at_a_path(tmp_path: Path, kind: str, result: bool | str) -> None:
    path = tmp_path / "f"
    _make(kind, path)
    if isinstance(result, bool):
        assert check_regular(path, "the file") is result
    else:
        with pytest.raises(UnsafePathError, match=result):
            check_regular(path, "the file")


def test_devices_are_refused() -> None:
    with pytest.raises(UnsafePathError, match="character device"):
        check_regular("/dev/null", "the session database")
    with pytest.raises(UnsafePathError, match="character device"):
        read_regular("/dev/zero", "the bindings file", max_bytes=10)


def test_read_regular_never_blocks_on_a_fifo_and_bounds_the_size(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafePathError, match="FIFO"):
        read_regular(tmp_path / "fifo", "the file", max_bytes=10)  # returns at once: nobody writes to it
    (tmp_path / "big").write_bytes(b"x" * 11)
    with pytest.raises(UnsafePathError, match="more than the 10 allowed"):
        read_regular(tmp_path / "big", "the file", max_bytes=10)
    assert read_regular(tmp_path / "absent", "the file", max_bytes=10) is None


def test_replace_atomically_replaces_a_link_never_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "out").symlink_to(victim)
    replace_atomically(tmp_path / "out", b"new", what="the file")
    assert victim.read_text() == "precious"
    assert not (tmp_path / "out").is_symlink() and (tmp_path / "out").read_bytes() == b"new"
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# ---------------------------------------------------------------- bindings.json (item 2, item 7)


@pytest.mark.parametrize("planted", [("bindings.tmp", "bindings.json.tmp"), ("bindings.json",)])
def test_a_switch_never_writes_through_a_planted_symlink(tmp_path: Path, planted: tuple[str, ...]) -> None:
    """A link at the old fixed temporary name had its target overwritten; a link at the file
    itself is replaced by the new file, never written through."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    data = tmp_path / "data"
    data.mkdir()
    for name in planted:
        (data / name).symlink_to(victim)
    binding.remember_switch(data, "kernel:k1", "mine")
    assert victim.read_text() == "precious"
    bindings = data / "bindings.json"
    assert not bindings.is_symlink() and json.loads(bindings.read_text()) == {"kernel:k1": "mine"}
    assert stat.S_IMODE(bindings.stat().st_mode) == 0o600


def _switch_many(data: str, worker: int, count: int) -> None:
    for i in range(count):
        binding.remember_switch(Path(data), f"kernel:w{worker}", f"s{i}")


@pytest.mark.slow
def test_concurrent_switches_from_three_processes_all_land(tmp_path: Path) -> None:
    """The fixed temporary name made about 1 in 3 switches fail with FileNotFoundError; the
    read-modify-write also lost other processes' keys. Every switch lands, none is lost."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_switch_many, args=(str(tmp_path), w, 150)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert json.loads((tmp_path / "bindings.json").read_text()) == {f"kernel:w{w}": "s149" for w in range(3)}
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling"])
def test_a_special_bindings_file_is_reported_not_waited_on(tmp_path: Path, kind: str) -> None:
    _make(kind, tmp_path / "bindings.json")
    done: list[binding.Binding] = []
    t = threading.Thread(
        target=lambda: done.append(
            binding.resolve(
                configured="", env={}, user_ns={}, connection_file="/x/kernel-1.json", data_dir=tmp_path
            )
        ),
        daemon=True,
    )
    t.start()
    t.join(timeout=30)
    assert done, "resolve blocked on bindings.json"
    assert done[0].session == "kernel:kernel-1" and done[0].problem is not None
    assert "bindings.json" in done[0].problem and "ignored" in done[0].problem
    with pytest.raises(UnsafePathError):
        binding.remember_switch(tmp_path, "kernel:kernel-1", "other")
    assert os.path.lexists(tmp_path / "bindings.json")  # left as it was


@pytest.mark.slow
def test_load_ext_with_a_fifo_bindings_file_loads_and_says_why_switches_are_ignored(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "bindings.json")
    code = (
        "from IPython.testing.globalipapp import start_ipython\n"
        "ip = start_ipython()\n"
        "ip.run_line_magic('load_ext', 'ipython_compact')\n"
        "ip.run_line_magic('compact', 'session')\n"
        "print('LOADED')\n"
    )
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path)}
    env.pop("IPYTHON_COMPACT_SESSION", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "LOADED" in out.stdout, out.stderr[-2000:]
    assert "bindings.json" in out.stderr and "FIFO" in out.stderr


# ---------------------------------------------------------------- the database path (item 7)


@pytest.mark.parametrize(
    ("kind", "expect"),
    [
        ("fifo", "FIFO"),
        ("dangling", "does not exist"),
    ],
)
def test_the_store_refuses_a_special_database_path(tmp_path: Path, kind: str, expect: str) -> None:
    db = tmp_path / "sessions.db"
    _make(kind, db)
    with pytest.raises(StoreError, match=expect):
        SessionStore(db)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "dangling", "devnull"])
def test_every_cli_command_refuses_a_special_db_in_one_line(tmp_path: Path, kind: str) -> None:
    db = Path("/dev/null") if kind == "devnull" else tmp_path / "sessions.db"
    if kind != "devnull":
        _make(kind, db)
    for command in (["sessions"], ["verify"], ["log"]):
        out = cli(tmp_path, "--db", str(db), *command, timeout=60)
        assert out.returncode == 2, (command, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr and str(db) in out.stderr
    assert not Path("/dev/null-journal").exists() and not Path("/dev/null-wal").exists()
    assert not (tmp_path / "nowhere").exists()


# ---------------------------------------------------------------- export targets


@pytest.mark.slow
def test_export_refuses_a_fifo_target_and_leaves_it(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.db")
    store.ensure_session("s")
    store.append("s", "message", {"message": {"role": "user", "content": "hi"}})
    store.close()
    os.mkfifo(tmp_path / "out.jsonl")
    out = cli(
        tmp_path,
        "--db",
        str(tmp_path / "sessions.db"),
        "export",
        "-s",
        "s",
        "-o",
        str(tmp_path / "out.jsonl"),
    )
    assert out.returncode != 0 and "FIFO" in out.stderr and "Traceback" not in out.stderr
    assert stat.S_ISFIFO(os.lstat(tmp_path / "out.jsonl").st_mode)
