"""Payload signing schemes (issue 21, item 6): the folder writes keyed-BLAKE3 payloads
(``IPCBLOB3``) and still verifies and restores those signed with HMAC-SHA256 (``IPCBLOB1``).

What must hold: a payload is unpickled only after its MAC, under the scheme its magic names and
the session key, verified; a flipped byte, a cut file, a magic swapped to the other scheme's or
an unknown magic is refused before anything is unpickled, for both schemes, blobs and packs. The
streaming check (``LaneMac``, used on read) and the one-shot signature (``sign_chunks``, used on
write) agree for every length. Real files, real SnapshotStore.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import dill
import numpy as np
import pytest

from ipython_compact.namespace.snapshot import SnapshotStore
from ipython_compact.namespace.snapshot.signing import (
    BLAKE3_LANES,
    BLAKE3_MAGIC,
    HMAC_LANES,
    MAGIC,
    PIECE,
    THREADED_ABOVE,
    WRITE_SCHEME,
    LaneMac,
    Scheme,
    sign_chunks,
)

KEY = b"s" * 32
assert BLAKE3_LANES is not None  # a declared dependency
SCHEMES: dict[str, Scheme] = {"hmac-sha256": HMAC_LANES, "blake3": BLAKE3_LANES}


def _store(tmp_path: Path, scheme: Scheme | None = None) -> SnapshotStore:
    store = SnapshotStore(tmp_path / "snap", KEY, durable=False)
    if scheme is not None:  # an older writer: what this code wrote before BLAKE3
        store._files.scheme = scheme
    return store


def _payloads(store: SnapshotStore) -> list[Path]:
    return sorted(p for p in store.blobs.iterdir() if p.suffix in (".blob", ".pack"))


def _namespace() -> dict[str, Any]:
    return {"arr": np.arange(300_000, dtype=np.float64), "small": {"a": [1, 2.5, "x"]}, "n": 7}


def test_the_folder_writes_keyed_blake3_payloads(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save(_namespace().items())
    assert WRITE_SCHEME is BLAKE3_LANES
    assert sorted(p.suffix for p in _payloads(store)) == [".blob", ".pack"]
    assert all(p.read_bytes()[: len(BLAKE3_MAGIC)] == BLAKE3_MAGIC for p in _payloads(store))


def test_a_snapshot_signed_with_hmac_sha256_still_verifies_and_restores(tmp_path: Path) -> None:
    ns = _namespace()
    writer = _store(tmp_path, HMAC_LANES)
    writer.save(ns.items())
    old = _payloads(_store(tmp_path))
    assert len(old) == 2 and all(p.read_bytes()[: len(MAGIC)] == MAGIC for p in old)
    store = _store(tmp_path)  # today's writer and reader
    values, report = store.load()
    assert report.failed == [] and report.refused == []
    assert values.keys() == ns.keys() and np.array_equal(values["arr"], ns["arr"])
    assert values["small"] == ns["small"] and values["n"] == 7
    # A generation mixing both: the old blob is kept (trusted on its samples), the new small
    # values are signed with BLAKE3.
    writer._files.scheme = WRITE_SCHEME  # the writer upgraded: its cache still names the old blob
    ns["n"] = 8
    assert "arr" in writer.save(ns.items(), automatic=True, verify="sampled").unchanged
    magics = [p.read_bytes()[: len(MAGIC)] for p in _payloads(store)]
    assert sorted(magics) == sorted([MAGIC, MAGIC, BLAKE3_MAGIC])  # old blob and pack, new pack
    values, report = _store(tmp_path).load()
    assert report.failed == [] and values["n"] == 8 and np.array_equal(values["arr"], ns["arr"])
    # A full verification re-hashes the array under today's scheme: the old blob's id cannot
    # match, so the array is written once more, signed with BLAKE3 (and restores the same).
    assert "arr" not in writer.save(ns.items()).unchanged
    values, report = _store(tmp_path).load()
    assert report.failed == [] and np.array_equal(values["arr"], ns["arr"])
    arr_blobs = [p for p in _payloads(store) if p.suffix == ".blob"]
    newest = max(arr_blobs, key=lambda p: p.stat().st_mtime_ns)
    assert newest.read_bytes()[: len(MAGIC)] == BLAKE3_MAGIC


def _flip(data: bytearray) -> None:
    data[len(data) // 2] ^= 0xFF


def _cut(data: bytearray) -> None:
    del data[-5:]


def _other_magic(data: bytearray) -> None:
    data[: len(MAGIC)] = BLAKE3_MAGIC if data[: len(MAGIC)] == MAGIC else MAGIC


def _unknown_magic(data: bytearray) -> None:
    data[: len(MAGIC)] = b"IPCBLOB9"


DAMAGE = {
    "flipped-byte": _flip,
    "cut": _cut,
    "other-scheme-magic": _other_magic,
    "unknown-magic": _unknown_magic,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("kind", [".blob", ".pack"])
@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_a_damaged_payload_of_either_scheme_is_refused_before_unpickling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheme: str, kind: str, damage: str
) -> None:
    value = np.arange(300_000, dtype=np.float64) if kind == ".blob" else "a small value"
    store = _store(tmp_path, SCHEMES[scheme])
    store.save([("v", value)])
    (path,) = _payloads(store)
    assert path.suffix == kind and path.read_bytes()[: len(MAGIC)] == SCHEMES[scheme].magic
    data = bytearray(path.read_bytes())
    DAMAGE[damage](data)
    os.chmod(path, 0o600)
    path.write_bytes(bytes(data))
    calls: list[Any] = []
    monkeypatch.setattr(dill, "loads", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: calls.append(a))
    values, report = _store(tmp_path).load()
    assert values == {} and calls == []
    assert report.generation is None and len(report.refused) == 1 and "not unpickled" in report.refused[0]


LENGTHS = [0, 1, 31, PIECE - 1, PIECE, PIECE + 1, 2 * PIECE + 3, THREADED_ABOVE + 4097]


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_the_streaming_check_and_the_one_shot_signature_agree(scheme: str, length: int) -> None:
    body = np.random.default_rng(length).integers(0, 256, length, dtype=np.uint8).tobytes()
    s = SCHEMES[scheme]
    whole = sign_chunks(KEY, [body], scheme=s)
    cut = min(7, length)
    middle = max(cut, length // 2)
    parts = sign_chunks(KEY, [body[:cut], body[cut:middle], body[middle:]], scheme=s)
    for threaded in (False, True):
        mac = LaneMac(KEY, threaded=threaded, scheme=s)
        for start in range(0, length, 1_000_003):  # odd reads across piece boundaries
            mac.update(memoryview(body)[start : start + 1_000_003])
        assert mac.digest() == whole
    assert parts == whole and len(whole) == 32
    other = BLAKE3_LANES if s is HMAC_LANES else HMAC_LANES
    assert other is not None and sign_chunks(KEY, [body], scheme=other) != whole
    assert sign_chunks(b"t" * 32, [body], scheme=s) != whole
    if length:
        flipped = bytearray(body)
        flipped[length // 2] ^= 1
        assert sign_chunks(KEY, [bytes(flipped)], scheme=s) != whole


def test_without_the_blake3_package_a_blake3_payload_is_refused_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store(tmp_path).save(_namespace().items())
    from ipython_compact.namespace.snapshot import signing

    monkeypatch.setattr(signing, "SCHEMES", {MAGIC: HMAC_LANES})  # as where blake3 cannot be imported
    values, report = _store(tmp_path).load()
    assert values == {} and len(report.refused) == 1
    assert "blake3 package is not installed" in report.refused[0] and "not unpickled" in report.refused[0]
