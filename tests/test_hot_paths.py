"""Hot-path queries return exactly what the full root→leaf path computation returns.

Every query that replaced a ``store.path(session)`` on a hot path (kinds via the mark chain,
spans, counts, tails, branch paths, the context view as preparation input) is compared with the
whole-path computation on real SQLite files holding branched sessions with several compactions.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from builders import assistant, counting_clock, counting_ids, tool_result
from builders import user as _user

from ipython_compact.core.context import collect_branch_entries
from ipython_compact.core.entries import Entry
from ipython_compact.core.preparation import prepare_compaction
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore, UnknownEntryError, migrations
from ipython_compact.store.migrations import MARK_KINDS


def _assistant(text: str, tool: bool = False) -> dict[str, Any]:
    return assistant(
        text, tool, call_id=f"c-{text[:6]}", name="read", arguments={"path": f"/f/{text[:6]}.py"}
    )


def _tool(text: str) -> dict[str, Any]:
    return tool_result(text, call_id="c", name="read")


def _grow(store: SessionStore, session: str, turns: int, tag: str, compact_every: int) -> list[Entry]:
    """Turns of user / assistant(+tool) messages with pins, goals, system notices and compactions."""
    made: list[Entry] = []
    for t in range(turns):
        made.append(store.append(session, "message", _user(f"{tag} question {t} " + "words " * (t % 7 + 3))))
        if t % 3 == 1:
            made.append(store.append(session, "message", _assistant(f"{tag}call{t} reading", tool=True)))
            made.append(
                store.append(session, "message", _tool(f"{tag} contents {t} " + "x = 1\n" * (t % 5 + 2)))
            )
        made.append(
            store.append(session, "message", _assistant(f"{tag} answer {t} " + "detail " * (t % 4 + 2)))
        )
        if t % 5 == 2:
            made.append(
                store.append(
                    session, "pin", {"action": "pin", "text": f"{tag} pin {t}", "pin_id": f"pin-{t}"}
                )
            )
        if t % 11 == 4:
            made.append(store.append(session, "goal", {"goal": f"{tag} goal {t}", "active": True}))
        if t % 9 == 0:
            made.append(
                store.append(session, "kernel_state", {"content": f"<ipython_state>{t}</ipython_state>"})
            )
        if t and t % compact_every == 0:
            keep = next(
                e for e in reversed(made[:-2]) if e.kind == "message" and e.data["message"]["role"] == "user"
            )
            made.append(
                store.append(
                    session, "compaction", {"summary": f"{tag} up to {t}", "first_kept_entry_id": keep.id}
                )
            )
            made.append(store.append(session, "system", {"content": f"baseline after {t}"}))
    return made


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A session with a trunk and three branches (one off a compacted region, one off a branch).
    Built once: every test here only reads it."""
    store = SessionStore(
        tmp_path_factory.mktemp("hot") / "hot.db",
        clock=counting_clock(),
        new_id=counting_ids("h"),
        cache_entries=64,
    )
    store.create_session("s")
    trunk = _grow(store, "s", 40, "trunk", 7)
    store.set_leaf("s", trunk[25].id)
    side = _grow(store, "s", 25, "side", 6)
    store.set_leaf("s", trunk[-10].id)
    late = _grow(store, "s", 12, "late", 5)
    store.set_leaf("s", side[8].id)
    nested = _grow(store, "s", 9, "nested", 4)
    store.create_session("other")
    _grow(store, "other", 10, "other", 3)
    leaves = {"trunk": trunk[-1].id, "side": side[-1].id, "late": late[-1].id, "nested": nested[-1].id}
    yield store, leaves, trunk
    store.close()


KIND_SETS = [
    {"compaction"},
    {"pin"},
    {"goal", "system"},
    {"compaction", "pin", "goal", "system", "branch_summary"},
    {"message"},
    {"kernel_state", "pin"},
    set(),
]


@pytest.mark.parametrize("kinds", KIND_SETS, ids=lambda k: "+".join(sorted(k)) or "none")
@pytest.mark.parametrize("leaf", ["trunk", "side", "late", "nested"])
def test_path_by_kind_and_counts_equal_the_full_path(tree: Any, leaf: str, kinds: set[str]) -> None:
    store, leaves, _ = tree
    full = store.path("s", leaves[leaf])
    expected = [e for e in full if e.kind in kinds]
    assert store.path("s", leaves[leaf], kinds=kinds) == expected
    assert store.count_on_path("s", kinds, leaf=leaves[leaf]) == len(expected)
    assert store.path_length("s", leaves[leaf]) == len(full)


@pytest.mark.parametrize("kinds", [None, *KIND_SETS[:5]])
@pytest.mark.parametrize("leaf", ["trunk", "side", "nested"])
def test_span_equals_the_slice_of_the_full_path(tree: Any, leaf: str, kinds: set[str] | None) -> None:
    store, leaves, _ = tree
    full = store.path("s", leaves[leaf])
    for start in (0, 1, len(full) // 3, len(full) - 5, len(full) - 1):
        piece = full[start:]
        expected = piece if kinds is None else [e for e in piece if e.kind in kinds]
        assert store.span("s", full[start].id, leaves[leaf], kinds=kinds) == expected
        if kinds is not None:
            assert store.count_on_path("s", kinds, leaf=leaves[leaf], from_id=full[start].id) == len(expected)


@pytest.mark.parametrize("kinds", [None, {"compaction"}, {"message"}])
def test_span_from_an_entry_off_the_path_is_an_error(tree: Any, kinds: set[str] | None) -> None:
    store, leaves, _ = tree
    off_path = store.path("s", leaves["late"])[-3].id
    with pytest.raises(UnknownEntryError, match="not on the path"):
        store.span("s", off_path, leaves["side"], kinds=kinds)


@pytest.mark.parametrize("limit", [0, 1, 2, 20, 10_000])
@pytest.mark.parametrize("leaf", ["trunk", "nested"])
def test_path_tail_equals_the_end_of_the_full_path(tree: Any, leaf: str, limit: int) -> None:
    store, leaves, _ = tree
    full = store.path("s", leaves[leaf])
    assert store.path_tail("s", limit, leaves[leaf]) == (full[-limit:] if limit else [])


@pytest.mark.parametrize(
    ("old", "target"),
    [
        ("trunk", "side"),
        ("side", "trunk"),
        ("nested", "side"),
        ("side", "nested"),
        ("late", "nested"),
        ("trunk", "trunk"),
    ],
)
def test_branch_paths_collect_what_the_full_paths_collect(tree: Any, old: str, target: str) -> None:
    store, leaves, trunk = tree
    for target_id in (leaves[target], trunk[3].id, store.path("s", leaves[target])[-4].id):
        old_full = store.path("s", leaves[old])
        target_full = store.path("s", target_id)
        paths = store.branch_paths("s", target_id, leaves[old])
        assert collect_branch_entries(paths.old, paths.target) == collect_branch_entries(
            old_full, target_full
        )
        assert paths.old[-1:] == old_full[-1:]
        assert paths.target[-1].id == target_id
        assert (
            len(paths.old) + len(paths.target) < len(old_full) + len(target_full) or target_id == trunk[3].id
        )


def test_branch_paths_between_separate_roots_are_the_whole_paths(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "roots.db", clock=counting_clock(), new_id=counting_ids("h")) as store:
        store.create_session("s")
        first = _grow(store, "s", 4, "one", 100)
        store.set_leaf("s", None)
        second = _grow(store, "s", 3, "two", 100)
        paths = store.branch_paths("s", first[-1].id, second[-1].id)
        assert (paths.old, paths.target, paths.common_ancestor_id) == (second, first, None)


# 1, 10 and 40 plan a compaction on every leaf, 150 on the trunk only, 5000 on none (the contexts
# are short, compacted every few turns): both branches of the comparison below are exercised.
@pytest.mark.parametrize("keep", [1, 10, 40, 150, 5000])
@pytest.mark.parametrize("leaf", ["trunk", "side", "late", "nested"])
@pytest.mark.parametrize("estimator", ["density", "chars4"])
def test_preparation_on_the_context_view_equals_preparation_on_the_full_path(
    tree: Any, leaf: str, keep: int, estimator: str
) -> None:
    store, leaves, _ = tree
    settings = CompactionSettings(keep_recent_tokens=keep, estimator=estimator)  # type: ignore[arg-type]
    full = store.path("s", leaves[leaf])
    view = store.context_view("s", leaves[leaf])
    on_full = prepare_compaction(full, settings)
    on_view = prepare_compaction(view.entries, settings, tokens=view.tokens(settings.estimator))
    assert (on_full is None) == (on_view is None)
    if on_full is None or on_view is None:
        return
    offset = view.offset
    assert on_view.first_kept_entry_id == on_full.first_kept_entry_id
    assert on_view.messages_to_summarize == on_full.messages_to_summarize
    assert on_view.turn_prefix == on_full.turn_prefix
    assert on_view.kept == on_full.kept
    assert (on_view.is_split_turn, on_view.previous_summary, on_view.tokens_before) == (
        on_full.is_split_turn,
        on_full.previous_summary,
        on_full.tokens_before,
    )
    assert (on_view.read_files, on_view.modified_files) == (on_full.read_files, on_full.modified_files)
    assert on_view.first_kept_index + offset == on_full.first_kept_index
    assert on_view.boundary_start + offset == on_full.boundary_start


@pytest.mark.parametrize(
    ("column", "migration"), [("mark", "0002_mark_chain"), ("compactions", "0003_compaction_counts")]
)
def test_derived_columns_survive_the_migration_of_an_older_database(
    tmp_path: Path, column: str, migration: str
) -> None:
    """A database written before a derived column existed is back-filled once, and agrees."""
    db = tmp_path / "old.db"
    with SessionStore(db, clock=counting_clock(), new_id=counting_ids("h")) as store:
        store.create_session("s")
        trunk = _grow(store, "s", 20, "trunk", 6)
        store.set_leaf("s", trunk[12].id)
        _grow(store, "s", 8, "side", 3)
        expected = {
            k: store.path("s", kinds=k) for k in (frozenset({"compaction"}), frozenset({"pin", "goal"}))
        }
        count = store.count_on_path("s", ("compaction",))
    conn = sqlite3.connect(db)
    conn.execute(f"ALTER TABLE entries DROP COLUMN {column}")
    conn.execute("DELETE FROM migrations WHERE name = ?", (migration,))
    conn.commit()
    conn.close()
    with SessionStore(db) as store:
        assert store.verify().ok, store.verify().problems
        for kinds, entries in expected.items():
            assert store.path("s", kinds=kinds) == entries
        assert store.count_on_path("s", ("compaction",)) == count == len(expected[frozenset({"compaction"})])
        with pytest.raises(Exception, match="append-only"):
            store._conn.execute(f"UPDATE entries SET {column} = NULL")
    assert migration in [m.name for m in migrations.MIGRATIONS]
    assert {"compaction", "pin", "goal", "system"} <= MARK_KINDS


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("UPDATE entries SET mark = NULL WHERE seq = (SELECT MAX(seq) FROM entries)", "has mark"),
        ("UPDATE entries SET compactions = 7 WHERE seq = 3", "compactions on its path"),
        (
            "UPDATE entries SET context_head = NULL WHERE seq = (SELECT MAX(seq) FROM entries)",
            "has context head",
        ),
    ],
)
def test_verify_notices_a_wrong_derived_column(tmp_path: Path, sql: str, problem: str) -> None:
    db = tmp_path / "m.db"
    with SessionStore(db, clock=counting_clock(), new_id=counting_ids("h")) as store:
        store.create_session("s")
        _grow(store, "s", 8, "t", 3)
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute(sql)
    conn.commit()
    conn.close()
    with SessionStore(db) as store:
        report = store.verify()
    assert any(problem in p for p in report.problems), report.problems


# ------------------------------------------------------------------ the callers, end to end


def _service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session: str) -> Any:
    """A real ``KernelService`` on a real database, with a bare namespace for a shell."""
    from types import SimpleNamespace

    from ipython_compact.kernel.config import CompactConfig
    from ipython_compact.kernel.service import KernelService

    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    return KernelService(
        SimpleNamespace(user_ns={}, user_ns_hidden={}, kernel=None), CompactConfig(session=session)
    )


def test_service_status_summaries_and_log_equal_the_full_path_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _service(tmp_path, monkeypatch, "svc")
    try:
        store = service.store
        trunk = _grow(store, "svc", 30, "trunk", 6)
        store.set_leaf("svc", trunk[20].id)
        _grow(store, "svc", 14, "side", 4)
        full = store.path("svc")
        status = service.status()
        assert (status["entries"], status["compactions"]) == (
            len(full),
            sum(1 for e in full if e.kind == "compaction"),
        )
        for limit in (0, 1, 2, 50):
            summaries = service.summaries(limit)
            compactions = [(i, e) for i, e in enumerate(full) if e.kind == "compaction"]
            expected = compactions[-limit:] if limit > 0 else compactions
            assert [s["id"] for s in summaries] == [e.id for _, e in expected]
            ids = [x.id for x in full]
            assert [s["kept_entries"] for s in summaries] == [
                sum(1 for k in full[ids.index(e.data["first_kept_entry_id"]) : i] if k.kind == "message")
                for i, e in expected
            ]
        for limit in (1, 7, 10_000):
            assert [row["id"] for row in service.log(limit)] == [e.id for e in full[-limit:]]
    finally:
        service.close()


def test_compactor_pins_compactions_and_branch_summary_follow_the_current_path(tmp_path: Path) -> None:
    from ipython_compact.compaction.compactor import Compactor

    with SessionStore(tmp_path / "c.db", clock=counting_clock(), new_id=counting_ids("h")) as store:
        store.create_session("s")
        trunk = _grow(store, "s", 24, "trunk", 6)
        store.set_leaf("s", trunk[15].id)
        side = _grow(store, "s", 10, "side", 4)
        compactor = Compactor(store)
        full = store.path("s")
        assert compactor.compactions("s") == [e for e in full if e.kind == "compaction"]
        from ipython_compact.core.anchors import apply_pins

        pins_on_path = [e for e in full if e.kind == "pin"]
        assert compactor.active_pins("s") == apply_pins((), pins_on_path, compactor._lookup("s"))
        pinned = compactor.pin("s", text="new pin")
        assert pinned.data["pin_id"] == f"pin-{len(pins_on_path) + 1}"
        expected = collect_branch_entries(store.path("s"), store.path("s", trunk[-1].id))
        summary = compactor.summarize_branch("s", trunk[-1].id)
        assert summary.parent_id == trunk[-1].id
        assert summary.data["from_id"] == pinned.id
        assert summary.data["details"]["entries"] == sum(
            1
            for e in expected.entries
            if e.kind != "compaction"
            and e.kind in ("message", "custom_message", "branch_summary", "system", "kernel_state")
        )
        assert side[-1].id in {e.id for e in expected.entries}


@pytest.mark.parametrize("estimator", ["density", "chars4"])
def test_a_session_ending_in_a_huge_tool_result_can_be_compacted(tmp_path: Path, estimator: str) -> None:
    """The stuck session: with Prime's fallback (the product default) the Compactor (and its
    ``prepare``, the agent's path) makes room; the pi-compatible chars4 path keeps pi's rule
    (nothing to compact)."""
    from ipython_compact.compaction.compactor import Compactor, NothingToCompact

    settings = CompactionSettings(keep_recent_tokens=2000, estimator=estimator)  # type: ignore[arg-type]
    with SessionStore(tmp_path / "stuck.db", clock=counting_clock(), new_id=counting_ids("h")) as store:
        store.create_session("s")
        _grow(store, "s", 6, "early", 100)
        store.append("s", "message", _user("load the big file"))
        call = store.append("s", "message", _assistant("bigcall reading", tool=True))
        store.append("s", "message", _tool("row,value\n" * 4000))
        engine_payload = Compactor(store, None, settings).prepare(
            "s", reason="overflow", focus=None, keep_recent_tokens=None
        )
        if estimator == "chars4":
            assert engine_payload is None
            with pytest.raises(NothingToCompact):
                Compactor(store, None, settings).compact("s", reason="overflow")
            return
        assert engine_payload is not None and engine_payload["first_kept_entry_id"] == call.id
        result = Compactor(store, None, settings).compact("s", reason="overflow")
        assert result.entry.data["first_kept_entry_id"] == call.id
        assert store.context_view("s").entries[0].id == call.id


def test_anchors_after_an_imported_compaction_equal_those_from_the_full_log(tmp_path: Path) -> None:
    """A compaction without anchors (pi import) sends the Compactor to the raw log for the goal,
    constraints and pins; reading only the history before the view (kept per head) gives the
    anchors the whole-path computation gives, on every call."""
    from ipython_compact.compaction.compactor import Compactor
    from ipython_compact.core.anchors import AnchorSet, extract_anchors

    with SessionStore(tmp_path / "a.db", clock=counting_clock(), new_id=counting_ids("h")) as store:
        store.create_session("s")
        store.append(
            "s", "message", _user("Goal: clean the sales table. Always use UTF-8 and never drop rows.")
        )
        made = _grow(store, "s", 30, "early", 1000)
        store.append("s", "message", _user("You must keep the index column. Prefer polars over pandas."))
        # one repeat, one new
        store.append("s", "message", _user("Always use UTF-8 and never drop rows. Do not print secrets."))
        store.append("s", "pin", {"action": "pin", "text": "deadline friday", "pin_id": "pin-1"})
        tail = _grow(store, "s", 12, "late", 1000)
        store.append(
            "s", "compaction", {"summary": "imported", "first_kept_entry_id": tail[6].id, "tokens_before": 1}
        )
        store.append("s", "message", _user("You must keep the index column. Never use tabs."))
        _grow(store, "s", 20, "after", 1000)
        settings = CompactionSettings(keep_recent_tokens=300)
        compactor = Compactor(store, None, settings)
        plans = [compactor.plan("s") for _ in range(2)]
        full = store.path("s")
        view = store.context_view("s")
        prep = prepare_compaction(view.entries, settings, tokens=view.tokens(settings.estimator))
        assert prep is not None
        span = [*prep.messages_to_summarize, *prep.turn_prefix]
        ids = {e.id for e in span}
        expected = extract_anchors(
            AnchorSet(),
            [e for e in full if e.kind != "compaction" and e.id not in ids] + span,
            lambda i: store.get(i, "s"),
        )
        assert plans[0].anchors.goal is not None and len(plans[0].anchors.constraints) >= 4
        assert [p.anchors.goal for p in plans] == [expected.goal] * 2
        assert [p.anchors.constraints for p in plans] == [expected.constraints] * 2
        assert made and len(full) > len(view.entries)


@pytest.mark.parametrize(
    ("kinds", "roles"),
    [
        (None, {"user"}),
        ({"message", "pin"}, {"user"}),
        ({"message"}, {"assistant", "toolResult"}),
        ({"pin"}, {"user"}),
        (None, set()),
    ],
)
@pytest.mark.parametrize("leaf", ["trunk", "nested"])
def test_path_by_role_equals_filtering_the_full_path(
    tree: Any, leaf: str, kinds: set[str] | None, roles: set[str]
) -> None:
    store, leaves, _ = tree
    full = store.path("s", leaves[leaf])
    expected = [
        e for e in full if (kinds is None or e.kind in kinds) and (e.kind != "message" or e.role in roles)
    ]
    assert store.path("s", leaves[leaf], kinds=kinds, roles=roles) == expected


@pytest.mark.parametrize("after_newest", [None, "compaction", "pin", "no_such_kind"])
@pytest.mark.parametrize(
    "kinds", [None, *KIND_SETS], ids=lambda k: "all" if k is None else "+".join(sorted(k)) or "none"
)
def test_entries_by_kind_and_since_the_newest_equal_filtering_every_entry(
    tree: Any, kinds: set[str] | None, after_newest: str | None
) -> None:
    """The agent's pre-turn overflow check reads only what came after the newest compaction."""
    store = tree[0]
    every = store.entries("s")
    start = 0
    if after_newest is not None:
        start = max((i + 1 for i, e in enumerate(every) if e.kind == after_newest), default=0)
    expected = [e for e in every[start:] if kinds is None or e.kind in kinds]
    assert store.entries("s", kinds=kinds, after_newest=after_newest) == expected
    assert store.entry_count("s") == len(every)


def test_kind_lookups_use_the_kind_index(tree: Any) -> None:
    """Cost must not grow with the history: SQLite answers these from ``entries_kind``."""
    conn = tree[0]._conn
    plans = [
        " ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", (1, "compaction")))
        for sql in (
            "SELECT MAX(seq) FROM entries WHERE session_id = ? AND kind = ?",
            "SELECT seq FROM entries WHERE session_id = ? AND kind IN (?) ORDER BY seq",
        )
    ]
    assert all("entries_kind" in plan for plan in plans), plans
