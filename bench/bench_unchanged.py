"""What an automatic snapshot of an unchanged namespace costs, against pickling it once (issue 21, item 2).

Shapes: 100,000 small names (ints, floats, short strings, small lists) and a 1M-row DataFrame with
an object (str) column. For each, side by side in one run: ``pickle.dumps`` (protocol 5) of the
values once (the reference), our first save, and our unchanged automatic save (``verify="sampled"``,
what runs after cells). Goal: the unchanged save costs less than pickling once. Minimum of
``--repeats`` rounds, seconds; each round times the reference and then our save back to back,
after the first save (so both meet the same heap and the same load on a shared machine).

``small_names_listed_anew``: the same 100,000 names, but before every timed call (outside the
timer) the ``(name, value)`` pairs are listed anew from a dict, as the kernel lists its namespace
for every snapshot: fresh tuples, scattered in memory, for the reference and for the save alike.

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
    return {"small_names": small, "small_names_listed_anew": small, "frame_object_column": [("df", frame)]}


def timed(fn: Any, items: Any) -> float:
    start = time.perf_counter()
    fn(items)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--names", type=int, default=100_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    out: dict[str, Any] = {"names": args.names, "rows": args.rows, "shapes": {}}
    for shape, items in shapes(args.names, args.rows).items():
        namespace = dict(items)
        anew = shape.endswith("listed_anew")

        def listed(namespace: dict[str, Any] = namespace, items: Any = items, anew: bool = anew) -> Any:
            return list(namespace.items()) if anew else items

        with tempfile.TemporaryDirectory() as tmp:
            store = SnapshotStore(Path(tmp) / "snap", b"k" * 32, durable=False, session="bench")
            start = time.perf_counter()
            store.save(items)
            first_s = time.perf_counter() - start
            rounds = [
                (
                    timed(lambda items: pickle.dumps([v for _, v in items], protocol=5), listed()),
                    timed(
                        lambda items, store=store: store.save(items, automatic=True, verify="sampled"),
                        listed(),
                    ),
                )
                for _ in range(args.repeats)
            ]
            pickle_s = min(p for p, _ in rounds)
            unchanged_s = min(u for _, u in rounds)
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
