"""Compaction settings: pi's defaults, Prime's ratio clamp, overrides, and errors that name the key."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ipython_compact.core.settings import CompactionSettings, SettingsError, clamp_trigger_ratio


def test_defaults_are_pis() -> None:
    s = CompactionSettings()
    assert (s.enabled, s.reserve_tokens, s.keep_recent_tokens, s.background_tokens) == (
        True,
        16384,
        20000,
        32768,
    )
    assert s.trigger_ratio is None
    assert s.estimator == "density"
    assert s.turn_alignment is False
    assert (s.summary_max_tokens, s.turn_prefix_max_tokens) == (13107, 8192)


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [
        (0.3, 0.5),
        (0.5, 0.5),
        (0.7, 0.7),
        (0.95, 0.95),
        (0.99, 0.95),
        (math.nan, 0.8),
        (math.inf, 0.8),
        (1, 0.95),
    ],
)
def test_trigger_ratio_is_clamped(ratio: float, expected: float) -> None:
    assert clamp_trigger_ratio(ratio) == expected
    assert CompactionSettings(trigger_ratio=ratio).trigger_ratio == expected


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        ({}, CompactionSettings()),
        (
            {"reserve_tokens": 1000, "keep_recent_tokens": 500},
            CompactionSettings(reserve_tokens=1000, keep_recent_tokens=500),
        ),
        (
            {"reserveTokens": 1000, "keepRecentTokens": 500, "backgroundTokens": 0},
            CompactionSettings(reserve_tokens=1000, keep_recent_tokens=500, background_tokens=0),
        ),
        (
            {"estimator": "chars4", "turnAlignment": True},
            CompactionSettings(estimator="chars4", turn_alignment=True),
        ),
        ({"trigger_ratio": 0.9}, CompactionSettings(trigger_ratio=0.9)),
        (
            {"modelOverrides": {"openai/gpt-4o": {"keepRecentTokens": 4000}}},
            CompactionSettings(model_overrides={"openai/gpt-4o": {"keep_recent_tokens": 4000}}),
        ),
    ],
)
def test_from_mapping_accepts_snake_and_camel_case(
    mapping: dict[str, Any], expected: CompactionSettings
) -> None:
    assert CompactionSettings.from_mapping(mapping) == expected


@pytest.mark.parametrize(
    ("mapping", "names"),
    [
        ({"reserve_tokens": -1}, "reserve_tokens"),
        ({"keep_recent_tokens": "20000"}, "keep_recent_tokens"),
        ({"background_tokens": True}, "background_tokens"),
        ({"enabled": "yes"}, "enabled"),
        ({"estimator": "tiktoken"}, "estimator"),
        ({"trigger_ratio": "high"}, "trigger_ratio"),
        ({"bogus": 1}, "bogus"),
        ({"reserve_tokens": 1, "reserveTokens": 2}, "given twice"),
        ({"model_overrides": {"gpt-4o": {}}}, "'gpt-4o'"),
        ({"model_overrides": {"a/b": {"reserve_tokens": "x"}}}, "model_overrides['a/b'].reserve_tokens"),
        ({"model_overrides": {"a/b": {"nope": 1}}}, "model_overrides['a/b'].nope"),
        ({"model_overrides": {"a/b": {"model_overrides": {}}}}, "model_overrides"),
        ({"model_overrides": {"a/b": 3}}, "model_overrides['a/b']"),
        ({"model_overrides": []}, "model_overrides"),
    ],
)
def test_from_mapping_errors_name_the_bad_key(mapping: dict[str, Any], names: str) -> None:
    with pytest.raises(SettingsError) as info:
        CompactionSettings.from_mapping(mapping)
    assert names in str(info.value)


def test_from_mapping_rejects_non_mappings() -> None:
    with pytest.raises(SettingsError, match="must be a mapping"):
        CompactionSettings.from_mapping([("reserve_tokens", 1)])  # type: ignore[arg-type]


def test_construction_validates_too() -> None:
    with pytest.raises(SettingsError, match="keep_recent_tokens"):
        CompactionSettings(keep_recent_tokens=-5)


@pytest.mark.parametrize(
    ("provider", "model", "keep", "reserve"),
    [
        ("openai", "gpt-4o", 4000, 8000),
        ("openai", "gpt-4o-mini", 20000, 16384),
        ("anthropic", "gpt-4o", 20000, 16384),
    ],
)
def test_for_model_applies_only_its_override(provider: str, model: str, keep: int, reserve: int) -> None:
    base = CompactionSettings(
        model_overrides={"openai/gpt-4o": {"keep_recent_tokens": 4000, "reserve_tokens": 8000}}
    )
    chosen = base.for_model(provider, model)
    assert (chosen.keep_recent_tokens, chosen.reserve_tokens) == (keep, reserve)
    assert base.keep_recent_tokens == 20000


def test_to_mapping_round_trips() -> None:
    s = CompactionSettings(
        reserve_tokens=1, trigger_ratio=0.6, estimator="chars4", model_overrides={"x/y": {"enabled": False}}
    )
    assert CompactionSettings.from_mapping(s.to_mapping()) == s


def test_settings_are_hashable_values() -> None:
    a = CompactionSettings(model_overrides={"x/y": {"enabled": False}})
    b = CompactionSettings(model_overrides={"x/y": {"enabled": False}})
    assert a == b
    assert len({a, b, CompactionSettings()}) == 2
