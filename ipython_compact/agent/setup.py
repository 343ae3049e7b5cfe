"""Defaults for ``Agent(model=..., base_url=...)``: the data directory's log, a session name, a
client, and the model's window from the server's ``/v1/models`` card.

Why here: a user should get a working agent from a model name and a URL; every default must be
something they can see and override (``store``, ``session``, ``client``, ``context_window``,
``kernel``), and a window that cannot be found is an error saying how to give it, never a guess.

What must hold:
- The window is the explicit argument, else the server's card for the model (``max_model_len``
  (vLLM), ``context_length`` (OpenRouter, llama.cpp), ``context_window``; top level or under
  ``meta``/``metadata``), else ``$IPYTHON_COMPACT_CONTEXT_WINDOW``; otherwise ``ValueError``.
- Without explicit settings, a window too small for the default reserve gets the defaults scaled
  to it (``settings_for_window``), so ``Agent(model=..., base_url=...)`` works on an 8k model.
- A default session name is new each time (time + random suffix), so two agents never share one
  by accident.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from ipython_compact.core.settings import CompactionSettings

ENV_WINDOW = "IPYTHON_COMPACT_CONTEXT_WINDOW"
CARD_KEYS = ("max_model_len", "context_length", "context_window")


def default_session_name() -> str:
    """``agent-YYYYmmdd-HHMMSS-xxxx`` (UTC, random suffix)."""
    return f"agent-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def make_client(base_url: str | None, api_key: str | None) -> Any:
    """An ``openai.OpenAI`` for ``base_url``; a local server needs no real key."""
    import openai  # deferred for start-up time (heavy); only reached when the caller gave no client

    key = api_key or os.environ.get("OPENAI_API_KEY") or ("not-needed" if base_url else None)
    return openai.OpenAI(base_url=base_url, api_key=key)


def window_from_card(card: Mapping[str, Any]) -> int | None:
    """The context window a model card states (see the module docstring for the keys), or None."""
    places: list[Mapping[str, Any]] = [card]
    places += [v for k in ("meta", "metadata") if isinstance(v := card.get(k), Mapping)]
    for place in places:
        for key in CARD_KEYS:
            value = place.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def model_cards(client: Any) -> list[dict[str, Any]]:
    """The server's ``/v1/models`` entries as dicts (empty when the server has none or fails)."""
    try:
        page = client.models.list()
        items = list(getattr(page, "data", None) or page)
    except Exception:
        return []
    return [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in items]


def resolve_model_and_window(client: Any, model: str | None, context_window: int | None) -> tuple[str, int]:
    """(model, window) from the arguments, the server's card, or the environment; see the module docstring."""
    cards = [] if (model and context_window) else model_cards(client)
    if not model:
        if not cards:
            raise ValueError("no model: pass model=... (the server's /v1/models lists none)")
        model = str(cards[0].get("id"))
    if context_window is not None:
        if context_window <= 0:
            raise ValueError(f"context_window must be positive, got {context_window}")
        return model, context_window
    card = next((c for c in cards if c.get("id") == model), None)
    window = window_from_card(card) if card is not None else None
    if window is None and os.environ.get(ENV_WINDOW):
        raw = os.environ[ENV_WINDOW]
        try:
            window = int(raw)
        except ValueError:
            raise ValueError(f"${ENV_WINDOW} must be an integer, got {raw!r}") from None
    if window is None or window <= 0:
        raise ValueError(
            f"cannot tell the context window of {model!r}: the server's /v1/models card states none "
            f"({', '.join(CARD_KEYS)}); pass context_window=... or set ${ENV_WINDOW}")
    return model, window


def settings_for_window(window: int) -> CompactionSettings:
    """The default compaction settings, scaled down for a window too small for them.

    pi's defaults (reserve 16,384, keep 20,000, background 32,768) assume a large window; below
    four reserves they would leave no room, so a small window keeps the same shape in proportion:
    reserve a fifth, keep a quarter verbatim, start background compaction a tenth earlier.
    """
    defaults = CompactionSettings()
    if window >= 4 * defaults.reserve_tokens:
        return defaults
    return CompactionSettings(reserve_tokens=max(1, window // 5), keep_recent_tokens=max(1, window // 4),
                              background_tokens=window // 10)
