"""Hostile and merely unusual transcript files: `import` and `plan FILE` give one clear error
(file and line), exit 2, no traceback, and write nothing. Real subprocesses, real SQLite files."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ipython_compact.store import ImportFormatError, SessionStore
from ipython_compact.store.importers import ImportLimits, import_file, load_transcript

SCRIPT = Path(sys.executable).parent / "ipython-compact"
PI_HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"}
JSONL_HEADER = {"type": "ipython_compact_session", "version": 1, "name": "x", "leaf_id": "a"}


def run(
    data: Path, *args: str, stdin: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "IPYTHON_COMPACT_DIR": str(data)}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, env=env, timeout=timeout, input=stdin)


def pi_msg(entry_id: str, parent: str | None, message: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2025-01-01T00:00:01.000Z",
        "message": message,
        **extra,
    }


def jsonl_entry(entry_id: str, parent: str | None, kind: str = "message", data: Any = None) -> dict[str, Any]:
    data = data if data is not None else {"message": {"role": "user", "content": "hi"}}
    return {"id": entry_id, "parent_id": parent, "kind": kind, "timestamp": "t", "data": data}


def lines(*objects: Any) -> str:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objects)


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def deep_args(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


USER = {"role": "user", "content": "hi"}

HOSTILE: list[tuple[str, str, str]] = [
    (
        "leaf-list",
        lines({**JSONL_HEADER, "leaf_id": ["a"]}, jsonl_entry("a", None)),
        r":1: header leaf_id "
        r"must be an entry id "
        r"\(a string\) or null, "
        r"got a list",
    ),
    (
        "leaf-object",
        lines({**JSONL_HEADER, "leaf_id": {"a": 1}}, jsonl_entry("a", None)),
        r":1: header leaf_id must be .* got an object",
    ),
    (
        "name-list",
        lines({**JSONL_HEADER, "name": ["x"]}, jsonl_entry("a", None)),
        r":1: header name must be "
        r"a string",
    ),
    (
        "pi-type-list",
        lines(PI_HEADER, {**pi_msg("a", None, USER), "type": ["message"]}),
        r":2: .*'type' must "
        r"be a string, got "
        r"a list",
    ),
    (
        "pi-type-object",
        lines(PI_HEADER, {**pi_msg("a", None, USER), "type": {"m": 1}}),
        r":2: .*'type' must "
        r"be a string, got "
        r"an object",
    ),
    (
        "pi-role-list",
        lines(PI_HEADER, pi_msg("a", None, {"role": ["user"], "content": "hi"})),
        r":2: .*role must be a string, got a list",
    ),
    (
        "pi-role-object",
        lines(PI_HEADER, pi_msg("a", None, {"role": {"u": 1}, "content": "hi"})),
        r":2: .*role must be a string, got an object",
    ),
    (
        "jsonl-kind-list",
        lines(JSONL_HEADER, {**jsonl_entry("a", None), "kind": ["message"]}),
        r":2: entry needs a non-empty 'kind'",
    ),
    (
        "deep-nesting",
        lines(PI_HEADER) + '{"type":"message","id":"a","parentId":null,"timestamp":"t",'
        '"message":{"role":"user","content":"hi"},"x":' + deep(1000) + "}\n",
        r":2: JSON nested deeper than 200 levels",
    ),
    (
        "deep-tool-args",
        lines(PI_HEADER) + '{"type":"message","id":"a","parentId":null,"timestamp":"t",'
        '"message":{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"f","arguments":'
        + deep_args(600)
        + "}]}}\n",
        r":2: JSON nested deeper than 200 levels",
    ),
    (
        "huge-int",
        lines(PI_HEADER) + '{"type":"message","id":"a","parentId":null,"timestamp":"t",'
        '"message":{"role":"user","content":"hi"},"n":' + "9" * 5000 + "}\n",
        r":2: a number with 5,000 digits",
    ),
    (
        "jsonl-first-kept-dangles",
        lines(
            {**JSONL_HEADER, "leaf_id": "c"},
            jsonl_entry("a", None),
            jsonl_entry("c", "a", "compaction", {"summary": "s", "first_kept_entry_id": "zz"}),
        ),
        r":3: compaction 'c': first_kept_entry_id 'zz' is not an entry of the file",
    ),
    (
        "jsonl-first-kept-self",
        lines(
            {**JSONL_HEADER, "leaf_id": "c"},
            jsonl_entry("a", None),
            jsonl_entry("c", "a", "compaction", {"summary": "s", "first_kept_entry_id": "c"}),
        ),
        r":3: compaction 'c': first_kept_entry_id 'c' is the compaction itself",
    ),
    (
        "jsonl-first-kept-other-branch",
        lines(
            {**JSONL_HEADER, "leaf_id": "c"},
            jsonl_entry("a", None),
            jsonl_entry("b", "a"),
            jsonl_entry("c", "a", "compaction", {"summary": "s", "first_kept_entry_id": "b"}),
        ),
        r":4: compaction 'c': first_kept_entry_id 'b' is not on the path to it",
    ),
    (
        "pi-first-kept-dangles",
        lines(
            PI_HEADER,
            pi_msg("a", None, USER),
            {
                "type": "compaction",
                "id": "c",
                "parentId": "a",
                "timestamp": "t",
                "summary": "s",
                "firstKeptEntryId": "zz",
                "tokensBefore": 1,
            },
        ),
        r":3: compaction 'c': first_kept_entry_id 'zz' is not an entry of the file",
    ),
    (
        "pi-first-kept-self",
        lines(
            PI_HEADER,
            pi_msg("a", None, USER),
            {
                "type": "compaction",
                "id": "c",
                "parentId": "a",
                "timestamp": "t",
                "summary": "s",
                "firstKeptEntryId": "c",
                "tokensBefore": 1,
            },
        ),
        r":3: compaction 'c': first_kept_entry_id 'c' is the compaction itself",
    ),
    (
        "pi-header-only",
        lines(PI_HEADER),
        r": the file holds a session header but no entries; nothing to "
        r"import",
    ),
    (
        "jsonl-header-only",
        lines({**JSONL_HEADER, "leaf_id": None}),
        r": the file holds a session header but "
        r"no entries",
    ),
    (
        "pi-v1-first-kept-self",
        lines(
            {"type": "session", "id": "s1", "timestamp": "t", "cwd": "/"},
            {"type": "message", "timestamp": "t", "message": USER},
            {
                "type": "compaction",
                "timestamp": "t",
                "summary": "s",
                "firstKeptEntryIndex": 2,
                "tokensBefore": 1,
            },
        ),
        r":3: compaction '\w+': first_kept_entry_id '\w+' is the compaction itself",
    ),
]


@pytest.mark.parametrize(("label", "text", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_file_is_one_clear_error_and_writes_nothing(
    tmp_path: Path, label: str, text: str, message: str
) -> None:
    data = tmp_path / "data"
    source = tmp_path / f"{label}.jsonl"
    source.write_text(text, encoding="utf-8")
    assert (
        run(
            data,
            "import",
            str(Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"),
            "-s",
            "keep",
        ).returncode
        == 0
    )
    db = data / "sessions.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for args in (("import", str(source)), ("import", str(source), "-s", "keep"), ("plan", str(source))):
        done = run(data, *args)
        err = done.stderr.decode()
        assert done.returncode == 2, (args, err)
        assert "Traceback" not in err, err
        assert err.startswith("ipython-compact: error:"), err
        assert re.search(rf"{label}\.jsonl{message}", err), err
        assert "  try: " in err and "pass another database" not in err, err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_lone_surrogate_is_imported_as_the_replacement_character(tmp_path: Path) -> None:
    """JavaScript writes ``"\\ud83d"`` when it cuts an emoji in half; pi files hold such strings.
    SQLite text must be UTF-8, so the lone half becomes U+FFFD (what JavaScript's own UTF-8
    encoder writes for it); nothing else changes and the import says so."""
    source = tmp_path / "surrogate.jsonl"
    source.write_text(
        lines(PI_HEADER) + '{"type":"message","id":"a","parentId":null,"timestamp":"t",'
        '"message":{"role":"user","content":"cut \\ud83d here \\ud83d\\ude00 ok"}}\n',
        encoding="utf-8",
    )
    data = tmp_path / "data"
    done = run(data, "import", str(source), "-s", "sur")
    assert done.returncode == 0, done.stderr.decode()
    assert b"1 lone UTF-16 surrogate" in done.stdout
    with SessionStore(data / "sessions.db") as store:
        (entry,) = store.path("sur")
        assert entry.data["message"]["content"] == "cut \ufffd here \U0001f600 ok"
        assert store.verify().ok
    assert run(data, "plan", str(source)).returncode == 0


def test_import_refuses_a_fifo_instead_of_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    done = run(tmp_path / "data", "import", str(fifo), timeout=30)  # blocking would end in TimeoutExpired
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err, err
    assert f"{fifo}: not a regular file (a FIFO)" in err


def test_import_refuses_a_device(tmp_path: Path) -> None:
    done = run(tmp_path / "data", "import", "/dev/zero", timeout=30)
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err, err
    assert "/dev/zero: not a regular file (a character device)" in err


def test_import_refuses_a_file_over_the_size_limit_before_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:  # sparse: costs no disk and no reading
        f.truncate(ImportLimits().max_bytes + 1)
    done = run(tmp_path / "data", "import", str(big))
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err, err
    assert "is larger than the import limit" in err and "--max-bytes" in err
    assert (
        not (tmp_path / "data" / "sessions.db").exists()
        or SessionStore(tmp_path / "data" / "sessions.db").sessions() == []
    )


def test_limits_bound_total_size_and_line_length(tmp_path: Path) -> None:
    source = tmp_path / "long.jsonl"
    source.write_text(
        lines(PI_HEADER, pi_msg("a", None, {"role": "user", "content": "x" * 5000})), encoding="utf-8"
    )
    with pytest.raises(ImportFormatError, match=r"long\.jsonl:2: line is longer than 1,000 bytes"):
        load_transcript(source, limits=ImportLimits(max_bytes=10**6, max_line_bytes=1000))
    with pytest.raises(
        ImportFormatError,
        match=r"long\.jsonl: .*larger than the import limit of 2,000 "
        r"bytes",
    ):
        load_transcript(source, limits=ImportLimits(max_bytes=2000, max_line_bytes=1000))
    assert len(load_transcript(source).entries) == 1


def test_stdin_dash_imports_with_a_session_name_and_a_size_limit(tmp_path: Path) -> None:
    data = tmp_path / "data"
    text = lines(
        PI_HEADER, pi_msg("a", None, USER), pi_msg("b", "a", {"role": "user", "content": "again"})
    ).encode()
    done = run(data, "import", "-", "-s", "piped", stdin=text)
    assert done.returncode == 0, done.stderr.decode()
    with SessionStore(data / "sessions.db") as store:
        assert [e.id for e in store.path("piped")] == ["a", "b"]
    nameless = run(data, "import", "-", stdin=text)
    assert nameless.returncode == 2 and b"--session NAME" in nameless.stderr
    over = run(data, "import", "-", "-s", "big", "--max-bytes", "100", stdin=text)
    err = over.stderr.decode()
    assert over.returncode == 2 and "<stdin>: larger than the import limit of 100 bytes" in err, err
    planned = run(data, "plan", "-", stdin=text)
    assert planned.returncode == 0, planned.stderr.decode()


def test_jsonl_without_leaf_id_takes_the_last_entry_as_pi_does(tmp_path: Path) -> None:
    header = {k: v for k, v in JSONL_HEADER.items() if k != "leaf_id"}
    source = tmp_path / "noleaf.jsonl"
    source.write_text(lines(header, jsonl_entry("a", None), jsonl_entry("b", "a")), encoding="utf-8")
    with SessionStore(tmp_path / "s.db") as store:
        result = import_file(store, source)
        assert result.leaf_id == "b"
        assert [e.id for e in store.context_path(result.session)] == ["a", "b"]
    # An explicit null is kept: an export of a session whose leaf was moved before its first entry.
    source.write_text(lines({**JSONL_HEADER, "leaf_id": None}, jsonl_entry("a", None)), encoding="utf-8")
    assert load_transcript(source).leaf_id is None
