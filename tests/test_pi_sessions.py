"""The seeded pi session generator (tests/pi_sessions.py) behind the differential fuzz."""

from __future__ import annotations

import json
import random

import pytest
from pi_kept_first import generate_keep_walk_session, walk_shapes
from pi_sessions import fork_session, generate_pi_session, path_of_objects

from ipython_compact.core.entries import path_to
from ipython_compact.core.pi_format import parse_pi_session


def test_same_seed_same_file_and_different_seeds_differ() -> None:
    assert generate_pi_session(7).jsonl() == generate_pi_session(7).jsonl()
    assert generate_pi_session(7).jsonl() != generate_pi_session(8).jsonl()


@pytest.mark.parametrize("seed", range(0, 40, 3))
def test_generated_files_are_valid_pi_v3_and_load(seed: int) -> None:
    session = generate_pi_session(seed)
    text = session.jsonl()
    objects = [json.loads(line) for line in text.splitlines()]
    assert objects[0]["type"] == "session" and objects[0]["version"] == 3
    ids = [o["id"] for o in objects[1:]]
    assert len(ids) == len(set(ids))
    seen: set[str] = set()
    for obj in objects[1:]:  # parents come before children, as pi appends them
        assert obj["parentId"] is None or obj["parentId"] in seen
        seen.add(obj["id"])
    entries = parse_pi_session(session.numbered()).entries
    path = path_to({e.id: e for e in entries}, session.leaf_id)
    assert [e.id for e in path] == [o["id"] for o in path_of_objects(session.entries, session.leaf_id)]
    assert session.notes["compactions_on_path"] == sum(e.kind == "compaction" for e in path) <= 3


def test_compactions_keep_a_valid_cut_point_on_their_path() -> None:
    for seed in range(60):
        session = generate_pi_session(seed)
        for compaction in (e for e in session.entries if e["type"] == "compaction"):
            path = path_of_objects(session.entries, compaction["id"])
            kept = next(e for e in path if e["id"] == compaction["firstKeptEntryId"])
            assert kept["type"] != "compaction"
            assert not (kept["type"] == "message" and kept["message"]["role"] == "toolResult")


def test_fork_drops_labels_from_the_path_and_recreates_them_last() -> None:
    forks = 0
    for seed in range(80):
        session = generate_pi_session(seed)
        labelled = [e for e in path_of_objects(session.entries, session.leaf_id) if e["type"] == "label"]
        if not labelled:
            continue
        fork = fork_session(session, session.leaf_id or "", random.Random(seed))
        body = [e for e in fork.entries if e["type"] != "label"]
        assert [e["id"] for e in body] == [
            e["id"] for e in path_of_objects(session.entries, session.leaf_id) if e["type"] != "label"
        ]
        assert all(e["type"] == "label" for e in fork.entries[len(body) :])
        forks += fork.notes["dangling_parents"] > 0
    assert forks >= 5


def test_walk_sessions_cycle_through_every_shape_and_load() -> None:
    shapes = walk_shapes()
    seen = set()
    for seed in range(len(shapes)):
        session = generate_keep_walk_session(seed)
        assert session.jsonl() == generate_keep_walk_session(seed).jsonl()
        notes = session.notes
        seen.add((notes["kind"], notes["placement"], notes["route"]))
        entries = parse_pi_session(session.numbered()).entries
        path = path_to({e.id: e for e in entries}, session.leaf_id)
        ids = [e.id for e in path]
        kept = path[ids.index(notes["first_kept_id"])]
        assert (kept.role if kept.kind == "message" else kept.kind) == notes["kind"]
        newest = max(i for i, e in enumerate(path) if e.kind == "compaction")
        placed_first = path[newest].data["first_kept_entry_id"] == notes["first_kept_id"]
        assert placed_first == (notes["placement"] == "boundary")
        assert path[-1].kind != "compaction"
    assert seen == set(shapes)
