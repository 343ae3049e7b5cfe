"""Precision benchmark: after rolling compactions, is what the checkpoint says still true?

The probe and retention benchmarks measure what a checkpoint *keeps*. This one measures whether
what it states is *current*, on a generated 30-day analyst session where facts change (issue 18):

- the goal is stated on day 1 after a routine first request, and redefined on day 17;
- 8 decisions the user makes and later changes (storage engine, decision threshold twice,
  headline metric, validation split, imputation, model family, report format, retrain cadence),
  some reversed 10+ compactions after they were made, stated in different ways (a rule with
  "instead of", the same sentence with a new value, a switch the assistant acknowledges);
- 6 quantities printed by tool outputs (``rows after dedup: rows=…``) and updated 3-5 times, the
  best model also reported in the assistant's answers;
- requests that are deferred ("I'll add the ROC plot once the March backfill is done", done 13
  days later), withdrawn ("never mind the PDF export"), deferred inside a turn whose other
  request is done, and one left open by a turn that has not ended: 5 open or deferred at the end;
- files rewritten in new versions (``models/churn_v1.pkl`` … ``v4``).

One compaction per day (30 rolling compactions, a small recent tail). Measured after each, on the
context the model would see:
- **current facts in context**: the current value of every subject (goal, decisions, quantities,
  the newest model file) is in the context (checkpoint + kept tail); goal 100%.
- **superseded facts stated as current**: a replaced value appears in the *checkpoint* on a line
  that does not mark it as replaced ("replaced", "superseded", "revised", "earlier:"); goal 0.
  Only facts whose replacement was summarized count (a replacement still in the kept tail is
  read there, after the checkpoint). Counted per fact at the last compaction, and summed over
  all compactions.
- **open/deferred requests shown**: every request still open or deferred is in the context in
  full or by its entry id; goal 100%.
- **plans already carried out, still in Next Steps**: a plan the assistant stated ("Next I will
  rebuild the lift chart", day 11) that a later request carried out (day 12) and that the
  checkpoint's Next Steps still lists, once the answer that carried it out is summarized (before
  that, the kept tail shows it done); goal 0.
- **duplicate lines**: checkpoint lines (not headings, not "(none)") that occur more than once.
- **statements the appended blocks repeat**: lines of ``<ledger>`` and ``<drift-guard>`` (what the
  pipeline appends after the summary) whose statement a line before them already holds (a
  decision or a request stated twice); goal 0.
- **false supersessions applied**: a current fact the checkpoint shows only as history (and the
  kept tail does not state); goal 0.
- **checkpoint tokens** over the compactions (first / max / last).

Arms: ``offline`` (full pipeline), ``openai_good`` and ``openai_drifting`` (the OpenAI-compatible
summarizer against ``testing.ModelServer`` scripted as in ``bench_fidelity_probes``: the good
model folds the previous checkpoint in and honours the ``<superseded>`` block; the drifting one
also paraphrases), ``openai_ideal`` (``ideal_model``: a scripted model whose summary states only
what holds now, from the session's ground truth, so whatever is still wrong is the deterministic
layers' or the update prompt's doing; it also counts the ``<superseded>`` pairs whose "earlier" is
still current), ``naive`` (the offline summarizer rolling its own summary: no anchors, no drift
guard, no ledger). The recall probes are ``bench_fidelity_probes.py``'s (run it too).

Prints one JSON object (``table``: one row per measure, one column per arm).
Usage: ``.venv/bin/python bench/bench_fidelity_precision.py [--days 30] [--arms offline,naive]``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the session writer

from bench_fidelity_probes import scripted
from bench_summarizers import summarizer_for
from generated_sessions import Writer
from ideal_model import Truth, ideal_script

from ipython_compact.compaction.compactor import Compactor, NothingToCompact
from ipython_compact.core.context import build_context
from ipython_compact.core.entries import text_of_content
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.tokens import estimate_message_tokens
from ipython_compact.store import SessionStore
from ipython_compact.testing import ModelServer

ARMS = ("offline", "openai_good", "openai_drifting", "openai_ideal", "naive")
JSON = dict[str, Any]
# a line that states history, not a current fact
HISTORY_MARK = re.compile(r"(?i)replaced|superseded|revised|earlier:|withdrawn|was |no longer|instead of")
_TAG = re.compile(r"^</?[\w-]+(?:\s[^>]*)?>$")


@dataclass
class Fact:
    """One value of a subject: the exact marker string, when it was stated and replaced (days)."""

    subject: str
    marker: str
    day: int
    at: int = 0  # index of the message that stated it (in the whole session)
    until: int | None = None  # replaced on this day (None: still current)
    until_at: int | None = None  # index of the message that replaced it


@dataclass
class ChangingSession:
    """A generated 30-day analyst session whose facts change (see the module doc)."""

    days: int = 30
    chunks: list[list[JSON]] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    # text -> (asked, settled day or None)
    requests: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    # a plan the assistant states ("Next I will …") -> index of the message that carried it out
    plans: dict[str, int] = field(default_factory=dict)

    def current(self, day: int) -> list[Fact]:
        return [f for f in self.facts if f.day <= day and (f.until is None or f.until > day)]

    def superseded(self, day: int, before: int | None = None) -> list[Fact]:
        """Facts replaced by ``day``; with ``before``, only those whose replacement is among the
        first ``before`` messages (summarized; a replacement in the kept tail is read there)."""
        return [
            f
            for f in self.facts
            if f.until is not None and f.until <= day and (before is None or (f.until_at or 0) < before)
        ]

    def pending(self, day: int) -> list[str]:
        return [
            t
            for t, (asked, settled) in self.requests.items()
            if asked <= day and (settled is None or settled > day)
        ]


# subject -> [(day, statement said by the user or the assistant, marker)]: each later one replaces the one
# before
DECISIONS: dict[str, list[tuple[int, str, str, str]]] = {
    "storage": [
        (1, "user", "Always use Postgres for storage.", "use Postgres for storage"),
        (12, "user", "Please use DuckDB for storage instead of Postgres from now on.", "DuckDB for storage"),
    ],
    "threshold": [
        (2, "user", "Use a decision threshold of 0.50 for the retention list.", "threshold of 0.50"),
        (9, "user", "Use a decision threshold of 0.35 for the retention list.", "threshold of 0.35"),
        (22, "user", "Use a decision threshold of 0.42 for the retention list.", "threshold of 0.42"),
    ],
    "metric": [
        (3, "user", "From now on, report AUC as the headline metric.", "report AUC as the headline"),
        (15, "user", "From now on, report PR-AUC as the headline metric.", "PR-AUC as the headline"),
    ],
    "split": [
        (
            4,
            "assistant",
            "I'll use a random row split for validation because the rows look independent.",
            "random row split",
        ),
        (
            18,
            "user",
            "Let's go with a split grouped by customer_id for validation instead of the random row split.",
            "grouped by customer_id",
        ),
    ],
    "imputation": [
        (5, "user", "Always impute missing tenure with the median.", "tenure with the median"),
        (25, "user", "Always impute missing tenure with KNN.", "tenure with KNN"),
    ],
    "model": [
        (
            2,
            "assistant",
            "I'll use XGBoost for the model because it is the team default.",
            "XGBoost for the model",
        ),
        (
            11,
            "assistant",
            "Switching the model to LightGBM instead of XGBoost because it trains faster "
            "on the new features.",
            "model to LightGBM",
        ),
    ],
    "report": [
        (6, "user", "Always send the weekly report as a PDF attachment.", "report as a PDF"),
        (20, "user", "Always send the weekly report as an HTML page.", "report as an HTML"),
    ],
    "cadence": [
        (7, "user", "Make sure to retrain the model every week.", "retrain the model every week"),
        (19, "user", "Make sure to retrain the model every day.", "retrain the model every day"),
    ],
}
# quantity -> (line prefix, key, [(day, value)])
QUANTITIES: dict[str, tuple[str, str, list[tuple[int, str]]]] = {
    "rows": ("rows after dedup:", "rows", [(2, "41203"), (8, "40877"), (16, "40112"), (24, "39950")]),
    "holdout": ("holdout size:", "holdout_rows", [(3, "8120"), (13, "8044"), (27, "7990")]),
    "features": (
        "features in use:",
        "n_features",
        [(4, "48"), (10, "52"), (17, "61"), (23, "57"), (28, "59")],
    ),
    "ece": ("calibration:", "ece", [(6, "0.041"), (14, "0.033"), (21, "0.029")]),
    "best_auc": ("best model:", "best_auc", [(5, "0.801"), (12, "0.812"), (19, "0.824"), (26, "0.829")]),
    "train_time": ("train time:", "train_minutes", [(9, "37"), (18, "29"), (29, "33")]),
}
MODEL_FILES = [
    (4, "models/churn_v1.pkl"),
    (11, "models/churn_v2.pkl"),
    (19, "models/churn_v3.pkl"),
    (26, "models/churn_v4.pkl"),
]
GOALS = [
    (
        1,
        "Our goal is a churn model the retention team can act on every week, with a calibrated decision "
        "threshold.",
        "retention team can act on every week",
    ),
    (
        17,
        "New goal: the churn model must also explain the top churn drivers per customer segment.",
        "top churn drivers per customer segment",
    ),
]
ROUTINE = (
    "Plot the churn rate by {x}.",
    "Show the distribution of {x}.",
    "Check {x} for missing values.",
    "Summarize {x} per segment.",
)
TOPICS = (
    "tenure",
    "monthly charges",
    "contract type",
    "support calls",
    "payment method",
    "region",
    "plan changes",
)


def make_session(days: int = 30) -> ChangingSession:
    s = ChangingSession(days=days)
    w = Writer(start_ms=1_800_000_000_000)

    def fact(subject: str, marker: str, day: int) -> None:
        at = sum(len(c) for c in s.chunks) + len(w.out) - 1  # the message just written
        for f in s.facts:
            if f.subject == subject and f.until is None:
                f.until, f.until_at = day, at
        s.facts.append(Fact(subject, marker, day, at))

    for day in range(1, days + 1):
        if day == 1:
            w.user("Load data/churn.csv and show me the first rows.")
            w.call(
                "python",
                {"code": "df = pd.read_csv('data/churn.csv')\ndf.head()"},
                "customer_id tenure monthly_charges churn\n1001 12 70.2 0",
            )
            w.say("Loaded data/churn.csv: 7 columns.")
        for d, text, marker in GOALS:
            if d == day:
                w.user(text)
                w.say("Understood.")
                fact("goal", marker, day)
        for subject, steps in DECISIONS.items():
            for d, who, text, marker in steps:
                if d != day:
                    continue
                if who == "user":
                    w.user(text)
                    w.say(
                        f"Noted: {text[0].lower()}{text[1:]}"
                        if "instead of" not in text
                        else "Done, switched as you asked."
                    )
                else:
                    w.user(f"What should we do about the {subject}?")
                    w.say(text)
                fact(subject, marker, day)
        # routine work with a quantity or a file, and a final answer
        topic = TOPICS[day % len(TOPICS)]
        w.user(ROUTINE[day % len(ROUTINE)].format(x=topic))
        outputs = [
            f"{prefix} {key}={value}"
            for _q, (prefix, key, series) in QUANTITIES.items()
            for d, value in series
            if d == day
        ]
        code = f"stats = summarize('{topic}')\nprint(stats)"
        w.call(
            "python",
            {"code": code},
            "\n".join([f"{topic}: {day * 3} rows checked", *outputs])
            if outputs
            else f"{topic}: {day * 3} rows checked",
        )
        for q, (_prefix, key, series) in QUANTITIES.items():
            for d, value in series:
                if d == day:
                    fact(q, f"{key}={value}", day)
        for d, path in MODEL_FILES:
            if d == day:
                w.call("write", {"path": path, "content": f"model of day {day}"}, "ok")
                fact("model_file", path, day)
        best = [v for d, v in QUANTITIES["best_auc"][2] if d == day]
        w.say(f"The best model so far reaches best_auc={best[0]}." if best else f"Here is the {topic} view.")
        # requests with a state
        if day == 8:
            w.user("Add a ROC plot to the weekly report.")
            w.say("I'll add the ROC plot to the weekly report once the March backfill is done.")
            s.requests["Add a ROC plot to the weekly report."] = (8, 21)
        if day == 10:
            w.user("Write a data dictionary for the feature table.")
            w.say("I'll write the data dictionary for the feature table after the feature set is frozen.")
            s.requests["Write a data dictionary for the feature table."] = (10, None)
        if day == 13:
            w.user("Make a PDF export of the dashboard.")
            s.requests["Make a PDF export of the dashboard."] = (13, 14)
        if day == 14:
            w.user("Never mind the PDF export of the dashboard.")
            w.say("Dropped the PDF export.")
        if day == 16:
            w.user("Set up alerting on data drift.")
            w.say("Not yet: data drift alerting waits on the monitoring service, which is down.")
            s.requests["Set up alerting on data drift."] = (16, None)
        if day == 21:
            w.user("How is the backfill going?")
            w.say("The March backfill finished and the ROC plot is added to the weekly report.")
        if day == 22:
            w.user("Refresh the churn dashboard. Also email the summary to finance.")
            w.say("The churn dashboard is refreshed. I'll email the summary to finance next week.")
            s.requests["Refresh the churn dashboard. Also email the summary to finance."] = (22, None)
        if day == 11:
            w.user("What is left for the regional review?")
            w.say("Next I will rebuild the lift chart for the regional managers.")
        if day == 12:
            w.user("Rebuild the lift chart for the regional managers.")
            w.say("Rebuilt the lift chart for the regional managers.")
            s.plans["rebuild the lift chart"] = sum(len(c) for c in s.chunks) + len(w.out) - 1
        if day == 29:
            w.user("Compare the model against last quarter's baseline.")
            w.say("I'll compare the model against last quarter's baseline once finance sends the numbers.")
            s.requests["Compare the model against last quarter's baseline."] = (29, None)
        if day == days:
            w.user("Draft the slides for Monday's retention review.")
            w.call(
                "python",
                {"code": "slides = outline('retention review')"},
                "outline with 6 sections",
                text="I will start with the outline.",
            )
            s.requests["Draft the slides for Monday's retention review."] = (days, None)
        s.chunks.append(w.take())
    return s


def statements(session: ChangingSession) -> dict[str, str]:
    """marker -> the full statement that set it (what an ideal summary writes for a current fact)."""
    out = {marker: text for steps in DECISIONS.values() for _d, _who, text, marker in steps}
    out.update({marker: text for _d, text, marker in GOALS})
    for _q, (prefix, key, series) in QUANTITIES.items():
        out.update({f"{key}={v}": f"{prefix} {key}={v}" for _d, v in series})
    out.update({path: f"current model file: {path}" for _d, path in MODEL_FILES})
    return out


def set_truth(truth: Truth, session: ChangingSession, day: int) -> None:
    """What holds on ``day`` (the ideal model states exactly this)."""
    said = statements(session)
    current = session.current(day)
    truth.goal = next((said[f.marker] for f in current if f.subject == "goal"), "")
    truth.facts = [said[f.marker] for f in current if f.subject != "goal"]
    truth.open_requests = session.pending(day)


# ------------------------------------------------------------------------------ scoring
def context_of(store: SessionStore, naive: bool) -> tuple[str, str]:
    """(whole context text, checkpoint text) of the session's current context."""
    messages = build_context(store.context_path("s"))
    parts = [text_of_content(m.get("content")) for m in messages]
    checkpoint = parts[0] if parts else ""
    if naive:
        checkpoint = re.sub(
            r"\n*<externalized(?:\s[^>]*)?>.*?</externalized>\n*", "\n", checkpoint, flags=re.DOTALL
        )
    return "\n".join(parts), checkpoint


def stated_as_current(checkpoint: str, marker: str) -> bool:
    return any(marker in line and not HISTORY_MARK.search(line) for line in checkpoint.splitlines())


def stated_before_mark(checkpoint: str, marker: str) -> bool:
    """Whether a line states ``marker`` ahead of any history mark ("B — replaced: A" states B)."""
    for line in checkpoint.splitlines():
        at = line.find(marker)
        if at < 0:
            continue
        mark = HISTORY_MARK.search(line)
        if mark is None or at < mark.start():
            return True
    return False


def next_steps_of(checkpoint: str) -> str:
    """The checkpoint's Next Steps section (lower-cased)."""
    m = re.search(r"(?ms)^## Next Steps\n(.*?)(?=^## |^<|\Z)", checkpoint)
    return m.group(1).lower() if m else ""


def duplicate_lines(checkpoint: str) -> int:
    lines = [ln.strip() for ln in checkpoint.splitlines()]
    body = [
        ln
        for ln in lines
        if ln
        and not ln.startswith("#")
        and ln.lower() not in ("(none)", "none", "---")
        and not _TAG.match(ln)
    ]
    return len(body) - len(set(body))


_APPENDED = re.compile(r"<(ledger|drift-guard)(?:\s[^>]*)?>\n(.*?)\n</\1>", re.DOTALL)
_LIST_MARK = re.compile(r"^(?:[-*]\s+(?:\[[ xX-]\]\s+)?(?:withdrawn: )?|\d+[.)]\s+)")


def repeated_by_pipeline(checkpoint: str) -> list[str]:
    """Statements of the blocks the pipeline appends after the summary (``<ledger>``,
    ``<drift-guard>``) that a line before them already holds: a decision or a request stated
    twice (list marks, the ``  (entry …)`` annotation and history marks left out; 20+ chars)."""
    out = []
    for m in _APPENDED.finditer(checkpoint):
        before = checkpoint[: m.start()]
        for line in m.group(2).splitlines():
            statement = _LIST_MARK.sub("", line.strip()).split("  (")[0].split(" — replaced")[0].strip()
            if len(statement) >= 20 and statement in before:
                out.append(statement)
    return out


def summarized_messages(store: SessionStore, first_kept: str) -> int:
    """How many messages of the session come before the compaction's first kept entry."""
    count = 0
    for e in store.path("s"):
        if e.id == first_kept:
            return count
        count += e.message is not None and e.kind == "message"
    return count


def request_ids(store: SessionStore) -> dict[str, str]:
    out = {}
    for e in store.path("s"):
        msg = e.message or {}
        if msg.get("role") == "user":
            out.setdefault(text_of_content(msg.get("content")), e.id)
    return out


def run(
    arm: str,
    args: argparse.Namespace,
    workdir: Path,
    server: ModelServer | None,
    truth: Truth | None = None,
) -> dict[str, Any]:
    """One arm over the session; ``truth`` (the ideal arm's) is set to what holds before each
    compaction."""
    session = make_session(args.days)
    store = SessionStore(workdir / f"{arm}.db")
    store.create_session("s")
    naive = arm == "naive"
    summarizer = summarizer_for(server)
    compactor = Compactor(
        store,
        summarizer,
        CompactionSettings(keep_recent_tokens=args.keep_recent_tokens),
        anchors=not naive,
        drift_guard=not naive,
        ledger=not naive,
    )
    rows = []
    started = time.perf_counter()
    for day, chunk in enumerate(session.chunks, 1):
        store.append_many("s", [("message", {"message": m}) for m in chunk])
        if truth is not None:
            set_truth(truth, session, day)
        told = len(truth.superseded_pairs) if truth is not None else 0
        try:
            result = compactor.compact("s", reason="threshold")
        except NothingToCompact:
            continue  # a short day: the next compaction takes it
        context, checkpoint = context_of(store, naive)
        ids = request_ids(store)
        current = session.current(day)
        summarized = summarized_messages(store, result.plan.first_kept_entry_id)
        old = session.superseded(day, summarized)
        pending = session.pending(day)
        rows.append(
            {
                "day": day,
                "current_in_context": sum(f.marker in context for f in current),
                "current_total": len(current),
                "missing_current": [f"{f.subject}: {f.marker}" for f in current if f.marker not in context],
                "superseded_as_current": [
                    f"{f.subject}: {f.marker}" for f in old if stated_as_current(checkpoint, f.marker)
                ],
                "superseded_total": len(old),
                # a current fact shown only as history: a change applied that did not happen
                "false_supersessions": [
                    f"{f.subject}: {f.marker}"
                    for f in current
                    if f.marker in checkpoint
                    and not stated_before_mark(checkpoint, f.marker)
                    and f.marker not in context[len(checkpoint) :]
                ],
                # the update prompt's <superseded> pairs whose "earlier" is a fact still current
                "false_pairs_told": [
                    old_
                    for old_, _new in (truth.superseded_pairs[told:] if truth is not None else [])
                    if any(f.marker in old_ for f in current)
                ],
                "pending_shown": sum(t in context or ids.get(t, "\0") in context for t in pending),
                "pending_total": len(pending),
                "missing_pending": [
                    t for t in pending if t not in context and ids.get(t, "\0") not in context
                ],
                "settled_plans_as_next": [
                    plan
                    for plan, done_at in session.plans.items()
                    if done_at < summarized and plan in next_steps_of(checkpoint)
                ],
                "duplicate_lines": duplicate_lines(checkpoint),
                "repeated_by_pipeline": repeated_by_pipeline(checkpoint),
                "checkpoint_tokens": estimate_message_tokens({"role": "user", "content": result.summary}),
            }
        )
    store.close()
    last = rows[-1]
    tokens = [r["checkpoint_tokens"] for r in rows]
    return {
        "current_facts_in_context": f"{last['current_in_context']}/{last['current_total']}",
        "current_facts_in_context_all_steps": round(
            sum(r["current_in_context"] for r in rows) / max(1, sum(r["current_total"] for r in rows)), 4
        ),
        "superseded_stated_as_current": f"{len(last['superseded_as_current'])}/{last['superseded_total']}",
        "superseded_stated_as_current_all_steps": sum(len(r["superseded_as_current"]) for r in rows),
        "false_supersessions_last": len(last["false_supersessions"]),
        "false_supersessions_all_steps": sum(len(r["false_supersessions"]) for r in rows),
        "false_pairs_told_all_steps": sum(len(r["false_pairs_told"]) for r in rows),
        "open_deferred_shown": f"{last['pending_shown']}/{last['pending_total']}",
        "open_deferred_shown_all_steps": round(
            sum(r["pending_shown"] for r in rows) / max(1, sum(r["pending_total"] for r in rows)), 4
        ),
        "settled_plans_as_next_last": len(last["settled_plans_as_next"]),
        "settled_plans_as_next_all_steps": sum(len(r["settled_plans_as_next"]) for r in rows),
        "duplicate_lines_last": last["duplicate_lines"],
        "duplicate_lines_max": max(r["duplicate_lines"] for r in rows),
        "repeated_by_pipeline_last": len(last["repeated_by_pipeline"]),
        "repeated_by_pipeline_max": max(len(r["repeated_by_pipeline"]) for r in rows),
        "repeated_by_pipeline_lines_last": last["repeated_by_pipeline"],
        "checkpoint_tokens": {"first": tokens[0], "max": max(tokens), "last": tokens[-1]},
        "missing_current_last": last["missing_current"],
        "superseded_as_current_last": last["superseded_as_current"],
        "missing_pending_last": last["missing_pending"],
        "seconds": round(time.perf_counter() - started, 2),
    }


TABLE = (
    ("current facts in context (last compaction)", "current_facts_in_context"),
    ("current facts in context (every compaction)", "current_facts_in_context_all_steps"),
    ("superseded facts stated as current (last)", "superseded_stated_as_current"),
    ("superseded stated as current (sum over compactions)", "superseded_stated_as_current_all_steps"),
    ("false supersessions applied (last)", "false_supersessions_last"),
    ("false supersessions applied (sum over compactions)", "false_supersessions_all_steps"),
    ("false earlier/now pairs told to the model (sum)", "false_pairs_told_all_steps"),
    ("open/deferred requests shown (last)", "open_deferred_shown"),
    ("open/deferred requests shown (every compaction)", "open_deferred_shown_all_steps"),
    ("plans already carried out, still in Next Steps (last)", "settled_plans_as_next_last"),
    (
        "plans already carried out, still in Next Steps (sum over compactions)",
        "settled_plans_as_next_all_steps",
    ),
    ("duplicate lines (last / max)", None),
    ("statements the appended blocks repeat (last / max)", None),
    ("checkpoint tokens first / max / last", None),
)


def table(arms: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for label, key in TABLE:
        row = {"measure": label}
        for arm, s in arms.items():
            if key:
                row[arm] = str(s[key])
            elif label.startswith("duplicate"):
                row[arm] = f"{s['duplicate_lines_last']} / {s['duplicate_lines_max']}"
            elif label.startswith("statements"):
                row[arm] = f"{s['repeated_by_pipeline_last']} / {s['repeated_by_pipeline_max']}"
            else:
                t = s["checkpoint_tokens"]
                row[arm] = f"{t['first']} / {t['max']} / {t['last']}"
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30, help="days = rolling compactions")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--keep-recent-tokens", type=int, default=150)
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"benchmark": "fidelity_precision", "config": vars(args), "arms": {}}
    with tempfile.TemporaryDirectory(prefix="bench-precision-") as tmp:
        for arm in args.arms.split(","):
            server = None
            truth = Truth() if arm == "openai_ideal" else None
            if truth is not None:
                server = ModelServer(script=ideal_script(truth), model="bench-model").start()
            elif arm.startswith("openai_"):
                server = ModelServer(
                    script=scripted(arm.removeprefix("openai_")), model="bench-model"
                ).start()
            try:
                out["arms"][arm] = run(arm, args, Path(tmp), server, truth)
            finally:
                if server is not None:
                    server.stop()
    out["table"] = table(out["arms"])
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
