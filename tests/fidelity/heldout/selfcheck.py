#!/usr/bin/env python3
"""Self-check of the held-out set (stdlib only):  python3 selfcheck.py

For every story in stories/:
  (a) the hand-written ideal checkpoint selfcheck_data/<name>.ideal.md, with
      the story's last TAIL_TURNS turns as kept tail, must score perfect;
  (b) a naive checkpoint that lists every value ever mentioned as current and
      every request as an open next step must score badly:
      every fact with superseded values is flagged, every fact with
      not_changes is flagged, and every cancelled and done request is shown
      open.
Also checks story format (roles, 150..250 turns, tool turns follow tool
calls, changed_at_turn in range).
Exit code 0 iff all checks pass.
"""
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from score import score, render_turns  # noqa: E402

TAIL_TURNS = 8


def naive_checkpoint(story):
    lines = ["## Goal", "Continue the work.", "", "## Critical Context"]
    for f in story["facts"]:
        vals = f["current"] + f["superseded"] + f["not_changes"]
        lines.append("- %s: %s" % (f["subject"], ", ".join(vals)))
    lines += ["", "## Next Steps"]
    for r in story["requests"]:
        lines.append("- [ ] %s" % r["match"][0])
    lines += ["", "## Identifiers"] + ["- " + i for i in story["identifiers"]]
    return "\n".join(lines)


def check_format(story):
    errs = []
    t = story["turns"]
    if not (150 <= len(t) <= 250):
        errs.append("turn count %d outside 150..250" % len(t))
    for i, x in enumerate(t):
        if x["role"] not in ("user", "assistant", "tool"):
            errs.append("bad role at %d" % i)
        if x.get("tool_call") and x["role"] != "assistant":
            errs.append("tool_call on non-assistant turn %d" % i)
        if x["role"] == "tool" and not (i > 0 and t[i - 1].get("tool_call")):
            errs.append("tool turn %d without preceding tool_call" % i)
    for f in story["facts"]:
        c = f.get("changed_at_turn")
        if c is not None and not (0 <= c < len(t)):
            errs.append("changed_at_turn out of range for %s" % f["subject"])
    return errs


def main():
    ok_all = True
    summary = []
    for path in sorted(glob.glob(os.path.join(HERE, "stories", "*.json"))):
        story = json.load(open(path, encoding="utf-8"))
        name = story["name"]
        errs = check_format(story)
        tail = render_turns(story["turns"][-TAIL_TURNS:])
        ideal = open(os.path.join(HERE, "selfcheck_data", name + ".ideal.md"), encoding="utf-8").read()
        ri = score(story, ideal, tail)
        if not ri["perfect"]:
            errs.append("ideal checkpoint not perfect: " + json.dumps(
                {k: ri[k] for k in ("current_misses", "superseded_offenders", "false_supersession_offenders",
                                    "identifiers_missing")}, ensure_ascii=False)
                + " requests=" + json.dumps(ri["requests"], ensure_ascii=False))
        rn = score(story, naive_checkpoint(story), tail)
        rq = rn["requests"]
        bad_enough = (rn["superseded_stated_as_current"] == rn["facts_with_superseded"]
                      and rn["false_supersessions_applied"] == rn["facts_with_not_changes"]
                      and rq["cancelled_shown_open"] == rq["cancelled_total"]
                      and rq["done_shown_open"] == rq["done_total"]
                      and not rn["perfect"])
        if not bad_enough:
            errs.append("naive checkpoint not penalised enough")
        ok = not errs
        ok_all &= ok
        summary.append({
            "story": name, "ok": ok, "errors": errs, "turns": len(story["turns"]),
            "ideal": {"perfect": ri["perfect"], "current": "%d/%d" % (ri["current_facts_stated"], ri["facts_total"]),
                      "superseded_as_current": ri["superseded_stated_as_current"],
                      "false_supersessions": ri["false_supersessions_applied"],
                      "open_shown": "%d/%d" % (ri["requests"]["open_or_deferred_shown_open"], ri["requests"]["open_or_deferred_total"]),
                      "cancelled_shown_open": ri["requests"]["cancelled_shown_open"],
                      "done_shown_open": ri["requests"]["done_shown_open"],
                      "ids": "%d/%d" % (ri["identifiers_kept"], ri["identifiers_total"])},
            "naive": {"perfect": rn["perfect"], "current": "%d/%d" % (rn["current_facts_stated"], rn["facts_total"]),
                      "superseded_as_current": "%d/%d" % (rn["superseded_stated_as_current"], rn["facts_with_superseded"]),
                      "false_supersessions": "%d/%d" % (rn["false_supersessions_applied"], rn["facts_with_not_changes"]),
                      "cancelled_shown_open": "%d/%d" % (rq["cancelled_shown_open"], rq["cancelled_total"]),
                      "done_shown_open": "%d/%d" % (rq["done_shown_open"], rq["done_total"])},
        })
    print(json.dumps(summary, ensure_ascii=False, indent=1))
    print("SELFCHECK", "PASS" if ok_all else "FAIL")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
