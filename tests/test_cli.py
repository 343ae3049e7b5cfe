"""The ``ipython-compact`` command, run as a real subprocess against real database files."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pi_kept_first import issue_36_session

from ipython_compact.core.context import build_context
from ipython_compact.core.preparation import prepare_compaction
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore
from ipython_compact.store.importers import load_transcript

FIXTURES = Path(__file__).parent / "fixtures" / "pi"
LARGE = FIXTURES / "large-session.jsonl"
BEFORE = FIXTURES / "before-compaction.jsonl"
SCRIPT = Path(sys.executable).parent / "ipython-compact"


def run(tmp_path: Path, *args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
    if not SCRIPT.exists():  # pragma: no cover - editable install missing its script
        pytest.fail(f"{SCRIPT} is missing: run .venv/bin/pip install -e . --no-deps")
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path / "data")}
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)
    if check is not None:
        assert done.returncode == check, (
            f"exit {done.returncode}\nstdout:\n{done.stdout[-2000:]}\nstderr:\n{done.stderr}"
        )
    return done


def test_import_list_log_verify_in_the_default_data_dir(tmp_path: Path) -> None:
    out = run(tmp_path, "import", str(LARGE)).stdout
    assert "imported 1,018 entries (pi) into new session 'large-session'" in out
    again = json.loads(run(tmp_path, "import", str(LARGE), "--session", "copy", "--json").stdout)
    assert (again["session"], again["imported"], again["created"], again["format"]) == (
        "copy",
        1018,
        True,
        "pi",
    )
    assert (tmp_path / "data" / "sessions.db").exists()
    sessions = json.loads(run(tmp_path, "sessions", "--json").stdout)
    assert [(s["name"], s["entries"]) for s in sessions] == [("large-session", 1018), ("copy", 1018)]
    log_lines = run(tmp_path, "log", "--json", "--session", "large-session").stdout.splitlines()
    assert len(log_lines) == 1018
    assert json.loads(log_lines[0])["index"] == 0
    table = run(tmp_path, "log", "-n", "3", "-s", "large-session").stdout.splitlines()
    assert len(table) == 4 and "1,018 entries" in table[0]
    assert run(tmp_path, "verify").stdout.startswith("ok: 2,036 entries in 2 session(s)")
    assert json.loads(run(tmp_path, "verify", "--json", "-s", "copy").stdout)["entries"] == 1018


def test_db_option_before_or_after_the_command(tmp_path: Path) -> None:
    db = tmp_path / "elsewhere.db"
    run(tmp_path, "--db", str(db), "import", str(LARGE), "--session", "one")
    run(tmp_path, "import", str(LARGE), "--session", "two", "--db", str(db))
    names = [s["name"] for s in json.loads(run(tmp_path, "sessions", "--json", "--db", str(db)).stdout)]
    assert names == ["one", "two"]
    assert not (tmp_path / "data" / "sessions.db").exists()


@pytest.mark.parametrize("keep", [2000, 20000, 60000])
@pytest.mark.parametrize("estimator", ["chars4", "density"])
def test_plan_on_a_file_matches_the_core(tmp_path: Path, keep: int, estimator: str) -> None:
    report = json.loads(
        run(
            tmp_path,
            "plan",
            str(LARGE),
            "--json",
            "--keep-recent-tokens",
            str(keep),
            "--estimator",
            estimator,
        ).stdout
    )
    transcript = load_transcript(LARGE)
    prep = prepare_compaction(
        transcript.path(), CompactionSettings(keep_recent_tokens=keep, estimator=estimator)
    )  # type: ignore[arg-type]
    assert prep is not None
    assert report["first_kept_index"] == prep.first_kept_index
    assert report["first_kept_entry_id"] == transcript.entries[report["first_kept_index"]].id
    assert report["turn_start_index"] == prep.turn_start_index
    assert report["is_split_turn"] == prep.is_split_turn
    assert report["messages_to_summarize"] == len(prep.messages_to_summarize)
    assert report["tokens_before"] == prep.tokens_before
    assert not (tmp_path / "data").exists()  # planning a file touches no database


def test_plan_on_a_session_agrees_with_plan_on_its_file(tmp_path: Path) -> None:
    run(tmp_path, "import", str(LARGE))
    from_file = json.loads(run(tmp_path, "plan", str(LARGE), "--json").stdout)
    from_session = json.loads(run(tmp_path, "plan", "--json", "--window", "200000").stdout)
    for key in (
        "first_kept_entry_id",
        "first_kept_index",
        "turn_start_index",
        "is_split_turn",
        "messages_to_summarize",
        "tokens_before",
    ):
        assert from_session[key] == from_file[key], key
    assert from_session["decision"] in ("none", "background", "blocking")
    text = run(tmp_path, "plan").stdout
    assert "would summarize" in text and "would keep" in text


def test_plan_after_a_compaction_counts_from_the_branch_root(tmp_path: Path) -> None:
    run(tmp_path, "import", str(BEFORE), "--session", "bc")
    report = json.loads(run(tmp_path, "plan", "--json").stdout)
    with SessionStore(tmp_path / "data" / "sessions.db") as store:
        path = store.path("bc")
    assert path[report["first_kept_index"]].id == report["first_kept_entry_id"]
    assert report["has_previous_summary"] is True


def test_plan_with_nothing_to_compact(tmp_path: Path) -> None:
    report = json.loads(
        run(tmp_path, "plan", str(LARGE), "--json", "--keep-recent-tokens", "10000000").stdout
    )
    assert (
        report["compactable"],
        report["first_kept_index"],
        report["turn_start_index"],
        report["messages_to_summarize"],
    ) == (False, -1, -1, 0)


@pytest.mark.parametrize("kind", ["bashExecution", "custom_message", "branch_summary"])
def test_plan_with_pis_split_flag_and_an_empty_prefix_promises_no_prefix_summary(
    tmp_path: Path, kind: str
) -> None:
    """Issue 36's shape: pi (and ``chars4``) flag a cut at an entry that opens its turn as a split
    turn starting at the cut; nothing is before it in the turn, so there is no prefix to summarize
    (neither pi's compact nor ours makes one). ``density`` calls it no split."""
    file = tmp_path / "issue36.jsonl"
    file.write_text(issue_36_session(kind).jsonl(), encoding="utf-8")
    plan = ("plan", str(file), "--keep-recent-tokens", "1000")
    report = json.loads(run(tmp_path, *plan, "--estimator", "chars4", "--json").stdout)
    assert (report["first_kept_index"], report["is_split_turn"], report["turn_start_index"]) == (7, True, 7)
    assert report["turn_prefix_messages"] == 0
    text = " ".join(run(tmp_path, *plan, "--estimator", "chars4").stdout.split())
    assert "prefix summary" not in text
    assert (
        "split turn yes, as pi flags it: the turn starts at the kept entry itself (index 7), so "
        "nothing is summarized as a turn prefix"
    ) in text
    density = " ".join(run(tmp_path, *plan, "--estimator", "density").stdout.split())
    assert "split turn no would keep" in density


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    out = []
    for block in content or []:
        if block.get("type") == "text":
            out.append(block["text"])
        elif block.get("type") == "thinking":
            out.append(block["thinking"])
    return out


def test_context_prints_every_message_in_full(tmp_path: Path) -> None:
    run(tmp_path, "import", str(BEFORE), "--session", "bc")
    with SessionStore(tmp_path / "data" / "sessions.db") as store:
        expected = build_context(store.context_path("bc"))
    as_json = json.loads(run(tmp_path, "context", "--json").stdout)
    assert as_json == expected
    text = run(tmp_path, "context").stdout
    assert f"{len(expected)} messages" in text.splitlines()[0]
    longest = max((t for m in expected for t in _texts(m)), key=len)
    assert len(longest) > 5000
    assert longest in text
    missing = [t for m in expected for t in _texts(m) if t not in text]
    assert missing == []


def test_export_import_round_trip_through_the_command(tmp_path: Path) -> None:
    run(tmp_path, "import", str(BEFORE), "--session", "bc")
    exported = tmp_path / "bc.jsonl"
    run(tmp_path, "export", "--session", "bc", "-o", str(exported))
    other = tmp_path / "other.db"
    run(tmp_path, "--db", str(other), "import", str(exported))
    again = run(tmp_path, "--db", str(other), "export").stdout
    assert again.splitlines()[1:] == exported.read_text(encoding="utf-8").splitlines()[1:]


def test_import_into_existing_session_appends_after_the_leaf(tmp_path: Path) -> None:
    run(tmp_path, "import", str(LARGE), "--session", "s")
    out = run(tmp_path, "import", str(LARGE), "--session", "s", "--new-ids").stdout
    assert "existing session 's' (appended after its leaf)" in out
    assert "stored as copies: every entry got a fresh id (--new-ids)" in out
    assert len(run(tmp_path, "log", "--json").stdout.splitlines()) == 2036


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"type":"session","id":"x","timestamp":"t","version":3}\n{oops\n', r"bad\.jsonl:2: invalid JSON"),
        (b'{"type":"nonsense"}\n', r"bad\.jsonl:1: cannot tell the format"),
    ],
)
def test_malformed_import_exits_2_names_file_and_line_and_writes_nothing(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    done = run(tmp_path, "import", str(bad), check=2)
    assert done.stdout == ""
    assert re.search(expected, done.stderr), done.stderr
    assert "try:" in done.stderr
    assert json.loads(run(tmp_path, "sessions", "--json").stdout) == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("log", "--session", "ghost"), "no session named 'ghost'"),
        (("context",), "has no sessions yet"),
        (("plan", "--keep-recent-tokens", "-1"), "--keep-recent-tokens must be 0 or more, got -1"),
        (("--db", "/nonexistent-dir/x.db", "sessions"), "does not exist"),
    ],
)
def test_errors_go_to_stderr_with_exit_2_and_a_hint(
    tmp_path: Path, args: tuple[str, ...], fragment: str
) -> None:
    done = run(tmp_path, *args, check=2)
    assert fragment in done.stderr
    assert done.stderr.startswith("ipython-compact: error:")
    assert "try:" in done.stderr


def test_corrupt_database_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"definitely not sqlite" * 100)
    done = run(tmp_path, "--db", str(broken), "sessions", check=2)
    assert "broken.db" in done.stderr and "not a usable ipython-compact database" in done.stderr


def test_verify_fails_with_exit_1_when_history_was_altered(tmp_path: Path) -> None:
    run(tmp_path, "import", str(LARGE))
    db = tmp_path / "data" / "sessions.db"
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute("UPDATE entries SET data = replace(data, 'the', 'THE') WHERE seq = 10")
    conn.commit()
    conn.close()
    done = run(tmp_path, "verify", check=1)
    assert "FAILED" in done.stdout and "does not match its hash" in done.stdout
    report = json.loads(run(tmp_path, "verify", "--json", check=1).stdout)
    assert (report["ok"], report["entries"], len(report["problems"])) == (False, 1018, 2)
    # the guard dropped too
    assert any("trigger 'entries_no_update' is missing" in p for p in report["problems"])
