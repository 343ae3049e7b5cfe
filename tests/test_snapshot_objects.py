"""The snapshot guarantees, on the local folder and on a real S3-compatible server (moto's, started
by the tests): round trip, tampering refused before unpickling, a crash before the manifest leaves
no generation, two writers, rollback refused against the log's digests, restore from another
process. On S3 the writer lock is the session store's (a SQLite log here; both engines' locks are
tested in test_writer_locks.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from IPython.core.error import UsageError
from postgres_server import server as postgres
from s3_server import server
from snapshot_ledger import MemoryLedger

from ipython_compact.namespace.snapshot import SnapshotError, SnapshotStore
from ipython_compact.namespace.snapshot.keys import load_shared_key
from ipython_compact.namespace.snapshot.locking import SnapshotLockBusy
from ipython_compact.namespace.snapshot.objects import FsspecObjects, LocalObjects, Objects, object_scheme
from ipython_compact.store.writer_locks import writer_locks

KEY = b"k" * 32
TRIPPED: list[str] = []


def trip(label: str) -> str:
    """Runs only when a ``Tripwire`` is unpickled."""
    TRIPPED.append(label)
    return label


class Tripwire:
    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (trip, ("unpickled",))


@dataclass
class Where:
    """One backend: where the snapshots of session ``s1`` are, and raw access to their objects."""

    kind: str
    location: str | Path
    log: Path  # the SQLite session log whose file locks guard the objects (S3)
    raw: Objects

    def store(self, **kw: Any) -> SnapshotStore:
        locks = writer_locks(self.log) if self.kind != "folder" else None
        return SnapshotStore(self.location, KEY, session="s1", durable=False, locks=locks, **kw)

    def names(self) -> list[str]:
        return sorted([*self.raw.list(""), *self.raw.list("blobs/")])

    def payloads(self) -> list[str]:
        return [n for n in self.raw.list("blobs/") if n.endswith((".blob", ".pack"))]

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}


@pytest.fixture(params=["folder", "file", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Where]:
    folder = tmp_path / "snap" / "s1"
    if request.param == "folder":
        yield Where("folder", folder, tmp_path / "log.db", LocalObjects(folder, durable=False))
    elif request.param == "file":  # a file:// URL: the object layer (no rename) on a local folder
        yield Where("file", f"file://{folder}", tmp_path / "log.db", LocalObjects(folder, durable=False))
    else:
        url = request.getfixturevalue("s3_url") + "/s1"
        yield Where("s3", url, tmp_path / "log.db", FsspecObjects(url))


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


def test_a_round_trip_keeps_every_kind_of_value(where: Where) -> None:
    arr = np.arange(400_000, dtype=np.float64)  # 3.2 MB: a blob of its own
    where.store().save([("arr", arr), ("n", 7), ("text", "hé"), ("table", {"a": [1, 2]})])
    values, report = where.store().load()
    assert sorted(report.restored) == ["arr", "n", "table", "text"] and report.refused == []
    assert np.array_equal(values["arr"], arr) and values["arr"].flags.writeable
    assert (values["n"], values["text"], values["table"]) == (7, "hé", {"a": [1, 2]})
    assert "manifest-00000001.json" in where.names()


def test_a_tampered_manifest_is_refused(where: Where) -> None:
    where.store().save([("x", 1)])
    raw = where.raw.get("manifest-00000001.json")
    where.raw.put("manifest-00000001.json", raw.replace(b'"x"', b'"y"'))
    values, report = where.store().load()
    assert values == {} and any("failed its signature check" in r for r in report.refused)


def test_a_tampered_payload_is_never_unpickled(where: Where) -> None:
    TRIPPED.clear()
    where.store().save([("wire", Tripwire()), ("big", np.ones(300_000))])
    assert where.store().load()[0]["wire"] == "unpickled" and TRIPPED == ["unpickled"]
    TRIPPED.clear()
    for name in where.payloads():
        data = where.raw.get(name)
        where.raw.put(name, _flip(data, len(data) // 2))
    values, report = where.store().load()
    assert values == {} and TRIPPED == []
    assert any("signature check" in r for r in report.refused), report


def test_a_manifest_renamed_to_another_generation_is_refused(where: Where) -> None:
    store = where.store()
    store.save([("x", 1)])
    store.save([("x", 2)])
    where.raw.delete("manifest-00000002.json")
    where.raw.put("manifest-00000003.json", where.raw.get("manifest-00000001.json"))
    values, report = where.store().load()
    assert values == {"x": 1} and any("renamed or copied" in r for r in report.refused)


def test_a_rolled_back_location_is_refused_against_the_log(where: Where) -> None:
    ledger = MemoryLedger()
    store = where.store(ledger=ledger)
    store.save([("x", 1)])
    older = where.raw.get("manifest-00000001.json")
    store.save([("x", 2)])
    assert sorted(ledger.records) == [1, 2]
    # Rolled back: the newest generation the log recorded is gone.
    where.raw.delete("manifest-00000002.json")
    values, report = where.store(ledger=ledger).load()
    assert values == {} and any("older than the session log" in r for r in report.refused)
    # Replaced: a validly signed older manifest planted under the newest name.
    where.raw.put("manifest-00000002.json", older)
    values, report = where.store(ledger=ledger).load()
    assert values == {} and any("older than the session log" in r for r in report.refused)


def _program(where: Where, body: str) -> str:
    """A Python program running ``body`` with ``where``'s store as ``store()``."""
    return textwrap.dedent(
        f"""
        import json, os, sys
        from pathlib import Path
        import numpy as np
        from ipython_compact.namespace.snapshot import SnapshotStore
        from ipython_compact.store.writer_locks import writer_locks
        LOCATION = {str(where.location)!r}
        def store(**kw):
            location = LOCATION if {where.kind != "folder"!r} else Path(LOCATION)
            locks = writer_locks(Path({str(where.log)!r})) if {where.kind != "folder"!r} else None
            return SnapshotStore(location, b"k" * 32, session="s1", durable=False, locks=locks, **kw)
        """
    ) + textwrap.dedent(body)


def _run(where: Where, body: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``body`` in a new Python process (``_program``), to its end."""
    return subprocess.run(
        [sys.executable, "-c", _program(where, body)],
        env={**where.env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_writer_killed_between_payloads_and_manifest_leaves_no_generation(where: Where) -> None:
    where.store().save([("x", 1)])
    before = where.payloads()
    # The writer dies right before its commit: every payload is written, the manifest is not.
    died = _run(
        where,
        """
        from ipython_compact.namespace.snapshot import places
        def die(self, generation, doc):
            os._exit(9)
        places.FolderPlace.commit_manifest = die
        places.ObjectPlace.commit_manifest = die
        store().save([("x", 2), ("big", np.ones(300_000))])
        """,
    )
    assert died.returncode == 9, died.stderr
    orphans = set(where.payloads()) - set(before)
    assert len(orphans) == 2  # its pack and its blob are there, named by no manifest
    store = where.store()
    assert store.manifests() == [1]
    values, report = store.load()
    assert values == {"x": 1} and report.generation == 1
    store.save([("x", 3)])  # the next save prunes what no manifest names
    kept = where.payloads()
    values, _ = where.store().load()
    assert values == {"x": 3} and len(kept) == 2 and not orphans & set(kept)


def test_an_automatic_save_skips_while_another_writer_holds_the_lock(where: Where) -> None:
    holder, other = where.store(process="a"), where.store(process="b")
    holder.save([("x", 1)])
    with holder._place.lock(shared=False, timeout=5):
        with pytest.raises(SnapshotLockBusy):
            other.save([("x", 2)], automatic=True)
        other.lock_timeout = 0.2
        with pytest.raises(SnapshotError, match="held the snapshot lock"):
            other.save([("x", 2)])
    assert other.save([("x", 2)]).generation == 2 and other.manifests() == [1, 2]


@pytest.mark.slow
def test_two_concurrent_writers_get_distinct_generations_and_lose_nothing(where: Where) -> None:
    writer = """
        label = sys.argv[1]
        s = store(process=label)
        got = []
        for i in range(6):
            report = s.save([("who", label), ("i", i), ("big", np.full(200_000, i))])
            got.append(report.generation)
        print(json.dumps(got))
        """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _program(where, writer), label],
            env=where.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for label in ("a", "b")
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    a, b = (json.loads(o[0]) for o in outs)
    assert len(set(a)) == 6 and len(set(b)) == 6 and not set(a) & set(b)
    assert sorted(a + b) == list(range(1, 13))
    store = where.store()
    info = store.generations_info()
    assert info and all(g.verified for g in info), [g.problem for g in info]
    values, report = store.load()
    assert report.refused == [] and values["who"] in ("a", "b") and values["i"] == 5


def test_another_process_with_another_data_dir_restores_the_names(where: Where, tmp_path: Path) -> None:
    ledger = MemoryLedger()
    where.store(ledger=ledger).save([("x", 41), ("arr", np.arange(300_000))])
    other = _run(
        where,
        """
        values, report = store().load()
        print(json.dumps({"x": values["x"], "sum": int(values["arr"].sum()), "refused": report.refused}))
        """,
        env={"IPYTHON_COMPACT_DIR": str(tmp_path / "other-host")},
    )
    assert other.returncode == 0, other.stderr
    assert json.loads(other.stdout) == {"x": 41, "sum": int(np.arange(300_000).sum()), "refused": []}


def test_snapshots_on_object_storage_need_a_key_every_host_shares(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="IPYTHON_COMPACT_KEY_FILE"):
        load_shared_key(tmp_path / "missing", "s3://bucket/snaps")
    (tmp_path / "key").write_bytes(KEY)
    os.chmod(tmp_path / "key", 0o600)
    assert load_shared_key(tmp_path / "key", "s3://bucket/snaps") == KEY
    assert not (tmp_path / "missing").exists()  # never created


def test_object_storage_without_a_session_store_lock_is_refused() -> None:
    with pytest.raises(SnapshotError, match="writer lock"):
        SnapshotStore("s3://bucket/snaps/s1", KEY, session="s1")


def test_the_s3_server_refuses_a_second_manifest_of_the_same_generation(s3_url: str) -> None:
    objects = FsspecObjects(s3_url)
    assert objects.put_if_absent("manifest-00000001.json", b"first")
    assert not objects.put_if_absent("manifest-00000001.json", b"second")
    assert objects.conditional and objects.get("manifest-00000001.json") == b"first"
    assert server().endpoint.startswith("http://127.0.0.1:")


def test_a_writer_that_lost_its_lock_commits_nothing(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock on PostgreSQL lives as long as its connection: when that drops between the payloads
    and the manifest, the save refuses to commit (another writer may already hold the lock)."""
    import psycopg

    from ipython_compact.namespace.snapshot import places

    log = postgres().fresh_url()
    store = SnapshotStore(f"{s3_url}/s1", KEY, session="s1", durable=False, locks=writer_locks(log))
    store.save([("x", 1)])
    real = places.ObjectPlace.payloads_written

    def connection_drops(self: places.ObjectPlace) -> None:
        real(self)
        with psycopg.connect(log, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                "AND pid <> pg_backend_pid()"
            )

    monkeypatch.setattr(places.ObjectPlace, "payloads_written", connection_drops)
    with pytest.raises(SnapshotError, match="lost the writer lock"):
        store.save([("x", 2)])
    monkeypatch.setattr(places.ObjectPlace, "payloads_written", real)
    assert store.manifests() == [1]
    assert store.save([("x", 3)]).generation == 2
    values, _ = SnapshotStore(f"{s3_url}/s1", KEY, session="s1", locks=writer_locks(log)).load()
    assert values == {"x": 3}


def test_a_kernel_snapshot_on_object_storage_without_the_shared_key_says_what_to_set(
    ip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from IPython.core.error import UsageError

    monkeypatch.setenv("IPYTHON_COMPACT_SNAPSHOTS", "s3://team-bucket/snaps")
    monkeypatch.setenv("IPYTHON_COMPACT_KEY_FILE", str(tmp_path / "absent-key"))
    ip.user_ns["x"] = 1
    with pytest.raises(UsageError, match="IPYTHON_COMPACT_KEY_FILE"):
        ip.run_line_magic("compact", "snapshot")
    assert not (tmp_path / "absent-key").exists()  # never made up on this host


def test_the_server_extension_lists_snapshots_kept_on_object_storage(s3_url: str, tmp_path: Path) -> None:
    from ipython_compact.jupyter.server_extension import persisted_snapshots

    key = tmp_path / "key"
    key.write_bytes(KEY)
    key.chmod(0o600)
    store = SnapshotStore(f"{s3_url}/s1", KEY, session="s1", locks=writer_locks(tmp_path / "log.db"))
    store.save([("x", 1)])
    store.save([("x", 2), ("y", "two")])
    listed = persisted_snapshots(f"{s3_url}/s1", key, "s1")
    assert [(g["generation"], [n["name"] for n in g["names"]]) for g in listed] == [
        (2, ["x", "y"]),
        (1, ["x"]),
    ]
    assert persisted_snapshots(f"{s3_url}/s1", key, "another session") == []
    assert persisted_snapshots(f"{s3_url}/s1", tmp_path / "no-key", "s1") == []


def test_an_agents_kernel_snapshots_to_object_storage_by_url(
    ip: Any, s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Agent(snapshot_dir="s3://...")``: the kernel-side glue takes a URL as well as a folder."""
    from ipython_compact.agent import kernel_state

    key = tmp_path / "key"
    key.write_bytes(KEY)
    key.chmod(0o600)
    monkeypatch.setenv("IPYTHON_COMPACT_KEY_FILE", str(key))
    monkeypatch.setenv("IPYTHON_COMPACT_DB", str(tmp_path / "log.db"))
    monkeypatch.setattr(kernel_state, "_stores", {})
    ip.user_ns["answer"] = 42
    saved = json.loads(kernel_state.snapshot_json(f"{s3_url}/agent"))
    assert saved["ok"] and "answer" in saved["saved"], saved
    del ip.user_ns["answer"]
    kernel_state._stores.clear()  # as a restarted kernel: nothing remembered
    restored = json.loads(kernel_state.restore_json(f"{s3_url}/agent"))
    assert restored["ok"] and "answer" in restored["restored"] and ip.user_ns["answer"] == 42
    assert not Path("s3:").exists()  # no local folder named like the URL


@pytest.mark.parametrize(
    ("location", "said"),
    [
        ("s3://", "no bucket or folder after s3://"),
        ("s3:///bucket/x", "the bucket comes right after s3://"),
        ("s3://bucket/../../etc", "'..' parts"),
        ("s3://bucket//x", "empty"),
        ("gs://b/./p", "'.' "),
        ("file://relative/x", "needs an absolute path"),
        ("ftp://host/x", "unknown snapshot location scheme 'ftp'"),
    ],
)
def test_a_malformed_location_is_refused_before_anything_is_written(location: str, said: str) -> None:
    """Before, "s3://" lost its slashes when the session's folder was joined to it and became a
    local folder named "s3:" in the working directory."""
    with pytest.raises(SnapshotError, match=re.escape(said)):
        object_scheme(location)


@pytest.mark.parametrize(
    ("location", "scheme"),
    [("s3://bucket", "s3"), ("s3://bucket/a/b/", "s3"), ("file:///tmp/x", "file"), ("AZ://c/p", "az")],
)
def test_a_well_formed_location_names_its_scheme(location: str, scheme: str) -> None:
    assert object_scheme(location) == scheme


def test_the_kernel_says_a_malformed_location_and_writes_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("IPYTHON_COMPACT_SNAPSHOTS", "s3://")  # read when the extension loads
    shell = request_shell(tmp_path, monkeypatch)
    try:
        shell.run_cell("x = 1")
        with pytest.raises(UsageError, match="no bucket or folder after s3://"):
            shell.run_line_magic("compact", "snapshot")
        assert not (tmp_path / "s3:").exists()
    finally:
        shell.run_line_magic("unload_ext", "ipython_compact")


def request_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The test IPython shell with the extension loaded on a session of this test's own (as the
    ``ip`` fixture, which loads it before a test can set the environment)."""
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    monkeypatch.setenv("IPYTHON_COMPACT_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("IPYTHON_COMPACT_SESSION", f"shell-{tmp_path.name}")
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "ipython_compact")
    return shell
