"""What an automatic snapshot of an unchanged namespace costs, against pickling it once (issue 21, item 2).

Shapes: 100,000 small names (ints, floats, short strings, small lists) and a 1M-row DataFrame with
an object (str) column. For each, side by side in one run: ``pickle.dumps`` (protocol 5) of the
values once (the reference), our first save, and our unchanged automatic save (``verify="sampled"``,
what runs after cells). Goal: the unchanged save costs less than pickling once. Minimum of
``--repeats`` runs, seconds.

Usage: python bench/bench_unchanged.py [--repeats 3] [--names 100000] [--rows 1000000]
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ipython_compact.namespace.snapshot import SnapshotStore  # noqa: E402


def shapes(names: int, rows: int) -> dict[str, list[tuple[str, Any]]]:
    small: list[tuple[str, Any]] = []
    for i in range(names):
        value: Any = (i, i * 0.5, f"name {i}", [i, i + 1])[i % 4]
        small.append((f"v{i:06d}", value))
    frame = pd.DataFrame({"s": [f"row {i}" for i in range(rows)], "x": np.arange(rows)})
    return {"small_names": small, "frame_object_column": [("df", frame)]}


def best(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--names", type=int, default=100_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    out: dict[str, Any] = {"names": args.names, "rows": args.rows, "shapes": {}}
    for shape, items in shapes(args.names, args.rows).items():
        with tempfile.TemporaryDirectory() as tmp:
            store = SnapshotStore(Path(tmp) / "snap", b"k" * 32, durable=False, session="bench")
            pickle_s = best(lambda items=items: pickle.dumps([v for _, v in items], protocol=5), args.repeats)
            start = time.perf_counter()
            store.save(items)
            first_s = time.perf_counter() - start
            unchanged_s = best(
                lambda store=store, items=items: store.save(items, automatic=True, verify="sampled"),
                args.repeats,
            )
            report = store.save(items, automatic=True, verify="sampled")
        out["shapes"][shape] = {
            "pickle_once_s": round(pickle_s, 4),
            "first_save_s": round(first_s, 4),
            "unchanged_save_s": round(unchanged_s, 4),
            "unchanged_over_pickle": round(unchanged_s / pickle_s, 3),
            "all_unchanged": len(report.unchanged) == len(items),
            "goal_below_pickle_once": unchanged_s < pickle_s,
        }
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
