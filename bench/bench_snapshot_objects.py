"""Snapshots on the local folder and on an S3-compatible server, side by side in one run.

What it measures: an explicit save (every value new), an unchanged save (nothing written: the
listing and manifest reads each save makes), and a restore in a new store, for a namespace of
``--names`` small values plus one ``--mb`` MB array. The S3 side is moto's standalone server on
127.0.0.1 (started here): no network latency, so the figures show the per-request overhead of the
object layer (HTTP, signing, listing), not a real bucket's round trips. The writer lock on S3 is a
SQLite log's file lock.

    python bench/bench_snapshot_objects.py --names 1000 --mb 40 --repeat 3

Prints JSON: per backend the median milliseconds of each step, and S3 / folder ratios.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ipython_compact.namespace.snapshot import SnapshotStore
from ipython_compact.store.writer_locks import writer_locks

KEY = b"b" * 32


def _moto() -> tuple[Any, str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
    import boto3

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
    return server, endpoint


def _ms(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def run(location: str | Path, log: Path, items: list[tuple[str, Any]], repeat: int) -> dict[str, float]:
    locks = writer_locks(log) if isinstance(location, str) else None
    out: dict[str, list[float]] = {"save_new_ms": [], "save_unchanged_ms": [], "restore_ms": []}
    for i in range(repeat):
        where = f"{location}/s{i}" if isinstance(location, str) else location / f"s{i}"
        store = SnapshotStore(where, KEY, session=f"s{i}", durable=True, locks=locks)
        out["save_new_ms"].append(_ms(lambda store=store: store.save(items)))
        out["save_unchanged_ms"].append(
            _ms(lambda store=store: store.save(items, automatic=True, verify="sampled"))
        )
        fresh = SnapshotStore(where, KEY, session=f"s{i}", durable=True, locks=locks)
        out["restore_ms"].append(_ms(lambda fresh=fresh: fresh.load()))
    return {k: round(statistics.median(v), 1) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--names", type=int, default=1000)
    parser.add_argument("--mb", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    items: list[tuple[str, Any]] = [(f"v{i}", {"i": i, "text": "x" * 50}) for i in range(args.names)]
    items.append(("arr", np.random.default_rng(0).random(args.mb * (1 << 20) // 8)))
    server, _ = _moto()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = run(Path(tmp) / "snaps", Path(tmp) / "log.db", items, args.repeat)
            s3 = run("s3://bench/snaps", Path(tmp) / "log.db", items, args.repeat)
    finally:
        server.stop()
    print(
        json.dumps(
            {
                "names": args.names,
                "array_mb": args.mb,
                "repeat": args.repeat,
                "folder": folder,
                "s3_moto_local": s3,
                "ratio_s3_over_folder": {
                    k: round(s3[k] / folder[k], 2) if folder[k] else None for k in folder
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
