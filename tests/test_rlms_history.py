"""rlms' ``history`` is a real list (issue 35, item 7): rlms promises "a list", so json.dumps,
``history + [...]`` and ``isinstance(history, list)`` must work, indexing must not read the log,
and it follows the session as the host logs more (refreshed before each cell)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ipython_compact.agent import kernel_history
from ipython_compact.store import SessionStore


def _say(store: SessionStore, role: str, text: str) -> None:
    store.append("rlm", "message", {"message": {"role": role, "content": text}})


def test_history_is_a_list_that_follows_the_log(ip: Any, tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    store = SessionStore(str(db))
    store.ensure_session("rlm")
    try:
        _say(store, "user", "count the words")
        _say(store, "assistant", "```repl\nlen(words)\n```")
        kernel_history.install(ip, str(db), "rlm")
        ip.run_cell(
            "import json\nas_text = json.dumps(history)\nmore = history + [['x']]\n"
            "is_list = isinstance(history, list)"
        )
        ns = ip.user_ns
        assert ns["is_list"] is True and json.loads(ns["as_text"]) == ns["history"]
        assert len(ns["more"]) == len(ns["history"]) + 1
        assert type(ns["history"]).__getitem__ is list.__getitem__  # indexing never reads the log
        first = len(ns["history"])
        _say(store, "assistant", "FINAL(3)")
        ip.run_cell("now = len(history)")
        assert ns["now"] == first + 1 and ns["history"][-1][0]["content"] == "FINAL(3)"
        # a second install replaces the first and its hook: one refresh per cell
        kernel_history.install(ip, str(db), "rlm")
        hooks = [f for f in ip.events.callbacks["pre_run_cell"] if getattr(f, "__self__", None) is not None]
        assert sum(isinstance(f.__self__, kernel_history.LoggedHistory) for f in hooks) == 1
    finally:
        ip.events.unregister("pre_run_cell", ip.user_ns["history"].refresh)
        store.close()


def test_history_of_a_session_not_written_yet_is_empty(ip: Any, tmp_path: Path) -> None:
    SessionStore(str(tmp_path / "log.db")).close()
    kernel_history.install(ip, str(tmp_path / "log.db"), "nobody")
    try:
        assert ip.user_ns["history"] == []
    finally:
        ip.events.unregister("pre_run_cell", ip.user_ns["history"].refresh)
