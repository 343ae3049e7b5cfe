"""``%compact`` is strict: a typo never compacts, help is printed, and the plain-text output reads
well in a terminal. In-process shell here; the real-kernel and terminal checks live in
``test_compact_magic_terminal.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from ipython_compact.kernel.display import ENTRY_MIME
from ipython_compact.kernel.extension import extension_for

FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"


def _run(ip: Any, line: str) -> Any:
    return ip.run_line_magic("compact", line)


def _compactions(ip: Any) -> int:
    ext = extension_for(ip)
    assert ext is not None
    return int(ext.service.status()["compactions"])


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("stauts", "did you mean `status`?"),
        ("snapshto", "did you mean `snapshot`?"),
        ("restroe x", "did you mean `restore`?"),
        ("please summarise the sales work", "'please' is not a subcommand. Nothing was run"),
        ("--focs x", "did you mean `--focus`?"),
    ],
)
def test_a_word_that_is_not_a_subcommand_never_compacts(ip: Any, line: str, expected: str) -> None:
    _run(ip, f"import {FIXTURE}")
    before = _compactions(ip)
    with pytest.raises(UsageError) as err:
        _run(ip, line)
    assert expected in str(err.value)
    assert _compactions(ip) == before


def test_the_typo_error_says_how_to_compact_with_that_focus(ip: Any) -> None:
    with pytest.raises(UsageError, match="type `%compact now stauts`"):
        _run(ip, "stauts")


@pytest.mark.parametrize(
    ("line", "focus"),
    [
        ("now the sales numbers", "the sales numbers"),
        ('--focus "the sales numbers"', "the sales numbers"),
        ("now --focus=sales", "sales"),
        ("", None),
    ],
)
def test_now_and_focus_compact(ip: Any, line: str, focus: str | None) -> None:
    _run(ip, f"import {FIXTURE}")
    before = _compactions(ip)
    shown = _run(ip, line)
    assert _compactions(ip) == before + 1
    ext = extension_for(ip)
    assert ext is not None
    entry = ext.service.store.get(shown.data["id"], ext.service.session)
    assert entry.data["details"].get("focus") == focus


def test_the_focus_reaches_the_panel_and_show(ip: Any) -> None:
    # The panel's timeline reads `summaries` over the comm; `%compact show` is the entry in full.
    _run(ip, f"import {FIXTURE}")
    first = _run(ip, "now").data["id"]
    _run(ip, f"import {FIXTURE} --new-ids")  # more history to compact (the same file again, as copies)
    focused = _run(ip, "now --focus=sales").data["id"]
    ext = extension_for(ip)
    assert ext is not None
    reply = ext.comm.handle({"v": 1, "id": "s", "op": "summaries", "limit": 1000})
    assert reply["ok"]
    by_id = {c["id"]: c for c in reply["compactions"]}
    assert by_id[focused]["focus"] == "sales"
    assert by_id[first]["focus"] is None
    bundle = _run(ip, f"show {focused}")._repr_mimebundle_()[0]
    assert bundle[ENTRY_MIME]["data"]["details"]["focus"] == "sales"
    assert "focus: sales" in bundle["text/plain"].splitlines()[0]
    other = _run(ip, f"show {first}")._repr_mimebundle_()[0]
    assert "focus:" not in other["text/plain"].splitlines()[0]


@pytest.mark.parametrize("line", ["--help", "-h", "help"])
def test_help_is_printed_not_returned(ip: Any, line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(ip, line) is None
    out = capsys.readouterr().out
    assert out.startswith("usage: %compact") and "  status  " in out and "--focus FOCUS" in out


def test_help_in_a_cell_leaves_no_out_value(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    result = ip.run_cell("%compact --help", store_history=True)
    assert result.result is None and "usage: %compact" in capsys.readouterr().out


def test_subcommand_help_wraps_to_the_terminal(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    _run(ip, "snapshot --help")
    out = capsys.readouterr().out
    assert "re-hashed" in out and max(len(line) for line in out.splitlines()) <= 80


def test_importing_the_same_transcript_twice_is_refused_unless_new_ids(ip: Any) -> None:
    ext = extension_for(ip)
    assert ext is not None
    _run(ip, f"import {FIXTURE}")
    count = ext.service.status()["entries"]
    with pytest.raises(UsageError) as err:
        _run(ip, f"import {FIXTURE}")
    assert "1,002 of 1,002 entries are already in session" in str(err.value)
    assert f"`%compact import {FIXTURE} --new-ids`" in str(err.value)
    assert ext.service.status()["entries"] == count
    _run(ip, f"import {FIXTURE} --new-ids")
    assert ext.service.status()["entries"] == 2 * count


def test_now_refuses_a_compaction_that_would_grow_the_context(ip: Any) -> None:
    from ipython_compact.cli.demo_transcript import TranscriptGenerator

    ext = extension_for(ip)
    assert ext is not None
    for msgs in TranscriptGenerator(4).rounds(8):
        ext.service.store.append_many(ext.service.session, [("message", {"message": m}) for m in msgs])
    ip.run_line_magic("config", "CompactConfig.compaction = {'keep_recent_tokens': 1500}")
    before = ext.service.store.path_length(ext.service.session)
    with pytest.raises(
        UsageError,
        match=r"would not make its context smaller.*Nothing was changed\. "
        r"`%compact preview` "
        r"shows what would be summarized and kept\.",
    ):
        ip.run_line_magic("compact", "now")
    reply = ext.comm.handle({"v": 1, "id": "c", "op": "compact"})
    assert reply["ok"] is False and reply["error"]["code"] == "nothing_to_compact"
    assert ext.service.store.path_length(ext.service.session) == before


def test_preview_and_now_use_the_live_agents_settings(ip: Any, tmp_path: Path) -> None:
    """Found with six `%%agent` turns in a 3,000-token window: status said 71% full while preview
    and now said "nothing to compact", using CompactConfig's 20,000-token tail without saying so."""
    import openai

    from ipython_compact.agent.kernel_tool import InProcessKernel
    from ipython_compact.agent.loop import Agent
    from ipython_compact.cli.demo_transcript import TranscriptGenerator
    from ipython_compact.testing import ModelServer

    ext = extension_for(ip)
    assert ext is not None
    service = ext.service
    for msgs in TranscriptGenerator(4).rounds(8):
        service.store.append_many(service.session, [("message", {"message": m}) for m in msgs])
    refusal = ip.run_line_magic("compact", "preview")._repr_mimebundle_()[0]["text/plain"]
    assert (
        "Nothing would be compacted now" in refusal
        and "decided with CompactConfig (128,000-token window, "
        "CompactConfig.compaction['keep_recent_tokens'] 20,000)"
        in " ".join(refusal.split())
    )
    with ModelServer() as srv:
        agent = Agent(
            store=service.store,
            session=service.session,
            model="local-model",
            context_window=3000,
            client=openai.OpenAI(base_url=srv.base_url, api_key="x"),
            kernel=InProcessKernel(ip),
            subcalls=False,
        )
        service.live_agent = lambda: agent
        try:
            assert agent.settings.keep_recent_tokens == 750
            status = ip.run_line_magic("compact", "status")._repr_mimebundle_()[0]["text/plain"]
            assert "estimated by default (density)" in " ".join(status.split())  # which estimate rules
            plan = ip.run_line_magic("compact", "preview").data
            assert plan["summarize"]["entries"] > 0 and plan["keep"]["tokens"] <= 1500
            done = ip.run_line_magic("compact", "now").data
            assert done["tokens_after"] < done["tokens_before"]
        finally:
            service.live_agent = lambda: None
            agent.close()


def test_names_lists_a_hundred_by_default_and_says_how_many_more(ip: Any) -> None:
    ip.run_cell("\n".join(f"v{i:03d} = {i}" for i in range(150)))
    shown = ip.run_line_magic("compact", "names")
    plain = shown._repr_mimebundle_()[0]["text/plain"]
    assert len(shown.data["names"]) == 100 and shown.data["total"] == 150
    assert plain.splitlines()[0] == (
        "100 names of 150 · 50 more: `%compact names --limit 0` lists all (or "
        "the probe's "
        "time budget ran out)"
    )
    assert len(ip.run_line_magic("compact", "names --limit 0").data["names"]) == 150
