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

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The ``location`` fixture (a log on each engine: SQLite, and PostgreSQL started by the tests), and
# ``s3_url`` (a bucket on moto's S3 server started by the tests).
pytest_plugins = ["llama_server", "postgres_server", "s3_server"]


@pytest.fixture(autouse=True)
def compact_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The data directory this test runs against (empty, private to the test)."""
    directory = tmp_path_factory.mktemp("compact-data")
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(directory))
    monkeypatch.delenv("IPYTHON_COMPACT_SESSION", raising=False)
    return directory


@pytest.fixture()
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The process's one test IPython shell, emptied of user names, with the extension loaded and
    bound to a session of this test's own; unloaded afterwards (its ``compaction`` config reset,
    since the shell's config outlives the extension)."""
    from IPython import get_ipython  # deferred: most tests never start a shell
    from IPython.testing.globalipapp import start_ipython

    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("IPYTHON_COMPACT_SESSION", f"shell-{tmp_path.name}")
    shell = start_ipython() or get_ipython()
    for name in [n for n in shell.user_ns if not n.startswith("_") and n not in shell.user_ns_hidden]:
        del shell.user_ns[name]
    shell.run_line_magic("load_ext", "ipython_compact")
    yield shell
    shell.run_line_magic("config", "CompactConfig.compaction = {}")
    shell.run_line_magic("unload_ext", "ipython_compact")
