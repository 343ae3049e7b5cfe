"""Fidelity through models: the offline summarizer beside a scripted model and a real one (issue 33, item 5).

Why: the fidelity bench (``bench_fidelity.py``) measured the offline summarizer only. Here the same
transcript rolls through a few compactions with three summarizers, all with the full pipeline
(anchors, drift guard, ledger, and the summary judge):
- ``offline``: the extractive summarizer;
- ``scripted``: ``ModelServer`` answering every summary request with one fixed, fact-free
  checkpoint (a model that drops everything: what the judge and the guard must make up for);
- ``realmodel``: SmolLM2-135M-Instruct on llama.cpp's server (``make realmodel``).
Reported per arm: anchor survival (worst over the run), planted and tracked identifier survival,
and seconds per compaction; then, on the precision bench's changing session (``--days`` rolling
compactions, ``bench_fidelity_precision.py``), current facts in context, superseded facts stated as
current, false supersessions and open/deferred requests shown; and for every compaction what the
summary judge did with the model's reply (kept, retried, merged, replaced) and why.

Usage: python bench/bench_fidelity_models.py [--compactions 4] [--days 3]   (prints one JSON document)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_fidelity
import bench_fidelity_precision

from ipython_compact.compaction.compactor import Compactor
from ipython_compact.summarizers import OfflineSummarizer
from ipython_compact.summarizers.openai_summarizer import OpenAISummarizer
from ipython_compact.testing.llama_server import LlamaServer
from ipython_compact.testing.model_server import ModelServer

FACT_FREE = """## Goal
Continue the analysis.

## Constraints & Preferences
(none)

## Progress
### Done
- [x] Worked on the data.

### In Progress
- [ ] More work.

### Blocked
(none)

## Key Decisions
(none)

## Next Steps
1. Keep going.

## Critical Context
(none)"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compactions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--days", type=int, default=3, help="rolling compactions of the precision session")
    cli = parser.parse_args()
    args = argparse.Namespace(
        compactions=cli.compactions,
        rounds=cli.rounds,
        keep_recent_tokens=400,
        big_output_lines=40,
        seed=2026,
        recent_window=2,
    )
    out: dict[str, Any] = {"benchmark": "fidelity_models", "config": vars(args), "arms": {}}
    with (
        ModelServer(script=lambda _req: FACT_FREE) as scripted,
        LlamaServer.from_environment(n_ctx=8192) as llama,
        tempfile.TemporaryDirectory(prefix="bench-fidelity-models-") as tmp,
    ):
        models = {
            "scripted": OpenAISummarizer(model="local-model", base_url=scripted.base_url, api_key="x"),
            "realmodel": OpenAISummarizer(
                model=llama.alias, base_url=llama.base_url, api_key="none", timeout=900
            ),
        }
        bench_fidelity.EXTRA_SUMMARIZERS.update(models)
        judged: list[dict[str, Any]] = []
        compact = Compactor.compact

        def recording(self: Compactor, *a: Any, **k: Any) -> Any:
            result = compact(self, *a, **k)
            for call in (result.details or {}).get("calls") or []:
                if isinstance(call, dict) and call.get("judged"):
                    judged.append(call["judged"])
            return result

        Compactor.compact = recording  # type: ignore[method-assign]
        for arm in ("guarded", "scripted", "realmodel"):
            judged.clear()
            started = time.perf_counter()
            result = bench_fidelity.run_arm(arm, args, Path(tmp) / arm)
            s = result["summary"]
            name = "offline" if arm == "guarded" else arm
            chosen = models.get(arm)
            bench_fidelity_precision.summarizer_for = lambda _server, chosen=chosen: (  # type: ignore[assignment]
                chosen or OfflineSummarizer()
            )
            precise = bench_fidelity_precision.run(
                name, argparse.Namespace(days=cli.days, keep_recent_tokens=150), Path(tmp), None
            )
            out["arms"][name] = {
                "anchor_survival_min": s["anchor_survival_min"],
                "planted_identifier_survival_final": s["planted_identifier_survival_final"],
                "tracked_identifier_survival": s["tracked_identifier_survival"],
                "per_class_final": s["per_class_final"],
                "seconds_per_compaction": round(s["compact_ms_mean"] / 1000, 2),
                "checkpoint_tokens_last": s["checkpoint_tokens"]["last"],
                "precision_current_facts_in_context": precise["current_facts_in_context"],
                "precision_superseded_stated_as_current": precise["superseded_stated_as_current"],
                "precision_false_supersessions_all_steps": precise["false_supersessions_all_steps"],
                "precision_open_deferred_shown": precise["open_deferred_shown"],
                "precision_seconds": precise["seconds"],
                "judged": [f"{j.get('action')}: {j.get('why')}" for j in judged],
                "elapsed_s": round(time.perf_counter() - started, 1),
            }
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
