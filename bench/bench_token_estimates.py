"""Token-estimate bench: the density estimate against a real tokenizer, before and after calibration.

Why (issue 33, item 4): through SmolLM2's tokenizer the density estimate was off by up to 4x
(digits), so a session of numeric tool outputs that looked like 23,600 tokens was 53,800 and
overflowed. ``core.token_calibration`` learns a per-class ratio from observed counts. Here each
class (prose, code, digits, JSON, German, Chinese, hex ids) gets generated texts (fixed seed);
the real count comes from llama.cpp's ``/extras/tokenize/count`` (the server ``make realmodel``
builds). "After three requests": the calibration has seen three texts of each class (what three
requests' usage deltas or tokenize calls would teach it), and is scored on ten others.

Goal: after three requests, median error within ±10% and worst within ±25% in every class.

A second table (``through_usage``) learns the way the agent does when the server has no tokenize
route: from usage. Per class, one conversation with the real server (a system message, then a user
message of the class per request, the model's one-token reply after each, ``max_tokens=1``); the
``TokenLearner`` learns from each request's reported prompt tokens, and its estimate made before
each of the six requests after the third is scored against what the server then counts: the part
added since the last usage (the hard part: the estimate's own error) and the whole prompt. Last, a
request with no usage to anchor on (as after a compaction: a fresh context of three texts of the
class) is scored whole — the request's fixed part (template) must not be read as a ratio.

Usage: python bench/bench_token_estimates.py   (prints one JSON document and two tables)
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ipython_compact.agent.token_learning import TokenLearner
from ipython_compact.core.entries import Entry
from ipython_compact.core.token_calibration import Calibration, content_class
from ipython_compact.core.tokens import estimate_entry_tokens, estimate_message_tokens
from ipython_compact.testing.llama_server import LlamaServer

WORDS = [
    "the",
    "model",
    "reads",
    "a",
    "file",
    "and",
    "writes",
    "the",
    "result",
    "to",
    "the",
    "log",
    "before",
    "it",
    "answers",
    "the",
    "user",
    "about",
    "which",
    "month",
    "had",
    "the",
    "best",
    "sales",
    "figures",
    "and",
    "why",
    "the",
    "totals",
    "differ",
    "from",
    "the",
    "report",
]
GERMAN = [
    "Die",
    "Größe",
    "der",
    "Datei",
    "überschreitet",
    "das",
    "Limit;",
    "bitte",
    "prüfen",
    "Sie",
    "die",
    "Einstellungen",
    "und",
    "versuchen",
    "Sie",
    "es",
    "später",
    "erneut,",
    "während",
    "der",
    "Kernel",
    "weiterläuft",
    "und",
    "Ergebnisse",
    "speichert",
]
CHINESE = "模型读取文件并将结果写入日志然后回答用户关于哪个月销售额最高以及为什么总数与报告不同的问题"


def prose(r: random.Random) -> str:
    return " ".join(r.choice(WORDS) for _ in range(r.randint(40, 160))).capitalize() + "."


def code(r: random.Random) -> str:
    lines = []
    for i in range(r.randint(6, 20)):
        name = r.choice(("total", "rows", "frame", "value", "result"))
        lines.append(
            r.choice(
                (
                    f"def step_{i}({name}, limit={r.randint(1, 99)}):",
                    f"    {name} = [x * {r.randint(2, 9)} for x in range({r.randint(5, 500)})]",
                    f"    if len({name}) > {r.randint(1, 50)}:",
                    f"        return sum({name}) / len({name})",
                    f"import numpy as np  # step {i}",
                )
            )
        )
    return "\n".join(lines)


def digits(r: random.Random) -> str:
    return "\n".join(
        " ".join(f"{r.uniform(-1000, 100000):.4f}" for _ in range(r.randint(4, 8)))
        for _ in range(r.randint(5, 20))
    )


def json_text(r: random.Random) -> str:
    rows = [
        {
            "id": r.randint(1, 10**6),
            "name": r.choice(WORDS),
            "score": round(r.random(), 4),
            "ok": r.random() > 0.5,
        }
        for _ in range(r.randint(3, 15))
    ]
    return json.dumps(rows)


def german(r: random.Random) -> str:
    return " ".join(r.choice(GERMAN) for _ in range(r.randint(30, 120))) + "."


def chinese(r: random.Random) -> str:
    return "".join(r.choice(CHINESE) for _ in range(r.randint(60, 300))) + "。"


def ids(r: random.Random) -> str:
    return "\n".join(
        f"{r.getrandbits(128):032x} {r.getrandbits(32):08x}-{r.getrandbits(16):04x}"
        for _ in range(r.randint(3, 15))
    )


CLASSES: dict[str, Callable[[random.Random], str]] = {
    "prose": prose,
    "code": code,
    "digits": digits,
    "json": json_text,
    "german": german,
    "chinese": chinese,
    "ids": ids,
}
LEARN, SCORE = 3, 10
USAGE_SCORE, USAGE_N_CTX = 6, 16384  # requests scored per conversation; its window


def estimate(text: str) -> int:
    return estimate_message_tokens({"role": "user", "content": text})


SYSTEM = "You are a helpful assistant. Read what the user sends and answer in one word."


def _entry(n: int, kind: str, data: dict[str, object]) -> Entry:
    return Entry(id=f"e{n}", parent_id=f"e{n - 1}" if n else None, kind=kind, timestamp="t", data=data)


def _openai(path: list[Entry]) -> list[dict[str, str]]:
    out = []
    for e in path:
        if e.kind == "system":
            out.append({"role": "system", "content": str(e.data["content"])})
        else:
            m = e.data["message"]
            assert isinstance(m, dict)
            out.append({"role": str(m["role"]), "content": str(m["content"])})
    return out


def _prompt_tokens(srv: LlamaServer, path: list[Entry]) -> tuple[int, int, str]:
    got = srv.post_json(
        "/v1/chat/completions",
        {"model": srv.alias, "messages": _openai(path), "max_tokens": 1, "temperature": 0},
        timeout=600,
    )
    usage = got["usage"]
    reply = str(got["choices"][0]["message"]["content"])
    return int(usage["prompt_tokens"]), int(usage["completion_tokens"]), reply


def through_usage(srv: LlamaServer, texts: list[str]) -> dict[str, float]:
    """One class's conversation (see the module docstring): errors of the estimate made before each
    request from the fourth on, and of a fresh context with no usage to anchor on."""
    learner = TokenLearner(None, srv.alias, "density")
    path = [_entry(0, "system", {"content": SYSTEM})]
    delta_errors: list[float] = []
    whole_errors: list[float] = []
    for k, text in enumerate(texts[: LEARN + USAGE_SCORE]):
        path.append(_entry(len(path), "message", {"message": {"role": "user", "content": text}}))
        counts = [estimate_entry_tokens(e) for e in path]
        believed = learner.context(path, counts)
        prompt, completion, reply = _prompt_tokens(srv, path)
        if k >= LEARN:
            added = believed.tokens - believed.usage_tokens
            delta_errors.append(added / (prompt - believed.usage_tokens) - 1)
            whole_errors.append(believed.tokens / prompt - 1)
        learner.learn(path, counts, prompt)
        usage = {"input": prompt, "output": completion, "totalTokens": prompt + completion}
        path.append(
            _entry(len(path), "message", {"message": {"role": "assistant", "content": reply, "usage": usage}})
        )
    fresh = [_entry(0, "system", {"content": SYSTEM})] + [
        _entry(n, "message", {"message": {"role": "user", "content": t}}) for n, t in enumerate(texts[-3:], 1)
    ]
    believed_fresh = learner.context(fresh, [estimate_entry_tokens(e) for e in fresh]).tokens
    fresh_prompt = _prompt_tokens(srv, fresh)[0]
    return {
        "median_error_added": round(statistics.median(delta_errors), 3),
        "worst_error_added": round(max(delta_errors, key=abs), 3),
        "median_error_prompt": round(statistics.median(whole_errors), 3),
        "worst_error_prompt": round(max(whole_errors, key=abs), 3),
        "error_without_anchor": round(believed_fresh / fresh_prompt - 1, 3),
    }


def main() -> None:
    rng = random.Random(33)
    rows: dict[str, dict[str, float | str]] = {}
    with LlamaServer.from_environment(n_ctx=8192) as srv:
        calibration = Calibration()
        samples = {name: [make(rng) for _ in range(LEARN + SCORE)] for name, make in CLASSES.items()}
        counted = {name: [(t, estimate(t), srv.tokens(t)) for t in texts] for name, texts in samples.items()}
        for texts in counted.values():  # three "requests" of each class teach the calibration
            for text, est, real in texts[:LEARN]:
                calibration.observe(content_class(text), est, real)
        for name, texts in counted.items():
            held = texts[LEARN:]
            before = [est / real - 1 for _t, est, real in held]
            after = [calibration.corrected(t, est) / real - 1 for t, est, real in held]
            rows[name] = {
                "detected_as": content_class(held[0][0]),
                "ratio_before": round(sum(e for _t, e, _r in held) / sum(r for _t, _e, r in held), 2),
                "median_error_before": round(statistics.median(before), 3),
                "worst_error_before": round(max(before, key=abs), 3),
                "median_error_after": round(statistics.median(after), 3),
                "worst_error_after": round(max(after, key=abs), 3),
            }
    with LlamaServer.from_environment(n_ctx=USAGE_N_CTX) as srv:  # one conversation per class fits
        usage_rows = {name: through_usage(srv, texts) for name, texts in samples.items()}
    ok = all(
        abs(float(r["median_error_after"])) <= 0.10 and abs(float(r["worst_error_after"])) <= 0.25
        for r in rows.values()
    )
    usage_ok = all(
        abs(r["median_error_added"]) <= 0.10
        and abs(r["worst_error_added"]) <= 0.25
        and abs(r["error_without_anchor"]) <= 0.25
        for r in usage_rows.values()
    )
    print(
        json.dumps(
            {
                "classes": rows,
                "goal_met": ok,
                "through_usage": usage_rows,
                "through_usage_goal_met": usage_ok,
            },
            indent=2,
        )
    )
    print(
        "\n| class | detected as | estimate÷real before | median err before | worst before "
        "| median after | worst after |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['detected_as']} | {r['ratio_before']} | {r['median_error_before']:+.0%} | "
            f"{r['worst_error_before']:+.0%} | {r['median_error_after']:+.0%} | "
            f"{r['worst_error_after']:+.0%} |"
        )
    print(
        "\n| class (through usage) | median err, added part | worst, added part | median, whole prompt "
        "| worst, whole prompt | no anchor (fresh context) |"
    )
    print("|---|---|---|---|---|---|")
    for name, u in usage_rows.items():
        print(
            f"| {name} | {u['median_error_added']:+.0%} | {u['worst_error_added']:+.0%} | "
            f"{u['median_error_prompt']:+.0%} | {u['worst_error_prompt']:+.0%} | "
            f"{u['error_without_anchor']:+.0%} |"
        )


if __name__ == "__main__":
    main()
