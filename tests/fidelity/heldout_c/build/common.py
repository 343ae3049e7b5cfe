"""Shared builder for held-out set C stories (stdlib only, seeded).

A story is a list of hand-written event blocks; seeded filler episodes from a
small per-story pool are drawn between blocks, and two closing filler episodes
plus a goodbye end the story so that the kept tail carries no fact value or
request keyword.  build() checks the invariants listed in ../README.md and
writes ../stories/<name>.json.
"""

import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))


def U(text, mark=None):
    return {"role": "user", "text": text, "_mark": mark}


def A(text, tool=None, mark=None):
    t = {"role": "assistant", "text": text, "_mark": mark}
    if tool is not None:
        t["tool_call"] = tool
    return t


def T(text, mark=None):
    return {"role": "tool", "text": text, "_mark": mark}


def bash(cmd):
    return {"name": "bash", "arguments": {"command": cmd}}


def edit(path, old, new):
    return {"name": "edit", "arguments": {"path": path, "old": old, "new": new}}


def _lower_blob(turn):
    s = turn.get("text", "")
    if turn.get("tool_call"):
        s += "\n" + json.dumps(turn["tool_call"].get("arguments", {}), ensure_ascii=False)
    return s.lower()


def build(name, domain, languages, blocks, fillers, goodbye, facts, requests, identifiers, seed,
          max_between=2):
    """blocks: list of lists of turns; fillers: list of callables rng -> list of turns."""
    rng = random.Random(seed)
    turns = []
    filler_idx = set()
    marks = {}

    def add(ts, is_filler):
        for t in ts:
            if t.get("_mark"):
                if t["_mark"] in marks:
                    raise SystemExit("duplicate mark %s" % t["_mark"])
                marks[t["_mark"]] = len(turns)
            if is_filler:
                filler_idx.add(len(turns))
            turns.append({k: v for k, v in t.items() if k != "_mark"})

    last = [None]

    def pick():
        # never the same filler kind twice in a row: it reads unnaturally
        f = rng.choice([g for g in fillers if g is not last[0]])
        last[0] = f
        return f(rng)

    for i, b in enumerate(blocks):
        add(b, False)
        last[0] = None
        n = rng.randint(0, max_between) if i < len(blocks) - 1 else 0
        for _ in range(n):
            add(pick(), True)
    for _ in range(2):
        add(pick(), True)
    add(goodbye, True)

    for f in facts:
        m = f.pop("mark")
        if m not in marks:
            raise SystemExit("no mark %s" % m)
        f["changed_at_turn"] = marks[m]

    # invariants
    errs = []
    values = []
    for f in facts:
        values += f["current"] + f["superseded"] + f["not_changes"]
        for v in f["superseded"] + f["not_changes"]:
            for c in f["current"] + identifiers:
                if v in c:
                    errs.append("%r is a substring of %r" % (v, c))
    keys = [m for r in requests for m in r["match"]]
    for i in sorted(filler_idx):
        blob = _lower_blob(turns[i])
        for v in values + keys:
            if v.lower() in blob:
                errs.append("filler turn %d contains %r" % (i, v))
    tail_blob = "\n".join(_lower_blob(t) for t in turns[-8:])
    for v in values + keys:
        if v.lower() in tail_blob:
            errs.append("tail contains %r" % v)
    whole = "\n".join(t.get("text", "") + json.dumps(t.get("tool_call", {}), ensure_ascii=False)
                      for t in turns)
    for f in facts:
        for v in f["current"] + f["superseded"] + f["not_changes"]:
            if v not in whole and v.replace('"', '\\"') not in whole:
                errs.append("value %r of %s not in story" % (v, f["subject"]))
    for ident in identifiers:
        if ident not in whole:
            errs.append("identifier %r not in story" % ident)
    for r in requests:
        if not any(m.lower() in whole.lower() for m in r["match"]):
            errs.append("request %s not in story" % r["id"])
    for i, t in enumerate(turns):
        if t["role"] == "tool" and not (i > 0 and turns[i - 1].get("tool_call")):
            errs.append("tool turn %d without call" % i)
        if t.get("tool_call") and not (i + 1 < len(turns) and turns[i + 1]["role"] == "tool"):
            errs.append("tool call %d without output" % i)
    if not 150 <= len(turns) <= 250:
        errs.append("turn count %d" % len(turns))
    if errs:
        raise SystemExit("\n".join(errs))
    story = {"name": name, "domain": domain, "languages": languages, "turns": turns,
             "facts": facts, "requests": requests, "identifiers": identifiers}
    out = os.path.join(os.path.dirname(HERE), "stories", name + ".json")
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(story, fh, ensure_ascii=False, indent=1)
        fh.write("\n")
    print(name, len(turns), "turns ->", out)
