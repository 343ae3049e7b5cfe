"""Summarizers: the ``Summarizer`` protocol, the offline extractive default and the OpenAI one.

``openai_summarizer`` is the only module of this layer that imports ``openai``; import it
explicitly (``from ipython_compact.summarizers.openai_summarizer import OpenAISummarizer``).
"""

from ipython_compact.summarizers.base import Summarizer, SummarizerError, SummaryInput, SummaryResult
from ipython_compact.summarizers.offline import OfflineSummarizer

__all__ = ["OfflineSummarizer", "Summarizer", "SummarizerError", "SummaryInput", "SummaryResult"]
