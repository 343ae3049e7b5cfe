"""A ``%%agent`` cell in JupyterLab (real server, real kernel, real Chromium, local model server):
the transcript fills one output in place — each tool call as highlighted code with its output
folded in ``<details>``, each compaction as one line — and the answer follows in full, rendered
as Markdown, with the model's HTML shown as text (never an element). Screenshot: agent-transcript.png.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from lab_driver import run_cell

from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply, ToolCall

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NB = "agent-transcript.ipynb"
ANSWER = (
    "The best month was **March**.\n\n| month | sales |\n|---|---|\n| March | 1234 |\n\n"
    'Note: <img src=x onerror="window.__agentPwned=1"> ' + " ".join(f"detail{i}" for i in range(120))
)


@pytest.fixture(scope="module")
def notebooks() -> tuple[str, ...]:
    return (NB,)


def reply(req: RecordedRequest) -> Reply:
    if req.messages[-1]["role"] == "tool":
        return Reply(text=ANSWER)
    code = "sales = {'Jan': 900, 'Feb': 1100, 'Mar': 1234}\nfor m, v in sales.items():\n    print(m, v)\n"
    return Reply(text="Let me look.", tool_calls=(ToolCall("python", {"code": code + "print('x' * 300)"}),))


def test_agent_transcript_in_jupyterlab(page: Any, shot: Callable[[str], None]) -> None:
    with ModelServer(reply, model="local", context_window=60000) as srv:
        run_cell(page, "%load_ext ipython_compact")
        run_cell(
            page, f"%config AgentConfig.model = 'local'\n%config AgentConfig.base_url = '{srv.base_url}'"
        )
        run_cell(page, "%%agent\nWhich month sold best?")
    cell = page.locator(".jp-Cell").filter(has_text="Which month sold best?").first
    outputs = cell.locator(".jp-OutputArea-output")
    outputs.nth(1).wait_for()  # the transcript (updated in place) and the answer
    assert outputs.count() == 2
    transcript, answer = outputs.nth(0), outputs.nth(1)
    card_window = "window 60,000 tokens, from the server's model card (max_model_len)"
    transcript.filter(has_text=card_window).wait_for()
    assert transcript.locator("span[style*='color']").count() > 3  # highlighted code
    details = transcript.locator("details")
    assert details.count() == 1 and "output (4 lines)" in details.locator("summary").inner_text()
    assert not details.locator("pre").is_visible()  # folded until opened
    assert answer.locator("strong", has_text="March").count() == 1 and answer.locator("table").count() == 1
    assert "detail119" in answer.inner_text()  # in full
    assert answer.locator("img").count() == 0 and page.evaluate("() => window.__agentPwned") is None
    assert "<img src=x" in answer.inner_text()  # shown as text
    details.locator("summary").click()
    cell.scroll_into_view_if_needed()
    shot("agent-transcript")
