"""Precision and recall of the constraint extractor (``core.anchors.constraint_spans``).

The ANCHOR layer copies every sentence the extractor calls a constraint or preference verbatim into
every later checkpoint, so a false positive (a bug report, a pasted error) costs context forever and
a false negative loses a rule the user set. Labels:

- ``tests/fixtures/anchor_labels.jsonl``: every sentence of every user message in pi's two session
  files (``tests/fixtures/pi``), labelled by hand: a constraint is a rule or preference meant to
  hold beyond the request that states it ("invalid themes must NEVER explode", "don't modify the
  theme"); a bug report, a question, a one-off request or pasted text is not.
- The generated sessions (``ipython_compact.cli.demo_transcript`` and ``tests/generated_sessions.py``):
  labelled by construction (the planted constraints are the positives; every other user sentence,
  including planted distractors such as bug reports and pasted errors, is a negative).

Prints one JSON object: per source and overall, true/false positives, false negatives, precision,
recall, and the false positives and negatives themselves.
Usage: ``.venv/bin/python bench/bench_fidelity_anchors.py``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ipython_compact.core.entries import text_of_content
from ipython_compact.core.facts import SENTENCE_RE
from ipython_compact.core.pi_format import parse_pi_session
from ipython_compact.core.user_statements import constraint_spans

ROOT = Path(__file__).resolve().parent.parent
LABELS = ROOT / "tests" / "fixtures" / "anchor_labels.jsonl"
sys.path.insert(0, str(ROOT / "tests"))  # the generated sessions live with the tests


def sentences(text: str) -> Iterable[str]:
    for line in text.split("\n"):
        for m in SENTENCE_RE.finditer(line):
            if m.group(0).rstrip():
                yield m.group(0).rstrip()


def extracted(messages: Iterable[str]) -> set[str]:
    """Every sentence the extractor returns for these user messages."""
    return {text[s:e] for text in messages for s, e in constraint_spans(text)}


def fixture_user_texts(name: str) -> list[str]:
    path = ROOT / "tests" / "fixtures" / "pi" / name
    objects = [
        (n, json.loads(line)) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()
    ]
    out = []
    for entry in parse_pi_session(objects).entries:
        msg = entry.message
        if msg is not None and msg.get("role") == "user":
            out.append(text_of_content(msg.get("content")))
    return out


def generated_sources() -> dict[str, tuple[list[str], set[str], set[str]]]:
    """Generated sessions: (user texts, planted constraints, goal sentences). The goal is its own
    anchor, so its sentences count neither way."""
    from generated_sessions import SESSION_KINDS, make_session

    from ipython_compact.cli.demo_transcript import TranscriptGenerator

    out: dict[str, tuple[list[str], set[str], set[str]]] = {}
    gen = TranscriptGenerator(seed=2026)
    texts = [text_of_content(m["content"]) for r in gen.rounds(60) for m in r if m["role"] == "user"]
    out["generated:transcripts"] = (texts, set(gen.facts.constraints), set(sentences(gen.facts.goal)))
    for kind in SESSION_KINDS:
        session = make_session(kind, seed=2026, chunks=30)
        out[f"generated:{kind}"] = (
            session.user_texts(),
            set(session.constraints),
            set(sentences(session.goal)),
        )
    return out


def score(
    name: str, texts: list[str], positives: set[str], negatives: set[str] | None = None
) -> dict[str, Any]:
    found = extracted(texts)
    all_sentences = {s for t in texts for s in sentences(t)}
    negatives = (all_sentences - positives) if negatives is None else negatives
    tp = sorted(found & positives)
    fp = sorted(found & negatives)
    fn = sorted(positives - found)
    return {
        "source": name,
        "sentences": len(all_sentences),
        "constraints": len(positives),
        "true_positives": len(tp),
        "false_positives": len(fp),
        "false_negatives": len(fn),
        "precision": round(len(tp) / max(1, len(tp) + len(fp)), 4),
        "recall": round(len(tp) / max(1, len(positives)), 4),
        "fp": fp,
        "fn": fn,
    }


def measure() -> dict[str, Any]:
    labels = [json.loads(line) for line in LABELS.read_text().splitlines() if line.strip()]
    rows = []
    for name in ("before-compaction.jsonl", "large-session.jsonl"):
        mine = [r for r in labels if r["source"] == f"pi:{name}"]
        rows.append(
            score(
                f"pi:{name}",
                fixture_user_texts(name),
                {r["text"] for r in mine if r["constraint"]},
                {r["text"] for r in mine if not r["constraint"]},
            )
        )
    for name, (texts, positives, goal) in generated_sources().items():
        everything = {s for t in texts for s in sentences(t)}
        rows.append(score(name, texts, positives, everything - positives - goal))
    tp = sum(r["true_positives"] for r in rows)
    fp = sum(r["false_positives"] for r in rows)
    pos = sum(r["constraints"] for r in rows)
    overall = {
        "precision": round(tp / max(1, tp + fp), 4),
        "recall": round(tp / max(1, pos), 4),
        "true_positives": tp,
        "false_positives": fp,
        "constraints": pos,
    }
    return {"benchmark": "anchor_extractor", "overall": overall, "sources": rows}


def main() -> int:
    json.dump(measure(), sys.stdout, indent=2, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
