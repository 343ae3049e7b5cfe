"""Where a ``%%agent`` cell's model, server and window come from: the line, ``AgentConfig``,
the server's ``/v1/models`` card, ``CompactConfig`` — table-driven, plus the real openai client
against the local model server."""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

import openai
import pytest

from ipython_compact.kernel.agent_settings import ServerNotAnswering, resolve, server_window, window_from_card
from ipython_compact.testing.model_server import ModelServer


@pytest.mark.parametrize(
    ("card", "found"),
    [
        ({"id": "m", "max_model_len": 32768}, (32768, "max_model_len")),
        ({"id": "m", "context_length": 8192}, (8192, "context_length")),
        ({"id": "m", "context_window": 200000}, (200000, "context_window")),
        ({"id": "m", "meta": {"context_length": 4096}}, (4096, "context_length")),
        ({"id": "m", "max_model_len": 0, "context_length": 1024}, (1024, "context_length")),
        ({"id": "m", "max_model_len": "32768"}, None),  # a string is not a window
        ({"id": "m", "max_model_len": True}, None),
        ({"id": "m"}, None),
    ],
)
def test_window_from_card(card: dict[str, Any], found: tuple[int, str] | None) -> None:
    assert window_from_card(card) == found


AGENT = SimpleNamespace(model="", base_url="", context_window=0, max_steps=12, stream=False)
COMPACT = SimpleNamespace(model="", base_url="", context_window=128_000)


@pytest.mark.parametrize(
    ("opts", "agent", "compact", "card", "expected"),
    [
        (
            {"model": "a", "window": 3000},
            {},
            {},
            (9, "max_model_len"),
            ("a", None, 3000, "the cell's --window"),
        ),
        (
            {},
            {"model": "b", "context_window": 5000},
            {},
            (9, "max_model_len"),
            ("b", None, 5000, "AgentConfig.context_window"),
        ),
        (
            {},
            {"model": "b", "base_url": "http://x/v1"},
            {},
            (32768, "max_model_len"),
            ("b", "http://x/v1", 32768, "the server's model card (max_model_len)"),
        ),
        (
            {},
            {},
            {"model": "c", "base_url": "http://y/v1", "context_window": 64000},
            None,
            ("c", "http://y/v1", 64000, "CompactConfig.context_window (the server reported no window)"),
        ),
        (
            {"model": "d", "base_url": "http://z/v1"},
            {"model": "b", "base_url": "http://x/v1"},
            {},
            None,
            ("d", "http://z/v1", 128_000, "CompactConfig.context_window (the server reported no window)"),
        ),
    ],
)
def test_settings_come_from_the_line_then_agentconfig_then_the_server_then_compactconfig(
    opts: dict[str, Any],
    agent: dict[str, Any],
    compact: dict[str, Any],
    card: tuple[int, str] | None,
    expected: tuple[str, str | None, int, str],
) -> None:
    asked: list[tuple[str, str | None]] = []

    def lookup(model: str, base_url: str | None) -> tuple[int, str] | None:
        asked.append((model, base_url))
        return card

    got = resolve(
        opts,
        SimpleNamespace(**{**vars(AGENT), **agent}),
        SimpleNamespace(**{**vars(COMPACT), **compact}),
        lookup,
    )
    assert (got.model, got.base_url, got.window, got.window_source) == expected
    # asked only when needed
    assert bool(asked) == ("server" in expected[3] or "reported no window" in expected[3])


def test_no_model_anywhere_says_how_to_set_one() -> None:
    with pytest.raises(ValueError, match=r"AgentConfig\.model"):
        resolve({}, AGENT, COMPACT, lambda m, u: None)


@pytest.mark.parametrize(
    ("server_args", "found"),
    [
        ({"context_window": 6000}, (6000, "max_model_len")),
        ({"card": {"context_length": 8192}}, (8192, "context_length")),
        ({"card": {"context_window": 9000}}, (9000, "context_window")),
        ({}, None),
    ],
)
def test_the_window_is_read_from_the_servers_models_card(server_args: dict[str, Any], found: Any) -> None:
    with ModelServer(model="local", **server_args) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="k")
        assert server_window(client, "local", timeout=5) == found
        assert [r.path for r in srv.requests] == ["/v1/models"]


def test_a_server_that_is_not_there_is_said_to_be_not_answering() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the request: nothing listens there
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
    with pytest.raises(ServerNotAnswering, match="APIConnectionError: Connection error"):
        server_window(client, "local", timeout=2)
    # the settings go on with the next source and say why the server's card was not used
    url = f"http://127.0.0.1:{port}/v1"
    got = resolve({"model": "m", "base_url": url}, AGENT, COMPACT, lambda m, u: server_window(client, m, 2))
    assert got.window == 128_000
    assert got.window_source.startswith(
        f"CompactConfig.context_window (the server at {url} did not answer /models: APIConnectionError"
    )
