"""A small window never fails a compaction: a span too big for the summarizer's window is
summarized in pieces that fit, each piece updating the summary of the ones before (issue 33, item 3).

Why: with a 4,096-token window one compaction failed outright, and a span too long for the window
lost its oldest messages (left out with a note). Pieces keep every message in front of the model
once. The scripted server refuses a prompt over its window with OpenAI's context-length error, as
llama.cpp's and vLLM's servers do.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ipython_compact.core.entries import Entry
from ipython_compact.core.offline_summary import repair_sections
from ipython_compact.summarizers.base import SummaryInput
from ipython_compact.summarizers.openai_summarizer import OpenAISummarizer
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply

SUMMARY, _ = repair_sections("## Goal\nKeep every marker.", "history")


def entries(n: int) -> list[Entry]:
    now = datetime.now(UTC).isoformat()
    out = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"marker-{i:03d} " + "the sensor log line reads fine and steady today " * 12
        message = {"role": role, "content": [{"type": "text", "text": text}]}
        out.append(
            Entry(
                id=f"e{i}",
                parent_id=f"e{i - 1}" if i else None,
                kind="message",
                timestamp=now,
                data={"message": message},
            )
        )
    return out


def test_a_span_over_the_window_is_summarized_in_pieces_and_no_message_is_left_out() -> None:
    def answer(req: RecordedRequest) -> Reply:
        return Reply(SUMMARY + f"\n(pieces seen: {len(req.messages)})")

    span = entries(24)  # about 24 x 150 tokens: far over a 1,500-token window
    with ModelServer(answer, context_window=1500) as srv:
        summarizer = OpenAISummarizer(model="m", base_url=srv.base_url, api_key="x", max_retries=0)
        result = summarizer.summarize(SummaryInput(span, max_tokens=200))
        answered = [r for r in srv.requests if r.messages and r.prompt_tokens <= 1500]
    sent = "\n".join(str(r.messages[-1]["content"]) for r in answered)
    assert result.pieces >= 2 and len(answered) == result.pieces
    assert all(f"marker-{i:03d}" in sent for i in range(24)), "a message never reached the model"
    assert "left out to fit" not in sent
    # each piece after the first updates the summary of the ones before
    assert all("Keep every marker." in str(r.messages[-1]["content"]) for r in answered[1:])
    assert result.to_json()["pieces"] == result.pieces
