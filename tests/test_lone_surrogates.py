"""Half an emoji from a model (a lone UTF-16 surrogate, JSON ``"\\ud83d"``) is kept as U+FFFD
with a notice, as the importer keeps one from a file; it never sinks the turn or the append.

Why: the fourth red team's scripted model answered ``"\\ud83d"``; ``Agent.ask`` raised
``UnicodeEncodeError`` from the store's hash, the reply was never logged and the turn died.
``SessionStore.append`` failed the same way on SQLite and PostgreSQL. A surrogate pair that
arrives as two code points (a stream cut between its halves) is the one character it spells.

Real parts: the openai client over HTTP to ``ModelServer`` (which writes the reply with JSON's
``\\u`` escapes), real SQLite files and a real PostgreSQL server (``postgres_server``).
"""

from __future__ import annotations

import logging
from pathlib import Path

import openai
import pytest

from ipython_compact.agent.loop import Agent, AgentEvent
from ipython_compact.core.entries import MESSAGE
from ipython_compact.store import SessionStore
from ipython_compact.testing.model_server import ModelServer, Reply

HALF = "\ud83d"  # the high half of U+1F600 alone
PAIR_AS_TWO = "\ud83d\ude00"  # both halves, as two code points: what a stream cut between them gives


def message(text: str) -> dict[str, object]:
    return {"message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}


def test_an_append_keeps_a_lone_surrogate_as_the_replacement_character(
    location: str | Path, caplog: pytest.LogCaptureFixture
) -> None:
    with SessionStore(location) as store:
        store.create_session("s")
        with caplog.at_level(logging.WARNING, logger="ipython_compact"):
            entry = store.append("s", MESSAGE, message(f"half {HALF} emoji"))
            keyed = store.append("s", "custom", {"custom_type": "x", "data": {f"k{HALF}": [HALF, 1]}})
            joined = store.append("s", MESSAGE, message(f"a {PAIR_AS_TWO} face"))
        assert entry.data == message("half \ufffd emoji")
        assert keyed.data == {"custom_type": "x", "data": {"k\ufffd": ["\ufffd", 1]}}
        assert joined.data == message("a \U0001f600 face")
        assert [e.data for e in store.entries("s")] == [entry.data, keyed.data, joined.data]
        assert store.verify("s").ok
        notices = [r.getMessage() for r in caplog.records if "surrogate" in r.getMessage()]
        assert len(notices) == 2 and "U+FFFD" in notices[0], notices


def _agent(
    tmp_path: Path, server: ModelServer, *, stream: bool
) -> tuple[Agent, SessionStore, list[AgentEvent]]:
    store = SessionStore(tmp_path / "s.db")
    events: list[AgentEvent] = []
    agent = Agent(
        store=store,
        session="t",
        client=openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0),
        model="local-model",
        context_window=32000,
        subcalls=False,
        stream=stream,
        on_event=events.append,
    )
    return agent, store, events


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_with_half_an_emoji_is_answered_and_logged(
    tmp_path: Path, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with ModelServer([Reply(text=f"half {HALF} emoji"), Reply(text="second turn")]) as srv:
        agent, store, events = _agent(tmp_path, srv, stream=stream)
        with caplog.at_level(logging.WARNING, logger="ipython_compact"):
            answer = agent.ask("hi")
        assert (answer.stopped, answer.text) == ("final", "half \ufffd emoji")
        assert agent.ask("again").text == "second turn"  # the session goes on
    replies = [
        e.data["message"]
        for e in store.entries("t", kinds=(MESSAGE,))
        if e.data["message"]["role"] == "assistant"
    ]
    assert [r["content"] for r in replies] == [
        [{"type": "text", "text": "half \ufffd emoji"}],
        [{"type": "text", "text": "second turn"}],
    ]
    shown = "".join(e.text for e in events)
    assert HALF not in shown and "\ufffd" in shown  # what a terminal prints can be encoded
    shown.encode("utf-8")
    assert any("surrogate" in r.getMessage() and "U+FFFD" in r.getMessage() for r in caplog.records)
    store.close()
