"""Load benchmark: many agent processes posing as several hosts share one session log.

Why (issue 23 item 4): an agent fleet on several machines writes one PostgreSQL log. Under load,
with processes killed in the middle, nothing acknowledged may be lost, nothing duplicated, the hash
chains must verify, of two compactions planned on one leaf only one may land, and the compactions
a killed process left in flight must be settled by the survivors (on PostgreSQL through advisory
locks, since a pid means nothing on another host). The same run on SQLite with one host is the
baseline for throughput and latency.

Each agent is a process (``--worker``) that poses as host ``bench-host-H`` (``process.host_id``)
and works on a session it shares with another agent on another host, until the deadline: a turn
appends a user and an assistant message (one ``append_many``, acknowledged to a local file after
it returns); every 6th turn it compacts (``live_begin``, an ``append`` of a compaction with
``expect_leaf`` — the compare and swap — and ``live_end``; losing the race is counted, not an
error); every 4th turn it recalls (``search`` for a word of an earlier turn). Halfway through,
every 8th turn (``--snapshot-every``) it snapshots a small namespace (a signed generation: on PostgreSQL to
an S3 bucket on moto's server, started here, with the writer lock in the log; on SQLite to a local
folder), acknowledged with its generation number. Halfway through,
``--kills`` agents are killed with SIGKILL inside a compaction (after ``live_begin``, as if the
summarizer call hung), leaving work in flight that the survivors must settle. Afterwards every
session's live status is read (settling orphans), then each session is checked: every
acknowledged entry is in the log, no turn is stored twice, ``verify`` passes; no two acknowledged
snapshots of a session share a generation, and the session's newest generation restores (from the
checking process, another "host") to exactly what its writer acknowledged.

The PostgreSQL server is started by the benchmark (``tests/postgres_server.py``: initdb in a
temporary folder, a unix socket, fsync off — the same for both engines' durability is not what is
measured; SQLite runs with its defaults, WAL, synchronous=NORMAL).

Usage: python bench/bench_store_hosts.py [--agents 16] [--hosts 4] [--duration 20] [--kills 4]
       [--engines postgresql,sqlite] [--snapshot-every 8]
Prints one JSON document; ``--duration`` is per engine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # postgres_server, s3_server: the tests' own starters


class LogDigests:
    """The snapshot ledger in the session log (as the kernel's ``LogLedger``, without its journal):
    ``record`` runs under the snapshot writer lock, so its read-modify-write is not raced."""

    KEY = "snapshot_digests"

    def __init__(self, store: Any, session: str) -> None:
        self.store, self.session = store, session

    def record(self, generation: int, digest: str) -> None:
        known = dict(self.store.status_get(self.session, self.KEY, {}) or {})
        known[str(generation)] = digest
        self.store.status_set(self.session, self.KEY, known)

    def recorded(self) -> dict[int, str]:
        return {int(g): str(d) for g, d in (self.store.status_get(self.session, self.KEY, {}) or {}).items()}


def snapshots_for(location: str, snapshots: str, session: str, store: Any) -> Any:
    """One session's snapshot store: a bucket URL (writer lock in the log) or a local folder."""
    from ipython_compact.namespace.snapshot import SnapshotStore
    from ipython_compact.store.writer_locks import writer_locks

    key = bytes.fromhex(os.environ["BENCH_SNAPSHOT_KEY"])
    ledger = LogDigests(store, session)
    if "://" in snapshots:
        where = snapshots.format(session=session)
        return SnapshotStore(where, key, session=session, locks=writer_locks(location), ledger=ledger)
    return SnapshotStore(Path(snapshots) / session, key, session=session, ledger=ledger)


def worker(location: str, snapshots: str, host: str, session: str, agent: str, ack_path: str) -> None:
    """One agent: turns, compactions, recalls and snapshots until ``deadline`` (module text)."""
    from ipython_compact.store import process

    process.host_id = lambda: host  # type: ignore[assignment]  # posing as another machine
    from ipython_compact.store import LeafMovedError, SessionStore

    store = SessionStore(location, busy_timeout=60)
    store.ensure_session(session)
    snaps = snapshots_for(location, snapshots, session, store)
    print("ready", flush=True)
    deadline = float(sys.stdin.readline())  # sent when every agent is ready
    lat: dict[str, list[float]] = {"append": [], "compact": [], "recall": [], "snapshot": []}
    counts = {"turns": 0, "compactions": 0, "races_lost": 0, "recalls": 0, "recall_hits": 0, "snapshots": 0}
    with open(ack_path, "a", encoding="utf-8") as ack:
        turn = 0
        while time.time() < deadline:
            t0 = time.perf_counter()
            made = store.append_many(
                session,
                [
                    (
                        "message",
                        {
                            "message": {
                                "role": "user",
                                "content": f"{agent} turn {turn} asks about kiwi{turn}",
                            }
                        },
                    ),
                    (
                        "message",
                        {
                            "message": {
                                "role": "assistant",
                                "content": [{"type": "text", "text": f"{agent} answer {turn} " * 8}],
                            }
                        },
                    ),
                ],
            )
            lat["append"].append(time.perf_counter() - t0)
            ack.write(json.dumps({"ids": [e.id for e in made], "turn": turn}) + "\n")
            ack.flush()
            counts["turns"] += 1
            if turn % 6 == 5:
                t0 = time.perf_counter()
                task = f"{agent}-{turn}"
                store.live_begin(session, task, reason="threshold", blocking=False)
                if os.path.exists(ack_path + ".hold"):  # the summarizer call hangs: this agent is killed now
                    Path(ack_path + ".held").touch()
                    time.sleep(3600)
                leaf = store.leaf(session)  # planned against this leaf; the other agent may append meanwhile
                tail = store.path_tail(session, 4)
                try:
                    store.append(
                        session,
                        "compaction",
                        {"summary": f"{agent} summary {turn}", "first_kept_entry_id": tail[0].id},
                        expect_leaf=leaf,
                    )
                    counts["compactions"] += 1
                except LeafMovedError:
                    counts["races_lost"] += 1
                store.live_end(session, task)
                lat["compact"].append(time.perf_counter() - t0)
            if turn % 4 == 3:
                t0 = time.perf_counter()
                hits = store.search(f"kiwi{turn - 2}", session=session, limit=5)
                lat["recall"].append(time.perf_counter() - t0)
                counts["recalls"] += 1
                counts["recall_hits"] += bool(hits)
            if turn % SNAPSHOT_EVERY == SNAPSHOT_EVERY - 1:
                t0 = time.perf_counter()
                payload = {"agent": agent, "turn": turn}
                report = snaps.save([("state", payload), ("blob", os.urandom(16384))])
                lat["snapshot"].append(time.perf_counter() - t0)
                counts["snapshots"] += 1
                ack.write(json.dumps({"snapshot": report.generation, **payload}) + "\n")
                ack.flush()
            turn += 1
    store.close()
    print(json.dumps({"latency": lat, **counts}), flush=True)


SNAPSHOT_EVERY = int(os.environ.get("BENCH_SNAPSHOT_EVERY", "8"))  # set from --snapshot-every


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


def run(
    engine: str,
    location: str,
    snapshots: str,
    agents: int,
    hosts: int,
    duration: float,
    kills: int,
    folder: Path,
) -> dict[str, Any]:
    from ipython_compact.store import SessionStore

    pairs = max(1, agents // 2)
    procs = []
    for i in range(agents):
        # Agents i and i+pairs share a session, on different hosts when hosts > 1: a killed agent's
        # compaction is settled by a process on another host (PostgreSQL: through its advisory lock).
        host = f"bench-host-{(i + i // pairs) % hosts}"
        session = f"pair-{i % pairs}"
        ack = folder / f"{engine}-{i}.ack"
        procs.append(
            (
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        location,
                        snapshots,
                        host,
                        session,
                        f"a{i}",
                        str(ack),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
                session,
                ack,
            )
        )
    for p, _, _ in procs:  # the clock starts when every agent has opened the log
        assert p.stdout is not None and p.stdout.readline().strip() == "ready", p.stderr and p.stderr.read()
    deadline = time.time() + duration
    for p, _, _ in procs:
        assert p.stdin is not None
        p.stdin.write(f"{deadline}\n")
        p.stdin.flush()
    time.sleep(duration / 2)  # the load runs for a fixed time by design; kills land in its middle
    # One agent of a pair at most, so every shared session keeps a writer that settles orphans.
    victims = [procs[i][0] for i in range(0, pairs, max(1, pairs // max(1, kills)))][:kills]
    # Each victim is killed inside a compaction (after live_begin, as if its summarizer hung), the
    # case that leaves work in flight for the survivors to settle.
    for i in range(0, pairs, max(1, pairs // max(1, kills))):
        if procs[i][0] in victims:
            Path(str(procs[i][2]) + ".hold").touch()
    for i in range(0, pairs, max(1, pairs // max(1, kills))):
        proc, _, ack = procs[i]
        if proc in victims:
            while not Path(str(ack) + ".held").exists() and proc.poll() is None:
                time.sleep(0.01)  # its next compaction is at most six turns away
            os.kill(proc.pid, signal.SIGKILL)
    lat: dict[str, list[float]] = {"append": [], "compact": [], "recall": [], "snapshot": []}
    totals = {"turns": 0, "compactions": 0, "races_lost": 0, "recalls": 0, "recall_hits": 0, "snapshots": 0}
    failures = []
    for p, _, _ in procs:
        out, err = p.communicate(timeout=duration + 300)
        if p in victims:
            continue
        if p.returncode != 0:
            failures.append(err[-500:])
            continue
        doc = json.loads(out.strip().splitlines()[-1])
        for k in lat:
            lat[k] += doc["latency"][k]
        for k in totals:
            totals[k] += doc[k]
    # Check: nothing acknowledged lost, no turn stored twice, chains verify, orphans settled.
    lost = duplicated = 0
    settled = 0
    with SessionStore(location, busy_timeout=60) as store:
        acked: dict[str, set[str]] = {}
        snaps_acked: dict[str, list[dict[str, Any]]] = {}
        for _, session, ack in procs:
            ids = acked.setdefault(session, set())
            saved = snaps_acked.setdefault(session, [])
            if ack.exists():
                for line in ack.read_text().splitlines():
                    # a line cut by the kill: that append may or may not have landed
                    with contextlib.suppress(ValueError):
                        record = json.loads(line)
                        if "snapshot" in record:
                            saved.append(record)
                        else:
                            ids.update(record["ids"])
        snapshot_clashes = snapshot_mismatches = 0
        for session, saved in snaps_acked.items():
            generations = [r["snapshot"] for r in saved]
            snapshot_clashes += len(generations) - len(set(generations))
            if not saved:
                continue
            newest = max(saved, key=lambda r: r["snapshot"])
            values, restored = snapshots_for(location, snapshots, session, store).load()
            state = values.get("state")
            snapshot_mismatches += restored.generation != newest["snapshot"] or state != {
                "agent": newest["agent"],
                "turn": newest["turn"],
            }
        entries_total = compactions_total = 0
        for session, ids in acked.items():
            store.live_status(session)  # settles compactions whose owner was killed (if no agent did yet)
            settled += sum(
                "abandoned" in str(e.data.get("error"))
                for e in store.entries(session, kinds=("compaction_outcome",))
            )
            entries = store.entries(session)
            stored = {e.id for e in entries}
            lost += len(ids - stored)
            turns = [
                e.data["message"]["content"]
                for e in entries
                if e.kind == "message" and e.data["message"]["role"] == "user"
            ]
            duplicated += len(turns) - len(set(turns)) + (len(entries) - len(stored))
            entries_total += len(entries)
            compactions_total += sum(e.kind == "compaction" for e in entries)
            assert store.entry_count(session) == len(entries)
        report = store.verify()
        in_flight = sum(len(store.live_status(s).in_flight) for s in acked)
    return {
        "engine": engine,
        "agents": agents,
        "hosts": hosts,
        "duration_s": duration,
        "killed": len(victims),
        "entries_written": entries_total,
        "turns": totals["turns"],
        "compactions_landed": compactions_total,
        "compaction_races_lost": totals["races_lost"],
        "recalls": totals["recalls"],
        "recall_hit_rate": round(totals["recall_hits"] / totals["recalls"], 3) if totals["recalls"] else None,
        "throughput_entries_per_s": round(entries_total / duration, 1),
        "append_ms": {"p50": _pct(lat["append"], 0.5), "p99": _pct(lat["append"], 0.99)},
        "compact_ms": {"p50": _pct(lat["compact"], 0.5), "p99": _pct(lat["compact"], 0.99)},
        "recall_ms": {"p50": _pct(lat["recall"], 0.5), "p99": _pct(lat["recall"], 0.99)},
        "snapshots": totals["snapshots"],
        "snapshot_ms": {"p50": _pct(lat["snapshot"], 0.5), "p99": _pct(lat["snapshot"], 0.99)},
        "snapshot_generation_clashes": snapshot_clashes,
        "snapshot_restore_mismatches": snapshot_mismatches,
        "lost": lost,
        "duplicated": duplicated,
        "verify_ok": report.ok,
        "orphans_settled": settled,
        "left_in_flight": in_flight,
        "worker_failures": failures,
    }


@contextlib.contextmanager
def _buckets(sessions: int) -> Iterator[str]:
    """S3 buckets on moto's standalone server on 127.0.0.1 (the tests' starter), for the agents'
    snapshots on PostgreSQL; the agents reach it through the ``AWS_*`` variables they inherit.

    One bucket per session, not one for all: moto answers a listing by walking every key of the
    bucket (and in one Python process), so with one shared bucket the benchmark measured moto's
    listing, not the snapshots (p50 12.9 s per save at 64 agents). A real bucket lists by prefix.
    Yields a location template with ``{session}``."""
    import boto3
    from s3_server import Server

    server = Server()
    try:
        os.environ.update(server.env())
        client = boto3.client("s3", endpoint_url=server.endpoint)
        for i in range(sessions):
            client.create_bucket(Bucket=f"bench-pair-{i}")
        yield "s3://bench-{session}/snapshots"
    finally:
        server.stop()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        location, snapshots, host, session, agent, ack = sys.argv[2:8]
        worker(location, snapshots, host, session, agent, ack)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per engine (default 20)")
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--engines", default="postgresql,sqlite")
    parser.add_argument(
        "--snapshot-every", type=int, default=8, help="turns between two snapshots (default 8)"
    )
    args = parser.parse_args()
    results = []
    os.environ.setdefault("BENCH_SNAPSHOT_KEY", os.urandom(32).hex())
    os.environ["BENCH_SNAPSHOT_EVERY"] = str(max(1, args.snapshot_every))  # the agents read it
    with (
        tempfile.TemporaryDirectory(prefix="bench-hosts-") as tmp,
        _buckets(max(1, args.agents // 2)) as bucket,
    ):
        folder = Path(tmp)
        for engine in args.engines.split(","):
            if engine == "postgresql":
                from postgres_server import Server, bin_dir

                if bin_dir() is None:
                    print(
                        "postgresql: skipped (install the postgresql package: make system-deps)",
                        file=sys.stderr,
                    )
                    continue
                server = Server(max_connections=args.agents * 7 + 20)
                try:
                    url = server.url()
                    results.append(
                        run(engine, url, bucket, args.agents, args.hosts, args.duration, args.kills, folder)
                    )
                finally:
                    server.stop()
            else:
                results.append(
                    run(
                        engine,
                        str(folder / "sessions.db"),
                        str(folder / "snapshots"),
                        args.agents,
                        1,
                        args.duration,
                        args.kills,
                        folder,
                    )
                )
            print(json.dumps(results[-1]), file=sys.stderr)
    if len(results) == 2 and all(r["throughput_entries_per_s"] for r in results):
        ratio = results[0]["throughput_entries_per_s"] / results[1]["throughput_entries_per_s"]
        print(f"throughput {results[0]['engine']}/{results[1]['engine']}: {ratio:.2f}", file=sys.stderr)
    print(
        json.dumps(
            {
                "runs": results,
                "median_append_p99_ms": statistics.median(
                    [r["append_ms"]["p99"] for r in results if r["append_ms"]["p99"] is not None] or [0]
                ),
            },
            indent=2,
        )
    )
    bad = [
        r
        for r in results
        if r["lost"]
        or r["duplicated"]
        or not r["verify_ok"]
        or r["left_in_flight"]
        or r["snapshot_generation_clashes"]
        or r["snapshot_restore_mismatches"]
    ]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
