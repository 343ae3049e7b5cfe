"""Held-out precision benchmark: stories written blind, scored by their own frozen scorer.

Why (issue 32): our precision bench was written next to the code, so passing it can mean the
code was tuned to it. The stories under ``tests/fidelity/heldout/`` were written without reading
the code and are frozen (never edited to make them pass). Each story's turns are appended to a
real SQLite log in ``--compactions`` chunks, compacting after each (rolling compactions); the
final context (checkpoint + kept tail) is scored by the set's own ``score.py``.

Arms: ``offline`` (full pipeline, offline summarizer) and ``openai_ideal`` (the OpenAI-compatible
summarizer through the real ``openai`` client against ``testing.ModelServer`` scripted as an ideal
model, ``ideal_model``: its summary states only the story's current values and its open
requests; whatever is still wrong is the deterministic layers' or the update prompt's doing). The
ideal arm also counts the ``<superseded>`` pairs the update prompts named whose "earlier" is a
value that never changed (a not-change) or is still current: false pairs told to the model.

Prints one JSON object: per arm, per story and totals (``table``).
Usage: ``.venv/bin/python bench/bench_fidelity_heldout.py [--compactions 30] [--arms offline]
[--set heldout|heldout_b|own]`` (``own``: our stories, ``tests/fidelity/own/``, not held out).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench_summarizers import summarizer_for
from generated_sessions import Writer
from ideal_model import Truth, ideal_script

from ipython_compact.compaction.compactor import Compactor, NothingToCompact
from ipython_compact.core.context import build_context
from ipython_compact.core.entries import text_of_content
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore
from ipython_compact.testing import ModelServer

HELDOUT = Path(__file__).resolve().parent.parent / "tests" / "fidelity" / "heldout"
ARMS = ("offline", "openai_ideal")
JSON = dict[str, Any]


def scorer(folder: Path = HELDOUT) -> Any:
    """The set's own ``score.py`` if it has one (``own``: the same rules), else the first held-out
    set's frozen one, loaded as it is."""
    path = folder / "score.py" if (folder / "score.py").exists() else HELDOUT / "score.py"
    spec = importlib.util.spec_from_file_location("heldout_score", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stories(folder: Path = HELDOUT) -> list[JSON]:
    """The stories of a held-out set (``heldout``, or ``heldout_b``: written later by another blind
    writer and never seen while the heuristics changed); both are scored by the first set's
    frozen ``score.py``."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted((folder / "stories").glob("*.json"))]


def messages(story: JSON) -> list[tuple[int, JSON]]:
    """(turn index, pi-shaped message) for each turn: a user or assistant message, an assistant's
    tool call with the next ``tool`` turn as its result."""
    w = Writer(start_ms=1_800_000_000_000)
    out: list[tuple[int, JSON]] = []
    turns = story["turns"]
    i = 0
    while i < len(turns):
        t = turns[i]
        if t["role"] == "user":
            w.user(t.get("text", ""))
        elif t["role"] == "assistant" and t.get("tool_call"):
            result = (
                turns[i + 1].get("text", "") if i + 1 < len(turns) and turns[i + 1]["role"] == "tool" else ""
            )
            call = t["tool_call"]
            w.call(str(call.get("name")), dict(call.get("arguments") or {}), result, text=t.get("text", ""))
            out.extend((i, m) for m in w.take())
            i += 2 if result or (i + 1 < len(turns) and turns[i + 1]["role"] == "tool") else 1
            continue
        elif t["role"] == "assistant":
            w.say(t.get("text", ""))
        else:  # a tool turn with no call before it: shown as the assistant's report
            w.say(t.get("text", ""))
        out.extend((i, m) for m in w.take())
        i += 1
    return out


def set_truth(truth: Truth, story: JSON, turn: int) -> None:
    """What the ideal model states after ``turn``: each fact's current value once established
    (the story gives final values only), the requests whose final state is open or deferred."""
    truth.goal = story["turns"][0]["text"][:300]
    truth.facts = [
        f"{f['subject']}: {f['current'][0]}"
        for f in story["facts"]
        if f.get("current") and f.get("changed_at_turn", 0) <= turn
    ]
    truth.open_requests = [
        r["match"][0] for r in story["requests"] if r["final_state"] in ("open", "deferred")
    ]


def context_of(store: SessionStore) -> tuple[str, str]:
    """(checkpoint, tail) of the session's current context, the tail's tool calls included."""
    parts = []
    for m in build_context(store.context_path("s")):
        text = text_of_content(m.get("content"))
        calls = [
            json.dumps(b.get("arguments", {}), ensure_ascii=False)
            for b in m.get("content") or []
            if isinstance(b, dict) and b.get("type") == "toolCall"
        ]
        parts.append("\n".join([text, *calls]))
    return (parts[0] if parts else ""), "\n".join(parts[1:])


def run_story(arm: str, story: JSON, args: argparse.Namespace, workdir: Path) -> JSON:
    truth = Truth() if arm == "openai_ideal" else None
    server = ModelServer(script=ideal_script(truth), model="bench-model").start() if truth else None
    try:
        store = SessionStore(workdir / f"{arm}-{story['name']}.db")
        store.create_session("s")
        summarizer = summarizer_for(server)
        compactor = Compactor(
            store, summarizer, CompactionSettings(keep_recent_tokens=args.keep_recent_tokens)
        )
        msgs = messages(story)
        n = args.compactions
        size = -(-len(msgs) // n)
        started = time.perf_counter()
        done = 0
        for k in range(n):
            chunk = msgs[k * size : (k + 1) * size]
            if not chunk:
                continue
            store.append_many("s", [("message", {"message": m}) for _t, m in chunk])
            if truth is not None:
                set_truth(truth, story, chunk[-1][0])
            try:
                compactor.compact("s", reason="threshold")
                done += 1
            except NothingToCompact:
                continue
        checkpoint, tail = context_of(store)
        store.close()
    finally:
        if server is not None:
            server.stop()
    found = scorer(HELDOUT.parent / args.set).score(story, checkpoint, tail)
    found["offending_lines"] = offending_lines(found, checkpoint)
    found["compactions"] = done
    found["seconds"] = round(time.perf_counter() - started, 2)
    if truth is not None:
        stale_ok = {v for f in story["facts"] for v in (*f.get("current", []), *f.get("not_changes", []))}
        found["false_pairs_told"] = [
            (old, new)
            for old, new in dict.fromkeys(truth.superseded_pairs)
            if any(v in old for v in stale_ok)
        ]
    return found


_TAG = re.compile(r"^\s*<(/?)([A-Za-z_][\w\-]*)[^>]*>\s*$")
_HEADING = re.compile(r"^\s*(#{1,6})\s+(.*?)\s*$")


def layers(checkpoint: str) -> dict[str, str]:
    """Which layer wrote each checkpoint line: the innermost block tag it sits in (``anchors``,
    ``ledger``, ``drift-guard``) or, in the summary text, its section heading path
    (``summary: Progress/Done``). A line written twice keeps its first layer."""
    out: dict[str, str] = {}
    tags: list[str] = []
    heads: list[str] = []
    for line in checkpoint.splitlines():
        tag = _TAG.match(line)
        if tag:
            if tag.group(1):
                while tags and tags.pop() != tag.group(2):
                    pass
            else:
                tags.append(tag.group(2))
                heads = [] if tag.group(2) != "summary" else heads
            continue
        head = _HEADING.match(line)
        if head:
            heads = [*heads[: len(head.group(1)) - 2], head.group(2)]
            continue
        inner = [t for t in tags if t != "summary"]
        where = inner[-1] if inner else "summary: " + "/".join(heads) if heads else "summary"
        out.setdefault(line.strip(), where)
    return out


def offending_lines(found: JSON, checkpoint: str) -> list[JSON]:
    """Each superseded / false / cancelled-shown-open checkpoint line with the layer that wrote
    it; each open request not shown, and each current fact missed (no line: nothing wrote it)."""
    where = layers(checkpoint)
    out: list[JSON] = []
    for kind, key in (("superseded", "superseded_offenders"), ("false", "false_supersession_offenders")):
        for o in found[key]:
            out.extend(
                {
                    "kind": kind,
                    "subject": o["subject"],
                    "value": h["value"],
                    "layer": where.get(h["line"], "?"),
                    "line": h["line"][:160],
                }
                for h in o["hits"]
            )
    for o in found["requests"]["cancelled_offenders"] + found["requests"]["done_offenders"]:
        out.append(
            {
                "kind": "closed shown open",
                "subject": o["id"],
                "layer": where.get(o["line"], "?"),
                "line": o["line"][:160],
            }
        )
    out.extend(
        {"kind": "open not shown", "subject": r, "layer": "-"}
        for r in found["requests"]["open_or_deferred_not_shown"]
    )
    out.extend({"kind": "current missed", "subject": f, "layer": "-"} for f in found["current_misses"])
    return out


TOTALS = (
    ("current facts stated", "current_facts_stated", "facts_total"),
    ("superseded stated as current", "superseded_stated_as_current", "facts_with_superseded"),
    ("false supersessions applied", "false_supersessions_applied", "facts_with_not_changes"),
    ("identifiers kept", "identifiers_kept", "identifiers_total"),
)
REQUESTS = (
    ("open/deferred requests shown open", "open_or_deferred_shown_open", "open_or_deferred_total"),
    ("cancelled requests shown open", "cancelled_shown_open", "cancelled_total"),
    ("done requests shown open", "done_shown_open", "done_total"),
)


def totals(rows: list[JSON]) -> dict[str, str]:
    out = {label: f"{sum(r[a] for r in rows)}/{sum(r[b] for r in rows)}" for label, a, b in TOTALS}
    out.update(
        {
            label: f"{sum(r['requests'][a] for r in rows)}/{sum(r['requests'][b] for r in rows)}"
            for label, a, b in REQUESTS
        }
    )
    if any("false_pairs_told" in r for r in rows):
        out["false earlier/now pairs told to the model"] = str(
            sum(len(r.get("false_pairs_told", [])) for r in rows)
        )
    out["perfect stories"] = f"{sum(bool(r['perfect']) for r in rows)}/{len(rows)}"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compactions", type=int, default=30)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--stories", default="", help="comma-separated story names (default: all)")
    parser.add_argument("--keep-recent-tokens", type=int, default=400)
    parser.add_argument("--set", default="heldout", help="the held-out set's folder under tests/fidelity")
    args = parser.parse_args(argv)
    chosen = [
        s
        for s in stories(HELDOUT.parent / args.set)
        if not args.stories or s["name"] in args.stories.split(",")
    ]
    out: JSON = {"benchmark": "fidelity_heldout", "config": vars(args), "arms": {}}
    with tempfile.TemporaryDirectory(prefix="bench-heldout-") as tmp:
        for arm in args.arms.split(","):
            rows = [run_story(arm, s, args, Path(tmp)) for s in chosen]
            out["arms"][arm] = {"totals": totals(rows), "stories": rows}
    labels = list(dict.fromkeys(k for v in out["arms"].values() for k in v["totals"]))
    out["table"] = [
        {"measure": k, **{a: v["totals"].get(k, "") for a, v in out["arms"].items()}} for k in labels
    ]
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
