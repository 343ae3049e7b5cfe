"""Span benchmark: one offline compaction of a 20,000- and a 200,000-entry span of the same shape.

Why: a compaction summarizes everything since the previous one. A session that ran long without
compacting (an import, a disabled threshold, a long autonomous run) hands the Compactor a span
ten times larger; the work must grow about linearly with it, not quadratically. Goal: the
200k-entry compaction takes at most 12x the 20k one and under 20 s.

Each span is built by ``testing.transcripts.TranscriptGenerator`` (same seed and shape: a big
tool output every ninth round, ``--big-lines`` lines each) appended to a fresh SessionStore file
in 2,000-entry transactions (not timed). Timed: ``Compactor(store).compact(session)`` with the
offline summarizer, on that real SQLite file, in this process, ``--rounds`` times (each round
moves the leaf back and empties the parsed-entry cache first, so every round does the same cold
work; median and minimum are reported — the minimum shows the cost when a shared machine adds
noise). ``--profile N`` prints the top N functions of a cProfile run of the
largest size to stderr.

Usage: python bench/bench_span.py [--sizes 20000,200000] [--big-lines 240] [--rounds 3] [--profile 25]
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ipython_compact.compactor import Compactor  # noqa: E402
from ipython_compact.store import SessionStore  # noqa: E402
from ipython_compact.testing.transcripts import TranscriptGenerator  # noqa: E402

SESSION = "span"
BATCH = 2000


def build(db: Path, size: int, big_lines: int) -> SessionStore:
    """A store whose session holds ``size`` generated message entries and no compaction."""
    store = SessionStore(db, busy_timeout=30.0)
    store.create_session(SESSION)
    gen = TranscriptGenerator(seed=11, big_output_lines=big_lines)
    pending: list[tuple[str, dict[str, Any]]] = []
    written = 0
    while written < size:
        for message in gen.next_round():
            if written + len(pending) >= size:
                break
            pending.append(("message", {"message": message}))
        if len(pending) >= BATCH or written + len(pending) >= size:
            store.append_many(SESSION, pending)
            written += len(pending)
            pending = []
    return store


def measure(size: int, big_lines: int, profile: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-span-") as tmp:
        db = Path(tmp) / "sessions.db"
        started = time.perf_counter()
        store = build(db, size, big_lines)
        build_s = time.perf_counter() - started
        leaf = store.leaf(SESSION)
        times = []
        for round_ in range(rounds):
            store.set_leaf(SESSION, leaf)  # every round compacts the same span (earlier ones sit on side branches)
            store.clear_cache()
            compactor = Compactor(store)
            profiler = cProfile.Profile() if profile and round_ == 0 else None
            started = time.perf_counter()
            if profiler:
                profiler.enable()
            result = compactor.compact(SESSION)
            if profiler:
                profiler.disable()
            times.append(time.perf_counter() - started)
            if profiler:
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(profile)
                print(out.getvalue(), file=sys.stderr)
        summarized = result.plan.summarize.entries
        store.close()
        return {
            "entries": size,
            "build_s": round(build_s, 2),
            "compact_s": round(statistics.median(times), 3),
            "compact_min_s": round(min(times), 3),
            "rounds": rounds,
            "summarized_messages": summarized,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
            "db_bytes": os.path.getsize(db),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,200000")
    parser.add_argument("--big-lines", type=int, default=240, help="lines of every big tool output")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile the largest size, top N")
    parser.add_argument("--rounds", type=int, default=3, help="compactions per size (median and minimum reported)")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    runs = [measure(size, args.big_lines, args.profile if size == sizes[-1] else 0, args.rounds) for size in sizes]
    report: dict[str, Any] = {"runs": runs, "load": os.getloadavg()[0], "big_output_lines": args.big_lines}
    if len(runs) >= 2:
        small, large = runs[0], runs[-1]
        report["ratio"] = round(large["compact_s"] / small["compact_s"], 2)
        report["ratio_of_minima"] = round(large["compact_min_s"] / small["compact_min_s"], 2)
        report["size_ratio"] = large["entries"] / small["entries"]
        report["goal"] = {"max_ratio": 12, "max_large_s": 20,
                          "met": report["ratio"] <= 12 and large["compact_s"] < 20}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
