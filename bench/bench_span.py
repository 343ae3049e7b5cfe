"""Span benchmark: one offline compaction of a 20,000- and a 200,000-entry span of the same shape.

Why: a compaction summarizes everything since the previous one. A session that ran long without
compacting (an import, a disabled threshold, a long autonomous run) hands the Compactor a span
ten times larger; the work must grow about linearly with it, not quadratically. Goal (issue 18):
for every shape, the 200k-entry compaction takes at most 12x the 20k one and under 20 s, both in
this process and as ``ipython-compact compact`` wall time.

Shapes (``--shapes``, each a span built by ``cli.demo_transcript.TranscriptGenerator`` with the
same seed):
- ``answers-long``: every round ends in a final answer; a 240-line tool output (``--big-lines``)
  every ninth round.
- ``answers-short``: final answers; every tool output short (one line of words).
- ``loop-long`` / ``loop-short``: a long autonomous tool loop: the assistant never gives a final
  answer (each closing answer becomes a tool call with a short result), while the user's messages
  keep arriving, so every request of the span stays open.
- ``pi-derived``: a real pi session (``bench_engine.FIXTURE``, its compactions dropped) replicated
  with fresh ids by ``bench_engine.replicate`` and cut to the size, then imported: the session
  ``bench_engine.py`` plans on and issue 37 compacted with ``compact --summarizer offline``.

Each span is appended to a fresh SessionStore file in 2,000-entry transactions (not timed).
Timed, ``--rounds`` times per mode (each round moves the leaf back first, so every round does the
same cold work; median and minimum are reported — the minimum shows the cost when a shared
machine adds noise — and the CPU seconds the compaction used, which a loaded machine changes far
less than wall time):
- ``inproc``: ``Compactor(store).compact(session)`` with the offline summarizer, after emptying
  the parsed-entry cache;
- ``cli``: ``ipython-compact compact --json`` in a new process (start-up, store open and the
  context read included).
``--profile N`` prints the top N functions of a cProfile run of the largest in-process size to
stderr.

Usage: python bench/bench_span.py [--sizes 20000,200000] [--shapes answers-long,...]
       [--modes inproc,cli] [--big-lines 240] [--rounds 3] [--profile 25]
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ipython_compact.cli.demo_transcript import TranscriptGenerator  # noqa: E402
from ipython_compact.compaction.compactor import Compactor  # noqa: E402
from ipython_compact.compaction.deciding import forget_remembered  # noqa: E402
from ipython_compact.core.entries import Entry  # noqa: E402
from ipython_compact.store import SessionStore  # noqa: E402
from ipython_compact.store.importers import load_transcript  # noqa: E402

SESSION = "span"
BATCH = 2000
SHAPES = ("answers-long", "answers-short", "loop-long", "loop-short", "pi-derived")
MODES = ("inproc", "cli")
CLI = str(Path(sys.executable).with_name("ipython-compact"))


def _loop(messages: list[dict[str, Any]], counter: list[int]) -> Iterator[dict[str, Any]]:
    """A round without its final answer: the closing answer becomes a tool call and its result."""
    for m in messages:
        if m.get("role") == "assistant" and m.get("stopReason") == "stop":
            counter[0] += 1
            cid = f"loop_{counter[0]}"
            content = [
                *m["content"],
                {"type": "toolCall", "id": cid, "name": "python", "arguments": {"code": "check()"}},
            ]
            yield {**m, "content": content, "stopReason": "toolUse"}
            yield {
                "role": "toolResult",
                "toolCallId": cid,
                "toolName": "python",
                "content": [{"type": "text", "text": "ok"}],
                "isError": False,
                "timestamp": m.get("timestamp", 0),
            }
        else:
            yield m


def messages(shape: str, big_lines: int) -> Iterator[dict[str, Any]]:
    answers, outputs = shape.split("-")
    gen = TranscriptGenerator(
        seed=11, big_output_lines=big_lines, big_output_every=9 if outputs == "long" else 0
    )
    counter = [0]
    while True:
        round_ = gen.next_round()
        yield from (round_ if answers == "answers" else _loop(round_, counter))


def pi_derived(size: int) -> list[Entry]:
    """``size`` entries of the replicated pi fixture (a prefix of a chain is a chain)."""
    import bench_engine  # heavy: only this shape needs the engine bench's generator

    template = bench_engine.without_compactions(load_transcript(bench_engine.FIXTURE).path())
    copies = -(-size // len(template))
    return bench_engine.replicate(template, copies)[:size]


def build(db: Path, size: int, shape: str, big_lines: int) -> SessionStore:
    """A store whose session holds ``size`` generated message entries and no compaction."""
    store = SessionStore(db, busy_timeout=30.0)
    store.create_session(SESSION)
    if shape == "pi-derived":
        entries = pi_derived(size)
        for start in range(0, len(entries), BATCH):
            store.import_entries(SESSION, entries[start : start + BATCH])
        return store
    pending: list[tuple[str, dict[str, Any]]] = []
    written = 0
    for message in messages(shape, big_lines):
        pending.append(("message", {"message": message}))
        if len(pending) >= BATCH or written + len(pending) >= size:
            store.append_many(SESSION, pending)
            written += len(pending)
            pending = []
            if written >= size:
                break
    return store


def _inproc(store: SessionStore, profiler: cProfile.Profile | None) -> tuple[float, float, dict[str, Any]]:
    store.clear_cache()
    forget_remembered()  # every round decides afresh, as a new process would
    compactor = Compactor(store)
    started, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    result = compactor.compact(SESSION)
    if profiler:
        profiler.disable()
    took, cpu = time.perf_counter() - started, time.process_time() - cpu
    return (
        took,
        cpu,
        {
            "summarized_messages": result.plan.summarize.entries,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
            "checkpoint_chars": len(result.summary),
        },
    )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cli(db: Path) -> tuple[float, float, dict[str, Any]]:
    # the tree this file belongs to, even when another copy is installed
    env = {k: v for k, v in os.environ.items() if k != "IPYTHON_COMPACT_MODEL"} | {"PYTHONPATH": str(ROOT)}
    started, cpu = time.perf_counter(), _children_cpu()
    proc = subprocess.run(
        [CLI, "--db", str(db), "compact", "-s", SESSION, "--summarizer", "offline", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    took, cpu = time.perf_counter() - started, _children_cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"ipython-compact compact failed ({proc.returncode}): {proc.stderr.strip()}")
    return took, cpu, {}


def measure(
    size: int, shape: str, modes: list[str], big_lines: int, profile: int, rounds: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-span-") as tmp:
        db = Path(tmp) / "sessions.db"
        started = time.perf_counter()
        store = build(db, size, shape, big_lines)
        out: dict[str, Any] = {
            "entries": size,
            "shape": shape,
            "build_s": round(time.perf_counter() - started, 2),
        }
        leaf = store.leaf(SESSION)
        for mode in modes:
            times, cpus = [], []
            for round_ in range(rounds):
                # every round compacts the same span (earlier ones sit on side branches)
                store.set_leaf(SESSION, leaf)
                if mode == "inproc":
                    profiler = cProfile.Profile() if profile and round_ == 0 else None
                    took, cpu, facts = _inproc(store, profiler)
                    out.update(facts)
                    if profiler:
                        text = io.StringIO()
                        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(profile)
                        print(f"== {shape} {size}\n{text.getvalue()}", file=sys.stderr)
                else:
                    took, cpu, _ = _cli(db)
                times.append(took)
                cpus.append(cpu)
            out[mode] = {
                "median_s": round(statistics.median(times), 3),
                "min_s": round(min(times), 3),
                "cpu_s": round(min(cpus), 3),
            }
        store.close()
        out["db_bytes"] = os.path.getsize(db)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,200000")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument(
        "--big-lines", type=int, default=240, help="lines of every big tool output (the -long shapes)"
    )
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="cProfile the largest size in process, top N"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="compactions per size and mode (median and minimum reported)"
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES] + [s for s in args.shapes.split(",") if s not in SHAPES]
    if unknown:
        raise SystemExit(
            f"unknown shape or mode: {', '.join(unknown)} (shapes: {', '.join(SHAPES)}; modes: "
            f"{', '.join(MODES)})"
        )
    report: dict[str, Any] = {
        "load_before": os.getloadavg()[0],
        "big_output_lines": args.big_lines,
        "shapes": {},
    }
    met = True
    for shape in args.shapes.split(","):
        runs = [
            measure(size, shape, modes, args.big_lines, args.profile if size == sizes[-1] else 0, args.rounds)
            for size in sizes
        ]
        entry: dict[str, Any] = {"runs": runs}
        if len(runs) >= 2:
            small, large = runs[0], runs[-1]
            for mode in modes:
                ratio = round(large[mode]["median_s"] / small[mode]["median_s"], 2)
                ok = ratio <= 12 and large[mode]["median_s"] < 20
                entry[mode] = {
                    "ratio": ratio,
                    "ratio_of_minima": round(large[mode]["min_s"] / small[mode]["min_s"], 2),
                    "ratio_of_cpu": round(large[mode]["cpu_s"] / small[mode]["cpu_s"], 2),
                    "goal_met": ok,
                }
                met = met and ok
        report["shapes"][shape] = entry
        print(f"{shape}: " + json.dumps({m: [r[m] for r in runs] for m in modes}), file=sys.stderr)
    report["load_after"] = os.getloadavg()[0]
    report["goal"] = {"max_ratio": 12, "max_large_s": 20, "met": met}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
