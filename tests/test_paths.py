"""Where the data directory is: the override, else the XDG data home, else ~/.local/share; made
owner-only when created, with everything else inside it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ipython_compact.files import paths


@pytest.mark.parametrize(
    ("override", "xdg", "expected"),
    [
        ("custom/dir", "xdg", "custom/dir"),
        (None, "xdg", "xdg/ipython-compact"),
        (None, None, "home/.local/share/ipython-compact"),
        ("", "xdg", "xdg/ipython-compact"),  # an empty override is no override
    ],
    ids=["override", "xdg", "home", "empty-override"],
)
def test_data_dir_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, override: str | None, xdg: str | None, expected: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var, value in ((paths.ENV_DIR, override), ("XDG_DATA_HOME", xdg)):
        if value is None:
            monkeypatch.delenv(var, raising=False)
        else:
            monkeypatch.setenv(var, str(tmp_path / value) if value else "")
    found = paths.data_dir()
    assert found == tmp_path / expected
    assert found.is_dir() and stat.S_IMODE(found.stat().st_mode) == 0o700


def test_files_live_in_the_data_dir_and_snapshots_are_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(paths.ENV_DIR, str(tmp_path / "d"))
    assert paths.database_path() == tmp_path / "d" / "sessions.db"
    assert paths.key_path() == tmp_path / "d" / "key"
    snapshots = paths.snapshots_dir()
    assert snapshots == tmp_path / "d" / "snapshots"
    assert stat.S_IMODE(snapshots.stat().st_mode) == 0o700
    assert not paths.database_path().exists()  # naming a file creates none
