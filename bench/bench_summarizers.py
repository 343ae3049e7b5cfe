"""The summarizer a fidelity bench arm runs, chosen in one place.

Why: the held-out, precision and probes benches each picked the offline summarizer or the
OpenAI-compatible one against a local ``testing.ModelServer`` with the same settings; three
copies drift apart. What must hold: no server → the offline summarizer; a server → the real
``openai`` client against it (short back-off, bounded timeout), model name ``bench-model``.
"""

from __future__ import annotations

from ipython_compact.summarizers import OfflineSummarizer
from ipython_compact.summarizers.openai_summarizer import OpenAISummarizer
from ipython_compact.testing import ModelServer

MODEL = "bench-model"


def summarizer_for(server: ModelServer | None) -> OfflineSummarizer | OpenAISummarizer:
    """The offline summarizer without a server, else the OpenAI-compatible one talking to it."""
    if server is None:
        return OfflineSummarizer()
    return OpenAISummarizer(model=MODEL, base_url=server.base_url, api_key="k", backoff=0.01, timeout=10.0)
