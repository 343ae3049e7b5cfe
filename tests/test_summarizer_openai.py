"""The OpenAI summarizer against the local model server, through the real ``openai`` client."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipython_compact.cli.demo_transcript import GOAL, TranscriptGenerator
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.anchors import AnchorSet
from ipython_compact.core.entries import Entry
from ipython_compact.core.prompts import ANCHORS_NOTE
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore
from ipython_compact.summarizers import SummarizerError, SummaryInput
from ipython_compact.summarizers.openai_summarizer import OpenAISummarizer, retry_after_seconds
from ipython_compact.testing import ModelServer, RecordedRequest, Reply

CHECKPOINT = """## Goal
Train the churn model.

## Constraints & Preferences
- Always use CUDA 12.4.

## Progress
### Done
- [x] Loaded data/churn.csv

### In Progress
- [ ] Feature engineering

### Blocked
(none)

## Key Decisions
- **LightGBM**: faster

## Next Steps
1. Tune

## Critical Context
- frame_3 holds the features"""


def span() -> list[Entry]:
    msgs = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Train the churn model. Always use CUDA 12.4."}],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Loading data/churn.csv now."}],
            "stopReason": "stop",
        },
    ]
    return [Entry(f"e{i}", None, "message", "t", {"message": m}) for i, m in enumerate(msgs)]


def request(max_tokens: int = 13107) -> SummaryInput:
    return SummaryInput(span(), "history", "## Goal\nold goal", "keep the hotel shortlist", max_tokens)


def make(srv: ModelServer, **kw: object) -> OpenAISummarizer:
    # A 60 s request bound: answers must come on a loaded machine too; a test of the timeout sets its own.
    opts: dict[str, object] = {"backoff": 0.01, "max_wait": 5.0, "timeout": 60.0, "max_retries": 2}
    opts.update(kw)
    return OpenAISummarizer(model="summ-model", base_url=srv.base_url, api_key="k", **opts)  # type: ignore[arg-type]


def test_accepts_valid_reply_and_sends_an_isolated_capped_request() -> None:
    with ModelServer(script=[CHECKPOINT]) as srv:
        result = make(srv, model_max_tokens=700).summarize(request())
        assert result.text == CHECKPOINT
        assert result.summarizer == "openai" and result.attempts == 1
        assert result.usage["prompt_tokens"] > 50 and result.usage["completion_tokens"] > 10
        (sent,) = srv.chat_requests
        body = sent.body or {}
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        assert body["max_tokens"] == 700
        assert body["model"] == "summ-model"
        assert not {"user", "prompt_cache_key", "tools", "metadata"} & set(body)
        user_text = body["messages"][1]["content"]
        assert "<conversation>" in user_text and "Always use CUDA 12.4." in user_text
        assert "<previous-summary>" in user_text and "keep the hotel shortlist" in user_text


def test_cap_is_the_request_budget_without_model_limit() -> None:
    with ModelServer(script=[CHECKPOINT]) as srv:
        make(srv).summarize(request(max_tokens=1234))
        assert (srv.chat_requests[0].body or {})["max_tokens"] == 1234


# The waits are what the summarizer asks its ``sleep`` for, not seconds measured around it: a
# loaded machine stretches the requests, never the wait that was asked for.


def test_retry_after_is_honoured() -> None:
    waits: list[float] = []
    with ModelServer(script=[Reply.rate_limited(retry_after=1), CHECKPOINT]) as srv:
        result = make(srv, sleep=waits.append).summarize(request())
        assert result.attempts == 2
        assert waits == [1.0]
        assert len(srv.chat_requests) == 2


def test_retry_after_wait_is_capped() -> None:
    waits: list[float] = []
    with ModelServer(script=[Reply.rate_limited(retry_after=120), CHECKPOINT]) as srv:
        assert make(srv, max_wait=0.2, sleep=waits.append).summarize(request()).attempts == 2
        assert waits == [0.2]


def test_retries_are_bounded() -> None:
    with ModelServer(script=[Reply.server_error()] * 10) as srv:
        with pytest.raises(SummarizerError) as info:
            make(srv, max_retries=2).summarize(request())
        assert info.value.code == "server_error"
        assert info.value.attempts == 3
        assert "after 3 attempts" in str(info.value) and "HTTP 500" in str(info.value)
        assert len(srv.chat_requests) == 3


@pytest.mark.parametrize(
    ("reply", "code", "fragment", "requests"),
    [
        (Reply.length_cut(), "length", "output limit", 1),
        (Reply.tool_call("run_python", {"code": "1"}), "tool_call", "tried to call a tool (run_python)", 1),
        (Reply.empty(), "empty", "no text", 1),
        (
            Reply(status=400, error_message="bad model name", error_type="invalid_request_error"),
            "http_error",
            "HTTP 400",
            1,
        ),
        (Reply(text=CHECKPOINT, finish_reason="content_filter"), "bad_reply", "'content_filter'", 1),
    ],
)
def test_rejected_replies(reply: Reply, code: str, fragment: str, requests: int) -> None:
    with ModelServer(script=[reply, CHECKPOINT]) as srv:
        with pytest.raises(SummarizerError) as info:
            make(srv).summarize(request())
        assert info.value.code == code
        assert fragment in str(info.value)
        assert len(srv.chat_requests) == requests


PREFIX_WITHOUT_EARLY_PROGRESS = (
    "## Original Request\nFix the loader.\n\n## Context for Suffix\n- data/churn.csv has 7,043 rows"
)


def test_a_missing_section_is_resampled_once_with_the_reason_stated() -> None:
    dropped = CHECKPOINT.replace("## Key Decisions\n- **LightGBM**: faster\n\n", "")
    with ModelServer(script=[dropped, CHECKPOINT]) as srv:
        result = make(srv).summarize(request())
        assert result.text == CHECKPOINT
        assert result.resampled == "missing section(s): Key Decisions" and result.repaired == ()
        assert result.attempts == 2 and result.to_json()["resampled"] == "missing section(s): Key Decisions"
        first, second = srv.chat_requests
        roles = [m["role"] for m in (second.body or {})["messages"]]
        assert roles == ["system", "user", "assistant", "user"]
        assert (second.body or {})["messages"][2]["content"] == dropped
        assert "lacks the required section(s): Key Decisions" in (second.body or {})["messages"][3]["content"]
        assert (first.body or {})["messages"] == (second.body or {})["messages"][:2]


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        (PREFIX_WITHOUT_EARLY_PROGRESS, "missing section(s): Early Progress"),
        (Reply.empty(), "missing section(s): Early Progress; the resample failed (empty)"),
        (
            Reply.tool_call("run_python"),
            "missing section(s): Early Progress; the resample failed (tool_call)",
        ),
    ],
)
def test_a_section_still_missing_after_the_resample_is_repaired_and_recorded(
    second: Reply | str, reason: str
) -> None:
    with ModelServer(script=[PREFIX_WITHOUT_EARLY_PROGRESS, second]) as srv:
        result = make(srv).summarize(SummaryInput(span(), "turn_prefix", None, None, 2000))
        assert result.text == (
            "## Original Request\nFix the loader.\n\n## Early Progress\n(none)\n\n## "
            "Context for Suffix\n- data/churn.csv has 7,043 rows"
        )
        assert result.repaired == ("Early Progress",)
        assert result.resampled == reason
        assert result.to_json()["repaired"] == ["Early Progress"]
        assert len(srv.chat_requests) == 2


def test_headingless_reply_is_repaired_into_every_section_after_one_resample() -> None:
    with ModelServer(script=["Trained the model; AUC 0.81."] * 2) as srv:
        result = make(srv).summarize(request())
        assert result.text.startswith("Trained the model; AUC 0.81.\n\n## Goal\n(none)")
        assert result.repaired == (
            "Goal",
            "Constraints & Preferences",
            "Progress",
            "Key Decisions",
            "Next Steps",
            "Critical Context",
        )
        assert len(srv.chat_requests) == 2


def test_compaction_records_the_repair(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "log.db")
    store.create_session("s")
    gen = TranscriptGenerator(seed=3, big_output_every=0)
    for msgs in gen.rounds(8):
        store.append_many("s", [("message", {"message": m}) for m in msgs])
    dropped = CHECKPOINT.replace("## Critical Context\n- frame_3 holds the features", "")
    with ModelServer(script=[dropped, dropped]) as srv:
        result = Compactor(store, make(srv), CompactionSettings(keep_recent_tokens=200)).compact("s")
    (call,) = result.details["calls"]
    assert call["repaired"] == ["Critical Context"] and call["resampled"] == (
        "missing section(s): Critical Context"
    )
    assert "## Critical Context\n(none)" in result.summary
    assert store.verify("s").ok


def test_hang_times_out() -> None:
    # The code says the client gave up at its timeout (a reply would have come after 20 s and been
    # read); no seconds are measured around it.
    with ModelServer(script=[Reply.hang(20)]) as srv:
        with pytest.raises(SummarizerError) as info:
            make(srv, timeout=0.4, max_retries=0).summarize(request())
        assert info.value.code == "timeout"
        assert "within 0.4s" in str(info.value)


def test_connection_refused_is_retried_then_reported() -> None:
    with ModelServer() as srv:
        url = srv.base_url
    summarizer = OpenAISummarizer(model="m", base_url=url, api_key="k", max_retries=1, backoff=0.01)
    with pytest.raises(SummarizerError) as info:
        summarizer.summarize(request())
    assert info.value.code == "connection" and info.value.attempts == 2


def test_configuration_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with ModelServer(script=[CHECKPOINT]) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("IPYTHON_COMPACT_MODEL", "env-model")
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        summarizer = OpenAISummarizer()
        assert summarizer.summarize(request()).text == CHECKPOINT
        assert (srv.chat_requests[0].body or {})["model"] == "env-model"


def test_missing_configuration_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_BASE_URL", "IPYTHON_COMPACT_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SummarizerError, match="no summarizer model configured"):
        OpenAISummarizer()
    with pytest.raises(SummarizerError, match="no API key"):
        OpenAISummarizer(model="m")


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After": "soon"}, None),
        ({}, None),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after-ms": "x", "Retry-After": "2"}, 2.0),
    ],
)
def test_retry_after_parsing(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_seconds(headers) == seconds


def long_span(n: int = 40) -> list[Entry]:
    msgs: list[dict[str, object]] = [
        {"role": "user", "content": [{"type": "text", "text": "GOAL-MARKER: index the archive."}]}
    ]
    for i in range(n):
        msgs.append(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"chunk {i} " + "lorem ipsum " * 60}],
                "stopReason": "stop",
            }
        )
    return [Entry(f"e{i}", None, "message", "t", {"message": m}) for i, m in enumerate(msgs)]


def test_input_too_long_is_summarized_in_pieces_from_the_first_request_to_the_newest() -> None:
    with ModelServer(default=CHECKPOINT, context_window=3000) as srv:
        result = make(srv).summarize(SummaryInput(long_span(), "history", None, None, 1000))
        assert result.text == CHECKPOINT
        sent = srv.chat_requests
        answered = [str(r.messages[1]["content"]) for r in sent if r.prompt_tokens <= 3000]
        assert sent[0].prompt_tokens > 3000 and result.pieces == len(answered) >= 2
        assert "GOAL-MARKER: index the archive." in answered[0]
        assert "chunk 39" in answered[-1]  # the newest messages come last, updating the summary
        assert not any("older message(s) were left out" in text for text in answered)


def test_input_that_never_fits_fails_clearly_and_bounded() -> None:
    with ModelServer(script=[CHECKPOINT], context_window=200) as srv:
        with pytest.raises(SummarizerError) as info:
            make(srv, input_retries=2).summarize(SummaryInput(long_span(), "history", None, None, 1000))
        assert info.value.code == "context_length"
        assert "maximum context length is 200 tokens" in str(info.value)
        assert len(srv.chat_requests) == 3


ANCHORS = ("Train the churn model.", "Always use CUDA 12.4.", "Pinned: the holdout is weeks 40-52.")


@pytest.mark.parametrize(("anchors", "noted"), [(ANCHORS, True), ((), False)])
def test_anchors_go_into_the_request_with_the_note_not_to_restate_them(
    anchors: tuple[str, ...], noted: bool
) -> None:
    with ModelServer(script=[CHECKPOINT]) as srv:
        result = make(srv).summarize(SummaryInput(span(), "history", None, None, 1000, anchors))
        assert result.text == CHECKPOINT
        user_text = str(srv.chat_requests[0].messages[1]["content"])
    assert (ANCHORS_NOTE in user_text) is noted
    assert ("<anchors>\n- " in user_text) is noted
    for text in anchors:
        assert f"- {text}" in user_text


def test_anchors_stay_in_every_piece_when_the_input_is_split() -> None:
    with ModelServer(default=CHECKPOINT, context_window=3000) as srv:
        make(srv).summarize(SummaryInput(long_span(), "history", None, None, 1000, ANCHORS))
        sent = srv.chat_requests
        assert len(sent) >= 3  # the first request did not fit; then two pieces or more
        pieces = [str(r.messages[1]["content"]) for r in sent[1:]]
    assert all(ANCHORS_NOTE in p and all(f"- {text}" in p for text in ANCHORS) for p in pieces)


# What a model that follows the note writes: section headings kept, anchors referred to, not restated.
REFERRING = """## Goal
(see <anchors>)

## Constraints & Preferences
- (see <anchors>)

## Progress
### Done
- [x] Explored the data and fitted a first model.

### In Progress
- [ ] Tuning.

### Blocked
- (none)

## Key Decisions
- **Gradient boosting**: best first score.

## Next Steps
1. Tune and evaluate.

## Critical Context
- (none)"""
PREFIX = "## Original Request\nTune.\n\n## Early Progress\n- Started.\n\n## Context for Suffix\n- (none)"


def referring_or_prefix(req: RecordedRequest) -> str:
    """The history checkpoint, or a turn-prefix summary when the cut split a turn."""
    return PREFIX if "FIRST PART" in str(req.messages[-1]["content"]) else REFERRING


def test_compaction_sends_the_anchors_and_the_drift_guard_keeps_them_in_the_checkpoint(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path / "log.db")
    store.create_session("s")
    gen = TranscriptGenerator(11, big_output_every=0)
    for msgs in gen.rounds(12):
        store.append_many("s", [("message", {"message": m}) for m in msgs])
    with ModelServer(script=referring_or_prefix) as srv:
        compactor = Compactor(store, make(srv), CompactionSettings(keep_recent_tokens=800))
        compactor.pin("s", text="Report the AUC with 3 decimals")
        before = [e.to_json() for e in store.entries("s")]
        result = compactor.compact("s")
        requests = [str(r.messages[1]["content"]) for r in srv.chat_requests]
    anchors = AnchorSet.from_json(result.details["anchors"]).texts()
    assert GOAL in anchors and "Report the AUC with 3 decimals" in anchors
    assert len(anchors) >= 3  # goal, at least one constraint, the pin
    history = [text for text in requests if "<conversation>" in text and "FIRST PART" not in text]
    assert len(history) == 1
    assert ANCHORS_NOTE in history[0]
    for text in anchors:
        assert f"- {text}" in history[0]  # each anchor shown verbatim to the model
        assert text not in REFERRING  # ... which, as told, did not restate it
        assert text in result.summary  # ... and the checkpoint still holds it verbatim
    drift = result.details["drift"]
    assert drift["checked"] >= len(anchors)  # the guard verified the anchors too
    assert not set(drift["missing"]) & set(anchors)
    assert REFERRING in result.summary
    after = [e.to_json() for e in store.entries("s")]
    assert after[: len(before)] == before  # append-only
    assert store.verify("s").ok
    store.close()
