"""A scripted *ideal* model for the fidelity benches: its summary states only what is true now.

Why (issue 32): with a perfect model summary, whatever is still wrong in the checkpoint is the
deterministic layers' doing (anchors, decision book, ledger, drift guard) or the update prompt's
(a ``<superseded>`` block that names a false "earlier/now" pair). The bench sets ``Truth`` before
each compaction (the story's ground truth at that point); the script answers every summary
request with the required sections holding exactly those current lines, and records the pairs
each update prompt's ``<superseded>`` block named, so a bench can count the false ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from bench_fidelity_probes import good_model_text

from ipython_compact.testing import RecordedRequest, Reply


@dataclass
class Truth:
    """What holds at the compaction being made: the goal, current facts, open requests."""

    goal: str = ""
    facts: list[str] = field(default_factory=list)
    open_requests: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    # (earlier, now) pairs the update prompts' <superseded> blocks named, across the run
    superseded_pairs: list[tuple[str, str]] = field(default_factory=list)


def _between(text: str, tag: str) -> str:
    m = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.DOTALL)
    return m.group(1) if m else ""


def superseded_pairs(prompt: str) -> list[tuple[str, str]]:
    """The (earlier, now) pairs of a prompt's ``<superseded>`` block."""
    lines = _between(prompt, "superseded").splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.strip().startswith("- earlier: ") and i + 1 < len(lines):
            now = lines[i + 1].strip()
            out.append((line.strip()[len("- earlier: ") :], now.removeprefix("now: ")))
    return out


def ideal_text(truth: Truth) -> str:
    """The ideal checkpoint: every section, only current lines."""

    def items(lines: list[str]) -> str:
        return "\n".join(f"- {x}" for x in lines) or "(none)"

    return "\n\n".join(
        [
            "## Goal\n" + (truth.goal or "(none)"),
            "## Constraints & Preferences\n(none)",
            "## Progress\n### Done\n"
            + ("\n".join(f"- [x] {d}" for d in truth.done) or "(none)")
            + "\n\n### In Progress\n"
            + ("\n".join(f"- [ ] {r}" for r in truth.open_requests) or "(none)")
            + "\n\n### Blocked\n(none)",
            "## Key Decisions\n" + items(truth.facts),
            "## Next Steps\n(none)",
            "## Critical Context\n(none)",
        ]
    )


def ideal_script(truth: Truth) -> Callable[[RecordedRequest], str | Reply]:
    """The ModelServer script: the ideal checkpoint for ``truth`` as it is when asked (the split
    turn's prefix summary, which has its own headings, as the good model writes it)."""

    def script(req: RecordedRequest) -> str | Reply:
        messages = req.messages
        prompt = str(messages[1]["content"]) if len(messages) > 1 else ""
        truth.superseded_pairs.extend(superseded_pairs(prompt))
        if "## Original Request" in prompt and "Early Progress" in prompt.split("</conversation>")[-1]:
            return good_model_text(prompt)
        return ideal_text(truth)

    return script
