"""Importing pi session files and our JSONL into real SQLite files; exporting back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ipython_compact.store import DuplicateImportError, ImportFormatError, SessionStore
from ipython_compact.store.exporters import export_text
from ipython_compact.store.importers import import_file, load_transcript

FIXTURES = Path(__file__).parent / "fixtures" / "pi"


def write_jsonl(path: Path, objects: list[Any]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    return path


def pi_header(version: int | None = 3) -> dict[str, Any]:
    header: dict[str, Any] = {
        "type": "session",
        "id": "sess-1",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/tmp",
    }
    if version is not None:
        header["version"] = version
    return header


def pi_msg(entry_id: str | None, parent: str | None, role: str, text: str, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z"}
    if entry_id is not None:
        obj["id"] = entry_id
        obj["parentId"] = parent
    content: Any = text if role == "user" else [{"type": "text", "text": text}]
    obj["message"] = {"role": role, "content": content, **extra}
    return obj


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = SessionStore(tmp_path / "log.db")
    yield s
    s.close()


@pytest.mark.parametrize("name", ["before-compaction", "large-session"])
def test_pi_fixture_imports_in_order(store: SessionStore, name: str) -> None:
    source = FIXTURES / f"{name}.jsonl"
    lines = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    result = import_file(store, source)
    assert (result.session, result.format, result.imported, result.created) == (
        name,
        "pi",
        len(lines) - 1,
        True,
    )
    stored = store.path(name)
    assert [e.kind for e in stored] == [o["type"] for o in lines[1:]]
    assert [e.timestamp for e in stored] == [o["timestamp"] for o in lines[1:]]
    messages = [o["message"] for o in lines[1:] if o["type"] == "message"]
    assert [e.data["message"] for e in stored if e.kind == "message"] == messages
    assert store.leaf(name) == stored[-1].id
    assert store.verify().ok
    # Importing the same file again is refused (nothing written); --new-ids appends a renamed copy.
    count = store.entry_count(name)
    with pytest.raises(
        DuplicateImportError,
        match=rf"{len(lines) - 1:,} of {len(lines) - 1:,} entries are "
        rf"already",
    ):
        import_file(store, source)
    assert store.entry_count(name) == count
    again = import_file(store, source, new_ids=True)
    assert (again.created, again.renamed_ids, again.imported) == (False, len(lines) - 1, len(lines) - 1)
    assert len(store.path(name)) == 2 * (len(lines) - 1)
    assert store.verify().ok


def test_pi_v3_tree_keeps_ids_parents_and_leaf(store: SessionStore, tmp_path: Path) -> None:
    objects = [
        pi_header(3),
        pi_msg("a1", None, "user", "start"),
        pi_msg("a2", "a1", "assistant", "branch one"),
        pi_msg("a3", "a1", "assistant", "branch two"),
        {
            "type": "compaction",
            "id": "c1",
            "parentId": "a3",
            "timestamp": "2025-01-01T00:00:02.000Z",
            "summary": "so far",
            "firstKeptEntryId": "a3",
            "tokensBefore": 50,
            "details": {"readFiles": ["x.py"], "modifiedFiles": []},
        },
        pi_msg("a4", "c1", "user", "after"),
    ]
    result = import_file(store, write_jsonl(tmp_path / "tree.jsonl", objects), session="t")
    assert result.leaf_id == "a4"
    assert [(e.id, e.parent_id) for e in store.entries("t")] == [
        ("a1", None),
        ("a2", "a1"),
        ("a3", "a1"),
        ("c1", "a3"),
        ("a4", "c1"),
    ]
    compaction = store.get("c1", "t")
    assert compaction.data["first_kept_entry_id"] == "a3"
    assert compaction.data["details"]["read_files"] == ["x.py"]
    assert [e.id for e in store.context_path("t")] == ["a3", "c1", "a4"]


def test_pi_v1_gets_ids_chain_and_first_kept_index(store: SessionStore, tmp_path: Path) -> None:
    objects = [
        pi_header(None),
        pi_msg(None, None, "user", "q1"),
        pi_msg(None, None, "assistant", "a1"),
        pi_msg(None, None, "user", "q2"),
        {
            "type": "compaction",
            "timestamp": "2025-01-01T00:00:03.000Z",
            "summary": "s",
            "firstKeptEntryIndex": 3,
            "tokensBefore": 9,
        },
        pi_msg(None, None, "hookMessage", "from a hook"),
    ]
    objects[5]["message"]["content"] = "from a hook"
    import_file(store, write_jsonl(tmp_path / "v1.jsonl", objects), session="old")
    path = store.path("old")
    assert [e.parent_id for e in path] == [None] + [e.id for e in path[:-1]]
    assert path[3].data["first_kept_entry_id"] == path[2].id
    assert path[4].data["message"]["role"] == "custom"  # v2 -> v3 migration


MALFORMED: list[tuple[str, bytes, str]] = [
    (
        "bad-json",
        b'{"type":"session","id":"x","timestamp":"t","version":3}\n{"type": "message",\n',
        r":2: invalid JSON",
    ),
    ("not-utf8", b'{"type":"session","id":"x","timestamp":"t","version":3}\n\xff\xfe\n', r":2: not UTF-8"),
    ("empty", b"\n\n", r"the file is empty"),
    (
        "no-header",
        b'{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":"x"}}\n',
        r":1: cannot tell the format",
    ),
    (
        "bad-role",
        b'{"type":"session","id":"x","timestamp":"t","version":3}\n{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"robot","content":"x"}}\n',
        r":2: .*unknown role",
    ),
    # a parent named later in the file (a parent missing from the file is a fork's dropped label: re-linked)
    (
        "forward-parent",
        b'{"type":"session","id":"x","timestamp":"t","version":3}\n\n{"type":"message","id":"a","parentId":"b","timestamp":"t","message":{"role":"user","content":"x"}}\n{"type":"label","id":"b","parentId":null,"timestamp":"t","targetId":"a","label":"l"}\n',
        r":3: parentId 'b'",
    ),
    (
        "future-version",
        b'{"type":"session","id":"x","timestamp":"t","version":9}\n',
        r":1: unsupported pi "
        r"session version",
    ),
    (
        "jsonl-bad-parent",
        b'{"type":"ipython_compact_session","version":1,"name":"n","leaf_id":null}\n{"id":"a","parent_id":"q","kind":"message","timestamp":"t","data":{}}\n',
        r":2: parent_id 'q'",
    ),
    (
        "jsonl-no-kind",
        b'{"type":"ipython_compact_session","version":1,"name":"n","leaf_id":null}\n{"id":"a","parent_id":null,"timestamp":"t","data":{}}\n',
        r":2: entry needs a non-empty 'kind'",
    ),
    (
        "jsonl-dup-id",
        b'{"type":"ipython_compact_session","version":1,"name":"n","leaf_id":null}\n{"id":"a","parent_id":null,"kind":"label","timestamp":"t","data":{}}\n{"id":"a","parent_id":"a","kind":"label","timestamp":"t","data":{}}\n',
        r":3: duplicate entry id 'a'",
    ),
    (
        "jsonl-bad-leaf",
        b'{"type":"ipython_compact_session","version":1,"name":"n","leaf_id":"zz"}\n',
        r":1: header leaf_id 'zz'",
    ),
    (
        "jsonl-version",
        b'{"type":"ipython_compact_session","version":7}\n',
        r":1: unsupported export version "
        r"7",
    ),
]


@pytest.mark.parametrize(("label", "content", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_file_names_file_and_line_and_writes_nothing(
    store: SessionStore, tmp_path: Path, label: str, content: bytes, message: str
) -> None:
    store.create_session("existing")
    store.append("existing", "message", {"message": {"role": "user", "content": "keep"}})
    before = export_text(store, "existing")
    source = tmp_path / f"{label}.jsonl"
    source.write_bytes(content)
    with pytest.raises(ImportFormatError, match=rf"{label}\.jsonl.*{message}|{label}\.jsonl{message}"):
        import_file(store, source)
    with pytest.raises(ImportFormatError):
        import_file(store, source, session="existing")
    assert [s.name for s in store.sessions()] == ["existing"]
    assert export_text(store, "existing") == before


@pytest.mark.parametrize(
    ("bad_entry", "message"),
    [
        (
            {"id": "b", "parent_id": "a", "kind": "mystery", "timestamp": "t", "data": {}},
            r"odd\.jsonl:3: "
            r"unknown entry "
            r"kind 'mystery'",
        ),
        (
            {"id": "b", "parent_id": "a", "kind": "custom", "timestamp": "t", "data": {"x": float("nan")}},
            r"odd\.jsonl:3: entry data cannot be stored",
        ),
    ],
)
def test_entries_the_store_would_refuse_are_named_by_line(
    store: SessionStore, tmp_path: Path, bad_entry: dict[str, Any], message: str
) -> None:
    source = write_jsonl(
        tmp_path / "odd.jsonl",
        [
            {"type": "ipython_compact_session", "version": 1, "name": "odd", "leaf_id": "b"},
            {
                "id": "a",
                "parent_id": None,
                "kind": "message",
                "timestamp": "t",
                "data": {"message": {"role": "user", "content": "x"}},
            },
            bad_entry,
        ],
    )
    with pytest.raises(ImportFormatError, match=message):
        import_file(store, source)
    assert store.sessions() == []


def test_store_level_failure_leaves_no_session(store: SessionStore, tmp_path: Path) -> None:
    # Well-formed file, but a compaction whose first kept entry is on another branch: the store
    # refuses it inside the import transaction, so not even the session is created.
    source = write_jsonl(
        tmp_path / "branchy.jsonl",
        [
            {"type": "ipython_compact_session", "version": 1, "name": "branchy", "leaf_id": "c"},
            {
                "id": "a",
                "parent_id": None,
                "kind": "message",
                "timestamp": "t",
                "data": {"message": {"role": "user", "content": "x"}},
            },
            {
                "id": "b",
                "parent_id": "a",
                "kind": "message",
                "timestamp": "t",
                "data": {"message": {"role": "user", "content": "y"}},
            },
            {
                "id": "c",
                "parent_id": "a",
                "kind": "compaction",
                "timestamp": "t",
                "data": {"summary": "s", "first_kept_entry_id": "b"},
            },
        ],
    )
    with pytest.raises(Exception, match="not on the path"):
        import_file(store, source)
    assert store.sessions() == []


def test_missing_file(store: SessionStore, tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match=r"nowhere\.jsonl: no such file"):
        import_file(store, tmp_path / "nowhere.jsonl")


def _branchy_session(store: SessionStore) -> None:
    store.create_session("orig")
    a = store.append(
        "orig", "message", {"message": {"role": "user", "content": "a"}}, timestamp="2025-02-01T00:00:00.000Z"
    )
    b = store.append(
        "orig", "message", {"message": {"role": "assistant", "content": [{"type": "text", "text": "b"}]}}
    )
    store.append(
        "orig",
        "compaction",
        {"summary": "sum", "first_kept_entry_id": b.id, "tokens_before": 3, "details": {}},
    )
    store.append("orig", "kernel_state", {"content": "<ipython_state>x = 1</ipython_state>"})
    store.set_leaf("orig", a.id)
    store.append(
        "orig",
        "message",
        {"message": {"role": "assistant", "content": [{"type": "text", "text": "other ✓"}]}},
    )
    store.append("orig", "pin", {"action": "pin", "entry_id": a.id, "pin_id": "p1"})
    store.set_leaf("orig", b.id)  # leaf in the middle: not the last entry appended


def test_jsonl_round_trip_is_lossless(store: SessionStore, tmp_path: Path) -> None:
    _branchy_session(store)
    exported = export_text(store, "orig")
    (tmp_path / "orig.jsonl").write_text(exported, encoding="utf-8")
    with SessionStore(tmp_path / "other.db") as other:
        result = import_file(other, tmp_path / "orig.jsonl")
        assert (result.session, result.format, result.renamed_ids) == ("orig", "jsonl", 0)
        assert other.entries("orig") == store.entries("orig")
        assert other.leaf("orig") == store.leaf("orig")
        again = export_text(other, "orig")
    assert again.splitlines()[1:] == exported.splitlines()[1:]  # the header carries a new created_at
    header = json.loads(exported.splitlines()[0])
    assert json.loads(again.splitlines()[0]) | {"created_at": header["created_at"]} == header


def test_import_into_existing_session_appends_after_leaf_and_renames_clashes(
    store: SessionStore, tmp_path: Path
) -> None:
    _branchy_session(store)
    source = tmp_path / "orig.jsonl"
    source.write_text(export_text(store, "orig"), encoding="utf-8")
    leaf_before = store.leaf("orig")
    originals = store.entries("orig")
    result = import_file(store, source, new_ids=True)
    assert (result.created, result.renamed_ids, result.imported, result.new_ids) == (
        False,
        len(originals),
        len(originals),
        True,
    )
    added = store.entries("orig")[len(originals) :]
    assert added[0].parent_id == leaf_before
    assert not {e.id for e in added} & {e.id for e in originals}
    new_ids = {old.id: new.id for old, new in zip(originals, added, strict=True)}
    assert [e.parent_id for e in added[1:]] == [new_ids[o.parent_id] for o in originals[1:] if o.parent_id]
    compaction = next(e for e in added if e.kind == "compaction")
    assert (
        compaction.data["first_kept_entry_id"]
        == new_ids[next(o for o in originals if o.kind == "compaction").data["first_kept_entry_id"]]
    )
    pin = next(e for e in added if e.kind == "pin")
    assert pin.data["entry_id"] == new_ids[originals[0].id]
    assert result.leaf_id == new_ids[leaf_before or ""]
    assert store.verify().ok


def test_load_transcript_reads_without_writing(tmp_path: Path) -> None:
    transcript = load_transcript(FIXTURES / "large-session.jsonl")
    assert transcript.format == "pi"
    assert transcript.header["version"] == 1
    assert transcript.path() == transcript.entries  # linear file: path is the file order
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("forced", "message"),
    [("jsonl", "first line must be the"), ("pi", "first line must be the session header")],
)
def test_forced_format_mismatch(tmp_path: Path, forced: Any, message: str) -> None:
    wrong = write_jsonl(
        tmp_path / "w.jsonl",
        [{"type": "ipython_compact_session" if forced == "pi" else "session", "version": 1}],
    )
    with pytest.raises(ImportFormatError, match=message):
        load_transcript(wrong, forced)


def test_an_import_killed_part_way_is_finished_with_resume(store: SessionStore, tmp_path: Path) -> None:
    """Red team 3, minor: a killed import could not be resumed; only --new-ids, which stored what
    had landed a second time. The leftover is the file's first batches under their own ids."""
    import dataclasses

    from ipython_compact.store.importers import import_transcript

    whole = load_transcript(FIXTURES / "before-compaction.jsonl")
    landed = 7
    partial = dataclasses.replace(whole, entries=whole.entries[:landed], leaf_id=whole.entries[landed - 1].id)
    import_transcript(store, partial, "s")
    with pytest.raises(DuplicateImportError) as err:
        import_transcript(store, whole, "s")
    assert f"stopped after {landed:,} entries" in str(err.value.hint) and "--resume" in str(err.value.hint)
    result = import_transcript(store, whole, "s", resume=True)
    assert result.imported == len(whole.entries) - landed
    assert [e.id for e in store.path("s")] == [e.id for e in whole.path()]
    assert store.verify("s").ok
    with pytest.raises(DuplicateImportError):  # once whole, a resume has nothing to finish
        import_transcript(store, whole, "s", resume=True)


def test_resume_finishes_a_file_whose_later_entries_repeat_earlier_content(
    store: SessionStore, tmp_path: Path
) -> None:
    """Found by hand: a 100,000-entry file killed at 82,000 could not be resumed, because its later
    entries repeat earlier ones' content under other ids (a loop, a replicated session), so the
    content check counted them as already stored. A resume only needs the session to hold exactly
    the file's first N entries; the repeats after them are the file's own."""
    import dataclasses

    from ipython_compact.store.importers import import_transcript

    first = load_transcript(FIXTURES / "before-compaction.jsonl")
    twice = [*first.entries, *(dataclasses.replace(e, id=f"x{e.id}") for e in first.entries)]
    twice = [dataclasses.replace(e, parent_id=twice[i - 1].id if i else None) for i, e in enumerate(twice)]
    whole = dataclasses.replace(first, entries=twice, leaf_id=twice[-1].id)
    landed = len(first.entries) + 3
    partial = dataclasses.replace(whole, entries=twice[:landed], leaf_id=twice[landed - 1].id)
    import_transcript(store, partial, "s")
    with pytest.raises(DuplicateImportError) as err:
        import_transcript(store, whole, "s")
    assert f"stopped after {landed:,} entries" in str(err.value.hint)
    result = import_transcript(store, whole, "s", resume=True)
    assert result.imported == len(twice) - landed
    assert [e.id for e in store.path("s")] == [e.id for e in twice]
    assert store.verify("s").ok


@pytest.mark.parametrize(
    ("value", "expect"),
    [
        ("123456789012345678901234567890", 123456789012345678901234567890),  # kept exact, never a float
        ("-9223372036854775809", -9223372036854775809),
        ("1.5", 1.5),
        ('"\\ud83d\\ude00"', "\U0001f600"),
        # lone surrogate escapes: the fast parser refuses them, the line is read again and repaired
        ('"\\ud800"', "\ufffd"),
        ('"x\\uDFFF"', "x\ufffd"),
        ('"\\ude00\\ud83d"', "\ufffd\ufffd"),
        ('"\\ud83d\\ude00\\ud83d"', "\U0001f600\ufffd"),
        ('{"\\udbff": 1}', {"\ufffd": 1}),
        ('["\\ud7ff", "\\ue000"]', ["\ud7ff", "\ue000"]),  # just outside the surrogates
    ],
)
def test_values_read_exactly_whichever_parser_reads_the_line(tmp_path: Path, value: str, expect: Any) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(
        json.dumps(pi_header())
        + "\n"
        + json.dumps(pi_msg("a", None, "user", "hi"))[:-1]
        + f', "extra": {value}}}\n'
    )
    transcript = load_transcript(path)
    got = transcript.entries[0].data["pi_extra"]["extra"]
    assert got == expect and type(got) is type(expect)


def test_each_line_of_a_mixed_file_is_read_exactly(tmp_path: Path) -> None:
    """The file is searched once for what sends a line to the stdlib parser (a surrogate escape, a
    run of 19+ digits); in a file that has them, every such line still takes that path and every
    other line the fast one, each value exact."""
    values = [
        "123456789012345678901234567890",
        '"\\ud83d\\ude00"',
        "1.5",
        '"plain"',
        "-9223372036854775809",
        '"\\ud83d alone"',
    ]
    lines = [json.dumps(pi_header())]
    parent = None
    for i, value in enumerate(values):
        lines.append(json.dumps(pi_msg(f"e{i}", parent, "user", "hi"))[:-1] + f', "extra": {value}}}')
        parent = f"e{i}"
    path = tmp_path / "x.jsonl"
    path.write_text("\n".join(lines) + "\n")
    transcript = load_transcript(path)
    got = [e.data["pi_extra"]["extra"] for e in transcript.entries]
    assert got == [
        123456789012345678901234567890,
        "\U0001f600",
        1.5,
        "plain",
        -9223372036854775809,
        "\ufffd alone",
    ]
    assert [type(g) for g in got] == [int, str, float, str, int, str]
    assert transcript.repaired_surrogates == 1


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_values_the_log_cannot_keep_are_refused_with_the_line(tmp_path: Path, value: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(
        json.dumps(pi_header())
        + "\n"
        + json.dumps(pi_msg("a", None, "user", "hi"))[:-1]
        + f', "extra": {value}}}\n'
    )
    with pytest.raises(ImportFormatError, match=r"x\.jsonl:2: entry data cannot be stored"):
        load_transcript(path)
