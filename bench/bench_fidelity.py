"""Fidelity benchmark: do planted facts survive 50 rolling compactions, and does the checkpoint stay bounded?

A generated kernel-agent transcript (``ipython_compact.cli.demo_transcript``) plants facts of each
class — the goal, user constraints, pinned text and a pinned entry, file paths, versions, error
messages, ids/issue refs, kernel variable names, commit hashes — and is rolled through N
compactions with the offline summarizer on a real SQLite log. After every compaction we build the
model's context view (summary + kept tail) and check, verbatim, which facts planted so far are
still in it, and how large the checkpoint is.

Arms, same transcript, same summarizer:
- ``guarded``: the full pipeline (anchor layer + drift guard + ledger).
- ``naive``: the same summarizer rolling its own previous summary, without the anchor layer and
  without the drift guard (ledger still on, as in the issue's definition).
- ``bare``: naive and also without the ledger: a plain rolling summary.
- ``drifting_guarded`` / ``drifting_naive``: the offline summarizer followed by the paraphrases a
  model makes (``CUDA 12.4`` → ``CUDA 12.x``, a path → its file name, an error message → its type),
  re-applied at every compaction to its own previous output — the seed's drift example, measured.

"Tracked identifiers" are the guard's working set (bounded: at most ``drift.MAX_TRACKED`` strings /
``MAX_TRACKED_CHARS`` characters, least relevant evicted first); "recent identifiers" are those
planted in the last ``--recent-window`` compactions' turns (the ones a continuing agent is most
likely to need); "planted identifiers" are every identifier ever planted, including ones old enough
to have left the working set (those remain recallable from the log by id or full-text search,
which is also measured).

Size trend: the least-squares slope of the checkpoint size (tokens) over the second half of the
run, and the compaction from which every later size stays within 10% of the second-half mean
("steady from"). Each arm's summary says which goal it meets; ``goals`` repeats the guarded arm's,
and ``table`` puts the arms side by side.

Prints one JSON object. Usage: ``.venv/bin/python bench/bench_fidelity.py [--compactions 50]``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ipython_compact.cli.demo_transcript import TranscriptGenerator
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.context import build_context
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.tokens import estimate_message_tokens
from ipython_compact.store import SessionStore
from ipython_compact.summarizers import OfflineSummarizer, SummaryInput, SummaryResult

PIN_TEXTS = (
    "Deadline: the model card goes to legal on 2026-12-11.",
    "The on-call contact for the GPU pool is ext. 4471.",
)
ANCHOR_CLASSES = ("goal", "constraint", "pin")


class DriftingSummarizer:
    """The offline checkpoint, then paraphrased the way a model drifts (deterministic)."""

    name = "drifting"

    def __init__(self) -> None:
        self.inner = OfflineSummarizer()

    def summarize(self, request: SummaryInput) -> SummaryResult:
        text = self.inner.summarize(request).text
        text = re.sub(r"\b(\d+)\.\d+(?:\.\d+)*\b", r"\1.x", text)  # versions lose precision
        text = re.sub(r"(?:~|\.{1,2})?/?(?:[\w.-]+/)+([\w.-]+)", r"\1", text)  # paths lose directories
        text = re.sub(r"\b([A-Z]\w*(?:Error|Exception)): [^\n]*", r"a \1", text)  # errors lose messages
        text = re.sub(r"\b[0-9a-f]{10}\b", "a commit", text)  # hashes become prose
        return SummaryResult(text=text, summarizer=self.name)


def slope(values: list[float]) -> float:
    """Least-squares slope per step."""
    n = len(values)
    if n < 2:
        return 0.0
    mx = (n - 1) / 2
    my = sum(values) / n
    num = sum((i - mx) * (v - my) for i, v in enumerate(values))
    den = sum((i - mx) ** 2 for i in range(n))
    return num / den


# Arms another bench adds (bench_fidelity_models.py): name -> the summarizer; run with the guarded options.
EXTRA_SUMMARIZERS: dict[str, Any] = {}


def run_arm(name: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    settings = CompactionSettings(keep_recent_tokens=args.keep_recent_tokens)
    opts = (
        {arm: {"anchors": True, "drift_guard": True, "ledger": True} for arm in EXTRA_SUMMARIZERS}
        | {
            "guarded": {"anchors": True, "drift_guard": True, "ledger": True},
            "naive": {"anchors": False, "drift_guard": False, "ledger": True},
            "bare": {"anchors": False, "drift_guard": False, "ledger": False},
            "drifting_guarded": {"anchors": True, "drift_guard": True, "ledger": True},
            "drifting_naive": {"anchors": False, "drift_guard": False, "ledger": True},
        }
    )[name]
    workdir.mkdir(parents=True, exist_ok=True)
    store = SessionStore(workdir / f"{name}.db")
    store.create_session("bench")
    gen = TranscriptGenerator(seed=args.seed, big_output_lines=args.big_output_lines)
    summarizer = EXTRA_SUMMARIZERS.get(name) or (
        DriftingSummarizer() if name.startswith("drifting") else None
    )
    compactor = Compactor(store, summarizer, settings, **opts)
    pins: list[str] = []
    pinned_entry_text: str | None = None
    rows: list[dict[str, Any]] = []
    compact_ms: list[float] = []
    tracked_total = tracked_kept = 0
    recent_total = recent_kept = 0
    planted_at: dict[str, int] = {}  # identifier -> compaction whose turns planted it
    for k in range(1, args.compactions + 1):
        for msgs in gen.rounds(args.rounds):
            store.append_many("bench", [("message", {"message": m}) for m in msgs])
        for values in gen.facts.by_class.values():
            for value in values:
                planted_at.setdefault(value, k)
        if k == 3:
            for text in PIN_TEXTS:
                compactor.pin("bench", text=text)
                pins.append(text)
        if k == 5:
            target = next(e for e in reversed(store.path("bench")) if e.role == "user")
            compactor.pin("bench", entry_id=target.id)
            content = (target.message or {}).get("content")
            pinned_entry_text = content[0]["text"] if isinstance(content, list) else str(content)
        started = time.perf_counter()
        result = compactor.compact("bench", reason="threshold")
        compact_ms.append((time.perf_counter() - started) * 1000)
        messages = build_context(store.context_path("bench"))
        view = "\n".join(
            json.loads(json.dumps(m))["content"]
            if isinstance(m.get("content"), str)
            else json.dumps(m, ensure_ascii=False)
            for m in messages
        )
        facts = gen.facts
        classes: dict[str, list[str]] = {
            "goal": [facts.goal],
            "constraint": list(facts.constraints),
            "pin": list(pins),
        }
        if pinned_entry_text:
            classes["pin"].append(pinned_entry_text)
        for cls, values in facts.by_class.items():
            classes[cls] = list(values)
        survival = {
            cls: {"kept": sum(1 for v in values if v in view), "total": len(values)}
            for cls, values in classes.items()
            if values
        }
        tracked = [i["text"] for i in result.details.get("identifiers", [])]
        kept_tracked = sum(1 for t in tracked if t in view)
        tracked_total += len(tracked)
        tracked_kept += kept_tracked
        recent = [v for v, at in planted_at.items() if at > k - args.recent_window]
        kept_recent = sum(1 for v in recent if v in view)
        recent_total += len(recent)
        recent_kept += kept_recent
        summary_tokens = estimate_message_tokens({"role": "user", "content": result.summary})
        rows.append(
            {
                "compaction": k,
                "log_entries": len(store.entries("bench")),
                "context_messages": len(messages),
                "tokens_before": result.tokens_before,
                "tokens_after": result.tokens_after,
                "checkpoint_chars": len(result.summary),
                "checkpoint_tokens": summary_tokens,
                "within_budget": summary_tokens <= settings.summary_max_tokens,
                "tracked_identifiers": len(tracked),
                "tracked_in_view": kept_tracked,
                "recent_identifiers": len(recent),
                "recent_in_view": kept_recent,
                "survival": survival,
            }
        )
    # recall: every planted identifier can be found again in the raw log by full-text search
    recallable = 0
    planted = [(cls, v) for cls, values in gen.facts.by_class.items() for v in values]
    for _, value in planted:
        words = " ".join(w for w in value.replace("/", " ").replace("'", " ").replace("=", " ").split() if w)
        if words and compactor.recall("bench", query=words, limit=1):
            recallable += 1
    report = store.verify("bench")
    store.close()

    def rate(classes: tuple[str, ...] | None, row: dict[str, Any]) -> tuple[int, int]:
        kept = total = 0
        for cls, s in row["survival"].items():
            if (classes is None and cls not in ANCHOR_CLASSES) or (classes is not None and cls in classes):
                kept += s["kept"]
                total += s["total"]
        return kept, total

    final = rows[-1]
    per_class_final = {cls: round(s["kept"] / s["total"], 4) for cls, s in final["survival"].items()}
    min_anchor = {
        cls: min(
            (r["survival"][cls]["kept"] / r["survival"][cls]["total"]) for r in rows if cls in r["survival"]
        )
        for cls in ANCHOR_CLASSES
        if cls in final["survival"]
    }
    ident_rates = [rate(None, r) for r in rows]
    sizes = [float(r["checkpoint_tokens"]) for r in rows]
    half = sizes[len(sizes) // 2 :]
    half_mean = statistics.mean(half)
    steady_from = next(
        (i + 1 for i in range(len(sizes)) if all(abs(v - half_mean) <= 0.10 * half_mean for v in sizes[i:])),
        len(sizes),
    )
    summary = {
        "compactions": len(rows),
        "anchor_survival_min": {k: round(v, 4) for k, v in min_anchor.items()},
        "planted_identifier_survival_final": round(ident_rates[-1][0] / max(1, ident_rates[-1][1]), 4),
        "planted_identifier_survival_mean": round(statistics.mean(k / max(1, t) for k, t in ident_rates), 4),
        "tracked_identifier_survival": round(tracked_kept / max(1, tracked_total), 4),
        "tracked_identifiers_final": rows[-1]["tracked_identifiers"],
        "recent_identifier_survival": round(recent_kept / max(1, recent_total), 4),
        "planted_identifiers_recallable": f"{recallable}/{len(planted)}",
        "per_class_final": per_class_final,
        "checkpoint_tokens": {
            "first": int(sizes[0]),
            "max": int(max(sizes)),
            "last": int(sizes[-1]),
            "budget": settings.summary_max_tokens,
        },
        "all_within_budget": all(r["within_budget"] for r in rows),
        "slope_tokens_per_compaction_second_half": round(slope(half), 2),
        "slope_relative_second_half": round(slope(half) / max(1.0, half_mean), 5),
        "second_half_mean_tokens": round(half_mean, 1),
        "steady_from_compaction": steady_from,
        "context_tokens_after_max": max(r["tokens_after"] for r in rows),
        "log_entries_final": final["log_entries"],
        "compact_ms_mean": round(statistics.mean(compact_ms), 1),
        "compact_ms_max": round(max(compact_ms), 1),
        "verify_ok": report.ok,
    }
    summary["goals_met"] = goals_of(summary, recallable == len(planted))
    return {"options": opts, "summary": summary, "per_compaction": rows}


# a flat second half: the fitted growth over the whole second half stays under 5% of its mean
MAX_HALF_GROWTH = 0.05
STEADY_BY = 25  # the first half of the 50-compaction run


def goals_of(s: dict[str, Any], all_recallable: bool) -> dict[str, bool]:
    """The issue's goals for one arm (the guarded arm must meet all of them)."""
    half_len = max(1, s["compactions"] - s["compactions"] // 2)
    return {
        "constraints_goal_pins_100pct": all(v == 1.0 for v in s["anchor_survival_min"].values())
        and len(s["anchor_survival_min"]) == 3,
        "tracked_identifiers_ge_99pct": s["tracked_identifier_survival"] >= 0.99,
        "recent_identifiers_ge_99pct": s["recent_identifier_survival"] >= 0.99,
        "every_planted_fact_recallable": all_recallable,
        "checkpoint_within_budget_every_step": s["all_within_budget"],
        "no_upward_trend_second_half": s["slope_tokens_per_compaction_second_half"] * half_len
        <= MAX_HALF_GROWTH * s["second_half_mean_tokens"],
        f"steady_by_compaction_{STEADY_BY}": s["steady_from_compaction"] <= STEADY_BY,
        "log_verifies": s["verify_ok"],
    }


def offline_speed(seed: int) -> dict[str, Any]:
    """Time the offline summarizer on a 1,000-entry span (best of 5), with and without a previous
    checkpoint."""
    from ipython_compact.core.entries import Entry
    from ipython_compact.core.offline_summary import offline_summary

    gen = TranscriptGenerator(seed=seed, big_output_lines=200)
    entries: list[Entry] = []
    while len(entries) < 1000:
        for m in gen.next_round():
            entries.append(Entry(f"e{len(entries)}", None, "message", "t", {"message": m}))
    span = entries[:1000]
    previous = offline_summary(span[:500])
    timings: dict[str, float] = {}
    for label, prev in (("first", None), ("rolling", previous)):
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            offline_summary(span, previous_summary=prev)
            best = min(best, time.perf_counter() - t0)
        timings[f"{label}_ms"] = round(best * 1000, 1)
    chars = sum(len(str(e.data)) for e in span)
    return {"entries": len(span), "span_chars": chars, **timings}


TABLE_ROWS = (
    (
        "goal / constraints / pins survival (min over steps)",
        lambda s: "/".join(f"{s['anchor_survival_min'].get(c, 0):.0%}" for c in ANCHOR_CLASSES),
    ),
    ("tracked identifiers in view", lambda s: f"{s['tracked_identifier_survival']:.1%}"),
    ("recent identifiers in view", lambda s: f"{s['recent_identifier_survival']:.1%}"),
    ("all planted identifiers in view (final)", lambda s: f"{s['planted_identifier_survival_final']:.1%}"),
    ("planted identifiers recallable from the log", lambda s: s["planted_identifiers_recallable"]),
    (
        "checkpoint tokens first / max / last",
        lambda s: (
            f"{s['checkpoint_tokens']['first']} / "
            f"{s['checkpoint_tokens']['max']} / "
            f"{s['checkpoint_tokens']['last']}"
        ),
    ),
    (
        "slope, second half (tokens per compaction)",
        lambda s: f"{s['slope_tokens_per_compaction_second_half']:+.2f}",
    ),
    ("steady from compaction", lambda s: str(s["steady_from_compaction"])),
    ("within budget every step", lambda s: str(s["all_within_budget"])),
    ("compaction ms mean / max", lambda s: f"{s['compact_ms_mean']} / {s['compact_ms_max']}"),
)


def comparison_table(arms: dict[str, Any]) -> list[dict[str, str]]:
    """One row per measure, one column per arm (guarded and naive side by side)."""
    return [
        {"measure": label, **{arm: fmt(a["summary"]) for arm, a in arms.items()}} for label, fmt in TABLE_ROWS
    ]


def _in_view(survival: dict[str, dict[str, int]], *, anchors: bool) -> str:
    """``kept/total`` over the identifier classes that are (or are not) anchor classes."""
    rows = [s for c, s in survival.items() if (c in ANCHOR_CLASSES) == anchors]
    return f"{sum(s['kept'] for s in rows)}/{sum(s['total'] for s in rows)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compactions", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=6, help="agent turns between compactions")
    parser.add_argument("--keep-recent-tokens", type=int, default=1000)
    parser.add_argument("--big-output-lines", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--arms", default="guarded,naive,bare,drifting_guarded,drifting_naive")
    parser.add_argument(
        "--long-compactions",
        type=int,
        default=100,
        help="also run the guarded arm this long, to show where the checkpoint levels off (0: skip)",
    )
    parser.add_argument(
        "--recent-window", type=int, default=5, help="compactions whose planted identifiers count as recent"
    )
    parser.add_argument(
        "--per-compaction", action="store_true", help="include every compaction's row in the output"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    out: dict[str, Any] = {
        "benchmark": "fidelity",
        "config": {k: v for k, v in vars(args).items() if k != "per_compaction"},
        "arms": {},
    }
    runs = [(arm, arm, args) for arm in args.arms.split(",")]
    if args.long_compactions > 0 and "guarded" in args.arms.split(","):
        runs.append(
            (
                f"guarded_{args.long_compactions}",
                "guarded",
                argparse.Namespace(**{**vars(args), "compactions": args.long_compactions}),
            )
        )
    with tempfile.TemporaryDirectory(prefix="bench-fidelity-") as tmp:
        for label, arm, arm_args in runs:
            result = run_arm(arm, arm_args, Path(tmp) / label)
            if not args.per_compaction:
                rows = result.pop("per_compaction")
                result["checkpoint_tokens_series"] = [r["checkpoint_tokens"] for r in rows]
                step = max(1, len(rows) // 10)
                result["sampled_compactions"] = [
                    {
                        "compaction": r["compaction"],
                        "log_entries": r["log_entries"],
                        "context_messages": r["context_messages"],
                        "tokens_after": r["tokens_after"],
                        "checkpoint_tokens": r["checkpoint_tokens"],
                        "identifiers_in_view": _in_view(r["survival"], anchors=False),
                        "anchors_in_view": _in_view(r["survival"], anchors=True),
                    }
                    for r in rows[step - 1 :: step]
                ]
            out["arms"][label] = result
    g = out["arms"].get("guarded", {}).get("summary")
    speed = offline_speed(args.seed)
    out["offline_summary_speed"] = speed
    if g:
        out["goals"] = dict(g["goals_met"])
        long = out["arms"].get(f"guarded_{args.long_compactions}", {}).get("summary")
        if long:
            out["goals"]["long_run_no_upward_trend_second_half"] = long["goals_met"][
                "no_upward_trend_second_half"
            ]
            out["goals"]["long_run_within_budget_every_step"] = long["all_within_budget"]
        out["goals"]["offline_1000_entries_under_1s"] = max(speed["first_ms"], speed["rolling_ms"]) < 1000
        out["all_goals_met"] = all(out["goals"].values())
    out["table"] = comparison_table(out["arms"])
    out["elapsed_s"] = round(time.perf_counter() - started, 2)
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
