"""With a live ``%%agent``, one figure for the context on every surface (issue 35).

The agent counts its context with an estimate that learns the model's tokenizer from the server's
usage (``agent/token_learning.py``); its thresholds, ``%compact status`` and the panel's gauge read
that figure. The timeline card, ``%compact log`` and the CLI's ``show`` read the log, and
re-estimated the context right after a compaction with the density estimate, and ``%compact now``
took its "before" from the density estimate too: a cell read "2,482 → …" while ``status`` said
6,458 for the same moment. The truth for "context now" is the figure the agent compacts by; every
surface now shows it, and names the estimate that counted it.

The scripted server plays a tokenizer that makes three tokens of numeric text where the density
estimate sees one (its usage is three times its own count), so the two estimates are far apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_fixtures import evaluate, execute, magic, running_kernel

from ipython_compact import Agent
from ipython_compact.agent.events import AgentEvent
from ipython_compact.compaction.timeline import summaries_of
from ipython_compact.core.tokens import estimate_context
from ipython_compact.store import SessionStore
from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply

TRIPLE = 3


def triple_tokenizer(req: RecordedRequest) -> Reply:
    """A model whose tokenizer counts three times what the server's chars/4 estimate does."""
    return Reply(
        "Noted. " + "fine " * 20, usage={"prompt_tokens": TRIPLE * req.prompt_tokens, "completion_tokens": 30}
    )


def readings(seed: int, count: int = 150) -> str:
    return f"Readings {seed}: " + " ".join(str((seed * 7919 + i * 104729) % 1000003) for i in range(count))


def _density_now(data: Path, session: str) -> int:
    with SessionStore(data / "sessions.db") as store:
        view = store.context_view(session)
        return int(estimate_context(view.entries, "density", tokens=view.tokens("density")).tokens)


@pytest.mark.slow
def test_compact_now_status_the_timeline_and_cli_show_give_the_live_agents_figure(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with (
        ModelServer(triple_tokenizer) as srv,
        running_kernel(data, IPYTHON_COMPACT_SESSION="gap") as km,
    ):
        assert execute(km, "%load_ext ipython_compact")["status"] == "ok"
        for seed in range(6):
            cell = f"%%agent --model m --base-url {srv.base_url} --window 12000\n{readings(seed)}"
            assert execute(km, cell, timeout=120)["status"] == "ok"
        before = magic(km, "status")["data"]
        assert before["estimate"].startswith("calibrated ×"), before["estimate"]
        done = magic(km, "now")
        after = magic(km, "status")["data"]
        cards = evaluate(
            km,
            "from ipython_compact.kernel.extension import extension_for",
            "__import__('json').dumps(extension_for(get_ipython()).service.summaries())",
        )
    comp = done["data"]
    # the case that read as a contradiction: right after a compaction (no usage anchor to lean on)
    # the log's density estimate is far below the agent's learned one
    assert _density_now(data, "gap") < 0.6 * after["tokens"]
    # the cell: before as the gauge said just before, after as it says just after
    assert (comp["tokens_before"], comp["context_after"]) == (before["tokens"], after["tokens"])
    assert comp["estimate"] == after["estimate"]
    head = done["title"]
    assert f"{before['tokens']:,} → {after['tokens']:,} tokens in context" in head, head
    # the timeline card (the panel's, `%compact log`'s): the same figures, the estimate named
    card = cards[-1]
    assert card["id"] == comp["id"]
    assert (card["tokens_before"], card["context_after"]) == (before["tokens"], after["tokens"])
    assert card["estimate"] == after["estimate"]
    # the CLI, a process with no agent: the figure kept beside the log, not a re-estimate
    env = {**os.environ, "COLUMNS": "200", "IPYTHON_COMPACT_DIR": str(data)}
    env.pop("IPYTHON_COMPACT_DB", None)
    cli = Path(sys.executable).parent / "ipython-compact"
    shown = subprocess.run(
        [str(cli), "show", "-s", "gap"], capture_output=True, text=True, timeout=120, env=env
    )
    assert shown.returncode == 0, shown.stderr
    head_line = shown.stdout.splitlines()[0]
    assert f"{before['tokens']:,} tokens before · {after['tokens']:,} tokens in context" in head_line, (
        head_line
    )
    assert f"estimated by {after['estimate']}" in head_line, head_line
    listed = subprocess.run(
        [str(cli), "show", "-s", "gap", "--list", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert json.loads(listed.stdout)[-1]["context_after"] == after["tokens"]
    # `sessions`: the context now as the gauge counts it, marked as the agent's count
    sessions = subprocess.run([str(cli), "sessions"], capture_output=True, text=True, timeout=120, env=env)
    row = next(line for line in sessions.stdout.splitlines() if line.startswith("gap "))
    assert f" {after['tokens']:,}* " in row, sessions.stdout
    assert "* as the last live %%agent counted it" in sessions.stdout


@pytest.mark.slow
def test_the_agents_own_compaction_is_shown_with_the_figure_it_compacted_by(tmp_path: Path) -> None:
    right_after: list[tuple[int, str]] = []
    box: list[Agent] = []

    def on_event(event: AgentEvent) -> None:
        if event.kind == "compaction_end" and event.data.get("state") == "placed":
            agent = box[0]
            right_after.append((agent.context_tokens()[0], agent.status()["estimate"]))

    store_path = tmp_path / "sessions.db"
    with (
        ModelServer(triple_tokenizer) as srv,
        Agent(
            model="m",
            base_url=srv.base_url,
            context_window=8000,
            store=str(store_path),
            session="own",
            on_event=on_event,
        ) as agent,
    ):
        box.append(agent)
        for seed in range(10):
            agent.ask(readings(seed))
            if right_after:
                break
    assert right_after, "the agent never compacted"
    with SessionStore(store_path) as store:
        first = summaries_of(store, "own", 0)[0]
    tokens, estimate = right_after[0]
    assert estimate.startswith("calibrated ×"), estimate
    assert first["context_after"] == tokens  # was the log's density re-estimate, a third of it
    assert first.get("estimate") == estimate


@pytest.mark.slow
def test_after_a_restart_status_keeps_the_last_agents_figure_until_the_context_changes(
    tmp_path: Path,
) -> None:
    """The gauge showed the live agent's 6,418 before a kernel restart and the density
    re-estimate 1,629 after it, for the same context: one number for one thing. Until the context
    the model sees changes, status (and the panel reading the log before `%load_ext`) keeps the
    figure the agent last reported, named as such; once it changes, the estimate in force counts."""
    from ipython_compact.jupyter.server_extension import persisted_session

    data = tmp_path / "data"
    with (
        ModelServer(triple_tokenizer) as srv,
        running_kernel(data, IPYTHON_COMPACT_SESSION="kept") as km,
    ):
        assert execute(km, "%load_ext ipython_compact")["status"] == "ok"
        for seed in range(3):
            head = (
                f"%%agent --model m --base-url {srv.base_url} --window 12000\n" if seed == 0 else "%%agent\n"
            )
            assert execute(km, head + readings(seed), timeout=120)["status"] == "ok"
        assert execute(km, "%config CompactConfig.compaction = {'keep_recent_tokens': 500}")["status"] == "ok"
        magic(km, "now")  # right after a compaction no usage anchors the estimate: the two differ
        live = magic(km, "status")["data"]
        km.restart_kernel(now=True)
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        kc.stop_channels()
        assert execute(km, "%load_ext ipython_compact")["status"] == "ok"
        assert execute(km, "x = 1")["status"] == "ok"  # a cell: a snapshot record, not context
        kept = magic(km, "status")["data"]
        density = _density_now(data, "kept")
        assert live["tokens"] > 2 * density  # the two estimates are far apart here
        assert kept["tokens"] == live["tokens"], (kept, live)
        assert kept["estimate"] == f"{live['estimate']}, as the last live %%agent counted it"
        os.environ["IPYTHON_COMPACT_DIR"] = str(data)  # the server extension reads the data directory
        try:
            served = persisted_session("a.ipynb", "kept", "env")["status"]
        finally:
            os.environ.pop("IPYTHON_COMPACT_DIR")
        assert (served["tokens"], served["estimate"]) == (kept["tokens"], kept["estimate"])
        # the context changes (a message the model will read): the estimate in force counts it
        with SessionStore(data / "sessions.db") as store:
            store.append("kept", "message", {"message": {"role": "user", "content": "And the median?"}})
        moved = magic(km, "status")["data"]
        assert moved["estimate"] == "default (density)" and moved["tokens"] == _density_now(data, "kept")
