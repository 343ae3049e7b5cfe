"""Our core against pi's own implementation, run in Node on pi's own session files.

``tests/pi_reference`` pins ``@mariozechner/pi-coding-agent`` 0.73.1 from npm (``make pi-reference``
installs it). That version already has pi's newer preparation (the summarized span starts at the
previous compaction's first-kept entry, compaction entries excluded, ``tokensBefore`` estimated on
the context view) and counts no images in user messages — the behaviour our ``chars4`` estimator
reproduces. pi migrates v1 files with random ids, so results are compared by entry index.

With the ``chars4`` estimator and pi's defaults, for several ``keep_recent_tokens``:
first kept entry, split-turn flag and turn start agree with pi's ``findCutPoint`` exactly; the
preparation agrees with ``prepareCompaction`` (first kept, summarized and prefix message counts,
tokens before, file lists, and the serialized conversation byte for byte), split-turn quirks
included. ``tests/test_pi_fuzz.py`` does the same on generated branched sessions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ipython_compact.core.context import build_agent_messages, context_start_index
from ipython_compact.core.cutpoints import find_cut_point
from ipython_compact.core.entries import Entry
from ipython_compact.core.messages import entry_message
from ipython_compact.core.pi_format import parse_pi_session
from ipython_compact.core.preparation import prepare_compaction
from ipython_compact.core.serialization import serialize_conversation
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.tokens import estimate_context, estimate_entry_tokens

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
REFERENCE = HERE / "pi_reference"
FIXTURES = sorted((HERE / "fixtures" / "pi").glob("*.jsonl"))
KEEPS = (2000, 5000, 10000, 20000, 50000)


def run_reference(fixture: Path) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed; the pi reference runs in Node")
    if not (REFERENCE / "node_modules" / "@mariozechner" / "pi-coding-agent").is_dir():
        pytest.fail("pi's reference package is not installed: run `make pi-reference`")
    done = subprocess.run(
        [node, str(REFERENCE / "pi_reference.mjs"), str(fixture), "--keep", ",".join(map(str, KEEPS))],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def load(fixture: Path) -> list[Entry]:
    with fixture.open(encoding="utf-8") as fh:
        objects = [(n, json.loads(line)) for n, line in enumerate(fh, start=1) if line.strip()]
    return parse_pi_session(objects).entries


@pytest.fixture(scope="module", params=FIXTURES, ids=lambda p: p.name)
def case(request: pytest.FixtureRequest) -> tuple[list[Entry], dict[str, Any]]:
    fixture: Path = request.param
    return load(fixture), run_reference(fixture)


def test_fixtures_exist() -> None:
    assert [p.name for p in FIXTURES] == ["before-compaction.jsonl", "large-session.jsonl"]


def test_reference_version_is_the_pinned_one(case: tuple[list[Entry], dict[str, Any]]) -> None:
    path, ref = case
    assert (ref["package"], ref["version"]) == ("@mariozechner/pi-coding-agent", "0.73.1")
    assert ref["entries"] == len(path)


def test_every_message_estimate_agrees(case: tuple[list[Entry], dict[str, Any]]) -> None:
    path, ref = case
    ours = [estimate_entry_tokens(e, "chars4") if e.kind == "message" else None for e in path]
    assert ours == ref["entry_tokens"]


def test_context_view_and_estimate_agree(case: tuple[list[Entry], dict[str, Any]]) -> None:
    path, ref = case
    messages = build_agent_messages(path)
    assert len(messages) == ref["context_messages"]
    estimate = estimate_context(messages, "chars4")
    expected = ref["context_estimate"]
    assert (estimate.tokens, estimate.usage_tokens, estimate.trailing_tokens, estimate.last_usage_index) == (
        expected["tokens"],
        expected["usageTokens"],
        expected["trailingTokens"],
        expected["lastUsageIndex"],
    )
    # the path form (anchor after the newest compaction) gives the same size on these files
    assert estimate_context(path, "chars4").tokens == expected["tokens"]
    assert context_start_index(path) == ref["boundary_start"]


@pytest.mark.parametrize("keep", KEEPS)
def test_cut_points_agree(case: tuple[list[Entry], dict[str, Any]], keep: int) -> None:
    path, ref = case
    row = next(r for r in ref["results"] if r["keep_recent_tokens"] == keep)
    for start, expected in ((ref["boundary_start"], row), (0, row["from_zero"])):
        cut = find_cut_point(path, start, len(path), keep, estimator="chars4")
        assert (cut.first_kept_index, cut.turn_start_index, cut.is_split_turn) == (
            expected["first_kept_index"],
            expected["turn_start_index"],
            expected["is_split_turn"],
        ), f"start={start}"


@pytest.mark.parametrize("keep", KEEPS)
def test_preparation_agrees(case: tuple[list[Entry], dict[str, Any]], keep: int) -> None:
    path, ref = case
    expected = next(r for r in ref["results"] if r["keep_recent_tokens"] == keep)["prepare"]
    assert expected is not None
    prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=keep, estimator="chars4"))
    assert prep is not None
    assert prep.first_kept_index == expected["first_kept_index"]
    assert prep.boundary_start == ref["boundary_start"]
    assert len(prep.messages_to_summarize) == expected["messages_to_summarize"]
    assert len(prep.turn_prefix) == expected["turn_prefix_messages"]
    assert prep.is_split_turn == expected["is_split_turn"]
    assert prep.tokens_before == expected["tokens_before"]
    assert list(prep.read_files) == expected["read_files"]
    assert list(prep.modified_files) == expected["modified_files"]
    assert len(prep.previous_summary or "") == (expected["previous_summary_chars"] or 0)
    messages = [m for m in (entry_message(e) for e in prep.messages_to_summarize) if m is not None]
    assert serialize_conversation(messages, mode="pi") == expected["serialized"]


def test_the_compared_cases_are_not_trivial(case: tuple[list[Entry], dict[str, Any]]) -> None:
    _, ref = case
    cuts = {r["first_kept_index"] for r in ref["results"]}
    assert len(cuts) >= 3  # the keep values move the cut
    assert any(r["is_split_turn"] and r["turn_start_index"] < r["first_kept_index"] for r in ref["results"])
