"""Start-up time (issue 21, item 5): the CLI's ``--help`` and the import ``%load_ext`` pays.

Side by side in one run, each a fresh interpreter, interleaved round by round so load on the
machine hits every case alike:
- ``python_pass``: ``python -c pass`` (the floor);
- ``cli_help``: ``ipython-compact --help`` (the console script's ``main``);
- ``kernel_base``: importing what a kernel has loaded before ``%load_ext`` (IPython, ipykernel);
- ``kernel_extension``: the same, then ``import ipython_compact.kernel.extension``;
  ``load_ext_import`` is the difference of their medians (what ``%load_ext`` adds).
Goals: ``cli_help`` under 100 ms, ``load_ext_import`` under 150 ms.

Usage: python bench/bench_startup.py [--rounds 15]   (prints one JSON document; milliseconds)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

BASE = "import IPython, ipykernel.ipkernel, comm"
CASES = {
    "python_pass": [sys.executable, "-c", "pass"],
    "cli_help": [
        sys.executable,
        "-c",
        "import sys; from ipython_compact.cli import main; sys.argv[0] = "
        "'ipython-compact'; "
        "sys.exit(main(['--help']))",
    ],
    "kernel_base": [sys.executable, "-c", BASE],
    "kernel_extension": [sys.executable, "-c", f"{BASE}; import ipython_compact.kernel.extension"],
}


def once(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    for cmd in CASES.values():  # warm the page cache and the bytecode caches
        once(cmd)
    runs: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.rounds):
        for name, cmd in CASES.items():
            runs[name].append(once(cmd))
    out: dict[str, object] = {
        name: {"median_ms": round(statistics.median(v), 1), "min_ms": round(min(v), 1)}
        for name, v in runs.items()
    }
    med = {name: statistics.median(v) for name, v in runs.items()}
    out["load_ext_import_ms"] = round(med["kernel_extension"] - med["kernel_base"], 1)
    out["cli_help_over_python_ms"] = round(med["cli_help"] - med["python_pass"], 1)
    out["rounds"] = args.rounds
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
