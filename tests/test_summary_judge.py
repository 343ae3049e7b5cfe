"""A model's summary is judged against the offline one before it becomes the checkpoint (issue 33, item 3).

Why: SmolLM2 through llama.cpp stored "Checking for new feature... Successfully!" ten times, every
section "(none)", as a checkpoint. The judge is pure (``core/summary_judge.py``); what follows from
its verdict (kept, retried, merged, replaced) is ``compaction/summary_check.py``, tried here with a
scripted model over HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence

from builders import answer_entry, user_entry

from ipython_compact.compaction.summary_check import MERGED_HEADING, checked_summary
from ipython_compact.core.entries import Entry
from ipython_compact.core.summary_judge import judge_summary
from ipython_compact.summarizers.base import SummaryInput
from ipython_compact.summarizers.openai_summarizer import OpenAISummarizer
from ipython_compact.testing.model_server import ModelServer

SECTIONS = (
    "Goal",
    "Constraints & Preferences",
    "Progress\n### Done\n### In Progress\n### Blocked",
    "Key Decisions",
    "Next Steps",
    "Critical Context",
)
LOOP = "\n".join([f"## {s}\n(none)" for s in SECTIONS] + ["Checking for new feature... Successfully!"] * 10)
REFERENCE = (
    "## Goal\nFix run_7f3a9c in model_v2.pkl\n## Critical Context\nrun_7f3a9c, model_v2.pkl, port 8443"
)
FACTS = ("run_7f3a9c", "model_v2.pkl", "8443")


def test_headings_and_none_only_is_empty() -> None:
    text = "\n".join(f"## {s}\n(none)" for s in SECTIONS)
    assert judge_summary(text, REFERENCE, FACTS).code == "empty"
    assert judge_summary("   ", REFERENCE, FACTS).code == "empty"


def test_the_looping_reply_smollm2_gave_is_looping() -> None:
    verdict = judge_summary(LOOP, REFERENCE, FACTS)
    assert verdict.code == "looping" and "repeats 10 times" in verdict.why


def test_a_summary_keeping_fewer_facts_than_the_offline_one_is_poorer() -> None:
    verdict = judge_summary("## Goal\nFix the run in model_v2.pkl.", REFERENCE, FACTS)
    assert verdict.code == "poorer" and (verdict.kept, verdict.reference_kept, verdict.facts) == (1, 3, 3)


def test_a_summary_as_rich_as_the_offline_one_is_ok() -> None:
    text = "## Goal\nFix run_7f3a9c (model_v2.pkl), served on port 8443.\n## Next Steps\nRe-run it."
    assert judge_summary(text, REFERENCE, FACTS).ok


def span() -> Sequence[Entry]:
    return [
        user_entry("u1", "Fix run_7f3a9c: it loads model_v2.pkl and must serve on port 8443."),
        answer_entry("a1", "Loaded model_v2.pkl; run_7f3a9c now serves on 8443."),
    ]


def summarize_with(script: list[str]) -> tuple[str, dict[str, object], int]:
    with ModelServer(script=script) as srv:
        summarizer = OpenAISummarizer(model="local-model", base_url=srv.base_url, api_key="x")
        result = checked_summary(summarizer, SummaryInput(span(), max_tokens=400))
        return result.text, dict(result.judged or {}), len(srv.chat_requests)


def test_a_looping_reply_is_asked_again_then_replaced_by_the_offline_checkpoint() -> None:
    text, judged, requests = summarize_with([LOOP, LOOP])
    assert judged["action"] == "replaced" and requests == 2
    assert "Successfully!" not in text and "run_7f3a9c" in text


def test_a_looping_reply_then_a_good_one_is_retried_and_kept() -> None:
    good = "\n".join(
        f"## {s}\nStep {n}: run_7f3a9c uses model_v2.pkl on port 8443." for n, s in enumerate(SECTIONS)
    )
    text, judged, requests = summarize_with([LOOP, good])
    assert judged["action"] == "retried" and text == good and requests == 2


def test_a_poorer_reply_is_merged_with_the_offline_checkpoint() -> None:
    poor = "\n".join(f"## {s}\nWorked on part {n} of the task." for n, s in enumerate(SECTIONS))
    text, judged, requests = summarize_with([poor])
    assert judged["action"] == "merged" and requests == 1
    assert text.startswith(poor) and MERGED_HEADING in text and "run_7f3a9c" in text
