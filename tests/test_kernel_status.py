"""``%compact status`` (and the panel's ``status`` op) report the session that is compacting.

Found by a user: with ``%%agent … --window 2500`` six compactions happened at the 400/1000-token
lines while the panel's gauge showed "1,349 / 128,000" (the extension's configured window) and
disagreed with the timeline. A live agent's window, lines and estimate are the ones that decide
its compactions, so status reports those; a plain notebook (nothing talks to a model) says so.
"""

from __future__ import annotations

from typing import Any

import pytest

from ipython_compact.kernel.comm_handler import CommHandler
from ipython_compact.kernel.extension import extension_for
from ipython_compact.testing.model_server import ModelServer, Reply

SMALL = "{'reserve_tokens': 1500, 'background_tokens': 600, 'keep_recent_tokens': 200}"


def _status(ip: Any) -> dict[str, Any]:
    data: dict[str, Any] = ip.run_line_magic("compact", "status").data
    return data


def test_a_plain_notebook_has_no_conversation_and_config_figures(ip: Any) -> None:
    status = _status(ip)
    assert status["conversation"] is False
    assert status["source"] == "config" and status["model"] is None
    assert status["window"] == 128_000 and status["tokens"] == 0


def test_with_a_live_agent_status_shows_the_agents_window_lines_and_estimate(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.run_line_magic("config", f"CompactConfig.compaction = {SMALL}")
    with ModelServer(lambda req: Reply(text="Noted: " + "the quarterly totals look fine. " * 20)) as srv:
        ip.run_cell_magic(
            "agent", f"--model local --base-url {srv.base_url} --window 2500", "Check the totals."
        )
    assert "%%agent:" not in capsys.readouterr().out
    ext = extension_for(ip)
    assert ext is not None and ext.agent_magics is not None and ext.agent_magics.current is not None
    agent = ext.agent_magics.current
    status = _status(ip)
    assert status["source"] == "agent" and status["model"] == "openai/local"
    assert status["conversation"] is True
    # The agent's own numbers: --window 2500, its lines (2500 - 1500 reserve; minus 600), its estimate.
    assert (status["window"], status["blocking_line"], status["background_line"]) == (2500, 1000, 400)
    assert status["tokens"] == agent.status()["tokens"] > 0
    assert status["session"] == agent.session
    # The panel asks the same question over the comm and gets the same figures.
    reply = CommHandler(ext.service).handle({"v": 1, "id": "s", "op": "status"})
    assert reply["ok"] and (reply["window"], reply["blocking_line"], reply["tokens"]) == (
        2500,
        1000,
        status["tokens"],
    )


def test_an_agent_on_another_session_moves_status_and_the_timeline_there(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with ModelServer(lambda req: Reply(text="ok")) as srv:
        ip.run_cell_magic(
            "agent", f"--model local --base-url {srv.base_url} --window 64000 --session side-notes", "hello"
        )
    ext = extension_for(ip)
    assert ext is not None
    assert _status(ip)["session"] == "side-notes"
    assert ext.service.context_session() == "side-notes"
    assert ext.service.summaries() == []  # the side session has no compaction yet
