"""The one place a summarizer is chosen by name: ``make_summarizer("offline" | "openai" | "auto")``.

Why: the kernel service (``%config CompactConfig.summarizer``), the CLI (``--summarizer``) and the
agent (``Agent(summarizer=...)``) all turn a name plus a model configuration into a
``Summarizer``; before this module each of them coded the choice itself, with different rules for
"auto" and different errors. New summarizers register here and every caller offers them.

What must hold:
- ``auto`` is ``openai`` when a model is named (argument or ``$IPYTHON_COMPACT_MODEL``), else
  ``offline`` (the default whenever no model is configured: no network).
- An unknown name raises ``ValueError`` listing the known ones; a known summarizer that cannot be
  configured raises its own ``SummarizerError`` (``code="config"``) unchanged.
- ``openai`` is imported only when chosen (start-up time: the ``openai`` package is heavy, and the
  CLI and the kernel extension must stay cheap to import).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ipython_compact.summarizers.base import ENV_MODEL, Summarizer
from ipython_compact.summarizers.offline import OfflineSummarizer

Factory = Callable[[str | None, str | None, str | None], Summarizer]
"""``factory(model, base_url, api_key) -> Summarizer``."""


def _offline(model: str | None, base_url: str | None, api_key: str | None) -> Summarizer:
    return OfflineSummarizer()


def _openai(model: str | None, base_url: str | None, api_key: str | None) -> Summarizer:
    # Lazy for start-up time only: importing ``openai`` costs ~0.3 s and most callers never need it.
    from ipython_compact.summarizers.openai_summarizer import OpenAISummarizer

    return OpenAISummarizer(model, base_url=base_url, api_key=api_key)


_FACTORIES: dict[str, Factory] = {"offline": _offline, "openai": _openai}


def register_summarizer(name: str, factory: Factory) -> None:
    """Offer another summarizer under ``name`` (``auto`` is reserved; an existing name is replaced)."""
    if not name or name == "auto":
        raise ValueError(f"a summarizer needs a name other than {name!r}")
    _FACTORIES[name] = factory


def summarizer_names() -> tuple[str, ...]:
    """The names ``make_summarizer`` accepts, ``auto`` first."""
    return ("auto", *_FACTORIES)


def resolve_kind(kind: str, model: str | None = None) -> str:
    """``auto`` → ``openai`` when a model is named (argument or environment), else ``offline``."""
    if kind == "auto":
        return "openai" if (model or os.environ.get(ENV_MODEL)) else "offline"
    return kind


def make_summarizer(
    kind: str = "auto", *, model: str | None = None, base_url: str | None = None, api_key: str | None = None
) -> Summarizer:
    """The summarizer named ``kind`` (see the module docstring for ``auto`` and the errors)."""
    name = resolve_kind(kind, model)
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ValueError(f"unknown summarizer {kind!r}; choose one of: {', '.join(summarizer_names())}")
    return factory(model or None, base_url or None, api_key or None)
