"""The agent API's first errors name the real cause, not the model card.

Found by trying it as a new user: a server that is down, a model name the server does not serve
and a 401 all raised "cannot tell the context window of 'X': the server's /v1/models card states
none"; with ``context_window`` given a dead server said "APIConnectionError: Connection error."
with no URL. Real ``openai`` client, real local server (``ModelServer``), a real closed port.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from ipython_compact.agent.events import TurnFailed
from ipython_compact.agent.kernel_tool import JupyterKernel
from ipython_compact.agent.loop import Agent
from ipython_compact.agent.model_resolution import ModelServerError
from ipython_compact.testing.model_server import ModelServer, Reply


@pytest.fixture(autouse=True)
def _no_env_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IPYTHON_COMPACT_CONTEXT_WINDOW", raising=False)


@pytest.fixture(scope="module")
def kernel() -> Iterator[JupyterKernel]:
    with JupyterKernel(extension=None) as k:
        yield k


def _dead_url() -> str:
    with ModelServer() as srv:
        url = srv.base_url
    return url  # stopped: nothing listens on its port now


def test_a_server_that_is_down_is_named_by_its_url(tmp_path: Path) -> None:
    url = _dead_url()
    with pytest.raises(ModelServerError) as info:
        Agent(model="m", base_url=url, store=tmp_path / "s.db", subcalls=False)
    message = str(info.value)
    assert message.startswith(
        f"cannot list the server's models: cannot reach the model server at {url}/models"
    )
    assert "card" not in message


def test_a_model_the_server_does_not_serve_lists_the_ones_it_does(tmp_path: Path) -> None:
    with ModelServer(model="qwen-7b", context_window=8000) as srv, pytest.raises(ModelServerError) as info:
        Agent(model="gpt-nothing", base_url=srv.base_url, store=tmp_path / "s.db", subcalls=False)
    assert re.search(
        r"does not serve the model 'gpt-nothing'; it serves: qwen-7b\. Pass one of them as "
        r"model=",
        str(info.value),
    ), str(info.value)


def test_a_401_states_the_status(tmp_path: Path) -> None:
    with ModelServer(api_key="right", context_window=8000) as srv, pytest.raises(ModelServerError) as info:
        Agent(
            model="local-model",
            base_url=srv.base_url,
            api_key="wrong",
            store=tmp_path / "s.db",
            subcalls=False,
        )
    assert "HTTP 401 from" in str(info.value) and "check the API key" in str(info.value)


def test_a_listed_model_without_a_window_asks_for_context_window(tmp_path: Path) -> None:
    with ModelServer(model="local-model") as srv, pytest.raises(ModelServerError) as info:
        Agent(model="local-model", base_url=srv.base_url, store=tmp_path / "s.db", subcalls=False)
    assert "serves 'local-model' but its /models entry states no context window" in str(info.value)
    assert "pass context_window=..." in str(info.value)


def test_with_a_window_given_a_dead_server_fails_the_turn_naming_the_url(
    tmp_path: Path, kernel: JupyterKernel
) -> None:
    url = _dead_url()
    client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
    agent = Agent(
        model="m", client=client, context_window=8000, store=tmp_path / "s.db", subcalls=False, kernel=kernel
    )
    try:
        with pytest.raises(TurnFailed) as failed:
            agent.ask("hello")
        result = failed.value.result
    finally:
        agent.close()
    assert result.stopped == "error"
    assert result.text.startswith(
        f"The model request failed: cannot reach the model server at {url}/chat/completions"
    )


def test_a_model_not_found_on_request_lists_the_served_models(tmp_path: Path, kernel: JupyterKernel) -> None:
    refusal = Reply(
        status=404,
        error_message="The model `gpt-nothing` does not exist.",
        error_type="NotFoundError",
        error_code="model_not_found",
    )
    with ModelServer([refusal], model="qwen-7b") as srv:
        agent = Agent(
            model="gpt-nothing",
            base_url=srv.base_url,
            context_window=8000,
            store=tmp_path / "s.db",
            subcalls=False,
            kernel=kernel,
        )
        try:
            with pytest.raises(TurnFailed) as failed:
                agent.ask("hello")
            result = failed.value.result
        finally:
            agent.close()
    assert result.stopped == "error"
    assert (
        "HTTP 404 from" in result.text
        and ("the server serves: qwen-7b; pass one of them as the model") in result.text
    )
