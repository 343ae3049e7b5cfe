"""Fixtures every test gets, and the one rule they enforce: no test touches the real data directory.

Why autouse: a test that forgets to point ``IPYTHON_COMPACT_DIR`` somewhere would read or write
``~/.local/share/ipython-compact`` (the developer's own sessions, snapshots and signing key) and
would see state left by earlier runs. So every test starts with the variable set to an empty
temporary directory of its own and ``IPYTHON_COMPACT_SESSION`` unset; a test that needs another
binding sets it itself (monkeypatch or a subprocess environment). Subprocesses and kernels started
with ``os.environ`` inherit the temporary directory too.

Builders shared by several test modules live in ``tests/builders.py``; kernel helpers in
``tests/kernel_fixtures.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def compact_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The data directory this test runs against (empty, private to the test)."""
    directory = tmp_path_factory.mktemp("compact-data")
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(directory))
    monkeypatch.delenv("IPYTHON_COMPACT_SESSION", raising=False)
    return directory
