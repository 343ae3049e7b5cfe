"""Restore against ``pickle.load`` of the same data from the same disk (issue 21, item 6).

A namespace of one large float array (``--mb``) and 1,000 small objects is written once by
``SnapshotStore.save`` and once by ``pickle.dump`` (protocol 5) into one file in the same
folder. Then, round by round and back to back (so load on a shared machine hits both alike):
``pickle.load`` of that file, and ``SnapshotStore.load`` (every signature verified, every name
unpickled). Both read from the page cache after the first round. Goal: ours within 1.2x.

``--scheme hmac-sha256`` writes the snapshot as before keyed BLAKE3 (``signing.py``): the restore
of an older snapshot.

Usage: python bench/bench_restore.py [--mb 400] [--rounds 5] [--scheme blake3|hmac-sha256]
(prints one JSON document; seconds)
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from ipython_compact.namespace.snapshot import SnapshotStore  # noqa: E402


def namespace(mb: int) -> dict[str, Any]:
    ns: dict[str, Any] = {"big": np.random.default_rng(0).random(mb * (1 << 20) // 8)}
    for i in range(1000):
        ns[f"small{i}"] = {"i": i, "name": f"item {i}", "values": list(range(i % 20))}
    return ns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scheme", choices=["blake3", "hmac-sha256"], default=None)
    args = parser.parse_args()
    ns = namespace(args.mb)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = SnapshotStore(root / "snap", b"k" * 32, durable=False, session="bench")
        if args.scheme is not None:
            from ipython_compact.namespace.snapshot import signing

            store._files.scheme = {s.name: s for s in signing.SCHEMES.values()}[args.scheme]
        store.save(ns.items())
        with open(root / "ns.pkl", "wb") as f:
            pickle.dump(ns, f, protocol=5)
        del ns
        ours: list[float] = []
        plain: list[float] = []
        ratios: list[float] = []
        for _ in range(args.rounds + 1):  # the first round warms the page cache; not counted
            start = time.perf_counter()
            with open(root / "ns.pkl", "rb") as f:
                loaded = pickle.load(f)
            p = time.perf_counter() - start
            del loaded
            start = time.perf_counter()
            values, report = store.load()
            o = time.perf_counter() - start
            assert len(values) == 1001 and not report.failed, report
            del values
            plain.append(p)
            ours.append(o)
            ratios.append(o / p)
    out = {
        "mb": args.mb,
        "rounds": args.rounds,
        "scheme": store._files.scheme.name if hasattr(store._files, "scheme") else "hmac-sha256",
        "pickle_load_s": round(statistics.median(plain[1:]), 4),
        "ours_load_s": round(statistics.median(ours[1:]), 4),
        "ratio_paired_median": round(statistics.median(ratios[1:]), 3),
    }
    out["goal_within_1_2x"] = out["ratio_paired_median"] <= 1.2
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
