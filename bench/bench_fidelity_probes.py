"""Probe benchmark: after N rolling compactions, can the model still answer what the session planted?

In the spirit of published compaction evaluations (recall, artifact, continuation and decision
probes), with exact answers instead of a judge model. Four generated sessions
(``tests/generated_sessions.py``: data analysis in a kernel, debugging with tracebacks, a long
single-turn agent task, a multi-file edit), each ``--chunks`` chunks long, are appended to a real
SQLite log one chunk at a time, and after each chunk the session is compacted (N rolling
compactions). After the last one, every probe is scored on the model's context view (the
checkpoint plus the kept tail):

- **level 1**: the exact answer is in the context.
- **level 2**: not level 1, but the context holds a pointer (``[entry X · … · recall X]``) whose gist
  (the pointer's line and the indented gist lines under it) names the probe's subject, and
  ``Compactor.recall(entry_id=X)`` returns text containing the answer: one recall away.

Arms, side by side on the same sessions:

- ``offline``: the full pipeline with our offline summarizer (anchors, drift guard, ledger, gists).
- ``openai_good``: the same pipeline with our OpenAI-compatible summarizer, through the real
  ``openai`` client, against ``ipython_compact.testing.ModelServer`` scripted as a *good model*: it
  folds the previous summary in, keeps its sections, and copies identifiers exactly.
- ``openai_drifting``: the same, against a *drifting model*: it paraphrases (versions lose their
  minor part, paths lose their directories, ids and hashes become words, errors lose their
  message) and drops a required heading in two replies out of four (so both the resample and the
  repair path run).
- ``naive``: a naive rolling summary: the offline summarizer rolling its own previous summary with
  no anchors, no drift guard, no ledger and no pointers (the ``<externalized>`` block is removed
  from its view).

Goals (checked for the ``offline`` and ``openai_good`` arms, printed as true/false):
level 1 + level 2 ≥ 99% of all probes; level 1 ≥ 90% of the probes planted in the last 5
compactions and of every result printed on the last line of an output; goal, constraints and a pin
100% verbatim; checkpoint tokens flat over the second half (fitted growth over the second half
≤ 5% of its mean).

Prints one JSON object (``table``: per arm and probe type). Usage:
``.venv/bin/python bench/bench_fidelity_probes.py [--chunks 30] [--sessions analysis,...]``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_summarizers import summarizer_for

from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.context import build_context
from ipython_compact.core.drift import extract_identifiers
from ipython_compact.core.entries import text_of_content
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.tokens import estimate_message_tokens
from ipython_compact.core.triage import INDEX_HEADER
from ipython_compact.store import SessionStore
from ipython_compact.testing import ModelServer, RecordedRequest, Reply

# generated sessions live with the tests
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from generated_sessions import PROBE_KINDS, SESSION_KINDS, GeneratedSession, Probe, make_session

ARMS = ("offline", "openai_good", "openai_drifting", "naive")
PIN_TEXT = "Escalation contact for this work: ops-pager 5512."
_POINTER = re.compile(r"\[entry (\S+) · [\d,]+ lines · recall \S+\]")
_EXTERNALIZED = re.compile(r"\n*<externalized(?:\s[^>]*)?>.*?</externalized>\n*", re.DOTALL)
_SECTION = re.compile(r"(?m)^## (.+)$")


# ------------------------------------------------------------------------------ scripted models
def _between(text: str, tag: str) -> str:
    m = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.DOTALL)
    return m.group(1) if m else ""


def _sections(summary: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in summary.splitlines():
        m = _SECTION.match(line)
        if m:
            current = m.group(1).strip()
            out[current] = []
        elif line.strip() == "---" or line.startswith("**Turn context"):
            current = None  # the split turn's part follows; a model does not fold its separator in
        elif (
            current
            and line.strip()
            and line.strip() not in ("(none)", "- (none)", "- [x] (none)")
            and not line.startswith("###")
        ):
            out[current].append(line.strip())
    return out


def _keep(items: list[str], cap: int) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.pop(item, None)
        seen[item] = None
    return list(seen)[-cap:]


def good_model_text(prompt: str, *, honours_superseded: bool = True) -> str:
    """What a good model writes: every section, the previous summary folded in, identifiers exact,
    and an earlier statement the prompt's ``<superseded>`` block names left out (it is told so)."""
    conversation = _between(prompt, "conversation")
    previous = _sections(_between(prompt, "previous-summary"))
    earlier = [
        ln.strip()[len("- earlier: ") :]
        for ln in _between(prompt, "superseded").splitlines()
        if ln.strip().startswith("- earlier: ")
    ]
    if honours_superseded and earlier:
        previous = {
            name: [i for i in items if not any(e in i for e in earlier)] for name, items in previous.items()
        }
    users = [ln[len("[User]: ") :] for ln in conversation.splitlines() if ln.startswith("[User]: ")]
    says = [ln[len("[Assistant]: ") :] for ln in conversation.splitlines() if ln.startswith("[Assistant]: ")]
    decisions = [s for s in says if re.search(r"(?i)\b(decided|root cause|switch to|instead of)\b", s)]
    done = [s for s in says if s.startswith("Done")]
    nexts = [s[s.find("Next") :] for s in says if "Next I will" in s]
    if honours_superseded:  # a plan the block says was carried out is not a next step
        nexts = [n for n in nexts if not any(e in n or n in e for e in earlier)]
    idents = [value for _cls, value in extract_identifiers(conversation)]
    if (
        ("## Original Request") in prompt
        and "<previous-summary>" not in prompt
        and "Early Progress" in prompt.split("</conversation>")[-1]
    ):
        return "\n\n".join(
            [
                "## Original Request\n" + (users[0] if users else "(see the conversation)"),
                "## Early Progress\n" + "\n".join(f"- {d}" for d in (done or ["(none)"])),
                "## Context for Suffix\n" + "\n".join(f"- {i}" for i in _keep(idents, 40)),
            ]
        )
    # the goal: "(see <anchors>)" when the prompt shows the anchors (the note asks for a reference)
    goal = ["(see <anchors>)"] if "<anchors>" in prompt else previous.get("Goal") or users[:1] or ["(none)"]
    constraints = _keep(
        previous.get("Constraints & Preferences", [])
        + [u for u in users if re.search(r"(?i)\b(never|always|keep|do not|use at most|don't)\b", u)],
        10,
    )
    return "\n\n".join(
        [
            "## Goal\n" + "\n".join(goal),
            "## Constraints & "
            "Preferences\n"
            + "\n".join(f"- {c}" if not c.startswith("- ") else c for c in constraints or ["(none)"]),
            "## Progress\n### "
            "Done\n" + "\n".join(f"- [x] {d}" for d in done[-8:] or ["(none)"]) + "\n\n### In "
            "Progress\n(none)\n\n### "
            "Blocked\n(none)",
            "## Key Decisions\n"
            + "\n".join(
                d if d.startswith("- ") else f"- {d}"
                for d in _keep(previous.get("Key Decisions", []) + decisions, 20) or ["(none)"]
            ),
            "## Next Steps\n"
            + (f"1. {nexts[-1]}" if nexts else "\n".join(previous.get("Next Steps", [])) or "(none)"),
            "## Critical "
            "Context\n"
            + "\n".join(
                c if c.startswith("- ") else f"- {c}"
                for c in _keep(previous.get("Critical Context", []) + idents, 60) or ["(none)"]
            ),
        ]
    )


def drift(text: str) -> str:
    """The paraphrases a drifting model makes, applied to a good summary."""
    text = re.sub(r"\b(\d+)\.\d+(?:\.\d+)*\b", r"\1.x", text)
    text = re.sub(r"(?:~|\.{1,2})?/?(?:[\w.-]+/)+([\w.-]+)", r"\1", text)
    text = re.sub(r"\b([A-Z]\w*(?:Error|Exception)): [^\n]*", r"a \1", text)
    text = re.sub(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\b", "a hash", text)
    return re.sub(r"\b(run|shard|idx|feat)[-_][\w-]+", r"the \1", text)


def scripted(kind: str) -> Callable[[RecordedRequest], str | Reply]:
    calls = {"n": 0}

    def script(req: RecordedRequest) -> str | Reply:
        messages = req.messages
        prompt = str(messages[1]["content"]) if len(messages) > 1 else ""
        text = good_model_text(prompt)
        if kind == "drifting":
            calls["n"] += 1
            text = drift(text)
            # drops a heading in two replies of four: some resamples fix it, some need a repair
            if calls["n"] % 4 in (1, 2):
                text = re.sub(r"## (Key Decisions|Early Progress)\n", "", text)
        return text

    return script


# ------------------------------------------------------------------------------ scoring
def view_text(store: SessionStore, session: str, *, naive: bool) -> tuple[str, str]:
    """(context text, checkpoint text) of the session's current context."""
    messages = build_context(store.context_path(session))
    parts = [
        text_of_content(m.get("content"))
        + "".join(
            f"\n{json.dumps(b, ensure_ascii=False)}"
            for b in m.get("content") or []
            if isinstance(b, dict) and b.get("type") == "toolCall"
        )
        for m in messages
    ]
    text = "\n".join(parts)
    checkpoint = parts[0] if parts else ""
    if naive:
        text, checkpoint = _EXTERNALIZED.sub("\n", text), _EXTERNALIZED.sub("\n", checkpoint)
    return text, checkpoint


def gists(text: str) -> list[tuple[str, str]]:
    """(entry id, gist text) for every pointer in the context: its line plus the indented lines
    under it; an index item of the ``<externalized>`` block (``ID subject``) is a pointer whose
    gist is its subject (outputs of one subject share an item: ``ID, ID subject``)."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if line.startswith(INDEX_HEADER):
            for item in line[len(INDEX_HEADER) :].split(" · "):  # "ID subject" or "ID, ID, ID subject"
                ids, _, subject = item.strip().rpartition(", ")
                last, _, subject = subject.partition(" ")
                out.extend((entry_id, subject) for entry_id in [*(ids.split(", ") if ids else []), last])
            continue
        for m in _POINTER.finditer(line):
            body = [line]
            for nxt in lines[i + 1 :]:
                if not nxt.startswith("  "):
                    break
                body.append(nxt)
            out.append((m.group(1), "\n".join(body)))
    return out


def score(probes: list[Probe], text: str, recall: Callable[[str], str]) -> list[dict[str, Any]]:
    pointers = gists(text)
    rows = []
    cache: dict[str, str] = {}
    for p in probes:
        level = 0
        if p.answer in text:
            level = 1
        else:
            for entry_id, gist in pointers:
                if p.subject in gist:
                    body = cache.setdefault(entry_id, recall(entry_id))
                    if p.answer in body:
                        level = 2
                        break
        rows.append(
            {"kind": p.kind, "chunk": p.chunk, "last_line": p.last_line, "level": level, "answer": p.answer}
        )
    return rows


def slope(values: list[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(values) / n
    return sum((i - mx) * (v - my) for i, v in enumerate(values)) / sum((i - mx) ** 2 for i in range(n))


# ------------------------------------------------------------------------------ one run
def run(
    kind: str, arm: str, args: argparse.Namespace, workdir: Path, server: ModelServer | None
) -> dict[str, Any]:
    session_data: GeneratedSession = make_session(kind, seed=args.seed, chunks=args.chunks)
    store = SessionStore(workdir / f"{kind}-{arm}.db")
    store.create_session("s")
    settings = CompactionSettings(keep_recent_tokens=args.keep_recent_tokens)
    naive = arm == "naive"
    summarizer = summarizer_for(server)
    compactor = Compactor(
        store, summarizer, settings, anchors=not naive, drift_guard=not naive, ledger=not naive
    )
    sizes: list[int] = []
    anchors_ok: list[bool] = []
    repaired = resampled = failures = 0
    started = time.perf_counter()
    for k, chunk in enumerate(session_data.chunks, 1):
        store.append_many("s", [("message", {"message": m}) for m in chunk])
        if k == 3:
            compactor.pin("s", text=PIN_TEXT)
        try:
            result = compactor.compact("s", reason="threshold")
        except Exception as exc:  # a failed compaction is counted, the session goes on
            failures += 1
            print(f"{kind}/{arm}: compaction {k} failed: {exc}", file=sys.stderr)
            continue
        for call in result.details.get("calls", []):
            repaired += bool(call.get("repaired"))
            resampled += bool(call.get("resampled"))
        text, checkpoint = view_text(store, "s", naive=naive)
        sizes.append(estimate_message_tokens({"role": "user", "content": checkpoint}))
        wanted = [session_data.goal, *session_data.constraints] + ([PIN_TEXT] if k >= 3 else [])
        anchors_ok.append(all(w in text for w in wanted))
    elapsed = time.perf_counter() - started
    text, _ = view_text(store, "s", naive=naive)

    def recall(entry_id: str) -> str:
        return "\n".join(h.text for h in compactor.recall("s", entry_id=entry_id))

    rows = score(session_data.probes, text, recall)
    store.close()
    return {
        "rows": rows,
        "sizes": sizes,
        "anchors_ok": all(anchors_ok) and bool(anchors_ok),
        "repaired": repaired,
        "resampled": resampled,
        "failures": failures,
        "seconds": round(elapsed, 2),
    }


def summarize(results: list[dict[str, Any]], chunks: int) -> dict[str, Any]:
    rows = [r for res in results for r in res["rows"]]

    def rate(sel: list[dict[str, Any]], levels: tuple[int, ...]) -> float:
        return round(sum(r["level"] in levels for r in sel) / max(1, len(sel)), 4)

    per_kind = {
        k: {
            "probes": len(sel),
            "level1": rate(sel, (1,)),
            "level2": rate(sel, (2,)),
            "level1+2": rate(sel, (1, 2)),
        }
        for k in PROBE_KINDS
        if (sel := [r for r in rows if r["kind"] == k])
    }
    recent = [r for r in rows if r["chunk"] > chunks - 5]
    last_line = [r for r in rows if r["last_line"]]
    flat = []
    for res in results:
        half = [float(v) for v in res["sizes"][len(res["sizes"]) // 2 :]]
        mean = statistics.mean(half) if half else 0.0
        flat.append(
            {
                "slope": round(slope(half), 2),
                "half_mean": round(mean, 1),
                "flat": slope(half) * len(half) <= 0.05 * max(mean, 1.0),
            }
        )
    summary = {
        "probes": len(rows),
        "level1": rate(rows, (1,)),
        "level2": rate(rows, (2,)),
        "level1+2": rate(rows, (1, 2)),
        "level1_recent5": rate(recent, (1,)),
        "level1_last_line_results": rate(last_line, (1,)),
        "per_kind": per_kind,
        "anchors_verbatim_every_step": all(res["anchors_ok"] for res in results),
        "checkpoint_tokens_second_half": flat,
        "checkpoint_tokens_last": [res["sizes"][-1] if res["sizes"] else None for res in results],
        "repaired_calls": sum(res["repaired"] for res in results),
        "resampled_calls": sum(res["resampled"] for res in results),
        "failed_compactions": sum(res["failures"] for res in results),
        "seconds": round(sum(res["seconds"] for res in results), 2),
        "lost": [f"{r['kind']}@{r['chunk']}: {r['answer']}" for r in rows if r["level"] == 0][:12],
    }
    summary["goals"] = {
        "level1+2_ge_99pct_of_all_probes": summary["level1+2"] >= 0.99,
        "level1_ge_90pct_last_5_compactions": summary["level1_recent5"] >= 0.90,
        "level1_ge_90pct_last_line_results": summary["level1_last_line_results"] >= 0.90,
        "goal_constraints_pins_100pct_verbatim": summary["anchors_verbatim_every_step"],
        "checkpoint_tokens_flat_second_half": all(f["flat"] for f in flat),
    }
    return summary


def table(arms: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for kind in PROBE_KINDS:
        row = {
            "probe": kind,
            "probes": str(next(iter(arms.values()))["per_kind"].get(kind, {}).get("probes", 0)),
        }
        for arm, s in arms.items():
            k = s["per_kind"].get(kind, {})
            row[arm] = f"{k.get('level1', 0):.0%} + {k.get('level2', 0):.0%}"
        out.append(row)
    row = {"probe": "all", "probes": str(next(iter(arms.values()))["probes"])}
    row.update({arm: f"{s['level1']:.0%} + {s['level2']:.0%}" for arm, s in arms.items()})
    out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=30, help="chunks per session = rolling compactions")
    parser.add_argument("--sessions", default=",".join(SESSION_KINDS))
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--keep-recent-tokens", type=int, default=800)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    out: dict[str, Any] = {"benchmark": "fidelity_probes", "config": vars(args), "arms": {}}
    with tempfile.TemporaryDirectory(prefix="bench-probes-") as tmp:
        for arm in args.arms.split(","):
            server = None
            if arm.startswith("openai_"):
                server = ModelServer(
                    script=scripted(arm.removeprefix("openai_")), model="bench-model"
                ).start()
            try:
                results = [run(kind, arm, args, Path(tmp), server) for kind in args.sessions.split(",")]
            finally:
                if server is not None:
                    server.stop()
            s = summarize(results, args.chunks)
            s["per_session"] = {
                kind: summarize([res], args.chunks) | {"per_session": None}
                for kind, res in zip(args.sessions.split(","), results, strict=True)
            }
            for v in s["per_session"].values():
                v.pop("per_session")
                v.pop("per_kind")
            out["arms"][arm] = s
    out["table"] = table(out["arms"])
    out["goals"] = {
        arm: out["arms"][arm]["goals"] for arm in ("offline", "openai_good") if arm in out["arms"]
    }
    out["elapsed_s"] = round(time.perf_counter() - started, 2)
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
