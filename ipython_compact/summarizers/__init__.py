"""Summarizers: the ``Summarizer`` protocol, the offline extractive default and the OpenAI one.

Choose one by name with ``make_summarizer("offline" | "openai" | "auto", model=..., base_url=...)``
(``registry``); ``openai_summarizer`` is the only module of this layer that imports ``openai``.
"""

from ipython_compact.summarizers.base import Summarizer, SummarizerError, SummaryInput, SummaryResult
from ipython_compact.summarizers.offline import OfflineSummarizer
from ipython_compact.summarizers.registry import make_summarizer, register_summarizer, summarizer_names

__all__ = [
    "OfflineSummarizer",
    "Summarizer",
    "SummarizerError",
    "SummaryInput",
    "SummaryResult",
    "make_summarizer",
    "register_summarizer",
    "summarizer_names",
]
