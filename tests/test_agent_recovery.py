"""The agent's pure recovery helpers: the failure ladder, the emergency shrink, reading API errors."""

from __future__ import annotations

import openai
import pytest
from builders import entry, text_block

from ipython_compact.agent.model_caller import api_error_details
from ipython_compact.agent.recovery import emergency_payload, keep_recent_after_failures
from ipython_compact.core.entries import COMPACTION, MESSAGE, SYSTEM, Entry
from ipython_compact.core.triggers import EMERGENCY_HEADER
from ipython_compact.testing import ModelServer, Reply


@pytest.mark.parametrize(
    ("failures", "keep", "expected"),
    [
        (0, 2000, (None, False)),  # no failure: the settings' own tail
        (1, 2000, (1000, False)),
        (2, 2000, (500, False)),
        (3, 2000, (250, False)),
        (4, 2000, (0, True)),  # the end of the ladder: lossy shrink
        (9, 2000, (0, True)),
        (1, 0, (0, False)),
    ],
)
def test_keep_less_verbatim_after_each_failure(
    failures: int, keep: int, expected: tuple[int | None, bool]
) -> None:
    assert keep_recent_after_failures(failures, keep) == expected


def _msg(i: int, role: str, text: str = "") -> Entry:
    return entry(f"e{i}", {"role": role, "content": [text_block(text or f"{role} {i}")]}, kind=MESSAGE)


def _compaction(i: int, summary: str) -> Entry:
    return Entry(
        f"e{i}", None, COMPACTION, "t", {"summary": summary, "first_kept_entry_id": "x", "tokens_before": 1}
    )


@pytest.mark.parametrize(
    ("path", "cut", "dropped", "carried"),
    [
        ([_msg(0, "user"), _msg(1, "assistant"), _msg(2, "user"), _msg(3, "assistant")], "e2", 2, None),
        (
            [_compaction(0, "OLD SUMMARY"), _msg(1, "user"), _msg(2, "assistant"), _msg(3, "user")],
            "e3",
            2,
            "OLD SUMMARY",
        ),
        (
            [
                Entry("s", None, SYSTEM, "t", {"content": "sys"}),
                _msg(1, "user"),
                _msg(2, "assistant"),
                _msg(3, "user"),
            ],
            "e3",
            2,
            None,
        ),
    ],
)
def test_emergency_shrink_keeps_the_last_user_turn_and_carries_the_summary(
    path: list[Entry], cut: str, dropped: int, carried: str | None
) -> None:
    payload = emergency_payload(path, "threshold", 1234)
    assert payload is not None
    assert payload["first_kept_entry_id"] == cut
    assert payload["reason"] == "emergency" and payload["tokens_before"] == 1234
    assert payload["summary"].startswith(f"{EMERGENCY_HEADER}\n{dropped} messages were dropped.")
    assert payload["details"] == {"emergency": True, "trigger": "threshold", "dropped_messages": dropped}
    if carried is None:
        assert "<carried-compaction-summary>" not in payload["summary"]
    else:
        assert f"<carried-compaction-summary>\n{carried}\n</carried-compaction-summary>" in payload["summary"]


@pytest.mark.parametrize(
    "path",
    [[], [_msg(0, "user"), _msg(1, "assistant")], [_msg(0, "assistant")]],
)
def test_emergency_shrink_needs_an_earlier_user_turn_to_cut_at(path: list[Entry]) -> None:
    assert emergency_payload(path, "overflow", 10) is None


def _error_from_local_server(case: str) -> Exception:
    """The exception the real ``openai`` client raises for one failure of the local server."""
    script = {
        "rate": [Reply.rate_limited(retry_after=None)],
        "server": [Reply.server_error()],
        "overflow": [],
    }[case]
    with ModelServer(script=script, context_window=40) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0, timeout=5.0)
        text = "plan the trip " * (40 if case == "overflow" else 1)
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
        except openai.APIError as exc:
            return exc
    raise AssertionError(f"the {case!r} case raised nothing")


@pytest.mark.parametrize(
    ("case", "text", "code", "status"),
    [
        ("rate", "Rate limit reached; try again later.", "rate_limit_exceeded", 429),
        ("server", "The server had an error while processing your request.", None, 500),
        ("overflow", "This model's maximum context length is 40 tokens.", "context_length_exceeded", 400),
    ],
)
def test_api_errors_are_read_into_text_code_and_status(
    case: str, text: str, code: str | None, status: int
) -> None:
    got = api_error_details(_error_from_local_server(case))
    assert (
        got[0].startswith(f"HTTP {status} from http://127.0.0.1:") and "/chat/completions: " + text in got[0]
    )
    assert got[1:] == (code, status)


def test_a_connection_error_names_the_url_and_has_no_code_or_status() -> None:
    with ModelServer() as srv:
        base_url = srv.base_url
    try:
        openai.OpenAI(base_url=base_url, api_key="k", max_retries=0, timeout=5.0).models.list()
    except openai.APIConnectionError as exc:
        text, code, status = api_error_details(exc)
    else:
        raise AssertionError("a stopped server still answered")
    assert text.startswith(f"cannot reach the model server at {base_url}/models (ConnectError: ")
    assert (code, status) == (None, None)
