"""Compaction settings: pi's defaults, a background line, Prime's optional trigger ratio.

Defaults follow pi (``enabled``, ``reserve_tokens`` 16384, ``keep_recent_tokens`` 20000) and
pi-durable (``background_tokens`` 32768; 0 turns the background line off). ``trigger_ratio`` is
Prime's: when set, the blocking line is ``floor(min(window * ratio, window - reserve))`` and the
ratio is clamped to [0.5, 0.95] (a non-finite ratio falls back to 0.8, as Prime does).

What must hold:
- A ``CompactionSettings`` value is always valid: construction checks every field, so code that
  receives one never re-validates.
- ``from_mapping`` names the offending key (with its ``model_overrides[...]`` path) in every
  error, accepts pi's camelCase spellings, and rejects unknown keys instead of ignoring them.
- ``for_model`` never mutates; overrides apply to one ``"provider/model"`` key only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final, Literal

Estimator = Literal["density", "chars4"]
ESTIMATORS: Final = ("density", "chars4")

DEFAULT_TRIGGER_RATIO: Final = 0.8
TRIGGER_RATIO_MIN: Final = 0.5
TRIGGER_RATIO_MAX: Final = 0.95


class SettingsError(ValueError):
    """A compaction setting has a bad name, type or value; the message names the key."""


def clamp_trigger_ratio(ratio: float) -> float:
    """Prime's clamp: [0.5, 0.95], non-finite values become 0.8."""
    if not math.isfinite(ratio):
        return DEFAULT_TRIGGER_RATIO
    return min(TRIGGER_RATIO_MAX, max(TRIGGER_RATIO_MIN, ratio))


_INT_FIELDS: Final = ("reserve_tokens", "keep_recent_tokens", "background_tokens")
_CAMEL: Final = {
    "reserveTokens": "reserve_tokens",
    "keepRecentTokens": "keep_recent_tokens",
    "backgroundTokens": "background_tokens",
    "triggerRatio": "trigger_ratio",
    "turnAlignment": "turn_alignment",
    "modelOverrides": "model_overrides",
}


@dataclass(frozen=True)
class CompactionSettings:
    """Everything the core needs to decide when and where to compact."""

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000
    background_tokens: int = 32768
    trigger_ratio: float | None = None
    estimator: Estimator = "density"
    turn_alignment: bool = False
    model_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        _check_value("enabled", self.enabled, "")
        for name in _INT_FIELDS:
            _check_value(name, getattr(self, name), "")
        _check_value("estimator", self.estimator, "")
        _check_value("turn_alignment", self.turn_alignment, "")
        if self.trigger_ratio is not None:
            _check_value("trigger_ratio", self.trigger_ratio, "")
            object.__setattr__(self, "trigger_ratio", clamp_trigger_ratio(float(self.trigger_ratio)))
        overrides: dict[str, dict[str, Any]] = {}
        if not isinstance(self.model_overrides, Mapping):
            raise SettingsError(
                f"model_overrides must be a mapping of 'provider/model' to settings, got "
                f"{self.model_overrides!r}"
            )
        for key, override in self.model_overrides.items():
            overrides[key] = _check_override(key, override)
        object.__setattr__(self, "model_overrides", overrides)

    @property
    def summary_max_tokens(self) -> int:
        """Output budget of the summary call: 80% of the reserve (pi)."""
        return int(0.8 * self.reserve_tokens)

    @property
    def turn_prefix_max_tokens(self) -> int:
        """Output budget of the split-turn prefix call: 50% of the reserve (pi)."""
        return int(0.5 * self.reserve_tokens)

    def for_model(self, provider: str, model: str) -> CompactionSettings:
        """These settings with the ``"provider/model"`` override applied, if there is one."""
        override = self.model_overrides.get(f"{provider}/{model}")
        if not override:
            return self
        return replace(self, **dict(override))

    def to_mapping(self) -> dict[str, Any]:
        """A JSON-ready dict that ``from_mapping`` turns back into an equal value."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["model_overrides"] = {k: dict(v) for k, v in self.model_overrides.items()}
        return out

    @staticmethod
    def from_mapping(data: Mapping[str, Any]) -> CompactionSettings:
        """Build settings from user configuration (snake_case or pi's camelCase keys).

        Raises ``SettingsError`` naming the bad key; unknown keys are errors.
        """
        if not isinstance(data, Mapping):
            raise SettingsError(f"compaction settings must be a mapping, got {type(data).__name__}")
        kwargs = _normalise(data, "")
        overrides = kwargs.pop("model_overrides", {})
        if not isinstance(overrides, Mapping):
            raise SettingsError(
                f"model_overrides must be a mapping of 'provider/model' to settings, got {overrides!r}"
            )
        checked = {
            key: _check_override(
                key, _normalise(value, f"model_overrides[{key!r}].") if isinstance(value, Mapping) else value
            )
            for key, value in overrides.items()
        }
        for name, value in kwargs.items():
            _check_value(name, value, "")
        return CompactionSettings(**kwargs, model_overrides=checked)


_FIELD_NAMES: Final = frozenset(f.name for f in fields(CompactionSettings))


def _normalise(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        if not isinstance(raw_key, str):
            raise SettingsError(f"{where}setting names must be strings, got {raw_key!r}")
        key = _CAMEL.get(raw_key, raw_key)
        if key not in _FIELD_NAMES:
            known = ", ".join(sorted(_FIELD_NAMES))
            raise SettingsError(f"{where}{raw_key}: unknown compaction setting (known: {known})")
        if key in out:
            raise SettingsError(f"{where}{raw_key}: given twice (as snake_case and camelCase)")
        out[key] = value
    return out


def _check_value(name: str, value: Any, where: str) -> None:
    label = f"{where}{name}"
    if name in ("enabled", "turn_alignment"):
        if not isinstance(value, bool):
            raise SettingsError(f"{label} must be true or false, got {value!r}")
    elif name in _INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SettingsError(f"{label} must be a non-negative integer, got {value!r}")
    elif name == "trigger_ratio":
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise SettingsError(f"{label} must be a number in [0.5, 0.95] or null, got {value!r}")
    elif name == "estimator" and value not in ESTIMATORS:
        raise SettingsError(f"{label} must be one of {', '.join(ESTIMATORS)}, got {value!r}")


def _check_override(key: Any, override: Any) -> dict[str, Any]:
    if not isinstance(key, str) or key.count("/") < 1 or key.startswith("/") or key.endswith("/"):
        raise SettingsError(f"model_overrides key {key!r} must look like 'provider/model'")
    where = f"model_overrides[{key!r}]."
    if not isinstance(override, Mapping):
        raise SettingsError(f"model_overrides[{key!r}] must be a mapping of settings, got {override!r}")
    out: dict[str, Any] = {}
    for name, value in override.items():
        if name not in _FIELD_NAMES or name == "model_overrides":
            raise SettingsError(f"{where}{name}: not a setting a model override may change")
        _check_value(name, value, where)
        out[name] = value
    return out
