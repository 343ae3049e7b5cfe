"""Snapshot benchmark: 400 MB of numpy arrays + 1,000 small objects + a few unpicklable values.

Compares, side by side (median of repeats, seconds):
- ours, full snapshot (per-name payloads, signed, atomic), with and without fsync;
- ``pickle.dump`` protocol 5 of the picklable part into one file (the floor), with and without fsync;
- ``dill.dump_module`` of the namespace (fails on the first unpicklable value), and of the
  picklable part only;
- ours, incremental with nothing changed, and with one array changed in place;
- restore (verify + load every name).

Goals (issue 4): full ≤ 1.3× protocol-5 pickle; nothing-changed < 5 % of full; every picklable
name restored. Prints one JSON object.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import socket
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dill
import numpy as np

from ipython_compact.kernel.snapshot import SnapshotStore

ARRAYS = 8
ARRAY_MB = 50
SMALL = 1000
REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))


def namespace() -> tuple[dict[str, Any], list[str], Any]:
    rng = np.random.default_rng(0)
    ns: dict[str, Any] = {}
    for i in range(ARRAYS):
        ns[f"array_{i}"] = rng.random(ARRAY_MB * (1 << 20) // 8)
    for i in range(SMALL):
        kind = i % 4
        if kind == 0:
            ns[f"small_{i}"] = {"id": i, "name": f"item {i}", "tags": ["a", "b"], "score": i * 0.5}
        elif kind == 1:
            ns[f"small_{i}"] = [i, i + 1, f"text {i}"]
        elif kind == 2:
            ns[f"small_{i}"] = f"a string value number {i}" * 3
        else:
            ns[f"small_{i}"] = (i, float(i), None)
    sock = socket.socket()
    ns["bad_generator"] = (x for x in range(3))
    ns["bad_socket"] = sock
    ns["bad_file"] = open(os.devnull)  # noqa: SIM115 - kept open on purpose
    unpicklable = ["bad_generator", "bad_socket", "bad_file"]
    return ns, unpicklable, sock


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def median_of(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        t, out = timed(fn)
        times.append(t)
    return statistics.median(times), out


def measure(root: Path, ns: dict[str, Any], unpicklable: list[str], durable: bool) -> dict[str, Any]:
    """All figures in one directory; ``durable`` adds fsync to ours and to the pickle baseline alike."""
    picklable = {k: v for k, v in ns.items() if k not in unpicklable}
    key = os.urandom(32)
    results: dict[str, Any] = {"dir": str(root), "fsync": durable}

    def pickle5() -> None:
        path = root / "pickle5.pkl"
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        with open(path, "wb") as f:
            pickle.dump(picklable, f, protocol=5)
            if durable:
                f.flush()
                os.fsync(f.fileno())

    results["pickle5_s"], _ = median_of(pickle5)
    results["pickle5_load_s"], _ = median_of(lambda: pickle.loads((root / "pickle5.pkl").read_bytes()))

    module = types.ModuleType("__bench__")
    module.__dict__.update(ns)
    try:
        t, _ = timed(lambda: dill.dump_module(str(root / "module.pkl"), module=module))
        results["dill_dump_module"] = {"ok": True, "seconds": round(t, 4)}
    except Exception as exc:
        results["dill_dump_module"] = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:120]}"}
    clean = types.ModuleType("__bench_clean__")
    clean.__dict__.update(picklable)
    results["dill_dump_module_picklable_part_s"], _ = median_of(
        lambda: dill.dump_module(str(root / "clean.pkl"), module=clean), repeats=1)
    for leftover in ("module.pkl", "clean.pkl"):
        with contextlib.suppress(FileNotFoundError):
            (root / leftover).unlink()

    items = list(ns.items())
    fulls: list[float] = []
    report: Any = None
    for i in range(REPEATS):
        target = root / f"ours-full-{i}"
        t, report = timed(lambda target=target: SnapshotStore(target, key, durable=durable).save(items))  # type: ignore[misc]
        fulls.append(t)
        shutil.rmtree(target)
    results["ours_full_s"] = statistics.median(fulls)
    results["ours_full_skipped"] = [s.to_json() for s in report.skipped]

    store = SnapshotStore(root / "incremental", key, durable=durable)
    store.save(items)
    results["ours_nothing_changed_s"], inc = median_of(lambda: store.save(items))
    results["ours_nothing_changed_written_bytes"] = inc.written_bytes
    ns["array_0"] *= 1.0001  # in place: same identity, new content
    results["ours_one_array_changed_s"], one = median_of(lambda: store.save(list(ns.items())), repeats=1)
    results["ours_one_array_changed_written_mb"] = round(one.written_bytes / 1e6, 1)
    picklable["array_0"] = ns["array_0"]

    results["ours_restore_s"], loaded = median_of(lambda: store.load())
    values, _ = loaded
    missing = sorted(set(picklable) - set(values))
    equal = all(np.array_equal(values[k], picklable[k]) if isinstance(picklable[k], np.ndarray)
                else values[k] == picklable[k] for k in picklable if k in values)
    results["restored_every_picklable_name"] = not missing and equal
    results["restore_missing"] = missing
    results["ratio_full_vs_pickle5"] = round(results["ours_full_s"] / results["pickle5_s"], 3)
    results["ratio_nothing_changed_vs_full"] = round(results["ours_nothing_changed_s"] / results["ours_full_s"], 4)
    results["goals"] = {
        "full_within_1.3x_pickle5": results["ratio_full_vs_pickle5"] <= 1.3,
        "nothing_changed_under_5pct_of_full": results["ratio_nothing_changed_vs_full"] < 0.05,
        "every_picklable_name_restored": results["restored_every_picklable_name"],
    }
    for k, v in list(results.items()):
        if isinstance(v, float):
            results[k] = round(v, 4)
    return results


def main() -> None:
    ns, unpicklable, sock = namespace()
    array_bytes = sum(v.nbytes for v in ns.values() if isinstance(v, np.ndarray))
    out: dict[str, Any] = {"arrays_mb": round(array_bytes / 1e6, 1), "small_objects": SMALL,
                           "unpicklable": unpicklable, "repeats": REPEATS, "python": sys.version.split()[0]}
    places = []
    if Path("/dev/shm").is_dir():
        places.append(("memory_tmpfs", Path("/dev/shm"), False))
    places.append(("disk_fsync", Path(os.environ.get("BENCH_DIR", tempfile.gettempdir())), True))
    for label, base, durable in places:
        root = Path(tempfile.mkdtemp(prefix="bench-snapshot-", dir=base))
        try:
            out[label] = measure(root, ns, unpicklable, durable)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    ns["bad_file"].close()
    sock.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
