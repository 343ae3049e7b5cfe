"""Which model, server and window a ``%%agent`` cell uses, and where each came from.

Why: settings used to be retyped on every cell (``--model … --base-url … --window …``) and the
window defaulted to 128,000 whatever the model was. Now each setting comes from, in order: the
cell's line, ``AgentConfig`` (``%config AgentConfig.x = …``), ``CompactConfig`` (the extension's
model settings); the window additionally from the server's ``/v1/models`` card when it reports
one (vLLM's ``max_model_len``, ``context_length``, ``context_window``).

What must hold: a server that does not answer, answers slowly or reports no window never fails
the cell — the next source is used and ``window_source`` says which one was, and why the server's
card was not used (it reported no window, or it did not answer, with the error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Keys a ``/v1/models`` card may carry the context window under, most specific first.
CARD_WINDOW_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length")
DEFAULT_WINDOW = 128_000
#: Where an ``openai.OpenAI`` client goes when neither a base URL nor ``$OPENAI_BASE_URL`` is set.
PUBLIC_API = "https://api.openai.com/v1"


@dataclass(frozen=True)
class AgentSettings:
    model: str
    base_url: str | None
    window: int
    # "the cell's --window", "AgentConfig.context_window", "the server's model card (max_model_len)", ...
    window_source: str
    max_steps: int
    stream: bool


def window_from_card(card: Mapping[str, Any]) -> tuple[int, str] | None:
    """(window, key) from a ``/v1/models`` card, looking one level into ``meta``/``metadata`` too."""
    for where in (card, card.get("meta"), card.get("metadata")):
        if not isinstance(where, Mapping):
            continue
        for key in CARD_WINDOW_KEYS:
            value = where.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, key
    return None


class ServerNotAnswering(RuntimeError):
    """The server's ``/v1/models`` could not be asked (refused, timed out, not a model server);
    the text says what happened, for the cell's note."""


def server_window(client: Any, model: str, timeout: float) -> tuple[int, str] | None:
    """The window the server's ``/v1/models`` card reports for ``model`` (None when it reports
    none). ``client`` is an ``openai.OpenAI``. Raises ``ServerNotAnswering`` when the server
    cannot be asked, so the cell can say so instead of "the server reported no window"."""
    try:
        page = client.with_options(timeout=timeout, max_retries=0).models.list()
        cards = [card.to_dict() if hasattr(card, "to_dict") else dict(card) for card in page.data]
    except Exception as exc:  # no /v1/models, a refused connection, a timeout
        cause = exc.__cause__ or exc.__context__
        detail = f"{type(exc).__name__}: {exc}" + (f" ({cause})" if cause is not None else "")
        raise ServerNotAnswering(detail) from exc
    chosen = [c for c in cards if c.get("id") == model] or (cards if len(cards) == 1 else [])
    return window_from_card(chosen[0]) if chosen else None


def resolve(
    opts: Mapping[str, Any],
    agent: Any,
    compact: Any,
    card_window: Callable[[str, str | None], tuple[int, str] | None],
) -> AgentSettings:
    """Settings for a new agent: ``opts`` (the cell's line) over ``agent`` (``AgentConfig``) over
    ``compact`` (``CompactConfig``); ``card_window(model, base_url)`` asks the server. Raises
    ValueError when no model is named anywhere."""
    model = str(opts.get("model") or getattr(agent, "model", "") or getattr(compact, "model", "") or "")
    if not model:
        raise ValueError("no model: pass --model NAME or set %config AgentConfig.model = 'NAME'")
    base_url = (
        str(opts.get("base_url") or getattr(agent, "base_url", "") or getattr(compact, "base_url", "") or "")
        or None
    )
    if opts.get("window"):
        window, source = int(opts["window"]), "the cell's --window"
    elif getattr(agent, "context_window", 0):
        window, source = int(agent.context_window), "AgentConfig.context_window"
    else:
        try:
            found = card_window(model, base_url)
            why = "the server reported no window"
        except ServerNotAnswering as exc:
            found, why = None, f"the server at {base_url or PUBLIC_API} did not answer /models: {exc}"
        if found is not None:
            window, source = found[0], f"the server's model card ({found[1]})"
        else:
            window = int(getattr(compact, "context_window", 0) or DEFAULT_WINDOW)
            source = f"CompactConfig.context_window ({why})"
    max_steps = int(opts.get("max_steps") or getattr(agent, "max_steps", 0) or 12)
    stream = bool(opts.get("stream") or getattr(agent, "stream", False))
    return AgentSettings(model, base_url, window, source, max_steps, stream)
