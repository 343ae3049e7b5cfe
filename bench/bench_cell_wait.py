"""How long the user's next cell waits for an automatic snapshot (issue 21, item 1).

Three real kernels (jupyter_client), side by side in one run:
- ``bare``: no extension (the reference);
- ``foreground``: the extension with ``CompactConfig.background_snapshots = False`` (the automatic
  snapshot runs on the kernel's main thread, as before);
- ``background``: the default (a forked child writes it).

For each shape of namespace change, a cell makes the change, the bench waits until the automatic
snapshot has started (the debounce has passed), then sends a trivial cell and measures its round
trip. Shapes: a new 400 MB array; 100,000 small names; a 1M-row DataFrame with an object (str)
column. Each is repeated ``--repeats`` times (the data changes each time, so every snapshot has
work). Goal: background within 2x (plus 25 ms) of bare.

Usage: python bench/bench_cell_wait.py [--repeats 3] [--mb 400] [--names 100000] [--rows 1000000]
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

DEBOUNCE = 0.3

SHAPES = {
    "array_400mb": "import numpy as np\nbig = np.full({mb} * (1 << 20) // 8, {i}, dtype=np.float64)",
    "names_100k": "globals().update({{f'v{{k}}': k + {i} for k in range({names})}})",
    "frame_object_col": (
        "import pandas as pd, numpy as np\n"
        "df = pd.DataFrame({{'s': [f'row {{k}} {i}' for k in range({rows})], "
        "'x': np.arange({rows}) + {i}}})"
    ),
}


def start(mode: str, data_dir: Path) -> tuple[KernelManager, Any]:
    env = {
        **os.environ,
        "IPYTHON_COMPACT_DIR": str(data_dir / mode),
        "IPYTHON_COMPACT_SESSION": f"bench-{mode}",
    }
    km = KernelManager(kernel_name="python3", transport="ipc")  # no "running over TCP" warning per kernel
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    if mode != "bare":
        run(
            kc,
            f"%load_ext ipython_compact\n%config CompactConfig.snapshot_debounce = {DEBOUNCE}\n"
            f"%config CompactConfig.background_snapshots = {mode == 'background'}",
        )
    return km, kc


def run(kc: Any, code: str, timeout: float = 600) -> float:
    """Seconds from sending ``code`` until its reply (the kernel ran it and answered)."""
    started = time.perf_counter()
    msg_id = kc.execute(code, store_history=False)
    while True:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    elapsed = time.perf_counter() - started
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"cell failed: {reply['content']}")
    return elapsed


def measure(mode: str, shape: str, repeats: int, sizes: dict[str, int], data_dir: Path) -> dict[str, Any]:
    km, kc = start(mode, data_dir)
    waits = []
    try:
        for i in range(repeats):
            run(kc, SHAPES[shape].format(i=i, **sizes))
            time.sleep(DEBOUNCE + 0.05)  # the automatic snapshot has started now (bare: nothing runs)
            waits.append(run(kc, "1 + 1") * 1000.0)
            time.sleep(0.2)
            if mode != "bare":  # let the snapshot finish before the next change, so each round is alike
                run(
                    kc,
                    "import time\n"
                    "ext = __import__('ipython_compact.kernel.extension', "
                    "fromlist=['x']).extension_for(get_ipython())\n"
                    "ext.service.settle_background(600)",
                )
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return {
        "min_ms": round(min(waits), 1),
        "median_ms": round(statistics.median(waits), 1),
        "all_ms": [round(w, 1) for w in waits],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mb", type=int, default=400)
    parser.add_argument("--names", type=int, default=100_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--shapes", default=",".join(SHAPES), help="comma-separated subset of: " + ", ".join(SHAPES)
    )
    args = parser.parse_args()
    sizes = {"mb": args.mb, "names": args.names, "rows": args.rows}
    results: dict[str, Any] = {"sizes": sizes, "debounce_s": DEBOUNCE, "shapes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            row = {
                mode: measure(mode, shape, args.repeats, sizes, Path(tmp))
                for mode in ("bare", "foreground", "background")
            }
            bare, bg = row["bare"]["median_ms"], row["background"]["median_ms"]
            row["background_over_bare"] = round(bg / bare, 2) if bare else None
            row["foreground_over_bare"] = round(row["foreground"]["median_ms"] / bare, 2) if bare else None
            row["goal_within_2x_plus_25ms"] = bg <= 2 * bare + 25
            results["shapes"][shape] = row
    results["goals_met"] = all(r["goal_within_2x_plus_25ms"] for r in results["shapes"].values())
    json.dump(results, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
