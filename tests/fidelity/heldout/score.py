#!/usr/bin/env python3
"""Held-out scorer for compaction checkpoints.  FROZEN: do not edit.

score(story, checkpoint, tail) -> dict

Inputs
  story      : dict loaded from stories/<name>.json
  checkpoint : the final checkpoint text (Markdown, may contain appended
               blocks such as <anchors>...</anchors>, <ledger>...</ledger>)
  tail       : the kept tail rendered as plain text (the verbatim recent
               messages)
  "context" below means checkpoint + "\n" + tail.

Rules (exactly these, deterministic, stdlib only)

  R0  A line "marks history" if it contains (case-insensitive) any of:
        superseded, replaced, revised, earlier:, was:, history, no longer,
        rejected, not adopted, hypothetical, cancelled, canceled, withdrawn,
        unclear which
      ("instead of" is deliberately NOT a marker.)

  R1  Current facts stated: a fact counts as stated if ANY of its `current`
      strings occurs in the context (exact, case-sensitive substring).
      Reported: count and list of misses.

  R2  Superseded stated as current: a fact is an offender if ANY of its
      `superseded` strings occurs (exact, case-sensitive) on a CHECKPOINT line
      that does not mark history (R0).  Only checkpoint lines count; the tail
      is ignored for this rule.  Counted per fact; offenders are listed with
      the offending line.

  R3  False supersessions applied: same as R2 but for the fact's
      `not_changes` strings (values that were only hypothetical, asked about,
      rejected, quoted from old docs, negated, historical, or staging/dev
      values).

  R4  Requests (match strings are case-insensitive substrings):
      - final_state "open" or "deferred": shown open if some line of the
        context contains a match string and does NOT contain (case-insens.)
        "done", "[x]", "cancel", "withdrawn".  Desired: shown open.
      - final_state "cancelled" or "done": shown open (= bad) if some
        CHECKPOINT line contains a match string and
          (the line lies in a section whose heading starts with
           "In Progress", "Next Steps", "Blocked" or "Goal"
           OR the line contains "open", "pending" or "[ ]")
        and the line does NOT contain "cancel", "withdrawn" or "dropped".
      Sections: a Markdown heading line (#..######) starts a section; a line
      that consists only of an XML-like tag (<name>, </name>) ends the
      current section (section = none).

  R5  Identifiers kept: an identifier counts if it occurs in the context
      (exact, case-sensitive substring).

  "perfect" is true iff R1 has no misses, R2 and R3 have no offenders,
  every open/deferred request is shown open, no cancelled/done request is
  shown open, and every identifier is kept.

CLI
  python3 score.py STORY.json CHECKPOINT.md [TAIL.txt]
  python3 score.py STORY.json CHECKPOINT.md --tail-turns N
      (tail = the story's last N turns rendered with render_turns)
  Prints the result dict as JSON.
"""
import json
import re
import sys

HISTORY_MARKERS = ("superseded", "replaced", "revised", "earlier:", "was:",
                   "history", "no longer", "rejected", "not adopted",
                   "hypothetical", "cancelled", "canceled", "withdrawn",
                   "unclear which")
OPEN_SECTIONS = ("in progress", "next steps", "blocked", "goal")
NOT_OPEN_WORDS = ("done", "[x]", "cancel", "withdrawn")
CLOSED_EXCUSES = ("cancel", "withdrawn", "dropped")
OPENISH_WORDS = ("open", "pending", "[ ]")

_HEADING = re.compile(r"^\s*#{1,6}\s+(.*?)\s*#*\s*$")
_TAG = re.compile(r"^\s*</?[A-Za-z_][\w\-]*\s*>\s*$")


def marks_history(line):
    low = line.lower()
    return any(m in low for m in HISTORY_MARKERS)


def _sectioned_lines(text):
    """Yield (section_heading_lowercase_or_None, line)."""
    section = None
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m:
            section = m.group(1).strip().lower()
            yield section, line
            continue
        if _TAG.match(line):
            section = None
            yield section, line
            continue
        yield section, line


def render_turns(turns):
    out = []
    for t in turns:
        s = "%s: %s" % (t["role"], t.get("text", ""))
        if t.get("tool_call"):
            s += "\n[tool_call %s] %s" % (
                t["tool_call"].get("name"),
                json.dumps(t["tool_call"].get("arguments", {}), ensure_ascii=False))
        out.append(s)
    return "\n\n".join(out)


def score(story, checkpoint, tail):
    checkpoint = checkpoint or ""
    tail = tail or ""
    context = checkpoint + "\n" + tail
    cp_lines = checkpoint.splitlines()
    ctx_lines = context.splitlines()

    res = {"story": story.get("name")}

    # R1
    facts = story.get("facts", [])
    misses = [f["subject"] for f in facts
              if not any(c in context for c in f.get("current", []))]
    res["facts_total"] = len(facts)
    res["current_facts_stated"] = len(facts) - len(misses)
    res["current_misses"] = misses

    # R2 / R3
    def offenders(key):
        offs = []
        for f in facts:
            hits = []
            for v in f.get(key, []):
                for line in cp_lines:
                    if v in line and not marks_history(line):
                        hits.append({"value": v, "line": line.strip()})
            if hits:
                offs.append({"subject": f["subject"], "hits": hits})
        return offs

    sup = offenders("superseded")
    res["facts_with_superseded"] = sum(1 for f in facts if f.get("superseded"))
    res["superseded_stated_as_current"] = len(sup)
    res["superseded_offenders"] = sup
    fal = offenders("not_changes")
    res["facts_with_not_changes"] = sum(1 for f in facts if f.get("not_changes"))
    res["false_supersessions_applied"] = len(fal)
    res["false_supersession_offenders"] = fal

    # R4
    reqs = story.get("requests", [])
    cp_sec = list(_sectioned_lines(checkpoint))
    open_total = open_shown = 0
    open_missing = []
    closed = {"cancelled": [], "done": []}
    closed_total = {"cancelled": 0, "done": 0}
    for r in reqs:
        ms = [m.lower() for m in r.get("match", [])]
        st = r["final_state"]
        if st in ("open", "deferred"):
            open_total += 1
            ok = False
            for line in ctx_lines:
                low = line.lower()
                if any(m in low for m in ms) and not any(w in low for w in NOT_OPEN_WORDS):
                    ok = True
                    break
            if ok:
                open_shown += 1
            else:
                open_missing.append(r["id"])
        elif st in ("cancelled", "done"):
            closed_total[st] += 1
            for sec, line in cp_sec:
                low = line.lower()
                if not any(m in low for m in ms):
                    continue
                in_open_sec = sec is not None and sec.startswith(OPEN_SECTIONS)
                openish = any(w in low for w in OPENISH_WORDS)
                if (in_open_sec or openish) and not any(w in low for w in CLOSED_EXCUSES):
                    closed[st].append({"id": r["id"], "line": line.strip()})
                    break
    res["requests"] = {
        "open_or_deferred_total": open_total,
        "open_or_deferred_shown_open": open_shown,
        "open_or_deferred_not_shown": open_missing,
        "cancelled_total": closed_total["cancelled"],
        "cancelled_shown_open": len(closed["cancelled"]),
        "cancelled_offenders": closed["cancelled"],
        "done_total": closed_total["done"],
        "done_shown_open": len(closed["done"]),
        "done_offenders": closed["done"],
    }

    # R5
    ids = story.get("identifiers", [])
    missing_ids = [i for i in ids if i not in context]
    res["identifiers_total"] = len(ids)
    res["identifiers_kept"] = len(ids) - len(missing_ids)
    res["identifiers_missing"] = missing_ids

    res["perfect"] = (not misses and not sup and not fal and not open_missing
                      and not closed["cancelled"] and not closed["done"]
                      and not missing_ids)
    return res


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    story = json.load(open(argv[1], encoding="utf-8"))
    checkpoint = open(argv[2], encoding="utf-8").read()
    tail = ""
    if len(argv) >= 5 and argv[3] == "--tail-turns":
        n = int(argv[4])
        tail = render_turns(story["turns"][-n:]) if n > 0 else ""
    elif len(argv) >= 4:
        tail = open(argv[3], encoding="utf-8").read()
    print(json.dumps(score(story, checkpoint, tail), ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
