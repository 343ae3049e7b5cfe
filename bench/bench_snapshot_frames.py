"""Snapshot benchmark for data frames: a 1M-row pandas DataFrame plus 200 MB of numpy arrays.

Measures (median of repeats, seconds), side by side:
- ``full_save_s``: a full snapshot (every value serialized, signed and written, fsynced);
- ``frame_full_save_s``: the frame alone, full;
- ``unchanged_sampled_s``: the next automatic snapshot with nothing changed (the frame's blocks and
  the arrays trusted on their sampled fingerprints; the path after every cell);
- ``frame_unchanged_sampled_s``: the frame alone, same;
- ``unchanged_full_verify_s``: an explicit snapshot with nothing changed (every large value
  re-hashed to prove it unchanged; costs about a hash pass, so it is reported, not held to 5 %);
- ``frame_edit_s``: one cell of the frame edited in place, explicit snapshot (re-hashed, rewritten);
- ``restore_s`` / ``frame_restore_s``: verify and load every name / the frame alone.

Goal (issue 9): an unchanged frame costs under 5 % of its full save on the automatic path
(``frame_unchanged_vs_full``). Prints one JSON object.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ipython_compact.namespace.snapshot import SnapshotStore

ROWS = 1_000_000
ARRAY_MB = 200
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
KEY = os.urandom(32)


def frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "id": np.arange(ROWS, dtype=np.int64),
            "price": rng.random(ROWS),
            "qty": rng.integers(0, 1000, ROWS),
            "ok": rng.random(ROWS) > 0.5,
            "when": pd.date_range("2026-01-01", periods=ROWS, freq="s"),
            "score": rng.standard_normal(ROWS).astype(np.float32),
        }
    )


def arrays() -> dict[str, Any]:
    rng = np.random.default_rng(1)
    return {f"array_{i}": rng.random(ARRAY_MB * (1 << 20) // 8 // 4) for i in range(4)}


def median(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    times, last = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        last = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), last


def store(root: Path, name: str) -> SnapshotStore:
    return SnapshotStore(root / name, KEY, session=name, durable=True)


def main() -> None:
    df = frame()
    ns = {"df": df, **arrays()}
    frame_bytes = int(df.memory_usage(deep=True).sum())
    root = Path(tempfile.mkdtemp(prefix="bench-frames-"))
    try:

        def fresh_full() -> Any:
            shutil.rmtree(root / "full", ignore_errors=True)
            return store(root, "full").save(ns.items())

        def fresh_frame() -> Any:
            shutil.rmtree(root / "frame", ignore_errors=True)
            return store(root, "frame").save([("df", df)])

        full_s, full_report = median(fresh_full)
        frame_full_s, _ = median(fresh_frame)
        s = store(root, "inc")
        s.save(ns.items())
        unchanged_s, sampled = median(
            lambda: s.save(ns.items(), verify="sampled", automatic=True), REPEATS * 3
        )
        verify_s, verified = median(lambda: s.save(ns.items(), verify="full"))
        f = store(root, "inc-frame")
        f.save([("df", df)])
        frame_unchanged_s, frame_sampled = median(
            lambda: f.save([("df", df)], verify="sampled", automatic=True), REPEATS * 3
        )

        def edit() -> Any:
            df.iloc[ROWS // 2 + 3, 1] = float(time.perf_counter())  # between the sampled blocks
            return f.save([("df", df)])

        edit_s, edited = median(edit)
        restore_s, (_values, report) = median(lambda: store(root, "full").load())
        frame_restore_s, (fvalues, _) = median(lambda: store(root, "frame").load())
        assert set(sampled.unchanged) == set(ns), sampled.unchanged
        assert frame_sampled.unchanged == ["df"] and frame_sampled.written_bytes == 0
        assert "df" not in edited.unchanged and edited.written_bytes > 0
        assert sorted(report.restored) == sorted(ns) and report.failed == []
        pd.testing.assert_frame_equal(fvalues["df"].iloc[:10], df.iloc[:10])
        out = {
            "rows": ROWS,
            "frame_mb": round(frame_bytes / 2**20, 1),
            "arrays_mb": ARRAY_MB,
            "snapshot_mb": round(full_report.bytes / 2**20, 1),
            "repeats": REPEATS,
            "full_save_s": round(full_s, 4),
            "frame_full_save_s": round(frame_full_s, 4),
            "unchanged_sampled_s": round(unchanged_s, 5),
            "frame_unchanged_sampled_s": round(frame_unchanged_s, 5),
            "unchanged_full_verify_s": round(verify_s, 4),
            "verified_mb": round(verified.verified_bytes / 2**20, 1),
            "frame_edit_s": round(edit_s, 4),
            "restore_s": round(restore_s, 4),
            "frame_restore_s": round(frame_restore_s, 4),
            "frame_unchanged_vs_full": round(frame_unchanged_s / frame_full_s, 4),
            "unchanged_vs_full": round(unchanged_s / full_s, 4),
            "goals": {
                "frame_unchanged_under_5pct_of_full": frame_unchanged_s / frame_full_s < 0.05,
                "all_unchanged_under_5pct_of_full": unchanged_s / full_s < 0.05,
                "every_name_restored": sorted(report.restored) == sorted(ns),
            },
        }
        print(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
