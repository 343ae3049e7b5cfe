"""Provider overflow recognition and the idle → attempted → reported recovery machine."""

from __future__ import annotations

from typing import Any

import pytest

from ipython_compact.core.overflow import (
    OVERFLOW_PATTERNS,
    RecoveryEvent,
    RecoveryState,
    is_context_overflow,
    is_overflow_text,
    message_is_overflow,
    overflow_step,
)

PROVIDER_TEXTS = [
    "prompt is too long: 213462 tokens > 200000 maximum",
    "Input is too long for requested model.",
    "Your input exceeds the context window of this model",
    "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",
    "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
    "Please reduce the length of the messages or completion",
    "This endpoint's maximum context length is 3000 tokens. However, you requested about 3500 tokens",
    "prompt token count of 140000 exceeds the limit of 128000",
    "the request exceeds the available context size, try increasing it",
    "Trying to keep the first 5000 tokens when context the overflows. greater than the context length",
    "invalid params, context window exceeds limit",
    "Your request exceeded model token limit: 262144",
    "context_length_exceeded",
    "Context length exceeded",
    "too many tokens in request",
    "token limit exceeded for this deployment",
    "413 Request too large",
    "input too long",
    "400 status code (no body)",
    "413 (no body)",
]


@pytest.mark.parametrize("text", PROVIDER_TEXTS)
def test_provider_phrasings_are_overflow(text: str) -> None:
    assert is_overflow_text(text) is True


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "rate limit reached, retry in 2s",
        "503 service unavailable",
        "Invalid API key",
        "500 status code (no body)",
        "tool call arguments were not valid JSON",
    ],
)
def test_other_errors_are_not_overflow(text: str | None) -> None:
    assert is_overflow_text(text) is False


def test_at_least_seventeen_patterns() -> None:
    assert len(OVERFLOW_PATTERNS) >= 17


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"error_code": "context_length_exceeded"}, True),
        ({"error_code": "CONTEXT_LENGTH_EXCEEDED"}, True),
        ({"error_code": "rate_limit_exceeded"}, False),
        ({"stop_reason": "stop", "input_tokens": 3100, "context_window": 3000}, True),
        ({"stop_reason": "stop", "input_tokens": 3000, "context_window": 3000}, False),
        ({"stop_reason": "length", "input_tokens": 9999, "context_window": 3000}, False),
        ({"stop_reason": "stop", "input_tokens": 9999, "context_window": None}, False),
        ({}, False),
    ],
)
def test_codes_and_silent_overflow(kwargs: dict[str, Any], expected: bool) -> None:
    assert is_context_overflow(**kwargs) is expected


@pytest.mark.parametrize(
    ("message", "window", "expected"),
    [
        (
            {
                "role": "assistant",
                "stopReason": "error",
                "errorMessage": "maximum context length is 3000 tokens",
            },
            None,
            True,
        ),
        (
            {
                "role": "assistant",
                "stopReason": "error",
                "errorMessage": "boom",
                "errorCode": "context_length_exceeded",
            },
            None,
            True,
        ),
        ({"role": "assistant", "stopReason": "error", "errorMessage": "rate limited"}, None, False),
        ({"role": "assistant", "stopReason": "stop", "usage": {"input": 2900, "cacheRead": 200}}, 3000, True),
        ({"role": "assistant", "stopReason": "stop", "usage": {"input": 2900, "cacheRead": 0}}, 3000, False),
        # The text of a successful answer never counts, even if it quotes an error.
        ({"role": "assistant", "stopReason": "stop", "errorMessage": "prompt is too long"}, None, False),
        ({"role": "user", "stopReason": "error", "errorMessage": "prompt is too long"}, None, False),
    ],
)
def test_message_is_overflow(message: dict[str, Any], window: int | None, expected: bool) -> None:
    assert message_is_overflow(message, window) is expected


@pytest.mark.parametrize(
    ("state", "event", "kw", "new_state", "action"),
    [
        ("idle", "overflow", {}, "attempted", "compact_and_retry"),
        ("attempted", "overflow", {}, "reported", "report_failure"),
        ("reported", "overflow", {}, "reported", "ignore"),
        ("attempted", "success", {}, "idle", "none"),
        ("reported", "user_message", {}, "idle", "none"),
        ("idle", "overflow", {"same_model": False}, "idle", "ignore"),
        ("attempted", "overflow", {"same_model": False}, "attempted", "ignore"),
        ("idle", "overflow", {"stale": True}, "idle", "ignore"),
        ("idle", "overflow", {"enabled": False}, "reported", "report_failure"),
    ],
)
def test_recovery_machine(
    state: RecoveryState, event: RecoveryEvent, kw: dict[str, bool], new_state: str, action: str
) -> None:
    step = overflow_step(state, event, **kw)
    assert (step.state, step.action) == (new_state, action)
    assert step.why
