"""Terminal IPython at 80 columns (a real pty): `%compact now`'s checkpoint, `log`, `tree`,
`snapshots` and a long refusal are laid out for the terminal, wrapped at spaces, never cut
mid-word by the terminal (issue 35, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from terminal_pty import ipython_on_a_terminal, too_wide

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "pi" / "before-compaction.jsonl"
SCRIPT = f"""\
%load_ext ipython_compact
%compact import {FIXTURE}
%compact log -n 8
%compact tree
%config CompactConfig.compaction = {{'keep_recent_tokens': 500}}
%compact now
%compact now
%compact snapshots
"""


@pytest.mark.slow
def test_compact_output_fits_80_columns(tmp_path: Path) -> None:
    out = ipython_on_a_terminal(SCRIPT, 80, tmp_path)
    assert "Compaction " in out and "(manual): 185,087 →" in out, out[-3000:]
    assert "<anchors" in out and "Snapshots of terminal" in out and "Branch tips" in out
    assert not too_wide(out, 80), "\n".join(too_wide(out, 80))
    # the refusal wraps after "UsageError: " with its continuation lines under the text
    assert "UsageError: %compact now: nothing to compact in session 'terminal':" in out
    assert "\n            " in out.split("UsageError: ", 1)[1][:400]
    # the log's long path (56 characters) is broken inside its column, the only mid-word break
    assert "20272f99  message" in out


ANSWER = (
    "The readings were loaded into a list and checked: every value lies between zero and one "
    "million, the mean is close to half a million, and nothing repeats, so the series looks like "
    "the uniform sample the instrument should produce; the notebook keeps it as `readings`."
)


@pytest.mark.slow
def test_an_agent_turn_fits_80_columns(tmp_path: Path) -> None:
    """``%%agent`` in terminal IPython: the settings line, the one-line events and the answer wrap
    at words (the terminal broke "AgentConfig.contex / t_window" and the answer mid-word)."""
    from ipython_compact.testing.model_server import ModelServer, Reply

    with ModelServer([Reply(ANSWER)]) as srv:
        script = (
            "%load_ext ipython_compact\n"
            "%config AgentConfig.model = 'a-model-with-a-rather-long-name'\n"
            f"%config AgentConfig.base_url = '{srv.base_url}'\n"
            "%config AgentConfig.context_window = 12000\n"
            "%%agent\nCheck the readings please.\n\n\n"
        )
        out = ipython_on_a_terminal(script, 80, tmp_path)
    assert "from AgentConfig.context_window" in " ".join(out.split()), out[-2000:]
    assert " ".join(ANSWER.split()) in " ".join(out.split()), out[-2000:]
    assert not too_wide(out, 80), "\n".join(too_wide(out, 80))
