"""The compaction subcommands (compact, pin, recall, show, demo) as real subprocesses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ipython_compact.testing import ModelServer, Reply

SCRIPT = Path(sys.executable).parent / "ipython-compact"
BEFORE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"


def run(
    tmp_path: Path, *args: str, code: int = 0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {
        k: v
        for k, v in os.environ.items()
        if k not in ("IPYTHON_COMPACT_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY")
    }
    full["IPYTHON_COMPACT_DIR"] = str(tmp_path / "data")
    full.update(env or {})
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=full, timeout=120)
    assert done.returncode == code, (
        f"exit {done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr}"
    )
    return done


@pytest.mark.slow
def test_demo_runs_offline_in_a_fresh_data_dir(tmp_path: Path) -> None:
    out = run(tmp_path, "demo").stdout
    assert "session 'demo'" in out
    assert "[3] compacted:" in out
    assert "the log grows, the context stays bounded:" in out
    assert "hash chain intact" in out
    assert (
        "planted facts still verbatim in the model's context: goal 1/1, constraints 8/8, pinned text 1/1"
    ) in out
    assert "<anchors" in out and "Always use CUDA 12.4" in out
    again = run(tmp_path, "demo", "--rounds", "6", "--compactions", "1", "--keep-recent-tokens", "500").stdout
    assert "session 'demo-2'" in again
    assert "goal 1/1" in again


@pytest.mark.slow
def test_compact_pin_recall_show_on_a_pi_session(tmp_path: Path) -> None:
    run(tmp_path, "import", str(BEFORE), "--session", "pi")
    plan = run(tmp_path, "compact", "-s", "pi", "--dry-run", "--keep-recent-tokens", "4000").stdout
    assert "keep verbatim (recent tail)" in plan
    plan_json = json.loads(
        run(tmp_path, "compact", "-s", "pi", "--dry-run", "--json", "--keep-recent-tokens", "4000").stdout
    )
    assert plan_json["summarize"]["entries"] > 0 and plan_json["keep"]["tokens"] > 0

    pinned = run(tmp_path, "pin", "-s", "pi", "Never push to main without review").stdout
    assert "pinned pin-1" in pinned
    assert "pin-1 (text): Never push to main without review" in run(tmp_path, "pin", "-s", "pi").stdout

    result = json.loads(
        run(
            tmp_path, "compact", "-s", "pi", "--keep-recent-tokens", "4000", "--focus", "rpc mode", "--json"
        ).stdout
    )
    assert result["tokens_after"] < result["tokens_before"]
    assert result["summarizer"] == "offline"

    shown = run(tmp_path, "show", "-s", "pi").stdout
    # The focus the user gave is part of the record, in `show --json` and `show --list --json`.
    assert json.loads(run(tmp_path, "show", "-s", "pi", "--json").stdout)["focus"] == "rpc mode"
    assert json.loads(run(tmp_path, "show", "-s", "pi", "--list", "--json").stdout)[-1]["focus"] == "rpc mode"
    assert "Never push to main without review" in shown and "## Goal" in shown
    listed = run(tmp_path, "show", "-s", "pi", "--list").stdout
    assert result["id"] in listed and "manual" in listed
    # the imported pi ones, then ours
    assert [row.split()[0] for row in listed.splitlines()][-1] == result["id"]
    oldest = listed.split()[0]
    # pi records no tokens_after: it is read off the log (the panel's timeline reads it the same way)
    assert " -> 0 " not in listed and re.search(
        r"  imported +[\d,]+ -> +[\d,]+ in context$", listed.splitlines()[0]
    )
    by_id = run(tmp_path, "show", "-s", "pi", oldest).stdout
    assert by_id.startswith(f"compaction {oldest} · ") and "Never push to main without review" not in by_id

    hits = json.loads(
        run(tmp_path, "recall", "-s", "pi", "--query", "tui-renderer", "--json", "-n", "2").stdout
    )
    assert len(hits) == 2 and all("tui-renderer" in h["text"].lower() for h in hits)
    # "by search", as the help says: --search is the same option
    searched = run(tmp_path, "recall", "-s", "pi", "--search", "tui-renderer", "--json", "-n", "2").stdout
    assert json.loads(searched) == hits
    one = run(tmp_path, "recall", "-s", "pi", hits[0]["id"]).stdout
    assert one.startswith(f"── entry {hits[0]['id']}")

    run(tmp_path, "pin", "-s", "pi", "--unpin", "pin-1")
    err = run(tmp_path, "pin", "-s", "pi", "--unpin", "pin-1", code=2).stderr
    assert "no active pin 'pin-1'" in err
    assert "give an ENTRY_ID or --query" in run(tmp_path, "recall", "-s", "pi", code=2).stderr
    assert "not a compaction" in run(tmp_path, "show", "-s", "pi", hits[0]["id"], code=2).stderr
    verify = run(tmp_path, "verify").stdout
    assert "ok" in verify.lower()


def _failed_openai_compact(tmp_path: Path, model: str, base_url: str) -> str:
    """The stderr of ``compact -s pi --summarizer openai`` against ``base_url``, which must fail (exit 2)."""
    args = ("--model", model, "--base-url", base_url, "--keep-recent-tokens", "4000")
    return run(tmp_path, "compact", "-s", "pi", "--summarizer", "openai", *args, code=2).stderr


@pytest.mark.slow
def test_openai_summarizer_from_the_command_line(tmp_path: Path) -> None:
    run(tmp_path, "import", str(BEFORE), "--session", "pi")
    err = run(tmp_path, "compact", "-s", "pi", "--summarizer", "openai", code=2).stderr
    assert "no summarizer model configured" in err
    with ModelServer(script=[Reply.rate_limited(retry_after=0.1)] * 8) as srv:
        err = _failed_openai_compact(tmp_path, "m", srv.base_url)
    assert (
        ("manual compaction failed") in err
        and "after 4 attempts" in err
        and "HTTP 429" in err
        and ("recorded as entry") in err
    )
    log = run(tmp_path, "log", "-s", "pi", "-n", "1", "--json").stdout
    assert json.loads(log.splitlines()[-1])["kind"] == "compaction_outcome"
    sections = (
        "## Goal\ng\n\n## Constraints & Preferences\n(none)\n\n## Progress\n### Done\n- [x] d\n\n### In "
        "Progress\n(none)\n\n"
        "### Blocked\n(none)\n\n## Key Decisions\n(none)\n\n## Next Steps\n1. n\n\n## Critical "
        "Context\n(none)"
    )
    # --summarizer auto picks openai when IPYTHON_COMPACT_MODEL is set
    with ModelServer(default=sections) as srv:
        env = {"IPYTHON_COMPACT_MODEL": "env-model", "OPENAI_BASE_URL": srv.base_url}
        done = json.loads(
            run(tmp_path, "compact", "-s", "pi", "--keep-recent-tokens", "4000", "--json", env=env).stdout
        )
        assert (done["summarizer"], (srv.chat_requests[0].body or {})["model"]) == ("openai", "env-model")


@pytest.mark.slow
def test_openai_summarizer_errors_name_the_cause(tmp_path: Path) -> None:
    """A model the server does not serve lists the served ones; a dead server names its URL and
    the refusal; neither hint says "retry later" (retrying cannot help)."""
    run(tmp_path, "import", str(BEFORE), "--session", "pi")
    refusal = Reply(
        status=404,
        error_message="The model `gpt-nothing` does not exist.",
        error_type="NotFoundError",
        error_code="model_not_found",
    )
    with ModelServer([refusal], model="qwen-7b") as srv:
        err = _failed_openai_compact(tmp_path, "gpt-nothing", srv.base_url)
    assert "HTTP 404 from" in err and "the server serves: qwen-7b; pass one of them as --model" in err
    assert "check --model and --base-url" in err and "retry later" not in err
    with ModelServer() as srv:
        dead = srv.base_url
    err = _failed_openai_compact(tmp_path, "m", dead)
    assert f"cannot connect to {dead} (ConnectError: " in err and "Connection refused" in err


def test_a_compaction_that_would_grow_the_context_is_refused(tmp_path: Path) -> None:
    from ipython_compact.cli.demo_transcript import TranscriptGenerator
    from ipython_compact.store import SessionStore

    db = tmp_path / "grow.db"
    store = SessionStore(db)
    store.ensure_session("s")
    for msgs in TranscriptGenerator(4).rounds(8):  # only a small turn prefix lies before a 1,500-token tail
        store.append_many("s", [("message", {"message": m}) for m in msgs])
    before = len(store.path("s"))
    store.close()
    err = run(tmp_path, "compact", "--db", str(db), "-s", "s", "--keep-recent-tokens", "1500", code=2).stderr
    assert "would not make its context smaller" in err and "nothing was written" in err
    assert "try: see what would be summarized: ipython-compact plan -s s" in err
    check = SessionStore(db)
    try:
        assert len(check.path("s")) == before
    finally:
        check.close()


@pytest.mark.slow
def test_demo_says_one_after_figure_per_compaction(tmp_path: Path) -> None:
    """Issue 35, item 6: "[1] … 2,790" against its own table's 2,838. The line each compaction
    prints and the table's "after compaction k" row give the same tokens in context."""
    import re

    out = run(tmp_path, "demo", "--compactions", "2").stdout
    said = {
        int(k): int(b.replace(",", "")) for k, b in re.findall(r"\[(\d)\] compacted: [\d,]+ -> ([\d,]+)", out)
    }
    table = {
        int(k): int(t.replace(",", ""))
        for k, t in re.findall(r"after compaction (\d)\s+[\d,]+\s+[\d,]+\s+([\d,]+)", out)
    }
    assert set(said) == {1, 2} and said == table, (said, table)
