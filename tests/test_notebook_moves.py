"""A notebook renamed, moved or saved under another name keeps its session (issue 35.1).

Real bindings file, real SQLite store: ``follow_move`` (what the server extension runs for a
contents ``rename`` event and for the panel's report of a path change) records the new path's
session, so ``binding.resolve`` — what a kernel restarted under the new path runs — binds to the
session the notebook had; the old path starts afresh.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from ipython_compact.jupyter.renames import follow_move, notebook_key
from ipython_compact.kernel import binding
from ipython_compact.store import SessionStore

NOW = datetime(2026, 12, 5, 9, 30, tzinfo=UTC)


def _resolve(data_dir: Path, root: Path, path: str) -> binding.Binding:
    """The binding of a kernel Jupyter Server starts for ``path`` (``JPY_SESSION_NAME`` set to it)."""
    return binding.resolve(
        configured="",
        env={"JPY_SESSION_NAME": str(root / path)},
        user_ns={},
        connection_file=None,
        data_dir=data_dir,
    )


def _setup(tmp_path: Path, *paths: str) -> tuple[Path, Path, Path]:
    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    data.mkdir()
    db = data / "log.sqlite"
    store = SessionStore(db)
    for path in paths:
        store.ensure_session(f"notebook:{os.path.abspath(root / path)}")
    store.close()
    return root, data, db


def test_a_renamed_notebook_keeps_its_session_and_the_old_name_starts_afresh(tmp_path: Path) -> None:
    root, data, db = _setup(tmp_path, "Untitled.ipynb")
    cwd = lambda d: str(root / d)  # noqa: E731 - Jupyter's cwd_for_path, for this root
    before = _resolve(data, root, "trip.ipynb")
    assert before.session == f"notebook:{root}/trip.ipynb"  # today's defect: a new, empty session

    moved = follow_move("Untitled.ipynb", "trip.ipynb", cwd, data, db, NOW)

    old = f"notebook:{root}/Untitled.ipynb"
    assert moved == [(old, f"notebook:{root}/trip.ipynb", old)]
    after = _resolve(data, root, "trip.ipynb")
    assert (after.session, after.source, after.moved_from) == (old, "moved", old)
    fresh = _resolve(data, root, "Untitled.ipynb")
    assert fresh.session == f"{old}@2026-12-05T09:30:00Z" and fresh.source == "notebook"


def test_the_same_move_reported_twice_is_recorded_once(tmp_path: Path) -> None:
    root, data, db = _setup(tmp_path, "a.ipynb")
    cwd = lambda d: str(root / d)  # noqa: E731
    assert follow_move("a.ipynb", "b.ipynb", cwd, data, db, NOW)
    assert (
        follow_move("a.ipynb", "b.ipynb", cwd, data, db, NOW) == []
    )  # the panel's report after the server's
    assert _resolve(data, root, "b.ipynb").session == f"notebook:{root}/a.ipynb"


def test_moves_chain_and_a_move_back_is_the_natural_session_again(tmp_path: Path) -> None:
    root, data, db = _setup(tmp_path, "a.ipynb")
    cwd = lambda d: str(root / d)  # noqa: E731
    follow_move("a.ipynb", "b.ipynb", cwd, data, db, NOW)
    follow_move("b.ipynb", "sub/c.ipynb", cwd, data, db, NOW)
    assert _resolve(data, root, "sub/c.ipynb").session == f"notebook:{root}/a.ipynb"
    follow_move("sub/c.ipynb", "a.ipynb", cwd, data, db, NOW)
    back = _resolve(data, root, "a.ipynb")
    assert (back.session, back.source) == (f"notebook:{root}/a.ipynb", "notebook")


def test_a_moved_folder_moves_every_session_below_it(tmp_path: Path) -> None:
    root, data, db = _setup(tmp_path, "trips/oslo.ipynb", "trips/deep/rome.ipynb", "other.ipynb")
    cwd = lambda d: str(root / d)  # noqa: E731
    moved = follow_move("trips", "archive/2026", cwd, data, db, NOW)
    assert sorted(after for _, after, _ in moved) == [
        f"notebook:{root}/archive/2026/deep/rome.ipynb",
        f"notebook:{root}/archive/2026/oslo.ipynb",
    ]
    assert _resolve(data, root, "archive/2026/oslo.ipynb").session == f"notebook:{root}/trips/oslo.ipynb"
    assert _resolve(data, root, "other.ipynb").source == "notebook"


def test_a_path_with_nothing_stored_moves_nothing(tmp_path: Path) -> None:
    root, data, db = _setup(tmp_path)
    assert follow_move("x.ipynb", "y.ipynb", lambda d: str(root / d), data, db, NOW) == []
    assert not (data / "bindings.json").exists()
    assert notebook_key(lambda d: str(root / d), "sub/n.ipynb") == f"notebook:{root}/sub/n.ipynb"


def test_a_remembered_switch_still_reads_as_before(tmp_path: Path) -> None:
    root, data, _ = _setup(tmp_path)
    binding.remember_switch(data, f"notebook:{root}/n.ipynb", "shared")
    got = _resolve(data, root, "n.ipynb")
    assert (got.session, got.source) == ("shared", "switched")
