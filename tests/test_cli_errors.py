"""Acceptance pass of the ``ipython-compact`` command: user mistakes found by running it as a
newcomer would. Each must exit 2 with ``error:`` + ``try:`` on stderr, no traceback, and leave the
stored log byte-for-byte as it was. Real subprocesses, real SQLite files."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "pi"
BEFORE = FIXTURES / "before-compaction.jsonl"
SCRIPT = Path(sys.executable).parent / "ipython-compact"


def run(data: Path, *args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(data)}
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)
    if check is not None:
        assert done.returncode == check, (
            f"exit {done.returncode}\nstdout:\n{done.stdout[-2000:]}\nstderr:\n{done.stderr}"
        )
    return done


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding one imported session 'work'."""
    data = tmp_path_factory.mktemp("cli-errors") / "data"
    run(data, "import", str(BEFORE), "--session", "work")
    return data


@pytest.mark.parametrize(
    ("args", "fragment", "hint"),
    [
        (
            ("plan", "-s", "work", "--window", "0"),
            "--window must be a positive number of tokens, got 0",
            "plan --window 128000",
        ),
        (("plan", "-s", "work", "--window", "-100"), "got -100", "plan --window 128000"),
        (
            ("export", "-s", "work", "-o", "/no/such/dir/out.jsonl"),
            "the directory /no/such/dir does not exist",
            "mkdir -p /no/such/dir",
        ),
        (("recall", "-s", "work", "-q", "theme", "-n", "0"), "-n must be 1 or more, got 0", "-n 5"),
        (
            ("recall", "-s", "work", "-q", "theme", "-n", "-3"),
            "-n must be 1 or more, got -3",
            "recall -n 5",
        ),
        (("pin", "-s", "work", "   "), "the text to pin is empty", "ipython-compact pin '"),
        (("recall", "-s", "work", "nosuchid"), "no entry 'nosuchid'", "ipython-compact log -s work"),
        (("show", "-s", "work", "nosuchid"), "no entry 'nosuchid'", "show --list"),
        (("compact", "-s", "ghost"), "no session named 'ghost'", "ipython-compact sessions"),
    ],
    ids=[
        "window-0",
        "window-negative",
        "export-missing-dir",
        "recall-limit-0",
        "recall-limit-negative",
        "pin-blank",
        "recall-unknown-id",
        "show-unknown-id",
        "unknown-session",
    ],
)
def test_mistakes_exit_2_with_a_hint_and_change_nothing(
    stored: Path, args: tuple[str, ...], fragment: str, hint: str
) -> None:
    db = stored / "sessions.db"
    before = digest(db)
    done = run(stored, *args, check=2)
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("ipython-compact: error:") and fragment in done.stderr
    assert "  try: " in done.stderr and hint in done.stderr
    assert digest(db) == before
    assert not Path("/no/such/dir/out.jsonl.partial").exists()


@pytest.mark.parametrize("below", ["a-file/sub", "a-file"], ids=["under-a-file", "is-a-file"])
def test_a_data_dir_that_cannot_be_created_is_named(tmp_path: Path, below: str) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    done = run(tmp_path / below, "sessions", check=2)
    assert "Traceback" not in done.stderr
    assert f"cannot create the data directory {tmp_path / below}" in done.stderr
    assert "IPYTHON_COMPACT_DIR" in done.stderr and "--db PATH" in done.stderr


def test_read_only_data_dir_says_why_and_what_to_do(tmp_path: Path) -> None:
    """A read-only filesystem (a tmpfs mounted read-only); root ignores file modes, so a mount is the
    only honest read-only place. Needs root and mount rights: skipped without them."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(mnt)], capture_output=True).returncode
    ):
        pytest.skip("mounting a read-only tmpfs needs root")
    try:
        run(mnt, "import", str(BEFORE), "--session", "work")
        before = digest(mnt / "sessions.db")
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        for args in (("sessions",), ("pin", "-s", "work", "hello")):
            done = run(mnt, *args, check=2)
            assert "Traceback" not in done.stderr
            assert f"the directory {mnt} is read-only" in done.stderr
            assert f"cp {mnt / 'sessions.db'} /tmp/sessions.db" in done.stderr
        assert digest(mnt / "sessions.db") == before
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_log_shows_what_each_pin_entry_did(tmp_path: Path) -> None:
    data = tmp_path / "data"
    run(data, "import", str(BEFORE), "--session", "work")
    first = json.loads(run(data, "log", "-s", "work", "-n", "1", "--json").stdout)["id"]
    run(data, "pin", "-s", "work", "never write into /data/raw")
    run(data, "pin", "-s", "work", "--entry", first)
    run(data, "pin", "-s", "work", "--unpin", "pin-1")
    rows = run(data, "log", "-s", "work", "-n", "3").stdout.splitlines()[1:]
    assert rows[0].endswith("pin-1: 'never write into /data/raw'")
    assert rows[1].endswith(f"pin-2: entry {first}")
    assert rows[2].endswith("unpin pin-1")


def test_human_output_has_thousands_separators_and_no_none(tmp_path: Path) -> None:
    data = tmp_path / "data"
    imported = run(data, "import", str(BEFORE), "--session", "work").stdout
    assert imported.startswith("imported 1,002 entries (pi)")
    assert run(data, "verify").stdout.startswith("ok: 1,002 entries in 1 session(s)")
    assert "1,002" in run(data, "sessions").stdout
    assert "1,002 entries on the current branch" in run(data, "log", "-n", "1").stdout
    # pi's compaction records no reason: it came in by import, as the panel's timeline says too
    shown = " ".join(run(data, "show", "-s", "work").stdout.split("\n<")[0].split())
    assert "reason imported" in shown and "tokens in context" in shown and "None" not in shown


@pytest.mark.parametrize(
    "args", [("context", "-s", "work"), ("recall", "-s", "work", "-q", "theme"), ("export", "-s", "work")]
)
def test_output_piped_into_head_ends_quietly(stored: Path, args: tuple[str, ...]) -> None:
    """`ipython-compact context | head -1`: the reader closes the pipe early; that is no error."""
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(stored)}
    proc = subprocess.Popen([str(SCRIPT), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert "Traceback" not in stderr and "error" not in stderr


@pytest.mark.parametrize(
    "args",
    [
        ("pin", "-s", "work", "text", "--entry", "x"),
        ("pin", "-s", "work", "--entry", "x", "--unpin", "pin-1"),
        ("pin", "-s", "work", "text", "--unpin", "pin-1"),
    ],
    ids=["text+entry", "entry+unpin", "text+unpin"],
)
def test_pin_refuses_two_actions_at_once(stored: Path, args: tuple[str, ...]) -> None:
    before = digest(stored / "sessions.db")
    done = run(stored, *args, check=2)
    assert "give one of TEXT, --entry or --unpin, not " in done.stderr and "  try: " in done.stderr
    assert digest(stored / "sessions.db") == before


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ((), "nothing would be compacted: nothing to compact"),
        (("--json",), '{"compactable": false, "reason": "nothing to compact'),
    ],
)
def test_dry_run_with_nothing_to_compact_answers_with_exit_0(
    tmp_path: Path, extra: tuple[str, ...], expected: str
) -> None:
    data = tmp_path / "data"
    run(data, "import", str(BEFORE), "--session", "work")
    run(data, "compact", "-s", "work")
    before = digest(data / "sessions.db")
    assert run(data, "compact", "-s", "work", "--dry-run", *extra).stdout.startswith(expected)
    assert run(data, "compact", "-s", "work", check=2).stderr.startswith(
        "ipython-compact: error: nothing to compact"
    )
    assert digest(data / "sessions.db") == before


def test_a_transcript_passed_as_db_is_named_and_left_alone(tmp_path: Path) -> None:
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(BEFORE.read_bytes())
    done = run(tmp_path / "data", "--db", str(transcript), "sessions", check=2)
    assert f"{transcript} is a JSONL transcript, not a database" in done.stderr
    assert f"ipython-compact import {transcript}" in done.stderr
    assert transcript.read_bytes() == BEFORE.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.jsonl"]


@pytest.mark.parametrize("command", ["import", "plan"])
@pytest.mark.parametrize(
    ("second_line", "fragment"),
    [
        ('{"type":"message"}', ":2: message entry: 'timestamp' must be a non-empty string"),
        ("[1, 2]", ":2: expected a JSON object, got list"),
        ("{broken", ":2: invalid JSON"),
    ],
    ids=["missing-fields", "not-an-object", "bad-json"],
)
def test_a_bad_line_is_named_with_what_to_fix(
    tmp_path: Path, command: str, second_line: str, fragment: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        BEFORE.read_text(encoding="utf-8").splitlines()[0] + "\n" + second_line + "\n", encoding="utf-8"
    )
    done = run(tmp_path / "data", command, str(bad), check=2)
    assert fragment in done.stderr and f"try: fix line 2 of {bad}" in done.stderr
    assert json.loads(run(tmp_path / "data", "sessions", "--json").stdout) == []  # nothing stored


def _subparsers() -> dict[str, Any]:
    from ipython_compact.cli import build_parser

    parser = build_parser()
    (action,) = [a for a in parser._actions if a.dest == "command"]
    return dict(action.choices)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", sorted(_subparsers()))
def test_every_option_of_every_command_is_explained(command: str) -> None:
    sub = _subparsers()[command]
    bare = [a.option_strings or [a.dest] for a in sub._actions if not a.help]
    assert bare == [], f"{command}: options without help text: {bare}"
    assert sub.format_help().startswith(f"usage: ipython-compact {command}")


def test_another_programs_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    import sqlite3

    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE entries (x)")
    conn.execute("INSERT INTO entries VALUES (1)")
    conn.commit()
    conn.close()
    before = digest(other)
    for args in (("sessions",), ("import", str(BEFORE))):
        done = run(tmp_path / "data", "--db", str(other), *args, check=2)
        assert (
            f"{other}: a SQLite database of another program (tables: entries), not an ipython-compact one"
        ) in done.stderr
        assert "  try: pass another database" in done.stderr
    assert digest(other) == before and sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_import_twice_with_the_short_session_option_reads_well(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = run(data, "import", str(BEFORE), "-s", "a").stdout
    second = run(data, "import", str(BEFORE), "-s", "a", "--new-ids").stdout.splitlines()
    assert first.startswith("imported 1,002 entries (pi) into new session 'a'; leaf ")
    assert second[0].startswith(
        "imported 1,002 entries (pi) into existing session 'a' (appended after its leaf); leaf "
    )
    assert second[1] == "  stored as copies: every entry got a fresh id (--new-ids)"
    assert run(data, "verify").stdout.startswith("ok: 2,004 entries in 1 session(s)")


def test_demo_names_its_database_in_the_commands_it_suggests(tmp_path: Path) -> None:
    """`make demo` sets IPYTHON_COMPACT_DIR; the suggested commands must find the demo without it."""
    data = tmp_path / "data"
    last = run(data, "demo", "--compactions", "1").stdout.splitlines()[-1]
    db = data / "sessions.db"
    assert last == (
        f"next: ipython-compact log -s demo --db {db} · ipython-compact context -s demo --db "
        f"{db} · "
        f"ipython-compact recall --query 'KeyError' -s demo --db {db}"
    )
    env = {k: v for k, v in os.environ.items() if k != "IPYTHON_COMPACT_DIR"}
    env["HOME"] = str(tmp_path / "home")  # the default data dir, empty: only --db can find the demo
    shown = subprocess.run(
        [str(SCRIPT), "log", "-s", "demo", "--db", str(db), "-n", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0 and shown.stdout.startswith("session 'demo': ")


def test_demo_too_short_to_compact_says_so(tmp_path: Path) -> None:
    done = run(tmp_path / "data", "demo", "--rounds", "4", "--compactions", "1", check=2)
    assert "Traceback" not in done.stderr
    assert (
        "nothing to compact in session 'demo'" in done.stderr
        and ("(after 4 turns with --keep-recent-tokens 3,000)") in done.stderr
    )
    assert "  try: ipython-compact demo --rounds 16" in done.stderr


def test_recall_header_counts_lines_in_english(tmp_path: Path) -> None:
    data = tmp_path / "data"
    run(data, "import", str(BEFORE), "-s", "work")
    pinned = run(data, "pin", "-s", "work", "one line only").stdout.split("(entry ", 1)[1].split(")", 1)[0]
    header = run(data, "recall", "-s", "work", pinned).stdout.splitlines()[0]
    assert header.startswith(f"── entry {pinned} · pin · ") and header.endswith(" · 1 line")


@pytest.mark.parametrize(("forced", "command"), [("jsonl", "import"), ("jsonl", "plan")])
def test_a_wrongly_forced_format_suggests_auto(tmp_path: Path, forced: str, command: str) -> None:
    done = run(tmp_path / "data", command, str(BEFORE), "--format", forced, check=2)
    assert "before-compaction.jsonl:1: first line must be" in done.stderr
    assert (
        f"try: let it detect the format from line 1: ipython-compact {command} {BEFORE} --format auto"
    ) in done.stderr
