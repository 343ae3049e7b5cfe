"""A newcomer follows README.md verbatim: the notebook lines in a real kernel (jupyter_client), the
agent snippet against a local OpenAI-compatible server, and ``%compact`` in terminal IPython.

What must hold: every README line runs (the only error is the placeholder recall id, and it says
what to type); each result is a display with text/plain, text/html and text/markdown; the HTML
of anything user-named is escaped; the terminal text has no raw JSON or ``null``."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from queue import Empty
from typing import Any

import pytest
from kernel_fixtures import running_kernel

from ipython_compact.testing.model_server import Reply, ToolCall

README = Path(__file__).parent.parent / "README.md"
FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
EVIL = "<img src=x onerror=alert(1)>"


def readme_block(language: str, marker: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    (block,) = [b for b in blocks if marker in b]
    return str(block)


def notebook_lines() -> list[str]:
    """The README's notebook block, one magic per line, comments stripped as IPython would."""
    lines = []
    for raw in readme_block("python", "%load_ext ipython_compact").splitlines():
        code = re.sub(r"\s+#.*$", "", raw).strip()
        if code:
            lines.append(code)
    return lines


def run_cell(km: Any, code: str, timeout: float = 60.0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The execute_reply content and every display/execute_result/error message of one cell."""
    kc = km.client()
    kc.start_channels()
    try:
        msg_id = kc.execute(code)
        outputs: list[dict[str, Any]] = []
        while True:
            try:
                msg = kc.get_iopub_msg(timeout=timeout)
            except Empty:  # pragma: no cover - a hung kernel
                pytest.fail(f"no output for {code!r} within {timeout}s")
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] in ("display_data", "execute_result", "error", "stream"):
                outputs.append({"type": msg["msg_type"], **msg["content"]})
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        reply = kc.get_shell_msg(timeout=timeout)
        return dict(reply["content"]), outputs
    finally:
        kc.stop_channels()


@pytest.mark.slow
def test_readme_notebook_lines_run_verbatim_in_a_real_kernel(tmp_path: Path) -> None:
    lines = notebook_lines()
    assert lines[0] == "%load_ext ipython_compact" and lines[-1] == "%compact --help"
    with running_kernel(tmp_path / "data", IPYTHON_COMPACT_SESSION="readme") as km:
        setup, _ = run_cell(
            km,
            f"import numpy as np\nprices = np.arange(12.0)\n%load_ext "
            f"ipython_compact\n%compact import {FIXTURE}",
        )
        assert setup["status"] == "ok"  # a session with history, as after some %%agent turns
        for line in lines:
            reply, outputs = run_cell(km, line)
            if line.startswith("%compact recall 1a2b3c4d"):
                # the placeholder id from the README: a clear usage error, not a traceback
                assert reply["status"] == "error" and reply["ename"] == "UsageError"
                assert "no entry '1a2b3c4d'" in reply["evalue"] and "%compact log" in reply["evalue"]
                continue
            assert reply["status"] == "ok", f"{line}: {reply.get('ename')}: {reply.get('evalue')}"
            if line == "%load_ext ipython_compact":
                continue
            if line.endswith("--help"):  # help is printed, never the cell's Out value
                assert [o["type"] for o in outputs] == ["stream"] and "usage: %compact" in outputs[0][
                    "text"
                ], outputs
                continue
            shown = [o for o in outputs if o["type"] in ("display_data", "execute_result")]
            assert len(shown) == 1, f"{line}: {outputs}"
            data = shown[0]["data"]
            assert {"text/plain", "text/html", "text/markdown"} <= set(data), line
            plain = data["text/plain"]
            if "application/vnd.ipython-compact.summary+json" not in data:  # a summary may quote /dev/null
                assert not re.search(r"(^|\s)null($|\s)", plain) and '{"' not in plain, f"{line}:\n{plain}"
            assert "<img" not in data["text/html"] and "<script" not in data["text/html"], line
            if line.startswith("%compact now Keep"):
                assert "application/vnd.ipython-compact.summary+json" in data
                assert re.match(r"Compaction \w+ \(manual\): \d{1,3}(,\d{3})+ → [\d,]+ tokens", plain)
        run_cell(km, f"%compact pin {EVIL}")
        reply, outputs = run_cell(km, "%compact pin --list")
        (pins,) = [o for o in outputs if o["type"] == "execute_result"]
        assert EVIL in pins["data"]["text/plain"]
        assert "&lt;img" in pins["data"]["text/html"] and "<img" not in pins["data"]["text/html"]


@pytest.mark.slow
def test_readme_agent_snippet_runs_verbatim(tmp_path: Path) -> None:
    """The 'For agent builders' block, unchanged, against a local server set through the
    environment variables openai.OpenAI() reads."""
    snippet = readme_block("python", "Agent(")
    script = [
        Reply(tool_calls=[ToolCall("python", {"code": "best = 'March'\nprint(best)"})]),
        "The best month is March.",
    ]
    code = (
        "import os, sys\n"
        "from ipython_compact.testing.model_server import ModelServer, Reply, ToolCall\n"
        f"with ModelServer(script={script!r}) as srv:\n"
        "    os.environ['OPENAI_BASE_URL'] = srv.base_url\n"
        "    os.environ['OPENAI_API_KEY'] = 'test'\n"
        f"    exec(compile({snippet!r}, 'README', 'exec'), {{}})\n"
        "    print('requests', len([r for r in srv.requests if r.messages]))\n"
    )
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path / "data")}
    env.pop("OPENAI_BASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == ["The best month is March.", "requests 2"]
    assert (tmp_path / "sessions.db").is_file() and (tmp_path / "snapshots").is_dir()


@pytest.mark.slow
def test_terminal_ipython_reads_well(tmp_path: Path) -> None:
    """`printf '...' | ipython --simple-prompt`: aligned tables, separators, no JSON dumps."""
    script = (
        "\n".join(
            [
                "%load_ext ipython_compact",
                # No automatic snapshot: one that lands after `x = 5` (debounced, so on a loaded machine it
                # may or may not) would leave the explicit snapshot below "Unchanged x" instead of "Written
                # x".
                "%config CompactConfig.auto_snapshot = False",
                f"%compact import {FIXTURE}",
                "x = 5",
                "%compact status",
                "%compact log -n 3",
                "%compact snapshot",
                "%compact pin --list",
                "%compact status --bogus",
            ]
        )
        + "\n"
    )
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path / "data"), "IPYTHON_COMPACT_SESSION": "term"}
    ipython = Path(sys.executable).parent / "ipython"
    done = subprocess.run(
        [
            str(ipython),
            "--simple-prompt",
            "--no-banner",
            "--colors=NoColor",
            "--HistoryManager.enabled=False",
        ],
        input=script,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    out = done.stdout
    assert "Traceback" not in out + done.stderr and "null" not in out
    assert "imported  1,002" in out
    assert re.search(r"^Context +[\d,]+ tokens in a 128,000-token window", out, re.M)
    assert re.search(r"^Written +x$", out, re.M)
    log = out.split("Last 3 entries of term\n", 1)[1].splitlines()
    assert log[0].split() == ["id", "kind", "role", "text"]
    rows = [row for row in log[1:] if row[:1].strip()]  # an entry's row; its text may wrap below it
    assert [len(row) > 0 and row[:8].isalnum() for row in rows[:3]] == [True, True, True]
    assert (
        "UsageError: %compact status: unknown option '--bogus'. Type `%compact status --help` for usage."
    ) in (done.stderr + out)


def test_readme_command_line_examples_run(tmp_path: Path) -> None:
    """The 'On the command line' block, in order, with its placeholder file replaced by a pi fixture
    and the optional `[...]` parts left out; run from the repository root as the README assumes."""
    block = readme_block("bash", "ipython-compact verify")
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path / "data")}
    commands = []
    for raw in block.splitlines():
        line = re.sub(r"\s+#.*$", "", raw).strip()
        line = re.sub(r"\s*\[[^\]]*\]", "", line)
        line = re.sub(r"(?<=import )session\.jsonl", str(FIXTURE), line)
        if line:
            commands.append(line)
    assert [c.split()[1] for c in commands] == ["import", "plan", "context", "compact", "recall", "verify"]
    script = Path(sys.executable).parent / "ipython-compact"
    outputs = {}
    for line in commands:
        argv = [str(script), *shlex.split(line)[1:]]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=README.parent)
        assert done.returncode == 0, f"{line}\n{done.stderr}"
        assert "Traceback" not in done.stderr
        outputs[line.split()[1]] = done.stdout
    assert outputs["import"].startswith("imported 1,002 entries (pi) into new session 'work'")
    assert json.loads(outputs["plan"])["compactable"] is True
    assert outputs["compact"].startswith("compacted session 'work': ")
    assert outputs["verify"].startswith("ok: ")


def test_read_only_data_dir_in_terminal_ipython(tmp_path: Path) -> None:
    """A read-only filesystem (tmpfs remounted read-only: root ignores file modes). Skipped without
    the rights to mount. `%compact` says why and what to do; cells keep running."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(mnt)], capture_output=True).returncode
    ):
        pytest.skip("mounting a read-only tmpfs needs root")
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(mnt), "IPYTHON_COMPACT_SESSION": "ro"}
    try:
        subprocess.run(
            [str(Path(sys.executable).parent / "ipython-compact"), "import", str(FIXTURE), "-s", "ro"],
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        script = "%load_ext ipython_compact\nx = 41\n%compact status\nprint(x + 1)\n"
        done = subprocess.run(
            [
                str(Path(sys.executable).parent / "ipython"),
                "--simple-prompt",
                "--no-banner",
                "--colors=NoColor",
                "--HistoryManager.enabled=False",
            ],
            input=script,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    both = done.stdout + done.stderr
    assert "Traceback" not in both
    assert f"UsageError: %compact status: {mnt}/sessions.db: the directory {mnt} is read-only" in both
    assert "point IPYTHON_COMPACT_DIR at a writable directory" in both and "42" in done.stdout
