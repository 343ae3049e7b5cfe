"""Two versions of the package side by side in one run: each bench alternately on a base source
tree (e.g. ``git archive main``) and on this one, so the load of a shared machine hits both alike.

Why: "nothing else slower than before" is a comparison between two versions, and two separate
runs on a shared machine differ by more than the change being judged. Each round runs every bench
once per side, the side that goes first alternating between rounds; every numeric figure whose
name says it is a duration (``_s``, ``_ms``, ``seconds``) is collected per side, and the report
gives the median per side and ``this_over_base`` (the median of per-round ratios; above 1 means
this tree is slower). The version is chosen by ``PYTHONPATH`` (ahead of the editable install),
which the benches' kernels and console commands inherit; each bench script is run from its own
tree.

The base tree needs what the benches need beside the package (e.g. a link to this tree's
tests/pi_reference/node_modules for the pi side).

Usage: python bench/bench_versus.py --base DIR [--rounds 2]
       [--bench "bench_import.py --entries 20000 --rounds 1" --bench ...]
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BENCHES = (
    "bench_import.py --entries 20000 --rounds 1",
    "bench_probe.py",
    "bench_cell_wait.py --repeats 1 --mb 100 --names 20000 --rows 200000",
    "bench_snapshot.py",
)
DURATION_SUFFIXES = ("_s", "_ms", "seconds")


def durations(doc: Any, prefix: str = "") -> dict[str, float]:
    """Every numeric leaf of ``doc`` whose key names a duration, by its dotted path."""
    out: dict[str, float] = {}
    if isinstance(doc, dict):
        for key, value in doc.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, (dict, list)):
                out.update(durations(value, path))
            elif (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and str(key).endswith(DURATION_SUFFIXES)
            ):
                out[path] = float(value)
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out.update(durations(value, f"{prefix}[{i}]"))
    return out


def run_one(tree: Path, bench: str, attempts: int = 2) -> dict[str, float]:
    """One run of ``bench`` on ``tree``; a failed run is retried once (on a shared machine a
    kernel can lose its port to another process between choosing and binding it)."""
    for attempt in range(attempts):
        try:
            return _run_once(tree, bench)
        except SystemExit as exc:
            if attempt + 1 == attempts:
                raise
            print(f"retrying after: {exc}", file=sys.stderr)
    raise AssertionError("unreachable")


def _run_once(tree: Path, bench: str) -> dict[str, float]:
    script, *args = shlex.split(bench)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, str(tree / "bench" / script), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tree),
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{script} failed on {tree}: {done.stderr.strip()[-800:]}")
    doc = json.loads(done.stdout)
    if isinstance(doc, dict) and "skipped" in doc:
        raise SystemExit(f"{script} skipped on {tree}: {doc['skipped']}")
    return durations(doc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="the base source tree (a package checkout)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bench", action="append", help="a bench script and its arguments (repeatable)")
    args = parser.parse_args()
    benches = args.bench or list(DEFAULT_BENCHES)
    sides = {"base": args.base.resolve(), "this": ROOT}
    seen: dict[str, dict[str, list[dict[str, float]]]] = {b: {"base": [], "this": []} for b in benches}
    started = time.perf_counter()
    for round_ in range(args.rounds):
        order = ["base", "this"] if round_ % 2 == 0 else ["this", "base"]
        for bench in benches:
            for side in order:
                seen[bench][side].append(run_one(sides[side], bench))
                print(f"round {round_ + 1}: {bench} on {side}", file=sys.stderr)
    report: dict[str, Any] = {
        "base": str(sides["base"]),
        "this": str(sides["this"]),
        "rounds": args.rounds,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "wall_s": round(time.perf_counter() - started, 1),
        "benches": {},
    }
    for bench, runs in seen.items():
        figures: dict[str, Any] = {}
        keys = set.intersection(*(set(r) for r in runs["base"] + runs["this"]))
        for key in sorted(keys):
            base = [r[key] for r in runs["base"]]
            this = [r[key] for r in runs["this"]]
            ratios = [t / b for t, b in zip(this, base, strict=True) if b > 0]
            figures[key] = {
                "base": round(statistics.median(base), 4),
                "this": round(statistics.median(this), 4),
                "this_over_base": round(statistics.median(ratios), 3) if ratios else None,
            }
        report["benches"][bench] = figures
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
