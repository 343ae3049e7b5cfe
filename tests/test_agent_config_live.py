"""A setting a message names is settable as named, with a live ``%%agent`` too (issue 35, item 2).

``%compact now``'s refusal says "set it with `%config CompactConfig.compaction = {'keep_recent_tokens':
N}`"; with a live agent, compactions are decided with the agent's settings, which were fixed when
the agent was built: the user set 500, and the next ``%compact now`` still said 3,000 and refused
again. The live agent now takes ``CompactConfig.compaction`` as it is when it is next asked.
Real parts: a real kernel, the scripted model server over HTTP.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_fixtures import evaluate, execute, magic, running_kernel

from ipython_compact.testing.model_server import ModelServer, RecordedRequest, Reply


def reply(req: RecordedRequest) -> Reply:
    return Reply(
        "Noted. " + "fine " * 20, usage={"prompt_tokens": 3 * req.prompt_tokens, "completion_tokens": 30}
    )


def readings(seed: int) -> str:
    return f"Readings {seed}: " + " ".join(str((seed * 7919 + i * 104729) % 1000003) for i in range(60))


@pytest.mark.slow
def test_percent_config_compaction_reaches_the_live_agent(tmp_path: Path) -> None:
    with ModelServer(reply) as srv, running_kernel(tmp_path / "data", IPYTHON_COMPACT_SESSION="cfg") as km:
        assert execute(km, "%load_ext ipython_compact")["status"] == "ok"
        for seed in range(3):
            cell = (
                f"%%agent --model m --base-url {srv.base_url} --window 12000\n" if seed == 0 else "%%agent\n"
            )
            assert execute(km, cell + readings(seed), timeout=120)["status"] == "ok"
        refused = magic(km, "preview")
        assert refused["title"].startswith("Compaction preview (nothing changed)")
        assert "keep_recent_tokens'] 3,000" in refused["data"], refused["data"]
        said = "set it with `%config CompactConfig.compaction = {'keep_recent_tokens': N}`"
        assert said in refused["data"]
        assert execute(km, "%config CompactConfig.compaction = {'keep_recent_tokens': 500}")["status"] == "ok"
        plan = magic(km, "preview")["data"]
        assert isinstance(plan, dict) and plan["summarize"]["entries"] > 0, plan
        assert plan["keep"]["tokens"] <= 1_500, plan  # a tail near 500 model tokens, not 3,000
        # and the agent's own next turn goes on with the settings as set
        assert execute(km, "%%agent\n" + readings(9), timeout=120)["status"] == "ok"
        status = magic(km, "status")["data"]
        assert status["source"] == "agent"


@pytest.mark.slow
def test_a_line_repeating_the_agents_options_keeps_the_agent_and_what_it_learned(tmp_path: Path) -> None:
    """Cells that each repeat `--model … --base-url … --window …` rebuilt the agent every time: its
    learned estimate restarted ("calibrated … after 1 request" for ever) and the settings line was
    printed again. Naming another value, or --reset, still starts a new agent."""
    with ModelServer(reply) as srv, running_kernel(tmp_path / "data", IPYTHON_COMPACT_SESSION="same") as km:
        assert execute(km, "%load_ext ipython_compact")["status"] == "ok"
        line = f"%%agent --model m --base-url {srv.base_url} --window 12000\n"
        which = (
            "id(__import__('ipython_compact.kernel.extension').kernel.extension"
            ".extension_for(get_ipython()).agent_magics.current)"
        )
        agents = []
        for seed in range(3):
            agents.append(evaluate(km, line + readings(seed), f"str({which})"))
        assert agents[0] == agents[1] == agents[2]
        estimate = magic(km, "status")["data"]["estimate"]
        assert estimate.startswith("calibrated ×") and not estimate.endswith("after 1 request"), estimate
        other = evaluate(km, line.replace("12000", "16000") + readings(7), f"str({which})")
        reset = evaluate(km, "%%agent --reset\n" + readings(8), f"str({which})")
        assert len({agents[0], other, reset}) == 3


@pytest.mark.slow
def test_with_an_agent_on_its_own_session_every_compact_command_reads_that_session(tmp_path: Path) -> None:
    """`%%agent --session side`: status, preview and now worked on 'side', while log, show, recall
    and pin read the kernel's bound session, and the kernel-state notice of a `%compact now` was
    appended there too: the refusal's "`%compact log` lists the entries" listed another session's."""
    from ipython_compact.core.entries import KERNEL_STATE
    from ipython_compact.store import SessionStore

    data = tmp_path / "data"
    with ModelServer(reply) as srv, running_kernel(data, IPYTHON_COMPACT_SESSION="bound") as km:
        assert execute(km, "%load_ext ipython_compact")["status"] == "ok"
        for seed in range(4):
            head = f"%%agent --model m --base-url {srv.base_url} --window 12000 --session side\n"
            assert (
                execute(km, (head if seed == 0 else "%%agent\n") + readings(seed), timeout=120)["status"]
                == "ok"
            )
        assert magic(km, "status")["data"]["session"] == "side"
        assert execute(km, "%config CompactConfig.compaction = {'keep_recent_tokens': 500}")["status"] == "ok"
        done = magic(km, "now")["data"]
        log = magic(km, "log -n 4")
        assert log["title"] == "Last 4 entries of side", log["title"]
        assert any(r["kind"] == KERNEL_STATE for r in log["data"]), log["data"]
        with SessionStore(data / "sessions.db") as store:
            first = store.path("side")[1]  # the first question, summarized now
            assert [e.kind for e in store.path("bound")].count(KERNEL_STATE) == 0
            after = store.children("side", done["id"])
        assert after and after[0].kind == KERNEL_STATE
        recalled = magic(km, f"recall {first.id}")
        assert "Readings 0:" in str(recalled["data"]), recalled
        shown = magic(km, f"show {first.id}")
        assert shown["title"].startswith(f"Entry {first.id}")


@pytest.mark.slow
def test_a_refusal_never_says_the_tail_is_larger_than_the_context(tmp_path: Path) -> None:
    """With a live agent the context is its usage-anchored count while the tail is summed from
    per-entry learned estimates, which can overshoot: "the context holds 2,754 tokens; the 3,101
    tokens of conversation just fill the recent tail" read as a contradiction. The tail is part
    of the context, so its figure is at most the context's."""
    import re

    with ModelServer(reply) as srv, running_kernel(tmp_path / "data", IPYTHON_COMPACT_SESSION="tail") as km:
        assert execute(km, "%load_ext ipython_compact")["status"] == "ok"
        for seed in range(4):
            cell = (
                f"%%agent --model m --base-url {srv.base_url} --window 12000\n" if seed == 0 else "%%agent\n"
            )
            assert execute(km, cell + readings(seed), timeout=120)["status"] == "ok"
        said = str(magic(km, "preview")["data"])
    found = re.search(r"the context holds ([\d,]+) tokens; the ([\d,]+) tokens", said)
    assert found is not None, said
    context, tail = (int(g.replace(",", "")) for g in found.groups())
    assert tail <= context, said
