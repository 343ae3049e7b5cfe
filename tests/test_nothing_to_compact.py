"""A refusal to compact names its reason: the entry that fills the tail, its size, why it cannot be
cut, what would help — and names the tail budget exactly as the user can set it (issue 35, item 2).

The pi fixture ends in ``20272f99``, a ``bashExecution`` of about 17k tokens. After one compaction
with a 500-token tail, the kept tail starts at that entry, right after the checkpoint."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from ipython_compact.kernel.extension import extension_for

FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
SCRIPT = Path(sys.executable).parent / "ipython-compact"
BIG = "20272f99"


def _refusal(ip: Any, line: str) -> str:
    with pytest.raises(UsageError) as caught:
        ip.run_line_magic("compact", line)
    return str(caught.value)


def test_the_refusal_names_the_big_entry_and_how_to_set_the_tail(ip: Any) -> None:
    ip.run_line_magic("compact", f"import {FIXTURE}")
    ip.run_line_magic("config", "CompactConfig.compaction = {'keep_recent_tokens': 500}")
    ip.run_line_magic("compact", "now")
    text = _refusal(ip, "now")
    assert f"one entry, {BIG} (bashExecution, " in text, text
    assert re.search(r"bashExecution, (1\d,\d{3}) tokens\), is larger than the whole recent tail", text), text
    assert "never cut in half" in text and "directly follows the last compaction's checkpoint" in text
    assert "once about 500 tokens of newer conversation follow the entry" in text
    assert "CompactConfig.compaction['keep_recent_tokens'] 500" in text
    # the form the message names works as named, and keeps the other overrides and defaults
    form = re.search(r"`%config (CompactConfig\.compaction = \{.*?\})`", text)
    assert form is not None, text
    ip.run_line_magic("config", form.group(1).replace("N}", "400}"))
    ext = extension_for(ip)
    assert ext is not None
    settings = ext.service.settings()
    assert (settings.keep_recent_tokens, settings.reserve_tokens) == (400, 16384)


def test_the_named_form_repeats_the_users_other_overrides(ip: Any) -> None:
    ip.run_line_magic("config", "CompactConfig.compaction = {'reserve_tokens': 9000}")
    ext = extension_for(ip)
    assert ext is not None
    form = ext.service.keep_setting_form()
    assert "`%config CompactConfig.compaction = {'reserve_tokens': 9000, 'keep_recent_tokens': N}`" in form


def test_a_session_without_conversation_says_so(ip: Any) -> None:
    text = _refusal(ip, "now")
    assert "it holds no conversation yet" in text, text
    assert "%compact import FILE.jsonl" in text


def _big_first_entry(path: Path) -> Path:
    """A pi session whose first message (a pasted log of ~6k tokens) is followed by one short reply."""
    pasted = " ".join(f"line{i} ok" for i in range(3000))
    rows = [
        {"type": "session", "id": "s1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/tmp"},
        {
            "type": "message",
            "timestamp": "2025-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": f"look at this: {pasted}"}]},
        },
        {
            "type": "message",
            "timestamp": "2025-01-01T00:00:02.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "It is all ok."}]},
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_the_cli_names_the_entry_and_its_own_option(tmp_path: Path) -> None:
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path)}

    def cli(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == code, done.stderr
        return done

    cli("import", str(_big_first_entry(tmp_path / "pasted.jsonl")), "-s", "work")
    done = cli("compact", "-s", "work", "--keep-recent-tokens", "500", code=2)
    assert "(user, " in done.stderr and "is larger than the whole recent tail" in done.stderr, done.stderr
    assert "directly follows the start of the session" in done.stderr
    assert "(--keep-recent-tokens 500)" in done.stderr and "keep_recent_tokens" not in done.stderr
    assert "ipython-compact log -s work -n 10" in done.stderr
    plan = cli("plan", "-s", "work", "--keep-recent-tokens", "500").stdout
    assert "is larger than the whole recent tail kept verbatim (--keep-recent-tokens 500)" in " ".join(
        plan.split()
    ), plan
