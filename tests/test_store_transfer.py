"""Moving a session between stores (SQLite ⇄ PostgreSQL), streamed, proved identical by the hash
chain; and the CLI's ``export --to``. Real files, a real PostgreSQL server, the real command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from postgres_server import server

from ipython_compact.store import SessionExistsError, SessionStore
from ipython_compact.store.transfer import copy_session

SCRIPT = Path(sys.executable).parent / "ipython-compact"


def _branchy(store: SessionStore) -> None:
    """A session with two roots, a side branch, a compaction and a leaf on an older branch."""
    store.create_session("s")
    say = lambda text: {"message": {"role": "user", "content": text}}  # noqa: E731
    a = store.append("s", "message", say("root one"))
    for i in range(7):
        store.append("s", "message", say(f"turn {i}"))
    store.append("s", "compaction", {"summary": "up to here", "first_kept_entry_id": store.path("s")[4].id})
    store.append("s", "message", say("after"))
    store.append("s", "custom", {"custom_type": "side"}, parent_id=a.id, move_leaf=False)
    store.set_leaf("s", None)
    store.append("s", "message", say("root two"))
    store.set_leaf("s", store.path("s", store.branch_tips("s")[0].id)[-1].id)


def _stores(tmp_path: Path) -> dict[str, str | Path]:
    return {"sqlite": tmp_path / "a.db", "postgresql": server().fresh_url(), "sqlite2": tmp_path / "b.db"}


@pytest.mark.parametrize(
    ("source", "target"), [("sqlite", "postgresql"), ("postgresql", "sqlite2"), ("sqlite", "sqlite2")]
)
@pytest.mark.parametrize("batch_size", [3, 2000])
def test_a_copied_session_is_the_same_tree_with_the_same_hash_chain(
    tmp_path: Path, source: str, target: str, batch_size: int
) -> None:
    where = _stores(tmp_path)
    with SessionStore(where[source]) as src, SessionStore(where[target]) as dst:
        _branchy(src)
        copied = copy_session(src, dst, "s", batch_size=batch_size)
        assert copied.identical and copied.entries == src.entry_count("s")
        assert copied.batches == -(-copied.entries // batch_size)
        assert dst.entries("s") == src.entries("s")
        assert dst.leaf("s") == src.leaf("s")
        assert dst.context_view("s").entries == src.context_view("s").entries
        assert {e.id for e in dst.branch_tips("s")} == {e.id for e in src.branch_tips("s")}
        assert dst.chain_tip("s") == src.chain_tip("s")
        assert dst.verify().ok
        assert [h.entry.id for h in dst.search("root")] != []


def test_a_copy_never_merges_into_an_existing_session(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "a.db") as src, SessionStore(server().fresh_url()) as dst:
        _branchy(src)
        dst.create_session("s")
        dst.append("s", "message", {"message": {"role": "user", "content": "theirs"}})
        with pytest.raises(SessionExistsError):
            copy_session(src, dst, "s")
        assert dst.entry_count("s") == 1
        assert copy_session(src, dst, "s", name="s-copy").identical


def test_export_to_a_url_moves_a_session_and_back(tmp_path: Path) -> None:
    url = server().fresh_url()
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(tmp_path / "data")}
    with SessionStore(tmp_path / "data.db") as store:
        _branchy(store)
    there = subprocess.run(
        [str(SCRIPT), "--db", str(tmp_path / "data.db"), "export", "-s", "s", "--to", url],
        env=env,
        capture_output=True,
        text=True,
    )
    assert there.returncode == 0, there.stderr
    assert "same hash chain as the source" in there.stderr
    back = subprocess.run(
        [str(SCRIPT), "export", "-s", "s", "--to", f"sqlite://{tmp_path / 'back.db'}", "--as", "home"],
        env={**env, "IPYTHON_COMPACT_DB": url},
        capture_output=True,
        text=True,
    )
    assert back.returncode == 0, back.stderr
    with SessionStore(tmp_path / "data.db") as a, SessionStore(tmp_path / "back.db") as b:
        assert b.entries("home") == a.entries("s") and b.chain_tip("home") == a.chain_tip("s")
    again = subprocess.run(
        [str(SCRIPT), "--db", str(tmp_path / "data.db"), "export", "-s", "s", "--to", url],
        env=env,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 2 and "already exists" in again.stderr and "--as NEW-NAME" in again.stderr


@pytest.mark.parametrize("batch", [1, 3, 1000])
def test_entries_stream_in_append_order_a_batch_at_a_time(location: str | Path, batch: int) -> None:
    from ipython_compact.store.exporters import export_lines

    with SessionStore(location) as store:
        _branchy(store)
        assert list(store.iter_entries("s", batch=batch)) == store.entries("s")
        lines = list(export_lines(store, "s"))
        assert len(lines) - 1 == store.entry_count("s")
