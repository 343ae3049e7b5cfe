"""The <ipython_state> notice wording, from probe results given as data."""

from __future__ import annotations

import pytest

from ipython_compact.core.state_notice import SnapshotOutcome, state_notice


@pytest.mark.parametrize(
    ("alive", "names", "snapshot", "contains", "absent"),
    [
        (
            True,
            ["b", "a"],
            SnapshotOutcome(True),
            ["persisted through compaction", "These names are still defined: a, b.", "snapshot was written"],
            ["could not be written", "unknown"],
        ),
        (True, [], SnapshotOutcome(True), ["You have not defined any names yet."], ["still defined:"]),
        (True, None, SnapshotOutcome(True), ["could not be listed", "unknown"], ["still defined:"]),
        (
            True,
            ["a"],
            SnapshotOutcome(False, error="disk full"),
            ["could not be written (disk full)", "must be recreated", "last successfully written snapshot"],
            [],
        ),
        (
            True,
            ["g", "a"],
            SnapshotOutcome(True, skipped=[("g", "TypeError: cannot pickle 'generator' object")]),
            ["will not survive a restart: g (TypeError: cannot pickle 'generator' object)."],
            [],
        ),
        (True, ["a"], None, ["No state snapshot is configured"], ["last successfully written snapshot"]),
    ],
    ids=["ok", "empty", "probe-failed", "snapshot-failed", "skipped", "no-snapshot-target"],
)
def test_notice_wording(
    alive: bool,
    names: list[str] | None,
    snapshot: SnapshotOutcome | None,
    contains: list[str],
    absent: list[str],
) -> None:
    text = state_notice(kernel_alive=alive, names=names, snapshot=snapshot)
    assert text is not None
    assert text.startswith("<ipython_state>\n") and text.endswith("\n</ipython_state>")
    for piece in contains:
        assert piece in text
    for piece in absent:
        assert piece not in text


def test_no_notice_when_kernel_is_gone() -> None:
    assert state_notice(kernel_alive=False, names=["a"], snapshot=SnapshotOutcome(True)) is None


def test_long_name_lists_are_cut_with_a_count() -> None:
    text = state_notice(
        kernel_alive=True, names=[f"v{i:04d}" for i in range(250)], snapshot=SnapshotOutcome(True)
    )
    assert text is not None and "and 50 more" in text and "v0199" in text and "v0200" not in text
