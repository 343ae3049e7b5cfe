"""The server extension's persisted session: what the panel shows after a restart, from the log.

Found by trying Lab: after a kernel restart the panel said "No context figures yet" and "No
compactions yet" while the session held two compactions. The server now finds the notebook's
session as the kernel does and serves its figures and compactions; these tests use a real SQLite
log written by a real shell's extension.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ipython_compact.files import paths
from ipython_compact.jupyter.server_extension import notebook_session, persisted_session
from ipython_compact.kernel.extension import extension_for

FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"


def _cwd_for(root: Path) -> Any:
    return lambda rel: str(root / rel) if rel else str(root)


def test_the_session_is_found_as_the_kernel_finds_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    env = {k: v for k, v in os.environ.items() if k != "IPYTHON_COMPACT_SESSION"}
    assert notebook_session(str(root), _cwd_for(root), "sub/a.ipynb", env, tmp_path) == (
        f"notebook:{root / 'sub' / 'a.ipynb'}",
        "notebook",
    )
    assert notebook_session(
        str(root), _cwd_for(root), "a.ipynb", {**env, "IPYTHON_COMPACT_SESSION": "mine"}, tmp_path
    ) == ("mine", "env")


def test_figures_and_compactions_come_from_the_log(ip: Any) -> None:
    ip.run_line_magic("compact", f"import {FIXTURE}")
    status = ip.run_line_magic("compact", "status").data  # the kernel remembers its window and lines
    session = status["session"]
    served = persisted_session("a.ipynb", session, "env")
    assert served["exists"] is True
    shown = served["status"]
    assert (shown["window"], shown["blocking_line"], shown["background_line"]) == (
        status["window"],
        status["blocking_line"],
        status["background_line"],
    )
    assert shown["tokens"] == status["tokens"] and shown["compactions"] == status["compactions"] == 2
    # the estimate that counted them is named, as the kernel names its own (the gauge's tooltip)
    assert shown["estimate"] == status["estimate"] == "default (density)"
    ext = extension_for(ip)
    assert ext is not None
    assert [c["id"] for c in served["compactions"]] == [c["id"] for c in ext.service.summaries(50)]
    assert persisted_session("b.ipynb", "no-such-session", "notebook")["exists"] is False
    assert paths.database_path().exists()
