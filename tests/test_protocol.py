"""The comm payloads are declared once (ipython_compact/core/comm_protocol.py) and the other places agree.

protocol.ts must declare an interface ``I<Name>`` with exactly the keys of each TypedDict in
``PAYLOADS``; the row of each op in docs/protocol.md must name every key of its reply (and of the
payloads nested in it); the comm handler must serve exactly the ops ``OPS`` lists; and the replies
a real shell sends carry the declared keys, no more and no fewer.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pytest

from ipython_compact.core import comm_protocol as protocol
from ipython_compact.kernel.comm_handler import CommHandler
from ipython_compact.kernel.extension import extension_for

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL_TS = ROOT / "labextension" / "src" / "protocol.ts"
PROTOCOL_MD = ROOT / "docs" / "protocol.md"
FIXTURE = Path(__file__).parent / "fixtures" / "pi" / "before-compaction.jsonl"
ENVELOPE = {"v", "id", "ok"}


def ts_interfaces(source: str) -> dict[str, set[str]]:
    """``{interface name: its keys}`` for every ``export interface`` in TypeScript ``source``."""
    out: dict[str, set[str]] = {}
    for match in re.finditer(r"export interface (\w+)(?: extends (\w+))? \{\n(.*?)\n\}", source, re.S):
        body = re.sub(r"/\*.*?\*/", "", match.group(3), flags=re.S)
        keys = set(re.findall(r"^\s*(\w+)\??\s*:", body, re.M))
        if match.group(2):
            keys |= out.get(match.group(2), set())
        out[match.group(1)] = keys
    return out


def test_the_interface_parser_reads_keys_optional_marks_and_comments() -> None:
    found = ts_interfaces(
        "export interface IA {\n  /** x: no key */\n  a: string;\n  b?: number | null;\n}\n"
        "export interface IB extends IA {\n  c: unknown;\n}\n"
    )
    assert found == {"IA": {"a", "b"}, "IB": {"a", "b", "c"}}


@pytest.mark.parametrize("payload", protocol.PAYLOADS, ids=lambda p: p.__name__)
def test_protocol_ts_declares_the_same_keys(payload: type) -> None:
    interfaces = ts_interfaces(PROTOCOL_TS.read_text(encoding="utf-8"))
    name = f"I{payload.__name__}"
    assert name in interfaces, f"labextension/src/protocol.ts declares no interface {name}"
    assert interfaces[name] == set(protocol.keys_of(payload)), name


def nested_payloads(payload: type) -> list[type]:
    """``payload`` and every TypedDict its fields hold (lists and optionals looked into)."""
    found: list[type] = [payload]
    hints = typing.get_type_hints(payload)

    def walk(tp: Any) -> None:
        if typing.is_typeddict(tp) and tp not in found:
            found.extend(nested_payloads(tp))
        for arg in typing.get_args(tp):
            walk(arg)

    for tp in hints.values():
        walk(tp)
    return found


def doc_row(op: str) -> str:
    rows = [
        line
        for line in PROTOCOL_MD.read_text(encoding="utf-8").splitlines()
        if line.startswith(f"| `{op}` |")
    ]
    assert len(rows) == 1, f"docs/protocol.md needs one table row for op {op!r}"
    return rows[0]


@pytest.mark.parametrize("op", sorted(protocol.OPS))
def test_the_docs_row_of_each_op_names_every_key(op: str) -> None:
    row = doc_row(op)
    missing = sorted(
        {
            key
            for payload in nested_payloads(protocol.OPS[op])
            for key in protocol.keys_of(payload)
            if not re.search(rf"\b{key}\b", row)
        }
    )
    assert missing == [], f"docs/protocol.md's row for {op!r} does not mention {missing}"


def test_the_docs_describe_the_persisted_session() -> None:
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    section = text[text.index("## Persisted session") :]
    # Its rows (compactions, calls, names) are the ops' payloads, named in their rows above.
    own = protocol.keys_of(protocol.PersistedSession) | protocol.keys_of(protocol.PersistedSnapshot)
    missing = sorted(key for key in own if not re.search(rf"\b{key}\b", section))
    assert missing == []


def test_the_handler_serves_exactly_the_declared_ops(ip: Any) -> None:
    handler: CommHandler = extension_for(ip).comm  # type: ignore[union-attr]
    assert set(handler.ops) == set(protocol.OPS)
    hello = handler.handle({"v": 1, "id": "h", "op": "hello"})
    assert hello["ops"] == sorted(protocol.OPS)


def assert_shape(reply: dict[str, Any], payload: type, extra: frozenset[str] = frozenset()) -> None:
    keys = set(reply) - extra
    assert protocol.required_keys_of(payload) <= keys, (
        payload.__name__,
        protocol.required_keys_of(payload) - keys,
    )
    assert keys <= protocol.keys_of(payload), (payload.__name__, keys - protocol.keys_of(payload))


def test_real_replies_carry_the_declared_keys(ip: Any) -> None:
    handler: CommHandler = extension_for(ip).comm  # type: ignore[union-attr]
    ip.run_cell(
        "import numpy as np\nn = 3\narr = np.zeros((2, 3))\ntext = 'short'\nfh = open(__file__ if "
        "'__file__' in dir() else '/dev/null')"
    )
    ip.run_line_magic("compact", f"import {FIXTURE}")

    def ask(op: str, **args: Any) -> dict[str, Any]:
        reply = handler.handle({"v": 1, "id": op, "op": op, **args})
        assert reply["ok"] is True, reply
        assert_shape(reply, protocol.OPS[op], frozenset(ENVELOPE))
        return reply

    ask("hello")
    names = ask("names")
    assert {row["name"] for row in names["names"]} >= {"n", "arr", "text", "fh"}
    for row in names["names"]:
        assert_shape(row, protocol.NameRow)
    assert any("restart" in row for row in names["names"]) and any("shape" in row for row in names["names"])
    table = ask("inspect", name="arr", rows=1)
    assert (table["kind"], table["shape"], table["rows"]) == ("array", [2, 3], [["0.0", "0.0", "0.0"]])
    preview = ask("preview")
    for layer in ("summarize", "turn_prefix", "keep", "encode"):
        assert_shape(preview[layer], protocol.LayerCount)
    compacted = ask("compact")
    assert_shape(compacted["compaction"], protocol.CompactionRecord)
    summaries = ask("summaries")
    assert summaries["compactions"]
    for c in summaries["compactions"]:
        assert_shape(c, protocol.CompactionSummary)
    ip.run_cell("fh.close(); del fh")
    snap = ask("snapshot")
    assert_shape(snap["snapshot"], protocol.SnapshotPayload)
    status = ask("status")
    assert status["snapshot"] is not None
    assert_shape(status["snapshot"], protocol.StatusSnapshot)
    assert ask("restore")["generation"] == snap["snapshot"]["generation"]
    hits = ask("recall", query="the")["hits"]
    assert hits
    for hit in hits:
        assert_shape(hit, protocol.RecallHit)
    calls = ask("calls")
    assert calls["root"] == status["session"] and [c["session"] for c in calls["calls"]] == [
        status["session"]
    ]
    for node in calls["calls"]:
        assert_shape(node, protocol.CallNode)


def test_inspect_looks_a_name_up_and_never_evaluates_it(ip: Any) -> None:
    handler: CommHandler = extension_for(ip).comm  # type: ignore[union-attr]
    ip.run_cell(
        "class Point:\n    def __repr__(self):\n        raise AssertionError('ran')\np = Point()\nxs = [1, 2]"
    )
    for name in ("xs[0]", "__import__('os')", "_ih", "nowhere"):
        reply = handler.handle({"v": 1, "id": "i", "op": "inspect", "name": name})
        assert reply["ok"] is False and "not a name in this kernel" in reply["error"]["message"], reply
    reply = handler.handle({"v": 1, "id": "i", "op": "inspect", "name": "p"})
    assert reply["ok"] is False and "a Point has no table view" in reply["error"]["message"]
    assert handler.handle({"v": 1, "id": "i", "op": "inspect"})["error"]["code"] == "bad_request"
    assert handler.handle({"v": 1, "id": "i", "op": "inspect", "name": "xs"})["rows"] == [["1"], ["2"]]


def test_an_error_reply_has_the_declared_envelope(ip: Any) -> None:
    handler: CommHandler = extension_for(ip).comm  # type: ignore[union-attr]
    reply = handler.handle({"v": 1, "id": "x", "op": "nope"})
    assert_shape(reply, protocol.ErrorReply)
    assert_shape(reply["error"], protocol.ErrorBody)
