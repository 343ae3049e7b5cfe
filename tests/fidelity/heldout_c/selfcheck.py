#!/usr/bin/env python3
"""Self-check of held-out set C (stdlib only):  python3 selfcheck.py

Scoring uses the FROZEN scorer of the first set, ../heldout/score.py, unchanged.
For every story in stories/:
  (a) the hand-written ideal checkpoint selfcheck_data/<name>.ideal.md, with the
      story's last TAIL_TURNS turns as kept tail, must score perfect;
  (b) a naive checkpoint (every value ever mentioned listed as current, every
      request listed as an open next step) must be flagged on every fact that
      has superseded values, on every fact that has not-change values, and on
      every cancelled and done request;
  (c) format: roles, 150..250 turns, tool turns follow tool calls,
      changed_at_turn in range, and every category of set B's legend present
      in the story.
Exit code 0 iff all checks pass.
"""

import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "heldout"))
from score import render_turns, score  # noqa: E402

TAIL_TURNS = 8
FACT_CATEGORIES = {
    "explicit_change",
    "change_in_tool_edit",
    "change_in_tool_sed",
    "change_in_git_diff",
    "accepted_proposal",
    "revert",
    "multi_revision",
    "change_by_assistant_action",
    "not_change_hypothetical",
    "not_change_question",
    "not_change_rejected_proposal",
    "not_change_quoted_doc",
    "not_change_negation",
    "not_change_historical",
    "not_change_staging_value",
}
REQUEST_CATEGORIES = {
    "done",
    "done_identical_answer",
    "open",
    "deferred_by_user",
    "deferred_by_assistant",
    "cancelled",
    "cancelled_then_reopened",
    "announced_not_done",
    "cancel_in_other_language",
}


def frac(a: int, b: int) -> str:
    return f"{a}/{b}"


def naive_checkpoint(story):
    """Everything ever mentioned, stated as current; every request as an open next step."""
    out = ["## Goal", "Keep going with the task.", "", "## Facts"]
    for f in story["facts"]:
        out.append(f"- {f['subject']}: " + " / ".join(f["current"] + f["superseded"] + f["not_changes"]))
    out += ["", "## Next Steps"] + [f"- [ ] {r['match'][0]}" for r in story["requests"]]
    out += ["", "## Identifiers"] + [f"- {i}" for i in story["identifiers"]]
    return "\n".join(out)


def format_errors(story):
    errs = []
    turns = story["turns"]
    if not 150 <= len(turns) <= 250:
        errs.append(f"turn count {len(turns)} outside 150..250")
    for i, t in enumerate(turns):
        if t["role"] not in ("user", "assistant", "tool"):
            errs.append(f"bad role at turn {i}")
        if t.get("tool_call") and t["role"] != "assistant":
            errs.append(f"tool_call on a non-assistant turn {i}")
        if t["role"] == "tool" and not (i > 0 and turns[i - 1].get("tool_call")):
            errs.append(f"tool turn {i} has no tool_call before it")
    for f in story["facts"]:
        c = f.get("changed_at_turn")
        if c is None or not 0 <= c < len(turns):
            errs.append(f"changed_at_turn out of range for {f['subject']}")
    missing_f = FACT_CATEGORIES - {f["category"] for f in story["facts"]}
    missing_r = REQUEST_CATEGORIES - {r["category"] for r in story["requests"]}
    if missing_f:
        errs.append(f"fact categories missing: {sorted(missing_f)}")
    if missing_r:
        errs.append(f"request categories missing: {sorted(missing_r)}")
    return errs


def main():
    ok_all = True
    report = []
    for path in sorted(glob.glob(os.path.join(HERE, "stories", "*.json"))):
        with open(path, encoding="utf-8") as fh:
            story = json.load(fh)
        name = story["name"]
        errs = format_errors(story)
        tail = render_turns(story["turns"][-TAIL_TURNS:])
        with open(os.path.join(HERE, "selfcheck_data", name + ".ideal.md"), encoding="utf-8") as fh:
            ideal = fh.read()
        ri = score(story, ideal, tail)
        if not ri["perfect"]:
            errs.append(
                "ideal not perfect: "
                + json.dumps(
                    {
                        k: ri[k]
                        for k in (
                            "current_misses",
                            "superseded_offenders",
                            "false_supersession_offenders",
                            "identifiers_missing",
                            "requests",
                        )
                    },
                    ensure_ascii=False,
                )
            )
        rn = score(story, naive_checkpoint(story), tail)
        q = rn["requests"]
        if not (
            rn["superseded_stated_as_current"] == rn["facts_with_superseded"]
            and rn["false_supersessions_applied"] == rn["facts_with_not_changes"]
            and q["cancelled_shown_open"] == q["cancelled_total"]
            and q["done_shown_open"] == q["done_total"]
            and not rn["perfect"]
        ):
            errs.append("naive checkpoint not flagged everywhere")
        ok_all &= not errs
        report.append(
            {
                "story": name,
                "ok": not errs,
                "errors": errs,
                "turns": len(story["turns"]),
                "ideal": {
                    "perfect": ri["perfect"],
                    "current": frac(ri["current_facts_stated"], ri["facts_total"]),
                    "superseded_as_current": ri["superseded_stated_as_current"],
                    "false_supersessions": ri["false_supersessions_applied"],
                    "open_shown": frac(
                        ri["requests"]["open_or_deferred_shown_open"],
                        ri["requests"]["open_or_deferred_total"],
                    ),
                    "cancelled_shown_open": ri["requests"]["cancelled_shown_open"],
                    "done_shown_open": ri["requests"]["done_shown_open"],
                    "ids": frac(ri["identifiers_kept"], ri["identifiers_total"]),
                },
                "naive": {
                    "perfect": rn["perfect"],
                    "superseded_as_current": frac(
                        rn["superseded_stated_as_current"], rn["facts_with_superseded"]
                    ),
                    "false_supersessions": frac(
                        rn["false_supersessions_applied"], rn["facts_with_not_changes"]
                    ),
                    "cancelled_shown_open": frac(q["cancelled_shown_open"], q["cancelled_total"]),
                    "done_shown_open": frac(q["done_shown_open"], q["done_total"]),
                },
            }
        )
    print(json.dumps(report, ensure_ascii=False, indent=1))
    print("SELFCHECK", "PASS" if ok_all else "FAIL")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
