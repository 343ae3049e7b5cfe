"""Engine benchmark: the session log and the core at 1k, 10k and 100k entries, side by side with pi.

Sessions are built by replicating a pi fixture (tests/fixtures/pi/before-compaction.jsonl by
default) with fresh ids: copy k hangs under the last entry of copy k-1. By default the fixture's
compactions are dropped (``uncompacted``): the session is never compacted, so the context grows
with the history, as in a long pi session imported for the first time (what issue 37 measures).
With ``--keep-compactions`` each copy carries the fixture's compaction, so every session ends
with the same context (equal context size) while its history grows 100-fold. Measured per size:

- append throughput: bulk import (2000 entries per transaction) and single appends (one
  transaction each, 500 of them into a side session of the same database file);
- threshold check: context size (newest usage anchor + stored estimates after it) + decision;
- plan: what a compaction would summarize/keep (``core.preparation.prepare_compaction``);
- context-view build: the model's message list (``core.context.build_context``);
- what a user actually triggers, through the product's own objects on the same database
  (``user_ops``): ``Compactor.plan`` (``%compact preview``), a full offline ``Compactor.compact``
  (each round moves the leaf back and compacts again, so every round does the same work; the
  compaction lands on a side branch), the kernel service's ``status`` (``%compact status`` and the
  panel's poll), and the agent's pre-request threshold check (``CompactionScheduler.before_request``: context
  estimate from the store + threshold decision). Goal: each at 100k entries within 2x of 1k.
  The fixture's compactions come from pi and carry no anchors, so the Compactor re-reads the goal,
  constraints and pins from the history before the view once per process (kept per view head):
  ``compactor_plan_first_call_ms`` reports that one-time cost, the medians the repeated calls.
  The first call also starts with no remembered decision (``_LAST_WORK``) and no remembered gists;
  note that a replicated fixture repeats each large output once per copy, so within that first
  call the gist of a repeated output is computed once (a real session's outputs differ; a
  preview makes no gists since issue 37, and decides from the outlines stored with each entry,
  ``SessionStore.context_outline``, parsing only user messages, pins and compactions). The
  repeated ``compactor_plan`` and ``compactor_compact`` rounds decide on the same view, so they
  reuse the remembered decision (as a preview followed by a compaction does); a plan after new
  entries decides again (``bench_span.py`` and the CLI's offline compaction time that).

``plan_vs_pi`` puts ``Compactor.plan`` beside pi's ``prepareCompaction`` per size, first call
and warm (pi's first call from ``pi_engine_bench.mjs``, its file load given apart); ``goals``
says at which sizes each is faster than pi.

"store" walks the SQLite file every round (what the product does) and reuses parsed entries
from the store's cache; "store_cold" empties that cache first (a fresh process); "memory" runs
the core on a path already in memory, which is how pi works. pi's figures come from its own
code (bench/pi_engine_bench.mjs, package pinned in tests/pi_reference) on the same session
written as a pi v3 file. Ratios are pi / ours: above 1 means ours is faster.

Usage: python bench/bench_engine.py [--sizes 1000,10000,100000] [--rounds 15] [--no-pi] [--keep-compactions]
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ipython_compact.compaction.compactor import Compactor  # noqa: E402
from ipython_compact.core.context import build_context  # noqa: E402
from ipython_compact.core.entries import Entry  # noqa: E402
from ipython_compact.core.pi_format import entry_to_pi  # noqa: E402
from ipython_compact.core.preparation import prepare_compaction  # noqa: E402
from ipython_compact.core.settings import CompactionSettings  # noqa: E402
from ipython_compact.core.thresholds import decide  # noqa: E402
from ipython_compact.core.tokens import estimate_context  # noqa: E402
from ipython_compact.store import SessionStore  # noqa: E402
from ipython_compact.store.importers import load_transcript, rename_entry  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "pi" / "before-compaction.jsonl"
PI_SCRIPT = ROOT / "bench" / "pi_engine_bench.mjs"
PI_PACKAGE = ROOT / "tests" / "pi_reference" / "node_modules" / "@mariozechner" / "pi-coding-agent"
ESTIMATOR: Final = "chars4"  # pi's rules, so both sides count the same tokens
WINDOW = 200_000
SESSION = "bench"


def replicate(template: list[Entry], copies: int) -> list[Entry]:
    """``copies`` chained copies of a linear template, each with fresh ids."""
    out: list[Entry] = []
    previous: str | None = None
    for copy in range(copies):
        renamed = {e.id: f"{copy:03x}{k:05x}" for k, e in enumerate(template)}
        for entry in template:
            fresh = rename_entry(entry, renamed)
            if fresh.parent_id is None:
                fresh = Entry(fresh.id, previous, fresh.kind, fresh.timestamp, fresh.data)
            out.append(fresh)
        previous = out[-1].id
    return out


def without_compactions(template: list[Entry]) -> list[Entry]:
    """The linear ``template`` with its compaction entries removed (each child re-hung under the
    removed entry's parent): a session that was never compacted."""
    out: list[Entry] = []
    parent_of: dict[str, str | None] = {}
    for entry in template:
        parent = entry.parent_id
        while parent is not None and parent in parent_of:
            parent = parent_of[parent]
        if entry.kind == "compaction":
            parent_of[entry.id] = parent
            continue
        out.append(
            entry
            if parent == entry.parent_id
            else Entry(entry.id, parent, entry.kind, entry.timestamp, entry.data)
        )
    return out


def write_pi_file(entries: list[Entry], header: dict[str, Any], path: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({**header, "version": 3}, ensure_ascii=False) + "\n")
        for entry in entries:
            out.write(json.dumps(entry_to_pi(entry), ensure_ascii=False) + "\n")


def timed(fn: Callable[[], object], rounds: int) -> tuple[float, float]:
    """(median, minimum) milliseconds over ``rounds`` calls after one warm-up call.

    The median is the headline figure; the minimum shows the intrinsic cost when other
    processes on a shared machine add noise to the median.
    """
    fn()  # warm caches, as the pi side does
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 3), round(min(times), 3)


def timings(ops: dict[str, Callable[[], object]], rounds: int) -> tuple[dict[str, float], dict[str, float]]:
    medians: dict[str, float] = {}
    minima: dict[str, float] = {}
    for name, fn in ops.items():
        medians[name], minima[name] = timed(fn, rounds)
    return medians, minima


def build_store(db: Path, entries: list[Entry]) -> dict[str, float]:
    store = SessionStore(db)
    store.create_session(SESSION)
    start = time.perf_counter()
    for i in range(0, len(entries), 2000):
        store.import_entries(SESSION, entries[i : i + 2000])
    bulk = time.perf_counter() - start
    store.create_session("side")
    n_single = 500
    start = time.perf_counter()
    for i in range(n_single):
        store.append("side", "message", {"message": {"role": "user", "content": f"single append {i}"}})
    single = time.perf_counter() - start
    store.close()
    return {
        "bulk_entries_per_s": round(len(entries) / bulk),
        "bulk_seconds": round(bulk, 2),
        "single_entries_per_s": round(n_single / single),
        "single_ms_per_append": round(single / n_single * 1000, 3),
    }


def cold(store: SessionStore, fn: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        store.clear_cache()
        return fn()

    return run


def measure_ours(db: Path, path: list[Entry], settings: CompactionSettings, rounds: int) -> dict[str, Any]:
    store = SessionStore(db)

    def store_threshold() -> str:
        view = store.context_view(SESSION)
        tokens = estimate_context(view.entries, ESTIMATOR, tokens=view.tokens(ESTIMATOR)).tokens
        return decide(tokens, WINDOW, settings)

    def store_plan() -> object:
        view = store.context_view(SESSION)
        return prepare_compaction(view.entries, settings, tokens=view.tokens(ESTIMATOR))

    def store_context() -> object:
        return build_context(store.context_path(SESSION))

    def memory_threshold() -> str:
        return decide(estimate_context(path, ESTIMATOR).tokens, WINDOW, settings)

    view = store.context_view(SESSION)
    prep = store_plan()
    result: dict[str, Any] = {
        "context_entries": len(view.entries),
        "context_messages": len(build_context(view.entries)),
        "context_tokens": estimate_context(view.entries, ESTIMATOR, tokens=view.tokens(ESTIMATOR)).tokens,
        "messages_to_summarize": 0 if prep is None else len(prep.messages_to_summarize),  # type: ignore[attr-defined]
        "first_kept_entry_id": None if prep is None else prep.first_kept_entry_id,  # type: ignore[attr-defined]
    }
    groups: dict[str, dict[str, Callable[[], object]]] = {
        "store": {"threshold_check": store_threshold, "plan": store_plan, "context_view": store_context},
        # the entry cache emptied before every round: what a fresh process pays
        "store_cold": {
            "threshold_check": cold(store, store_threshold),
            "plan": cold(store, store_plan),
            "context_view": cold(store, store_context),
        },
        "memory": {
            "threshold_check": memory_threshold,
            "plan": lambda: prepare_compaction(path, settings),
            "context_view": lambda: build_context(path),
        },
    }
    for name, ops in groups.items():
        result[f"{name}_ms"], result[f"{name}_min_ms"] = timings(ops, rounds)
    store.close()
    return result


USER_OPS: Final = ("compactor_plan", "compactor_compact", "service_status", "agent_threshold_check")


def measure_user_ops(db: Path, settings: CompactionSettings, rounds: int) -> dict[str, Any]:
    """The operations a user triggers, through ``Compactor``, ``KernelService`` and ``Agent``.

    ``db`` must be ``paths.database_path()`` of the data directory ``IPYTHON_COMPACT_DIR`` points
    at (the kernel service opens it by itself, as in a kernel). Runs last: the agent appends its
    system baseline when it binds to a session that has none, and compactions land on side
    branches; the session's leaf is put back afterwards.
    """
    from types import SimpleNamespace

    import openai

    from ipython_compact.agent.loop import Agent
    from ipython_compact.kernel.config import CompactConfig
    from ipython_compact.kernel.service import KernelService

    store = SessionStore(db)
    leaf = store.leaf(SESSION)
    assert leaf is not None
    compactor = Compactor(store, None, settings)

    def compact() -> object:
        store.set_leaf(SESSION, leaf)  # same starting point every round: same work
        return compactor.compact(SESSION, reason="manual")

    config = CompactConfig(session=SESSION, context_window=WINDOW, compaction={"estimator": ESTIMATOR})
    service = KernelService(SimpleNamespace(user_ns={}, user_ns_hidden={}, kernel=None), config)
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused", max_retries=0)  # never called
    from ipython_compact.compaction.deciding import forget_remembered

    forget_remembered()
    store.clear_cache()
    start = time.perf_counter()
    plan = compactor.plan(SESSION)  # first call in a process: reads the history once (imported compaction)
    first_plan_ms = (time.perf_counter() - start) * 1000
    compacted = compact()
    store.set_leaf(SESSION, leaf)
    status = service.status()
    agent = Agent(
        store=store,
        session=SESSION,
        client=client,
        model="bench",
        context_window=WINDOW,
        # its own: the agent attaches its token learner (count_correction) to the compactor it is
        # given, and a plan with a learner is neither remembered nor what %compact preview runs
        compactor=Compactor(store, None, settings),
        kernel=None,
        settings=settings,
    )  # type: ignore[arg-type]
    ops: dict[str, Callable[[], object]] = {
        "compactor_plan": lambda: compactor.plan(SESSION),
        "compactor_compact": compact,
        "service_status": service.status,
        "agent_threshold_check": agent.scheduler.before_request,
    }
    result: dict[str, Any] = {
        "compactor_plan_first_call_ms": round(first_plan_ms, 3),
        "plan_summarize_entries": plan.summarize.entries,
        "plan_keep_entries": plan.keep.entries,
        "compaction_tokens_after": compacted.tokens_after,  # type: ignore[attr-defined]
        "status_entries": status["entries"],
        "status_compactions": status["compactions"],
        "status_tokens": status["tokens"],
    }
    result["ms"], result["min_ms"] = timings(ops, rounds)
    store.set_leaf(SESSION, leaf)
    service.close()
    store.close()
    return result


def measure_pi(pi_file: Path, settings: CompactionSettings, rounds: int) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        return {"skipped": "node is not installed"}
    if not PI_PACKAGE.exists():
        return {"skipped": f"{PI_PACKAGE} missing: run npm ci in tests/pi_reference"}
    done = subprocess.run(
        [
            node,
            "--max-old-space-size=8192",
            str(PI_SCRIPT),
            str(pi_file),
            str(rounds),
            str(settings.keep_recent_tokens),
            str(settings.reserve_tokens),
            str(WINDOW),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        return {"skipped": f"pi bench failed: {done.stderr.strip()[-500:]}"}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def plan_vs_pi(user_ops: dict[str, Any], pi: dict[str, Any]) -> dict[str, Any]:
    """``Compactor.plan`` (what ``%compact preview`` runs) beside pi's ``prepareCompaction``, side by
    side from this run: the first call in a fresh process (ours reads the store with an empty entry
    cache and nothing remembered; pi's runs on the session it already parsed, JIT cold; pi's load
    of the file is given apart) and the warm median of repeated calls. ``pi_over_ours`` above 1
    means ours is faster."""
    ours_first = user_ops["compactor_plan_first_call_ms"]
    ours_warm = user_ops["ms"]["compactor_plan"]
    pi_first = pi.get("first_ms", {}).get("plan")
    pi_warm = pi["ms"]["plan"]
    pi_load = pi.get("load_ms")
    return {
        "first_call": {
            "ours_ms": ours_first,
            "pi_ms": pi_first,
            "pi_over_ours": ratio(pi_first, ours_first),
            "pi_with_file_load_ms": None
            if pi_first is None or pi_load is None
            else round(pi_load + pi_first, 3),
            "pi_with_file_load_over_ours": None
            if pi_first is None or pi_load is None
            else ratio(pi_load + pi_first, ours_first),
            "faster_than_pi": pi_first is not None and ours_first < pi_first,
        },
        "warm": {
            "ours_ms": ours_warm,
            "pi_ms": pi_warm,
            "pi_over_ours": ratio(pi_warm, ours_warm),
            "faster_than_pi": ours_warm < pi_warm,
        },
    }


def ratio(theirs: float | None, ours: float) -> float | None:
    if theirs is None or ours <= 0:
        return None
    return round(theirs / ours, 2)


def run(
    sizes: list[int], rounds: int, with_pi: bool, fixture: Path, keep_compactions: bool
) -> dict[str, Any]:
    transcript = load_transcript(fixture)
    template = transcript.path() if keep_compactions else without_compactions(transcript.path())
    settings = CompactionSettings(estimator=ESTIMATOR)
    results: list[dict[str, Any]] = []
    workdir = Path(tempfile.mkdtemp(prefix="ipython-compact-bench-"))
    try:
        for size in sizes:
            copies = max(1, round(size / len(template)))
            entries = replicate(template, copies)
            data_dir = workdir / f"data-{size}"
            data_dir.mkdir(mode=0o700)
            os.environ["IPYTHON_COMPACT_DIR"] = str(data_dir)
            db = data_dir / "sessions.db"  # paths.database_path(): the kernel service opens it itself
            append = build_store(db, entries)
            ours = measure_ours(db, entries, settings, rounds)
            row: dict[str, Any] = {
                "target_entries": size,
                "entries": len(entries),
                "copies_of_fixture": copies,
                "db_megabytes": round(sum(p.stat().st_size for p in data_dir.glob("sessions.db*")) / 1e6, 1),
                "append": append,
                **ours,
            }
            if with_pi:
                pi_file = workdir / f"bench-{size}.jsonl"
                write_pi_file(entries, transcript.header, pi_file)
                pi = measure_pi(pi_file, settings, rounds)
                pi_file.unlink()
                row["pi"] = pi
                pi_ms = pi.get("ms", {})
                row["pi_over_ours"] = {
                    f"{op}_{where}": ratio(pi_ms.get(op), row[f"{where}_ms"][op])
                    for op in ("threshold_check", "plan", "context_view")
                    for where in ("store", "store_cold", "memory")
                }
                row["same_decision_as_pi"] = {
                    "context_tokens": pi.get("context_tokens") == row["context_tokens"],
                    "first_kept_entry_id": pi.get("first_kept_entry_id") == row["first_kept_entry_id"],
                    "messages_to_summarize": pi.get("messages_to_summarize") == row["messages_to_summarize"],
                }
            row["user_ops"] = measure_user_ops(db, settings, rounds)
            if with_pi and "ms" in row["pi"]:
                row["plan_vs_pi"] = plan_vs_pi(row["user_ops"], row["pi"])
            shutil.rmtree(data_dir, ignore_errors=True)
            row["load_average_1min"] = round(os.getloadavg()[0], 2)
            results.append(row)
            print(f"measured {len(entries)} entries", file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "benchmark": "engine",
        "fixture": str(fixture.relative_to(ROOT)) if fixture.is_relative_to(ROOT) else str(fixture),
        "compactions": "kept" if keep_compactions else "dropped (never-compacted session)",
        "estimator": ESTIMATOR,
        "settings": {
            "keep_recent_tokens": settings.keep_recent_tokens,
            "reserve_tokens": settings.reserve_tokens,
            "window": WINDOW,
        },
        "rounds": rounds,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "sizes": results,
        "goals": goals(results),
    }


def goals(results: list[dict[str, Any]]) -> dict[str, Any]:
    if len(results) < 2:
        return {}
    small, large = results[0], results[-1]
    growth = large["store_ms"]["context_view"] / max(small["store_ms"]["context_view"], 1e-9)
    cold_growth = large["store_cold_ms"]["context_view"] / max(small["store_cold_ms"]["context_view"], 1e-9)
    cold_growth_min = large["store_cold_min_ms"]["context_view"] / max(
        small["store_cold_min_ms"]["context_view"], 1e-9
    )
    out: dict[str, Any] = {
        "context_view_growth_largest_over_smallest": round(growth, 2),
        "context_view_within_2x": growth <= 2.0,
        "context_view_cold_growth_largest_over_smallest": round(cold_growth, 2),
        "context_view_cold_within_2x": cold_growth <= 2.0,
        "context_view_cold_growth_by_minimum": round(cold_growth_min, 2),
        "plan_largest_ms": large["store_ms"]["plan"],
        "plan_under_50ms": large["store_ms"]["plan"] < 50.0,
        "plan_cold_largest_ms": large["store_cold_ms"]["plan"],
        "plan_cold_under_50ms": large["store_cold_ms"]["plan"] < 50.0,
    }
    for op in USER_OPS:
        by_median = large["user_ops"]["ms"][op] / max(small["user_ops"]["ms"][op], 1e-9)
        by_minimum = large["user_ops"]["min_ms"][op] / max(small["user_ops"]["min_ms"][op], 1e-9)
        out[f"{op}_growth_largest_over_smallest"] = round(by_median, 2)
        out[f"{op}_growth_by_minimum"] = round(by_minimum, 2)
        out[f"{op}_within_2x"] = by_median <= 2.0
    versus = {r["entries"]: r["plan_vs_pi"] for r in results if "plan_vs_pi" in r}
    if versus:
        out["plan_first_call_faster_than_pi_at"] = {
            n: v["first_call"]["faster_than_pi"] for n, v in versus.items()
        }
        out["plan_warm_faster_than_pi_at"] = {n: v["warm"]["faster_than_pi"] for n, v in versus.items()}
    ratios = large.get("pi_over_ours")
    if ratios:
        out["threshold_check_not_slower_than_pi_at_largest"] = (ratios["threshold_check_store"] or 0) >= 1.0
        out["plan_not_slower_than_pi_at_largest"] = (ratios["plan_store"] or 0) >= 1.0
        out["cold_threshold_check_not_slower_than_pi_at_largest"] = (
            ratios["threshold_check_store_cold"] or 0
        ) >= 1.0
        out["cold_plan_not_slower_than_pi_at_largest"] = (ratios["plan_store_cold"] or 0) >= 1.0
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated entry counts")
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds per operation (median reported)")
    parser.add_argument("--no-pi", action="store_true", help="skip pi's reference implementation")
    parser.add_argument("--fixture", type=Path, default=FIXTURE, help="pi session file to replicate")
    parser.add_argument(
        "--keep-compactions",
        action="store_true",
        help="keep the fixture's compactions in every copy (equal context at every size)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    report = run(sizes, args.rounds, not args.no_pi, args.fixture.resolve(), args.keep_compactions)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
