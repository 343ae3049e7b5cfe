"""Every numeric option is checked by argparse (no ValueError or OverflowError from deep inside),
misspelt commands, options and choices get a "did you mean", and blank session names are refused.
Real subprocesses, real SQLite files; the stored log must stay byte-for-byte the same."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BEFORE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
SCRIPT = Path(sys.executable).parent / "ipython-compact"
HUGE = "9" * 30


def run(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(data)}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("cli-options") / "data"
    assert run(data, "import", str(BEFORE), "--session", "work").returncode == 0
    return data


@pytest.mark.parametrize(
    ("args", "fragment", "hint"),
    [
        (
            ("plan", "-s", "work", "--window", "8000"),
            "--window 8,000 leaves no room: it must be larger than --reserve-tokens (16,384)",
            "plan --window 128000",
        ),
        (
            ("plan", "-s", "work", "--window", HUGE),
            "--window must be at most 1,000,000,000 of tokens",
            "plan --window 128000",
        ),
        (
            ("plan", "-s", "work", "--window", "lots"),
            "--window expects a whole number, got 'lots'",
            "plan --window 128000",
        ),
        (
            ("plan", "-s", "work", "--keep-recent-tokens", HUGE),
            "--keep-recent-tokens must be at most",
            "--keep-recent-tokens 20000",
        ),
        (("log", "-s", "work", "-n", HUGE), "-n must be at most 1,000,000,000", "log -n 20"),
        (("log", "-s", "work", "-n", "-1"), "-n must be 0 or more, got -1", "log -n 20"),
        (("log", "-s", "work", "--limit", "-1"), "--limit must be 0 or more, got -1", "log --limit 20"),
        (("recall", "-s", "work", "-q", "theme", "-n", HUGE), "-n must be at most", "recall -n 5"),
        (
            ("compact", "-s", "work", "--reserve-tokens", HUGE),
            "--reserve-tokens must be at most",
            "--reserve-tokens 16384",
        ),
        (("demo", "--rounds", "0"), "--rounds must be 1 or more, got 0", "demo --rounds 16"),
        (
            ("compcat",),
            "unknown command 'compcat'; did you mean 'compact'?",
            "ipython-compact compact --help",
        ),
        (
            ("sesions",),
            "unknown command 'sesions'; did you mean 'sessions'?",
            "ipython-compact sessions --help",
        ),
        (
            ("recall", "-s", "work", "--qeury", "theme"),
            "unknown option '--qeury' for ipython-compact recall; did you mean '--query'?",
            "ipython-compact recall --help",
        ),
        (("plan", "-s", "work", "--windw", "9"), "did you mean '--window'?", "ipython-compact plan --help"),
        (
            ("plan", "-s", "work", "--estimator", "char4"),
            "--estimator: unknown value 'char4'; did you mean 'chars4'?",
            "plan --estimator chars4",
        ),
        (("log", "-s", ""), "-s must name a session, got ''", "-s NAME"),
        (("log", "-s", "   "), "-s must name a session, got '   '", "-s NAME"),
        (("import", str(BEFORE), "-s", " "), "-s must name a session", "-s NAME"),
    ],
    ids=[
        "window-below-reserve",
        "window-huge",
        "window-text",
        "keep-huge",
        "log-n-huge",
        "log-n-negative",
        "log-limit-negative",
        "recall-n-huge",
        "reserve-huge",
        "demo-rounds-0",
        "command-typo",
        "command-typo-2",
        "option-typo",
        "option-typo-2",
        "choice-typo",
        "blank-session",
        "space-session",
        "import-blank-session",
    ],
)
def test_bad_options_exit_2_with_a_hint_and_change_nothing(
    stored: Path, args: tuple[str, ...], fragment: str, hint: str
) -> None:
    db = stored / "sessions.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    done = run(stored, *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "usage:" not in done.stderr
    assert done.stderr.startswith("ipython-compact: error:") and fragment in done.stderr, done.stderr
    assert "  try: " in done.stderr and hint in done.stderr, done.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_numbers_in_range_still_work(stored: Path) -> None:
    done = run(stored, "plan", "-s", "work", "--window", "200000", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["window"] == 200000
    assert run(stored, "log", "-s", "work", "-n", "1_000_000").returncode == 0


def test_a_blank_name_inside_a_file_falls_back_to_the_file_name(tmp_path: Path) -> None:
    source = tmp_path / "named-by-file.jsonl"
    entry = {
        "id": "a",
        "parent_id": None,
        "kind": "message",
        "timestamp": "t",
        "data": {"message": {"role": "user", "content": "hi"}},
    }
    source.write_text(
        json.dumps({"type": "ipython_compact_session", "version": 1, "name": "  ", "leaf_id": "a"})
        + "\n"
        + json.dumps(entry)
        + "\n"
    )
    data = tmp_path / "data"
    assert run(data, "import", str(source)).returncode == 0
    assert [s["name"] for s in json.loads(run(data, "sessions", "--json").stdout)] == ["named-by-file"]
