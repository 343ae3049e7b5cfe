"""Importing a never-compacted pi session against pi's own read of it (issue 21, item 4).

A pi v3 session of ``--entries`` entries is written by replicating a pi fixture with fresh ids
(as ``bench_engine.py`` does). Round by round, back to back (so load on a shared machine hits
both alike): pi reads it (``bench/pi_load_bench.mjs``: read, parse, migrate, in one Node
process per round, so both sides pay their start-up) and ``ipython-compact import FILE`` stores
it into a fresh database (the console command, in a fresh interpreter). Goal: ours at least as
fast as pi (``pi_over_ours`` >= 1). Also timed: our read alone (``load_transcript`` in a fresh
interpreter: parse, check, migrate, store nothing), the same work as pi's read
(``pi_over_ours_read``); the import's remainder is what storing costs (rows, hash chain, token
estimates).

Before timing, the package the console command imports is byte-compiled (``compileall``), as
an installed copy is: with ``PYTHONDONTWRITEBYTECODE`` set (this machine sets it) an editable
checkout would otherwise compile every module from source in every round (~90 ms).

Usage: python bench/bench_import.py [--entries 100000] [--rounds 3]   (prints one JSON document; seconds)
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_engine import FIXTURE, PI_PACKAGE, replicate, without_compactions, write_pi_file  # noqa: E402

from ipython_compact.store.importers import load_transcript  # noqa: E402

PI_SCRIPT = ROOT / "bench" / "pi_load_bench.mjs"
CLI = Path(sys.executable).parent / "ipython-compact"


def pi_read(node: str, path: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [node, "--max-old-space-size=8192", str(PI_SCRIPT), str(path), "1"],
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = time.perf_counter() - start
    json.loads(done.stdout)
    return elapsed


def our_import(path: Path, db: Path) -> float:
    db.unlink(missing_ok=True)
    for extra in ("-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)
    start = time.perf_counter()
    subprocess.run(
        [str(CLI), "import", str(path), "--session", "bench", "--db", str(db)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def our_read(path: Path) -> float:
    """The part of the import that is pi's read: parse, check and migrate the file into entries
    (``load_transcript``), in a fresh interpreter like the console command; nothing is stored."""
    code = (  # and ends the way the console command does (``cli.console``: no teardown)
        "import os, sys; from ipython_compact.store.importers import load_transcript; "
        "load_transcript(sys.argv[1]); os._exit(0)"
    )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-P", "-c", code, str(path)], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def compile_package() -> None:
    """Byte-compile the ``ipython_compact`` the console command will import (same interpreter,
    same environment, so a ``PYTHONPATH`` pointing at another checkout is honoured)."""
    code = (
        "import compileall, os, ipython_compact; "
        "compileall.compile_dir(os.path.dirname(ipython_compact.__file__), quiet=1)"
    )
    subprocess.run([sys.executable, "-P", "-c", code], check=True, stdout=subprocess.DEVNULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    node = shutil.which("node")
    if node is None or not PI_PACKAGE.exists():
        print(json.dumps({"skipped": "node or tests/pi_reference missing (make pi-reference)"}))
        return 0
    compile_package()
    transcript = load_transcript(FIXTURE)
    template = without_compactions(transcript.path())  # never compacted, as the name says
    entries = replicate(template, -(-args.entries // len(template)))[: args.entries]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session.jsonl"
        write_pi_file(entries, transcript.header, path)
        db = Path(tmp) / "sessions.db"
        theirs: list[float] = []
        ours: list[float] = []
        reads: list[float] = []
        for _ in range(args.rounds):
            theirs.append(pi_read(node, path))
            ours.append(our_import(path, db))
            reads.append(our_read(path))
        out = {
            "entries": len(entries),
            "file_mb": round(path.stat().st_size / 1e6, 1),
            "rounds": args.rounds,
            "pi_read_s": round(statistics.median(theirs), 3),
            "ours_import_s": round(statistics.median(ours), 3),
            "pi_over_ours": round(statistics.median(t / o for t, o in zip(theirs, ours, strict=True)), 3),
            "ours_read_s": round(statistics.median(reads), 3),
            "pi_over_ours_read": round(
                statistics.median(t / r for t, r in zip(theirs, reads, strict=True)), 3
            ),
        }
    out["goal_at_least_as_fast_as_pi"] = out["pi_over_ours"] >= 1.0
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
