"""The session log on both engines (a SQLite file, a real PostgreSQL server): append-only tree,
context view, integrity. Tests taking ``location`` or ``store`` run once per engine."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from builders import assistant, counting_clock, counting_ids, user
from postgres_server import raw_sql, server

from ipython_compact.core.entries import Entry
from ipython_compact.store import (
    InvalidEntryError,
    SessionExistsError,
    SessionStore,
    StoreError,
    UnknownEntryError,
    UnknownSessionError,
    migrations,
)


@pytest.fixture
def store(location: str | Path) -> Any:
    s = SessionStore(location, clock=counting_clock(), new_id=counting_ids())
    s.create_session("s")
    yield s
    s.close()


def test_append_chains_under_leaf_and_moves_it(store: SessionStore) -> None:
    a = store.append("s", "message", user("one"))
    b = store.append("s", "message", assistant("two"))
    assert (a.parent_id, b.parent_id) == (None, a.id)
    assert store.leaf("s") == b.id
    assert [e.id for e in store.path("s")] == [a.id, b.id]
    assert store.get(b.id) == b
    assert store.get_session("s").entry_count == 2


def test_entry_read_back_equals_entry_written(store: SessionStore) -> None:
    data = {
        "message": {"role": "user", "content": [{"type": "text", "text": "ü ✓ 漢字"}], "n": 1.5, "z": None}
    }
    written = store.append("s", "message", data, timestamp="2025-01-01T00:00:00.000Z", entry_id="fixed")
    assert store.get("fixed", "s") == written
    assert written.data == data


@pytest.mark.parametrize(
    "value",
    [
        12345678901234567890123,
        -98765432109876543210,
        5e-06,
        1.7976931348623157e308,
        0.1,
        -0.0,
        "\ud800 lone",
        "a\u2028b",
    ],
)
def test_a_value_read_back_from_a_cold_cache_is_the_value_written(store: SessionStore, value: Any) -> None:
    """Entries are parsed by orjson where it reads what the stdlib reads (issue 37); integers past
    64 bits, floats with exponents and lone surrogates (stored repaired) read back as written."""
    written = store.append("s", "custom", {"custom_type": "t", "data": {"v": value, "list": [value]}})
    store.clear_cache()
    read = store.get(written.id, "s")
    assert read == written and type(read.data["data"]["v"]) is type(written.data["data"]["v"])


def test_branching_by_moving_the_leaf(store: SessionStore) -> None:
    a = store.append("s", "message", user("root"))
    b = store.append("s", "message", assistant("first branch"))
    store.set_leaf("s", a.id)
    c = store.append("s", "message", assistant("second branch"))
    assert c.parent_id == a.id
    assert [e.id for e in store.path("s")] == [a.id, c.id]
    assert [e.id for e in store.path("s", b.id)] == [a.id, b.id]
    assert {e.id for e in store.branch_tips("s")} == {b.id, c.id}
    assert [e.id for e in store.children("s", a.id)] == [b.id, c.id]


def test_append_without_moving_leaf(store: SessionStore) -> None:
    a = store.append("s", "message", user("root"))
    side = store.append("s", "custom", {"custom_type": "x"}, move_leaf=False)
    assert side.parent_id == a.id
    assert store.leaf("s") == a.id


@pytest.mark.parametrize(
    ("kind", "data", "parent", "message"),
    [
        ("bogus", {}, None, "unknown kind 'bogus'"),
        ("message", {"x": {1, 2}}, None, "not JSON-serialisable"),
        ("message", {"x": float("nan")}, None, "not JSON-serialisable"),
        ("message", user("x"), "nope", "parent 'nope' does not exist"),
        ("compaction", {"summary": "s"}, None, "needs data.first_kept_entry_id"),
        ("compaction", {"summary": "s", "first_kept_entry_id": "ghost"}, None, "not on the path"),
    ],
)
def test_bad_entries_are_refused_and_nothing_is_written(
    store: SessionStore, kind: str, data: dict[str, Any], parent: str | None, message: str
) -> None:
    store.append("s", "message", user("keep me"))
    before = store.entries("s")
    with pytest.raises(InvalidEntryError, match=message):
        if parent is None:
            store.append("s", kind, data)
        else:
            store.append("s", kind, data, parent_id=parent)
    assert store.entries("s") == before
    assert store.verify().ok


def test_batch_is_all_or_nothing(store: SessionStore) -> None:
    store.append("s", "message", user("first"))
    with pytest.raises(InvalidEntryError):
        store.append_many("s", [("message", user("a")), ("message", user("b")), ("nope", {})])
    assert len(store.entries("s")) == 1
    assert store.get_session("s").entry_count == 1


def test_duplicate_id_is_refused(store: SessionStore) -> None:
    store.append("s", "message", user("a"), entry_id="x")
    with pytest.raises(InvalidEntryError, match="already exists"):
        store.append("s", "message", user("b"), entry_id="x")


def test_compaction_from_a_side_branch_is_refused(store: SessionStore) -> None:
    a = store.append("s", "message", user("a"))
    b = store.append("s", "message", assistant("b"))
    store.set_leaf("s", a.id)
    store.append("s", "message", assistant("c"))
    with pytest.raises(InvalidEntryError, match="not on the path"):
        store.append("s", "compaction", {"summary": "x", "first_kept_entry_id": b.id})


@pytest.mark.parametrize("sql", ["UPDATE entries SET kind = 'label'", "DELETE FROM entries"])
def test_triggers_forbid_changing_entries(store: SessionStore, location: str | Path, sql: str) -> None:
    store.append("s", "message", user("a"))
    with pytest.raises(Exception, match="append-only"):
        raw_sql(location, sql)
    assert len(store.entries("s")) == 1


def test_ids_are_per_session(store: SessionStore) -> None:
    store.create_session("t")
    a = store.append("s", "message", user("in s"), entry_id="same")
    b = store.append("t", "message", user("in t"), entry_id="same")
    assert store.get("same", "s") == a
    assert store.get("same", "t") == b
    with pytest.raises(UnknownEntryError, match="several sessions"):
        store.get("same")


def test_unknown_session_lists_known_ones(store: SessionStore) -> None:
    with pytest.raises(UnknownSessionError, match=r"no session named 'zz'.*known: s"):
        store.append("zz", "message", user("x"))


def test_create_existing_session_fails_but_ensure_returns_it(store: SessionStore) -> None:
    with pytest.raises(SessionExistsError):
        store.create_session("s")
    assert store.ensure_session("s").name == "s"


def _build_with_compactions(store: SessionStore, n: int, compact_every: int) -> list[Entry]:
    made: list[Entry] = []
    for i in range(n):
        made.append(
            store.append("s", "message", user(f"question {i}") if i % 2 == 0 else assistant(f"answer {i}"))
        )
        if i and i % compact_every == 0:
            made.append(
                store.append("s", "compaction", {"summary": f"up to {i}", "first_kept_entry_id": made[-3].id})
            )
    return made


@pytest.mark.parametrize(("n", "compact_every"), [(5, 100), (30, 10), (50, 7)])
def test_context_view_starts_at_newest_compactions_first_kept_entry(
    store: SessionStore, n: int, compact_every: int
) -> None:
    _build_with_compactions(store, n, compact_every)
    full = store.path("s")
    compactions = [i for i, e in enumerate(full) if e.kind == "compaction"]
    if compactions:
        head = full[compactions[-1]].data["first_kept_entry_id"]
        expected = full[[e.id for e in full].index(head) :]
    else:
        expected = full
    view = store.context_view("s")
    assert view.entries == expected
    assert view.head_id == (expected[0].id if compactions else None)
    assert view.tokens_density == store.token_counts("s", expected, "density")
    assert view.tokens_chars4 == store.token_counts("s", expected, "chars4")
    assert store.context_path("s") == expected


@pytest.mark.parametrize("cache_entries", [0, 3, 4096])
def test_context_view_is_the_same_whatever_the_cache_size(location: str | Path, cache_entries: int) -> None:
    with SessionStore(
        location, clock=counting_clock(), new_id=counting_ids(), cache_entries=cache_entries
    ) as s:
        s.create_session("s")
        first = s.append("s", "message", user("root"))
        for i in range(20):
            s.append("s", "message", assistant(f"reply {i}"))
        s.append("s", "compaction", {"summary": "x", "first_kept_entry_id": s.path("s")[12].id})
        s.append("s", "message", user("after"))
        expected = s.path("s")[12:]
        assert [s.context_path("s") for _ in range(3)] == [expected] * 3
        s.create_session("t")
        s.append("t", "message", user("other session, same id"), entry_id=first.id)
        assert s.context_path("s") == expected
        s.clear_cache()
        assert s.context_path("s") == expected


def test_a_large_cold_context_view_read_in_row_order_is_the_path(tmp_path: Path) -> None:
    """Over 500 uncached entries are read by row number (``seq``), not by id: two sessions
    written in turns (their rows interleave) and a side branch must still give each path."""
    with SessionStore(
        tmp_path / "big.db", clock=counting_clock(), new_id=counting_ids(), cache_entries=0
    ) as s:
        s.create_session("s")
        s.create_session("t")
        for i in range(0, 1400, 100):
            s.append_many(
                "s",
                [
                    ("message", user(f"s {j}") if j % 2 == 0 else assistant(f"s {j}"))
                    for j in range(i, i + 100)
                ],
            )
            s.append_many("t", [("message", user(f"t {j}")) for j in range(i, i + 50)])
        fork = s.path("s")[900].id
        main_leaf = s.leaf("s")
        s.set_leaf("s", fork)
        s.append_many("s", [("message", assistant(f"side {j}")) for j in range(600)])
        side = s.path("s")
        s.set_leaf("s", main_leaf)
        main = s.path("s")
        s.clear_cache()
        assert s.context_path("s") == main
        assert [e.data["message"]["content"] for e in s.context_path("s", side[-1].id)[-2:]] == [
            e.data["message"]["content"] for e in side[-2:]
        ]
        assert s.context_path("s", side[-1].id) == side
        assert len(main) == 1400 and len(side) == 901 + 600
        assert s.context_path("t") == s.path("t")


@pytest.mark.parametrize("kinds", [{"compaction"}, {"pin", "compaction"}, {"message"}, set()])
def test_path_filtered_by_kind_equals_filtering_the_full_path(store: SessionStore, kinds: set[str]) -> None:
    made = _build_with_compactions(store, 30, 8)
    store.append("s", "pin", {"action": "pin", "text": "keep", "pin_id": "p1"})
    store.set_leaf("s", made[10].id)
    store.append("s", "pin", {"action": "pin", "text": "side branch", "pin_id": "p2"})
    for leaf in (None, made[-1].id):
        full = store.path("s", leaf)
        assert store.path("s", leaf, kinds=kinds) == [e for e in full if e.kind in kinds]


def test_stored_token_estimates_match_the_core(store: SessionStore) -> None:
    from ipython_compact.core.tokens import estimate_entry_tokens

    entries = [
        store.append("s", "message", user("hello " * 50)),
        store.append("s", "message", assistant("x = 1\n" * 30)),
    ]
    for estimator in ("density", "chars4"):
        assert store.token_counts("s", entries, estimator) == [
            estimate_entry_tokens(e, estimator) for e in entries
        ]


def test_search_finds_text_and_treats_syntax_as_words(store: SessionStore) -> None:
    store.append("s", "message", user("the dataframe has NaN values"))
    store.append("s", "message", assistant('dropped rows with OR AND quotes "x"'))
    store.create_session("t")
    store.append("t", "message", user("another dataframe"))
    assert [h.entry.data["message"]["content"] for h in store.search("dataframe", session="s")] == [
        "the dataframe has NaN values"
    ]
    assert {h.session for h in store.search("dataframe")} == {"s", "t"}
    assert len(store.search('OR AND "x"')) == 1
    assert store.search("   ") == []


def test_verify_passes_on_a_clean_log(store: SessionStore) -> None:
    _build_with_compactions(store, 40, 9)
    report = store.verify()
    assert report.ok, report.problems
    assert report.entries == len(store.entries("s"))


def _tamper(location: str | Path, *sql: str) -> None:
    raw_sql(location, *sql, lift_guards=True)


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("UPDATE entries SET data = replace(data, 'question 3', 'question X')", "does not match its hash"),
        ("UPDATE entries SET timestamp = '1999' WHERE seq = 2", "does not match its hash"),
        ("DELETE FROM entries WHERE seq = (SELECT MAX(seq) FROM entries)", "leaf"),
        ("DELETE FROM entries WHERE seq = 4", "append chain breaks"),
        ("UPDATE entries SET parent_id = NULL WHERE seq = 5", "does not match its hash"),
        ("UPDATE sessions SET chain_tip = 'f00d'", "append chain ends at"),
    ],
)
def test_verify_detects_tampering(location: str | Path, sql: str, problem: str) -> None:
    path = location
    with SessionStore(path, clock=counting_clock(), new_id=counting_ids()) as s:
        s.create_session("s")
        for i in range(8):
            s.append("s", "message", user(f"question {i}"))
    _tamper(path, sql)
    with SessionStore(path) as s:
        report = s.verify()
    assert not report.ok
    assert any(problem in p for p in report.problems), report.problems


def test_verify_detects_a_removed_branch_tip(location: str | Path) -> None:
    path = location
    with SessionStore(path, clock=counting_clock(), new_id=counting_ids()) as s:
        s.create_session("s")
        a = s.append("s", "message", user("a"))
        s.append("s", "message", user("side"), move_leaf=False)
        s.append("s", "message", user("main"), parent_id=a.id)
    _tamper(path, "DELETE FROM entries WHERE seq = 2")
    with SessionStore(path) as s:
        report = s.verify()
    assert not report.ok
    assert any("entries lost" in p or "chain" in p for p in report.problems)


READERS = {
    "path": lambda s: s.path("s"),
    "path_by_role": lambda s: s.path("s", roles={"user"}),
    "path_by_kind": lambda s: s.path("s", kinds={"message"}),
    "context_view": lambda s: s.context_view("s"),
    "path_tail": lambda s: s.path_tail("s", 100),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_missing_parent_is_reported_by_every_path_reader_not_read_as_a_shorter_path(
    location: str | Path, reader: str
) -> None:
    path = location
    with SessionStore(path, clock=counting_clock(), new_id=counting_ids()) as s:
        s.create_session("s")
        made = [s.append("s", "message", user(f"question {i}")) for i in range(8)]
    _tamper(path, f"DELETE FROM entries WHERE id = '{made[3].id}'")
    with SessionStore(path) as s:
        with pytest.raises(
            StoreError,
            match=rf"broken parent link: '{made[4].id}' names parent "
            rf"'{made[3].id}'",
        ):
            READERS[reader](s)
        assert [e.id for e in s.path_tail("s", 3)] == [e.id for e in made[5:]]  # the intact tail still reads


def test_database_file_is_owner_only_and_migrations_are_named(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    SessionStore(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM migrations")] == [
        m.name for m in migrations.MIGRATIONS
    ]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    SessionStore(path).close()  # reopening applies nothing twice


def test_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    SessionStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO migrations VALUES ('9999_from_the_future', 'x')")
    conn.commit()
    conn.close()
    with pytest.raises(Exception, match=r"log\.db.*newer ipython-compact"):
        SessionStore(path)


def test_inbox_take_hands_out_each_item_once_and_settles_stale(store: SessionStore) -> None:
    made = _build_with_compactions(store, 12, 100)
    early = store.inbox_put("s", {"summary": "early"}, first_kept_entry_id=made[2].id)
    store.append("s", "compaction", {"summary": "newer cut", "first_kept_entry_id": made[6].id})
    late = store.inbox_put("s", {"summary": "late"}, first_kept_entry_id=made[9].id)
    free = store.inbox_put("s", {"note": "no cut"})
    taken = store.inbox_take("s")
    assert [i.item_id for i in taken] == [late.item_id, free.item_id]
    assert store.inbox_take("s") == []
    states = {i.item_id: i.state for i in store.inbox_items("s")}
    assert states == {early.item_id: "stale", late.item_id: "taken", free.item_id: "taken"}


def test_live_status_tracks_in_flight_and_last_failure(store: SessionStore) -> None:
    store.live_begin("s", "t1", reason="threshold", blocking=False)
    store.live_begin("s", "t2", reason="manual", blocking=True)
    assert [c.task_id for c in store.live_status("s").in_flight] == ["t1", "t2"]
    store.live_end("s", "t1", error="model timed out")
    store.live_end("s", "t2")
    status = store.live_status("s")
    assert status.in_flight == []
    assert status.last_failure is not None
    assert (status.last_failure["task_id"], status.last_failure["reason"], status.last_failure["error"]) == (
        "t1",
        "threshold",
        "model timed out",
    )
    store.status_set("s", "cooldown_until", {"at": "later"})
    assert store.status_get("s", "cooldown_until") == {"at": "later"}
    assert store.status_get("s", "missing", 7) == 7


def test_newer_postgres_database_is_refused_and_its_migrations_are_named() -> None:
    from ipython_compact.store import postgres

    url = server().fresh_url()
    with SessionStore(url) as s:
        assert s.engine == "postgresql"
        assert s.verify().ok
    SessionStore(url).close()  # reopening applies nothing twice
    raw_sql(url, "INSERT INTO migrations (name, applied_at) VALUES ('9999_from_the_future', 'x')")
    with pytest.raises(StoreError, match=r"postgresql://.*newer ipython-compact"):
        SessionStore(url)
    assert [m.name for m in postgres.MIGRATIONS] == ["0001_postgres_schema", "0002_entry_outlines"]


def test_a_postgres_database_of_another_program_is_left_untouched() -> None:
    url = server().fresh_url()
    raw_sql(url, "CREATE TABLE customers (id INTEGER)")
    with pytest.raises(StoreError, match=r"tables of another program \(customers\)"):
        SessionStore(url)
    raw_sql(url, "SELECT id FROM customers")  # still there, still alone


def test_a_generated_id_that_is_taken_is_replaced_and_the_hash_follows(location: str | Path) -> None:
    ids = iter(["a", "a", "b", "b", "b", "c"])
    with SessionStore(location, new_id=lambda: next(ids)) as s:
        s.create_session("s")
        first = s.append("s", "message", user("one"))
        second, third = s.append_many("s", [("message", user("two")), ("pin", {"text": "keep"})])
        assert [first.id, second.id, third.id] == ["a", "b", "c"]
        assert [e.id for e in s.path("s")] == ["a", "b", "c"]
        assert s.path("s", kinds={"pin"}) == [third]  # the mark chain names the id it got
        assert s.verify().ok


def test_when_no_free_id_is_found_nothing_is_written(location: str | Path) -> None:
    with SessionStore(location, new_id=lambda: "same") as s:
        s.create_session("s")
        s.append("s", "message", user("one"))
        with pytest.raises(StoreError, match="could not find a free entry id after 100 tries"):
            s.append_many("s", [("message", user("two")), ("message", user("three"))])
        assert s.entry_count("s") == 1 and s.verify().ok
