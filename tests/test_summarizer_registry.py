"""One factory chooses a summarizer by name for the service, the CLI and the agent."""

from __future__ import annotations

import pytest

from ipython_compact.summarizers import (
    OfflineSummarizer,
    SummarizerError,
    SummaryInput,
    SummaryResult,
    make_summarizer,
    register_summarizer,
    summarizer_names,
)
from ipython_compact.summarizers.base import ENV_MODEL


@pytest.mark.parametrize(
    ("kind", "model", "env", "name"),
    [
        ("offline", None, None, "offline"),
        ("auto", None, None, "offline"),
        ("auto", "m", None, "openai"),
        ("auto", None, "env-model", "openai"),
        ("openai", "m", None, "openai"),
    ],
)
def test_a_name_and_a_model_pick_the_summarizer(
    monkeypatch: pytest.MonkeyPatch, kind: str, model: str | None, env: str | None, name: str
) -> None:
    monkeypatch.delenv(ENV_MODEL, raising=False)
    if env:
        monkeypatch.setenv(ENV_MODEL, env)
    got = make_summarizer(kind, model=model, base_url="http://127.0.0.1:9/v1")
    assert got.name == name


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown summarizer 'bogus'; choose one of: auto, offline, openai"):
        make_summarizer("bogus")


def test_openai_without_a_model_is_its_own_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MODEL, raising=False)
    with pytest.raises(SummarizerError) as info:
        make_summarizer("openai", base_url="http://127.0.0.1:9/v1")
    assert info.value.code == "config"


def test_a_registered_summarizer_is_offered_everywhere() -> None:
    class Echo:
        name = "echo"

        def summarize(self, request: SummaryInput) -> SummaryResult:
            return SummaryResult("echo", self.name)

    register_summarizer("echo", lambda model, base_url, api_key: Echo())
    try:
        assert "echo" in summarizer_names()
        assert make_summarizer("echo").name == "echo"
    finally:
        from ipython_compact.summarizers import registry

        registry._FACTORIES.pop("echo")
    with pytest.raises(ValueError):
        register_summarizer("auto", lambda m, b, k: OfflineSummarizer())
