"""Snapshots on object storage: every remote call has a deadline (issue 31, red team four).

Found by attack: with the endpoint stalled mid-save an 8 MB save still hung after 90 s (500 s in
another run), holding the writer lock throughout. Now each call to the bucket gets a deadline
(``IPYTHON_COMPACT_OBJECT_TIMEOUT`` seconds plus one per MiB sent), the save fails with a
sentence saying so, the lock is released, and the previous generation still restores.

moto's S3 server behind a TCP proxy (``stalled_endpoint.StallingProxy``) that stops relaying on
command, as a bucket's endpoint that hangs mid-transfer.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import s3_server
from snapshot_ledger import MemoryLedger
from stalled_endpoint import StallingProxy

from ipython_compact.namespace.snapshot import SnapshotError, SnapshotStore
from ipython_compact.namespace.snapshot.places import lock_name
from ipython_compact.store.writer_locks import writer_locks

pytestmark = pytest.mark.slow

KEY = b"k" * 32


def _fresh_clients() -> None:
    import fsspec  # type: ignore[import-untyped]

    fsspec.filesystem("s3").clear_instance_cache()


def test_a_stalled_bucket_fails_the_save_in_time_and_keeps_the_last_generation(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moto = s3_server.server().endpoint
    host, port = moto.split("//")[1].split(":")
    locks = writer_locks(tmp_path / "log.db")
    ledger = MemoryLedger()
    url = f"{s3_url}/s1"
    first = np.arange(100_000, dtype=np.float64)
    with StallingProxy((host, int(port))) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        monkeypatch.setenv("IPYTHON_COMPACT_OBJECT_TIMEOUT", "2")
        _fresh_clients()
        store = SnapshotStore(url, KEY, durable=False, locks=locks, ledger=ledger, session="s1")
        assert store.save([("a", first)]).generation == 1
        proxy.stall_after(1 << 20)  # listings pass; the 8 MB payload stalls after its first MiB
        outcome: dict[str, Any] = {}

        def save() -> None:
            started = time.monotonic()
            try:
                store.save([("a", np.random.default_rng(1).random(1 << 20))])  # 8 MB, changed
            except SnapshotError as exc:
                outcome["error"] = str(exc)
            outcome["seconds"] = time.monotonic() - started

        saver = threading.Thread(target=save, daemon=True)
        saver.start()
        saver.join(120)
        assert not saver.is_alive(), "the save still hangs on the stalled bucket"
        assert "error" in outcome and "no answer within" in outcome["error"], outcome
        assert outcome["seconds"] < 60
        assert proxy.stalled_traffic.is_set() and "write blobs/" in outcome["error"], outcome
        with locks.hold(lock_name(store.location), timeout=0):
            pass  # the writer lock was released
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto)  # the bucket answers again
    _fresh_clients()
    again = SnapshotStore(url, KEY, durable=False, locks=locks, ledger=ledger, session="s1", process="p2")
    assert [(g.generation, g.verified) for g in again.generations_info()] == [(1, True)]
    values, _ = again.load()
    assert np.array_equal(values["a"], first)
