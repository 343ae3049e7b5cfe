"""``IPYTHON_COMPACT_SESSION`` holding bytes that are not UTF-8 (a Latin-1 shell, a mangled
launcher): every ``%compact`` command used to fail with a codec error. Real terminal IPython."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ipython_compact.kernel.binding import resolve
from ipython_compact.store import SessionStore

IPYTHON = Path(sys.executable).parent / "ipython"


def test_undecodable_session_name_binds_to_a_storable_name(tmp_path: Path) -> None:
    value = os.fsdecode(b"caf\xe9")  # how os.environ holds the byte 0xE9 (PEP 383)
    binding = resolve(
        configured="",
        env={"IPYTHON_COMPACT_SESSION": value},
        user_ns={},
        connection_file=None,
        data_dir=tmp_path,
    )
    assert binding.session == "caf\ufffd" and binding.source == "env"
    with SessionStore(tmp_path / "s.db") as store:
        store.create_session(binding.session)
    blank = resolve(
        configured="",
        env={"IPYTHON_COMPACT_SESSION": "   "},
        user_ns={},
        connection_file=None,
        data_dir=tmp_path,
    )
    assert blank.source != "env"


@pytest.mark.slow
def test_compact_commands_work_with_a_latin1_session_variable(tmp_path: Path) -> None:
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path / "data")}
    envb = {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
    envb[b"IPYTHON_COMPACT_SESSION"] = b"caf\xe9"
    done = subprocess.run(
        [str(IPYTHON), "--no-banner", "--simple-prompt"],
        input=b"%load_ext ipython_compact\n%compact status\n",
        capture_output=True,
        env=envb,
        timeout=120,
    )
    out = (done.stdout + done.stderr).decode("utf-8", "replace")
    assert "codec" not in out and "UsageError" not in out, out
    assert "caf\ufffd" in out, out
