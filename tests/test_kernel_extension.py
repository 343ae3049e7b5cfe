"""The extension inside an in-process IPython shell: load/unload, %compact subcommands, the comm
handler's request validation, the helper object, configuration, bindings and MIME bundles."""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from IPython import get_ipython
from IPython.core.error import UsageError
from IPython.testing.globalipapp import start_ipython

from ipython_compact.kernel import binding, display, report_rows
from ipython_compact.kernel.comm_handler import CommHandler
from ipython_compact.kernel.extension import extension_for
from ipython_compact.kernel.magics import COMMANDS


def _run(ip: Any, line: str) -> Any:
    return ip.run_line_magic("compact", line)


def test_unload_removes_everything_and_reload_leaves_one_of_each(ip: Any) -> None:
    ext = extension_for(ip)
    assert ext is not None
    manager = ext.comm_manager
    assert "compact" in ip.magics_manager.magics["line"]
    assert ip.user_ns["compact"] is ip.user_ns_hidden["compact"]
    assert "ipython_compact" in manager.targets
    ip.run_line_magic("unload_ext", "ipython_compact")
    assert "compact" not in ip.magics_manager.magics["line"]
    assert "compact" not in ip.user_ns and "compact" not in ip.user_ns_hidden
    assert "ipython_compact" not in manager.targets
    assert ext.pre_run_cell not in ip.events.callbacks["pre_run_cell"]
    assert ext.post_run_cell not in ip.events.callbacks["post_run_cell"]
    assert all(type(c).__name__ not in ("CompactConfig", "AgentConfig") for c in ip.configurables)
    ip.run_line_magic("load_ext", "ipython_compact")
    ip.run_line_magic("reload_ext", "ipython_compact")
    assert sum(type(c).__name__ == "CompactConfig" for c in ip.configurables) == 1
    assert sum(type(c).__name__ == "AgentConfig" for c in ip.configurables) == 1
    posts = [
        cb
        for cb in ip.events.callbacks["post_run_cell"]
        if getattr(cb, "__self__", None).__class__.__name__ == "Extension"
    ]
    assert len(posts) == 1


@pytest.mark.parametrize("sub", COMMANDS.names())
def test_every_subcommand_has_help(ip: Any, sub: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(ip, f"{sub} --help") is None  # printed, never the cell's Out value
    assert capsys.readouterr().out.startswith(f"usage: %compact {sub}")


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        ("names --limit x", "%compact names --help"),
        ("names --limit -3", "%compact names --help"),
        ("show", "%compact show --help"),
        ("show no-such-id", "%compact log"),
        ("recall", "one of them"),
        ("--bogus", "%compact --help"),
        ('pin "   "', "%compact pin"),
        ("log -n -3", "-n must be 0 or more, got -3"),
        ("recall --limit 0 -q x", "--limit must be 1 or more, got 0"),
        ("recall --limit 0 --search x", "--limit must be 1 or more, got 0"),  # --search is --query
        ("unpin nope", "active: none"),
        ('export "unterminated', "quotes"),
        ("export /no/such/dir/file.jsonl", "does not exist"),
    ],
)
def test_usage_errors_say_what_to_type(ip: Any, line: str, hint: str) -> None:
    with pytest.raises(UsageError) as err:
        _run(ip, line)
    assert hint in str(err.value)


def test_names_status_snapshot_restore_in_process(ip: Any) -> None:
    ip.run_cell("x = 41\ny = [1, 2]\ngen = (i for i in range(2))")
    names = _run(ip, "names")
    bundle = names._repr_mimebundle_()[0]
    assert [n["name"] for n in bundle[display.NAMESPACE_MIME]["names"]] == ["gen", "x", "y"]
    status = _run(ip, "status").data
    assert status["window"] == 128000 and status["blocking_line"] < status["window"]
    snap = _run(ip, "snapshot").data
    assert sorted(snap["saved"]) == ["x", "y"] and snap["skipped"][0]["name"] == "gen"
    ip.run_cell("del x, y")
    restored = _run(ip, "restore").data
    assert sorted(restored["restored"]) == ["x", "y"] and ip.user_ns["x"] == 41


def test_config_traits_are_settable_with_percent_config(ip: Any) -> None:
    try:
        ip.run_line_magic("config", "CompactConfig.context_window = 50000")
        assert _run(ip, "status").data["window"] == 50000
        ip.run_line_magic("config", "CompactConfig.context_window = 1000")
        status = _run(ip, "status").data
        assert status["blocking_line"] is None and "reserve_tokens" in status["problem"]
    finally:
        ip.run_line_magic("config", "CompactConfig.context_window = 128000")


def test_helper_is_hidden_and_pin_recall_work(ip: Any) -> None:
    ip.run_cell("a = 1")
    assert ip.run_line_magic("who_ls", "") == ["a"]
    helper = ip.user_ns["compact"]
    pinned = helper.pin("keep the answer 42")
    hits = helper.recall(pinned["entry_id"])
    assert hits[0]["text"] == "keep the answer 42"
    assert helper.recall("answer")[0]["id"] == pinned["entry_id"]
    assert helper.status()["scheduled"] is False
    receipt = helper.run("focus on the answer")
    assert receipt["scheduled"] is True and "runs when the current turn ends" in receipt["note"]
    assert helper.run(3)["scheduled"] is False  # type: ignore[arg-type]


def test_file_opens_in_cells_are_recorded_for_the_ledger(ip: Any, tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("a,b\n")
    out = tmp_path / "out.txt"
    ip.run_cell(f"data = open({str(src)!r}).read()\nwith open({str(out)!r}, 'w') as f: f.write(data)")
    service = extension_for(ip).service  # type: ignore[union-attr]
    entries = [e for e in service.store.path(service.session) if e.kind == "custom"]
    assert entries[-1].data["data"] == {"read": [str(src)], "modified": [str(out)], "by": "user"}


def test_files_written_by_compact_itself_are_not_the_users(ip: Any, tmp_path: Path) -> None:
    """`%compact export FILE` inside a cell writes a file, but that is our work, not the cell's."""
    src = tmp_path / "mine.txt"
    src.write_text("x")
    out = tmp_path / "export.jsonl"
    ip.run_cell(f"_ = open({str(src)!r}).read()\nget_ipython().run_line_magic('compact', 'export {out}')")
    assert out.exists()
    service = extension_for(ip).service  # type: ignore[union-attr]
    entries = [e for e in service.store.path(service.session) if e.kind == "custom"]
    assert entries[-1].data["data"] == {"read": [str(src)], "modified": [], "by": "user"}


def test_session_switch_is_remembered(ip: Any, tmp_path: Path) -> None:
    _run(ip, "session other-session")
    assert extension_for(ip).service.session == "other-session"  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- comm requests
@pytest.mark.parametrize(
    ("request_", "code"),
    [
        ("not an object", "bad_request"),
        ({"v": 1, "op": "hello"}, "bad_request"),
        ({"v": 1, "id": "", "op": "hello"}, "bad_request"),
        ({"id": "1", "op": "hello"}, "bad_request"),
        ({"v": 2, "id": "1", "op": "hello"}, "unsupported_version"),
        ({"v": 1, "id": "1"}, "bad_request"),
        ({"v": 1, "id": "1", "op": "exec"}, "unknown_op"),
        ({"v": 1, "id": "1", "op": "names", "limit": "5"}, "bad_request"),
        ({"v": 1, "id": "1", "op": "snapshot", "full": "yes"}, "bad_request"),
        ({"v": 1, "id": "1", "op": "restore", "names": "x"}, "bad_request"),
        ({"v": 1, "id": "1", "op": "restore", "generation": "2"}, "bad_request"),
        ({"v": 1, "id": "1", "op": "recall"}, "bad_request"),
        ({"v": 1, "id": "1", "op": "recall", "entry_id": "missing"}, "failed"),
    ],
)
def test_malformed_requests_get_error_replies_and_change_nothing(ip: Any, request_: Any, code: str) -> None:
    ip.run_cell("keep = 1")
    handler: CommHandler = extension_for(ip).comm  # type: ignore[union-attr]
    before = dict(ip.user_ns)
    reply = handler.handle(request_)
    assert reply["ok"] is False and reply["error"]["code"] == code
    assert reply["id"] == (request_.get("id") if isinstance(request_, dict) and request_.get("id") else None)
    assert dict(ip.user_ns).keys() == before.keys()


@pytest.mark.parametrize(
    "request_",
    [
        {"v": 1, "id": "1", "op": "x" * 1_000_000},
        {"v": 1, "id": "1", "op": "names", "limit": "9" * 1_000_000},
        {"v": 1, "id": "1", "op": "recall", "entry_id": "e" * 150, "limit": ["y" * 1_000_000]},
    ],
)
def test_error_replies_echo_only_a_bounded_part_of_the_request(ip: Any, request_: Any) -> None:
    handler: CommHandler = extension_for(ip).comm  # type: ignore[union-attr]
    reply = handler.handle(request_)
    assert reply["ok"] is False and len(json.dumps(reply)) < 2000
    assert "characters" in reply["error"]["message"]  # the cut is stated


def test_hello_and_names_replies(ip: Any) -> None:
    ip.run_cell("z = 3")
    handler: CommHandler = extension_for(ip).comm  # type: ignore[union-attr]
    hello = handler.handle({"v": 1, "id": "h", "op": "hello"})
    assert hello["ok"] and hello["protocol"] == 1 and hello["subshell"] is False and "names" in hello["ops"]
    names = handler.handle({"v": 1, "id": "n", "op": "names", "limit": 10})
    assert names["id"] == "n" and [n["name"] for n in names["names"]] == ["z"]
    json.dumps(names)


# ---------------------------------------------------------------------------- bindings
@pytest.mark.parametrize(
    ("configured", "env", "ns", "conn", "session", "source"),
    [
        ("cfg", {"IPYTHON_COMPACT_SESSION": "envs"}, {}, "/r/kernel-1.json", "cfg", "config"),
        ("", {"IPYTHON_COMPACT_SESSION": "envs"}, {}, "/r/kernel-1.json", "envs", "env"),
        ("", {"JPY_SESSION_NAME": "/nb/a.ipynb"}, {}, "/r/kernel-1.json", "notebook:/nb/a.ipynb", "notebook"),
        ("", {}, {"__vsc_ipynb_file__": "/nb/b.ipynb"}, None, "notebook:/nb/b.ipynb", "notebook"),
        ("", {}, {}, "/r/kernel-abc.json", "kernel:kernel-abc", "connection"),
    ],
    ids=["config", "env", "jupyter-server", "vscode", "connection-file"],
)
def test_binding_order(
    tmp_path: Path,
    configured: str,
    env: dict[str, str],
    ns: dict[str, Any],
    conn: str | None,
    session: str,
    source: str,
) -> None:
    b = binding.resolve(configured=configured, env=env, user_ns=ns, connection_file=conn, data_dir=tmp_path)
    assert (b.session, b.source) == (session, source)


def test_binding_switch_survives_a_restart(tmp_path: Path) -> None:
    first = binding.resolve(
        configured="", env={}, user_ns={}, connection_file="/r/kernel-9.json", data_dir=tmp_path
    )
    binding.remember_switch(tmp_path, first.key, "chosen")
    again = binding.resolve(
        configured="", env={}, user_ns={}, connection_file="/r/kernel-9.json", data_dir=tmp_path
    )
    assert (again.session, again.source) == ("chosen", "switched")


# ---------------------------------------------------------------------------- display
EVIL = "<script>alert(1)</script>*bold* [x](javascript:y)"


@pytest.mark.parametrize(
    "rendered",
    [
        report_rows.names_bundle(
            {"names": [{"name": EVIL, "type": EVIL, "kind": "object"}], "truncated": False}, width=160
        ),
        display.summary_bundle(
            {"id": "c1", "reason": "manual", "summary": EVIL, "tokens_before": 10}, notice=EVIL
        ),
        display.mapping_bundle(EVIL, {EVIL: EVIL}),
        display.text_bundle(EVIL, title=EVIL),
        display.rows_bundle(EVIL, ["h"], [[EVIL]]),
    ],
    ids=["names", "summary", "mapping", "text", "rows"],
)
def test_bundles_escape_html_and_carry_all_fallbacks(rendered: display.Rendered) -> None:
    bundle = rendered._repr_mimebundle_()[0]
    assert {"text/plain", "text/html", "text/markdown"} <= set(bundle)
    assert "<script>" not in bundle["text/html"] and "&lt;script&gt;" in bundle["text/html"]
    assert "<script>" not in bundle["text/markdown"].replace("```text\n" + EVIL, "")
    assert EVIL in bundle["text/plain"]


# ---------------------------------------------------------------------------- compaction through the magic
FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"


def test_import_preview_compact_appends_summary_and_state_notice(ip: Any) -> None:
    ip.run_cell("alive = 1")
    imported = _run(ip, f"import {FIXTURE}").data
    assert imported["imported"] > 900
    before = _run(ip, "status").data
    preview = _run(ip, "preview").data
    assert preview["keep"]["entries"] > 0 and _run(ip, "status").data["entries"] == before["entries"]
    out = _run(ip, "now")
    bundle = out._repr_mimebundle_()[0]
    payload = bundle[display.SUMMARY_MIME]
    assert payload["tokens_after"] < payload["tokens_before"]
    assert (
        "<ipython_state>" in payload["notice"]
        and ("These names are still defined: alive.") in payload["notice"]
    )
    service = extension_for(ip).service  # type: ignore[union-attr]
    kinds = [e.kind for e in service.store.path(service.session)[-3:]]
    assert "compaction" in kinds and kinds[-1] == "kernel_state"
    handler: CommHandler = extension_for(ip).comm  # type: ignore[union-attr]
    summaries = handler.handle({"v": 1, "id": "s", "op": "summaries"})
    assert summaries["ok"] and summaries["compactions"][-1]["id"] == payload["id"]
    again = handler.handle({"v": 1, "id": "c", "op": "compact"})
    assert (
        again["ok"] is False
        and again["error"]["code"] == "nothing_to_compact"
        and ("nothing to compact") in again["error"]["message"]
    )
    with pytest.raises(
        UsageError,
        match=r"nothing to compact.*just fill the recent tail.*%config CompactConfig.compaction = ",
    ):
        _run(ip, "now")


def test_helper_run_compacts_when_the_cell_ends_not_during_it(ip: Any) -> None:
    _run(ip, f"import {FIXTURE}")
    service = extension_for(ip).service  # type: ignore[union-attr]
    before = len(service.summaries(limit=0))
    result = ip.run_cell(
        "receipt = compact.run('keep the refactoring plan')\n"
        "compactions_during = get_ipython().run_line_magic('compact', "
        "'status').data['compactions']"
    )
    assert result.success
    assert ip.user_ns["receipt"]["scheduled"] is True
    after = service.summaries(limit=0)
    assert ip.user_ns["compactions_during"] == before  # nothing ran inside the cell
    assert len(after) == before + 1 and after[-1]["reason"] == "requested"


def test_helper_run_outside_a_turn_coalesces_like_the_agent_registry(ip: Any) -> None:
    helper = ip.user_ns["compact"]
    for text in ("keep a", "keep b", "keep a", None):
        assert helper.run(text)["scheduled"] is True
    assert helper.take_pending() == {"instructions": "keep a\nkeep b"}  # same rule as agent.requests.coalesce
    assert helper.take_pending() is None


def test_a_user_name_compact_is_never_overwritten(ip: Any) -> None:
    ip.run_line_magic("unload_ext", "ipython_compact")
    ip.user_ns["compact"] = "mine"
    ip.run_line_magic("load_ext", "ipython_compact")
    assert ip.user_ns["compact"] == "mine"
    assert ip.user_ns["_compact"] is ip.user_ns_hidden["_compact"]
    ip.run_line_magic("unload_ext", "ipython_compact")
    assert ip.user_ns["compact"] == "mine" and "_compact" not in ip.user_ns
    del ip.user_ns["compact"]
    ip.run_line_magic("load_ext", "ipython_compact")


def _synthetic_transcript(path: Path, turns: int = 30) -> Path:
    rows: list[dict[str, Any]] = [
        {"type": "session", "id": "t", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    ]
    for i in range(turns):
        rows.append(
            {
                "type": "message",
                "timestamp": f"2026-01-01T00:00:{i:02d}.000Z",
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": f"step {i}: analyse chunk {i} " * 20}],
                },
            }
        )
        rows.append(
            {
                "type": "message",
                "timestamp": f"2026-01-01T00:01:{i:02d}.000Z",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"chunk {i} done " * 30}],
                    "usage": {"input": 100, "output": 10},
                    "stopReason": "stop",
                },
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@pytest.mark.parametrize("cells_by", ["user", "agent"])
def test_only_the_agents_file_opens_reach_the_compaction_ledger(
    ip: Any, tmp_path: Path, cells_by: str
) -> None:
    """A person's own cells are not the agent's work; in a kernel an agent drives every cell is."""
    src, out = tmp_path / "sales.csv", tmp_path / "report.txt"
    src.write_text("a,b\n")
    ip.run_line_magic("config", f"CompactConfig.cells_by = {cells_by!r}")
    try:
        ip.run_cell(f"text = open({str(src)!r}).read()\nopen({str(out)!r}, 'w').write(text)")
        _run(ip, f"import {_synthetic_transcript(tmp_path / 't.jsonl')}")
        ip.run_line_magic("config", "CompactConfig.compaction = {'keep_recent_tokens': 500}")
        summary = _run(ip, "now").data["summary"]
    finally:
        ip.run_line_magic("config", "CompactConfig.compaction = {}")
        ip.run_line_magic("config", "CompactConfig.cells_by = 'user'")
    assert (f"files modified: {out}" in summary, str(src) in summary) == (cells_by == "agent",) * 2


def test_unload_removes_the_agent_and_compact_magics_and_load_brings_them_back(ip: Any) -> None:
    manager = ip.magics_manager
    assert "agent" in manager.magics["cell"] and "compact" in manager.magics["line"]
    ip.run_line_magic("unload_ext", "ipython_compact")
    assert "agent" not in manager.magics["cell"] and "agent" not in manager.magics["line"]
    assert "compact" not in manager.magics["line"] and "compact" not in manager.magics["cell"]
    assert {"AgentMagics", "CompactMagics"}.isdisjoint(manager.registry)
    with pytest.raises(UsageError, match="agent"):
        ip.run_cell_magic("agent", "", "hello")
    with pytest.raises(UsageError, match="compact"):
        ip.run_line_magic("compact", "status")
    ip.run_line_magic("load_ext", "ipython_compact")
    assert manager.magics["cell"]["agent"].__self__ is manager.registry["AgentMagics"]
    assert manager.magics["line"]["compact"].__self__ is manager.registry["CompactMagics"]
    ip.run_line_magic("reload_ext", "ipython_compact")
    assert (
        sum(
            getattr(fn, "__self__", None).__class__.__name__ == "AgentMagics"
            for fn in manager.magics["cell"].values()
        )
        == 1
    )


def test_unload_leaves_a_magic_of_the_same_name_registered_by_someone_else(ip: Any) -> None:
    def agent(line: str, cell: str) -> str:
        return "theirs"

    ip.register_magic_function(agent, "cell", "agent")
    ip.run_line_magic("unload_ext", "ipython_compact")
    try:
        assert ip.run_cell_magic("agent", "", "x") == "theirs"
    finally:
        del ip.magics_manager.magics["cell"]["agent"]
        ip.run_line_magic("load_ext", "ipython_compact")


# ---------------------------------------------------------------------------- plain-text rendering
# (acceptance)
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "-"),
        (True, "yes"),
        (False, "no"),
        (128000, "128,000"),
        (7, "7"),
        (2.349, "2.35"),
        (1234.5, "1,234"),
        ("text", "text"),
        ([], "none"),
        (["df", "np", "x"], "df, np, x"),
        (
            {"generation": 2, "timestamp": "2026-11-29T18:34:19Z"},
            "generation 2; timestamp 2026-11-29T18:34:19Z",
        ),
        ({"generation": 1, "skipped": [], "bytes": 24263}, "generation 1; skipped none; bytes 24,263"),
    ],
)
def test_cells_read_as_text_not_json(value: Any, shown: str) -> None:
    assert display.cell_text(value) == shown


def test_table_rows_wrap_inside_their_column_to_the_terminal() -> None:
    """Each cell is one line of text (cut at PLAIN_CELL_WIDTH), wrapped inside its own column so
    the table fits 80 columns; a word too long for its column is broken there, the last resort."""
    long = "line one\nline two\n" + "x" * 500
    plain = display.rows_bundle("t", ["id", "text"], [["a", long], ["b", "short"]])._repr_mimebundle_()[0][
        "text/plain"
    ]
    lines = plain.splitlines()
    assert lines[2].startswith("a   line one line two xxx") and all(len(line) <= 80 for line in lines), plain
    assert lines[-1].split() == ["b", "short"]
    cell = " ".join(line[4:] for line in lines[2:-1])
    assert cell.endswith("…") and len(cell) == display.PLAIN_CELL_WIDTH + 1  # the break adds one space


def test_status_and_snapshot_read_well_in_a_terminal(ip: Any) -> None:
    ip.run_cell("import numpy as np\nx = np.zeros((1000, 3))")
    snapshot = _run(ip, "snapshot")._repr_mimebundle_()[0]["text/plain"]
    status = _run(ip, "status")._repr_mimebundle_()[0]["text/plain"]
    for plain in (snapshot, status):
        assert "null" not in plain and "[" not in plain and "{" not in plain
    assert "128,000" in status and "111,616" in status
    assert " · 2 names saved · " in snapshot.splitlines()[0]
    # the automatic snapshot after the cell already wrote both: listed once, as unchanged
    assert re.search(r"^Unchanged +np, x \(kept from the previous generation\)$", snapshot, re.M), snapshot
    assert re.search(r"^Written +nothing: every value was unchanged", snapshot, re.M), snapshot


def test_a_terminal_cell_run_while_some_library_loop_runs_is_still_snapshotted(ip: Any) -> None:
    """Found when the suite ran after the browser tests: Playwright's sync API leaves its asyncio
    loop looking like the running one, the debounced snapshot was scheduled on that loop and never
    ran. Only a kernel's loop runs between cells; terminal IPython snapshots at once."""
    foreign = asyncio.new_event_loop()  # set as running but never run, as Playwright's sync API leaves it
    before = asyncio._get_running_loop()
    asyncio._set_running_loop(foreign)
    try:
        ip.run_cell("kept_in_terminal = 7")
    finally:
        asyncio._set_running_loop(before)
        foreign.close()
    ext = extension_for(ip)
    assert ext is not None and ext.service.last_snapshot is not None
    assert "kept_in_terminal" in ext.service.last_snapshot.saved


def test_log_show_and_summary_read_well_in_a_terminal(ip: Any) -> None:
    _run(ip, f"import {FIXTURE}")
    log = _run(ip, "log -n 5")._repr_mimebundle_()[0]["text/plain"].splitlines()
    # title, header, one row per entry even for multi-line outputs: its text wraps under its column
    assert len([line for line in log if not line.startswith(" ")]) == 1 + 1 + 5, log
    assert all(len(line) <= 80 for line in log), log
    entry_id = _run(ip, "log -n 0").data[0]["id"]
    shown = _run(ip, f"show {entry_id}")
    plain = shown._repr_mimebundle_()[0]["text/plain"]
    assert plain.startswith(f"Entry {entry_id} · message · ") and '{"message"' not in plain
    assert shown._repr_mimebundle_()[0][display.ENTRY_MIME]["id"] == entry_id
    head = _run(ip, "now")._repr_mimebundle_()[0]["text/plain"].splitlines()[0]
    assert head.startswith("Compaction ") and "(manual)" in head
    before, after = re.match(r"Compaction \S+ \(manual\): ([\d,]+) → ([\d,]+) tokens", head).groups()  # type: ignore[union-attr]
    assert "," in before and int(before.replace(",", "")) > int(after.replace(",", ""))


def test_pin_alone_lists_the_pins_like_the_command_line(ip: Any) -> None:
    assert _run(ip, "pin")._repr_mimebundle_()[0]["text/plain"].startswith("No active pins.")
    _run(ip, f"pin {EVIL}")
    listed = _run(ip, "pin")._repr_mimebundle_()[0]
    assert (
        EVIL in listed["text/plain"]
        and "&lt;script&gt;" in listed["text/html"]
        and "<script>" not in listed["text/html"]
    )


def test_preview_with_nothing_to_compact_answers_instead_of_failing(ip: Any) -> None:
    """A newcomer's third README line on a fresh session: a dry run's answer, not a UsageError."""
    plain = _run(ip, "preview")._repr_mimebundle_()[0]["text/plain"]
    assert all(len(line) <= 80 for line in plain.splitlines()), plain  # wrapped to the terminal
    plain = plain.replace("\n\n", "\0").replace("\n", " ").replace("\0", "\n\n")
    assert plain.startswith(
        "Compaction preview (nothing changed)\n\nNothing would be compacted now: nothing to compact"
    )
    assert (
        "it holds no conversation yet (0 tokens in context)" in plain
        and ("decided with CompactConfig (128,000-token window") in plain
    )
    assert "%compact status" in plain
    with pytest.raises(
        UsageError,
        match=re.escape("History to compact comes from `%%agent` turns or `%compact import FILE.jsonl`"),
    ):
        _run(ip, "now")


def test_entry_bundle_escapes_html() -> None:
    entry = {
        "id": "e1",
        "parent_id": None,
        "kind": "message",
        "timestamp": "t",
        "data": {"message": {"role": "user", "content": EVIL}},
    }
    bundle = display.entry_bundle(entry)._repr_mimebundle_()[0]
    assert "<script>" not in bundle["text/html"] and "&lt;script&gt;" in bundle["text/html"]
    assert bundle["text/plain"] == f"Entry e1 · message · user · t\n\n{EVIL}"


def test_status_tokens_agree_with_the_preview(ip: Any) -> None:
    """Found in the acceptance pass: status summed estimates while preview used the usage anchor."""
    _run(ip, f"import {FIXTURE}")
    status = _run(ip, "status").data["tokens"]
    preview = _run(ip, "preview")._repr_mimebundle_()[0]["text/plain"]
    assert f"context now: {status:,} tokens" in preview


def test_restore_of_a_name_the_snapshot_lacks_says_so(ip: Any) -> None:
    ip.run_cell("kept = 1")
    _run(ip, "snapshot")
    with pytest.raises(
        UsageError,
        match=r"not in snapshot generation \d+: ghost; `%compact restore` with no "
        r"names",
    ):
        _run(ip, "restore ghost")
    plain = _run(ip, "restore kept ghost")._repr_mimebundle_()[0]["text/plain"]
    assert "Restored         kept" in plain and "Not in snapshot  ghost" in plain


def test_import_of_a_bad_line_names_the_line_and_stores_nothing(ip: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(FIXTURE.read_text(encoding="utf-8").splitlines()[0] + "\n{broken\n", encoding="utf-8")
    before = _run(ip, "status").data["entries"]
    with pytest.raises(UsageError) as err:
        _run(ip, f"import {bad}")
    assert "bad.jsonl:2: invalid JSON" in str(err.value) and (
        f"Nothing was imported; fix line 2 of {bad}"
    ) in str(err.value)
    assert _run(ip, "status").data["entries"] == before


def test_export_into_a_directory_is_a_usage_error_and_writes_nothing(ip: Any, tmp_path: Path) -> None:
    place = tmp_path / "place"
    place.mkdir()
    with pytest.raises(
        UsageError,
        match=re.escape(
            f"{place} is a directory; give a file name, e.g. `%compact export {place}/session.jsonl`"
        ),
    ):
        _run(ip, f"export {place}")
    assert list(place.iterdir()) == [] and not (tmp_path / "place.tmp").exists()


def test_export_that_cannot_be_written_is_a_usage_error_not_a_traceback(ip: Any, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "out.jsonl")  # renaming over it would silently replace someone's pipe
    with pytest.raises(
        UsageError,
        match=re.escape(
            f"{tmp_path}/out.jsonl: the export target is a FIFO, "
            "not a regular file; refusing to use it. Nothing was "
            "changed"
        ),
    ):
        _run(ip, f"export {tmp_path}/out.jsonl")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "out.jsonl").st_mode)


def test_export_is_not_steered_by_names_planted_beside_the_target(ip: Any, tmp_path: Path) -> None:
    """Red team 3, item 2: the temporary file had a fixed name (``out.jsonl.tmp``), so anything
    planted there broke the export or was written through."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "out.jsonl.tmp").symlink_to(victim)
    _run(ip, f"export {tmp_path}/out.jsonl")
    assert victim.read_text() == "precious" and (tmp_path / "out.jsonl").is_file()


def test_a_damaged_database_is_a_usage_error_and_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "damaged"
    data.mkdir()
    (data / "sessions.db").write_bytes(b"garbage, not SQLite\n")
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(data))
    monkeypatch.setenv("IPYTHON_COMPACT_SESSION", "damaged")
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "ipython_compact")
    try:
        with pytest.raises(UsageError) as err:
            shell.run_line_magic("compact", "status")
        assert "not a usable ipython-compact database" in str(err.value)
        assert "Nothing was changed; move the file aside, or point IPYTHON_COMPACT_DIR" in str(err.value)
        assert (data / "sessions.db").read_bytes() == b"garbage, not SQLite\n"
    finally:
        shell.run_line_magic("unload_ext", "ipython_compact")


def test_names_lengths_have_separators(ip: Any) -> None:
    ip.run_cell("big = list(range(123456))")
    plain = _run(ip, "names")._repr_mimebundle_()[0]["text/plain"]
    row = r"^big +list +123,456 items · ≈ \d+\.\d MiB( +value: \[0, 1, 2, .*)?$"
    assert re.search(row, plain, re.M), plain


@pytest.mark.parametrize(
    ("kind", "data", "gist"),
    [
        ("model_change", {"provider": "openai", "model_id": "gpt-4o"}, "openai/gpt-4o"),
        ("thinking_level_change", {"thinking_level": "off"}, "thinking level off"),
        (
            "snapshot",
            {"generation": 2, "saved": 3, "bytes": 24241},
            "snapshot generation 2: 3 names, 23.7 KiB",
        ),
        ("pin", {"action": "pin", "pin_id": "pin-1", "text": "keep"}, "pin-1: 'keep'"),
        ("pin", {"action": "pin", "pin_id": "pin-2", "entry_id": "ab12"}, "pin-2: entry ab12"),
        ("pin", {"action": "unpin", "pin_id": "pin-1"}, "unpin pin-1"),
        (
            "custom",
            {"custom_type": "ipython_file_ops", "data": {"read": ["a.csv"], "modified": []}},
            "files read: a.csv; modified: none",
        ),
        (
            "custom",
            {"custom_type": "ipython_file_ops", "data": {"read": [], "modified": ["b.csv"], "by": "agent"}},
            "files read by the agent: none; modified: b.csv",
        ),
        ("custom", {"custom_type": "other"}, "other"),
        ("branch_summary", {}, ""),
    ],
)
def test_entries_without_text_get_a_gist(kind: str, data: dict[str, Any], gist: str) -> None:
    assert (
        display.entry_gist({"id": "e", "parent_id": None, "kind": kind, "timestamp": "t", "data": data})
        == gist
    )


def test_log_rows_of_textless_entries_are_described(ip: Any) -> None:
    ip.run_cell("x = 1")
    _run(ip, "snapshot")
    plain = _run(ip, "log -n 1")._repr_mimebundle_()[0]["text/plain"].splitlines()
    assert re.match(r"^\w+ +snapshot +snapshot generation \d+: 1 names, ", plain[2]), plain


def test_load_with_an_uncreatable_data_dir_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "a-file" / "sub"))
    shell = start_ipython() or get_ipython()
    with pytest.raises(
        UsageError,
        match=re.escape(
            f"cannot create the data directory {tmp_path}/a-file/sub: "
            f"Not a directory. "
            "Point IPYTHON_COMPACT_DIR at a writable directory"
        ),
    ):
        shell.run_line_magic("load_ext", "ipython_compact")
    assert "compact" not in shell.magics_manager.magics["line"]
    assert extension_for(shell) is None


def test_branch_to_an_entry_on_the_current_path_moves_the_leaf_without_a_summary(ip: Any) -> None:
    _run(ip, "snapshot")
    _run(ip, "snapshot")
    first, second = (r["id"] for r in _run(ip, "log -n 2").data)
    moved = _run(ip, f"branch {first}").data
    assert moved["leaf"] == first and moved["branch_summary"] is None
    assert [r["id"] for r in _run(ip, "log -n 1").data] == [first]  # the log now ends at the entry
    assert [t["id"] for t in _run(ip, "tree").data] == [second]  # the left-behind tip stays, unsummarized


def test_files_libraries_open_on_their_own_are_nobodys(ip: Any, tmp_path: Path) -> None:
    """System configuration and shared data (``/etc/os-release`` read for the model client's
    headers, time zones, certificates) are not what the cell worked on."""
    mine = tmp_path / "mine.csv"
    mine.write_text("a\n")
    ip.run_cell(f"_ = open('/etc/passwd').read()\n_ = open({str(mine)!r}).read()")
    service = extension_for(ip).service  # type: ignore[union-attr]
    entries = [e for e in service.store.path(service.session) if e.kind == "custom"]
    assert entries[-1].data["data"] == {"read": [str(mine)], "modified": [], "by": "user"}


def test_a_skipped_automatic_snapshot_is_shown_in_status_and_the_next_one_lands(ip: Any) -> None:
    """Red team 3, item 6 and a minor: with another process holding the snapshot lock the automatic
    snapshot skips at once (it used to stall the cell ~60 s) and ``status`` says so."""
    import fcntl

    ext = extension_for(ip)
    ip.run_cell("x = 1")
    ext.service.snapshot()
    fd = os.open(ext.service.snapshots.directory / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        ip.run_cell("x = 2")
        with pytest.raises(Exception, match="skipped rather than wait"):
            ext.service.automatic_snapshot()
        status = _run(ip, "status")
        assert "skipped rather than wait" in (status.data["last_snapshot_error"] or "")
        assert ("Last snapshot failed") in status.bundle["text/plain"] and "skipped" in status.bundle[
            "text/html"
        ]
    finally:
        os.close(fd)
    ext.service.automatic_snapshot()
    assert _run(ip, "status").data["last_snapshot_error"] is None
