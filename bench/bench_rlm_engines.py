"""One scripted RLM task, the same for three engines: our own Agent, CompactRLM on dspy, and rlms
with CompactIPythonEnv.

The task: an 8,000,000-character corpus sits in the kernel variable ``context``; 48 needles
``NEEDLE-k: value=v`` are planted in it. A scripted model scans it slice by slice with code — each
step keeps its needles in ``found_<i>``, prints an excerpt of the slice and asks a sub-model about
it with ``llm_query`` — until its history is far past a 16,384-token window, then adds up the
``found_*`` lists and answers. The model server enforces the window (HTTP 400 above it), so an
engine that does not compact cannot finish. The same code runs in every engine; only the reply
format differs (tool calls for ours, dspy's field markers, rlms' ```repl``` blocks).

Per engine: finished or not (and why), the model-context peak vs the window (the server's
estimate of each prompt, characters/4), total prompt tokens sent, compactions, sub-calls, wall
time, and whether the kernel's names were reported correctly after each compaction: ours and dspy
put an ``<ipython_state>`` notice in the next prompt; rlms tells the model to call ``SHOW_VARS()``,
so its scripted model does, and that output is checked. "Correct" = the ``found_*`` names listed
are exactly those the model had created.

Each engine runs in its own interpreter (dspy and rlms clash): ours in this one, dspy in
``.venv-dspy``, rlms in ``.venv-rlms`` (``make test`` builds both); a missing venv is reported as
skipped. For comparison, ``dspy_stock`` (plain ``dspy.RLM`` on the same kernel interpreter) and
``rlms_stock`` (rlms' own IPython environment, which never compacts) run the same task.
``python bench/bench_rlm_engines.py`` prints one JSON object; ``--engine NAME`` runs one.

Two more tasks (issue 22):

- ``--task fanout [--chars N] [--budget T] [--engine NAME]``: a root splits a ``FANOUT_CHARS``
  corpus (20,000,000 characters by default) over ``FANOUT_AGENTS`` (32) sub-calls in batches of 8,
  under a budget of about half of what the whole tree needs (26,000 tokens), on every engine
  (each in its own venv, as above; without ``--engine`` all five run). Ours: ``agent_query_batched``
  with each chunk as the child's ``context``; each child asks ``llm_query_batched`` about 4 excerpts
  and answers its sum; ``token_budget`` covers the tree. rlms: ``rlm_query_batched`` starts a child
  RLM per chunk (``max_depth=2``; the chunk is the child's context), the same child script;
  rlms' own cap, ``max_tokens``, stands in for the budget. dspy: it has no sub-agent that takes
  data, so each chunk travels in a sub-LM prompt (``llm_query_batched``); its only cap is a count,
  ``max_llm_calls`` (16, half the fan-out). Reported per engine: stopped how and why, tokens by
  level of the tree (root, sub-agents, ``llm_query``) from the server's side vs the budget, the
  prompts the server refused as over the window, the peak request vs the window, sub-agents
  started, requests, wall time.
- ``--task rollouts``: 64 concurrent ``await agent.aask(...)`` rollouts against the local server
  (64 agents, one SQLite log), each answering without code; the server takes ``LATENCY`` (0.2 s)
  per answer, the time concurrent rollouts overlap. The agents share one in-process
  shell as their kernel, because 64 kernel processes do not fit a 2-core machine; then 8
  rollouts with a kernel each, running code. Reported: wall time of all rollouts concurrently vs
  one rollout alone, and the most requests in flight at once.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ipython_compact.testing import ModelServer  # noqa: E402
from ipython_compact.testing.model_server import RecordedRequest, Reply, ToolCall  # noqa: E402

CORPUS_CHARS = 8_000_000
WINDOW = 16_384
RESERVE = 4_096
KEEP_RECENT = 4_000
STEPS = 24
NEEDLES = 48
EXCERPT = 4_000
RLMS_DEFAULT_LIMIT = 128_000  # rlms' context table value for an unknown model name
SUB_PREFIX = "Classify this excerpt:"
TASK = (
    "`context` holds an 8,000,000-character corpus. Find every line 'NEEDLE-k: value=v' and answer with "
    "the sum of all v. Scan it slice by slice with code; use llm_query(prompt) for a sub-model's "
    "opinion."
)


def make_corpus(seed: int = 13) -> tuple[str, int]:
    """The corpus and the expected answer (sum of the planted values)."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "kernel", "state", "window", "token", "summary", "probe"]
    lines: list[str] = []
    size = 0
    i = 0
    while size < CORPUS_CHARS:
        line = f"doc {i:07d} " + " ".join(rng.choice(words) for _ in range(12))
        lines.append(line)
        size += len(line) + 1
        i += 1
    total = 0
    for k in range(NEEDLES):
        value = rng.randrange(1, 1000)
        total += value
        lines[(k * len(lines)) // NEEDLES + rng.randrange(len(lines) // NEEDLES)] = (
            f"NEEDLE-{k}: value={value}"
        )
    return "\n".join(lines)[:CORPUS_CHARS], total


def scan_code(step: int) -> str:
    size = CORPUS_CHARS // STEPS
    start, end = (step - 1) * size, (step * size if step < STEPS else CORPUS_CHARS)
    return (
        "import re\n"
        f"found_{step} = [int(v) for v in re.findall(r'NEEDLE-\\d+: value=(\\d+)', context[{start}:{end}])]\n"
        f"print('slice {step}/{STEPS}: needles', found_{step})\n"
        f"print(context[{start}:{start + EXCERPT}])\n"
        f"print('sub-model:', llm_query({SUB_PREFIX!r} + context[{start}:{start + 300}]))"
    )


TOTAL_CODE = (
    "total = sum(sum(v) for k, v in sorted(globals().items()) if "
    "k.startswith('found_'))\nprint('TOTAL', total)"
)


def _names_in_notice(text: str) -> set[str] | None:
    notices = re.findall(r"These names are still defined: ([^\n]*)\.", text)
    return set(notices[-1].split(", ")) if notices else None


class Script:
    """The scripted model; ``fmt`` turns (note, code) into one engine's reply format."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.step = 0
        self.sub_calls = 0
        self.summaries = 0
        self.finished_code = False
        self.name_checks: list[dict[str, Any]] = []
        self._last_notice: frozenset[str] | None = None
        self._pending_show_vars = 0
        self._seen_compactions = 0

    def _expected(self) -> set[str]:
        return {f"found_{i}" for i in range(1, self.step + 1)}

    def _check(self, names: set[str] | None) -> None:
        got = {n for n in (names or set()) if n.startswith("found_")}
        self.name_checks.append(
            {
                "after_step": self.step,
                "correct": names is not None and got == self._expected(),
                "missing": sorted(self._expected() - got),
                "extra": sorted(got - self._expected()),
            }
        )

    def __call__(self, req: RecordedRequest) -> Any:
        messages = req.messages
        last = str(messages[-1].get("content", "")) if messages else ""
        if len(messages) == 1 and SUB_PREFIX in last:
            self.sub_calls += 1
            return "sub-model: filler text, no needle"
        if "Summarize your progress" in last:  # rlms' own summarizer call
            self.summaries += 1
            return (
                f"Scanned slices 1..{self.step} of {STEPS}; needles of slice i are in found_i. "
                f"Next: scan slice {self.step + 1}."
            )
        text = "\n".join(str(m.get("content", "")) for m in messages)
        if self.engine in ("ours", "dspy"):
            names = _names_in_notice(text)
            if names is not None and frozenset(names) != self._last_notice:
                self._last_notice = frozenset(names)
                self._check(names)
        if self.engine == "rlms":
            shown = re.findall(r"Available variables: ([^\n]*)", text)
            if shown and self._pending_show_vars:
                self._pending_show_vars -= 1
                self._check(set(re.findall(r"(\w+) \(", shown[-1])))
            compacted = re.search(r"compacted (\d+) time", text)
            if compacted and int(compacted.group(1)) > self._seen_compactions:
                self._seen_compactions = int(compacted.group(1))
                self._pending_show_vars += 1
                return self.fmt(
                    "The history was compacted; list what the kernel still holds.", "print(SHOW_VARS())"
                )
        if self.step < STEPS:
            self.step += 1
            return self.fmt(f"Scan slice {self.step}.", scan_code(self.step))
        if self.engine == "ours":
            if not self.finished_code:
                self.finished_code = True
                return self.fmt("Add up the needles.", TOTAL_CODE)
            total = re.findall(r"TOTAL (\d+)", text)
            return Reply(text=f"The sum of all needle values is {total[-1] if total else 'unknown'}.")
        if self.engine == "dspy":
            return self.fmt("Add up and submit.", TOTAL_CODE + "\nSUBMIT(answer=str(total))")
        return self.fmt(
            "Add up and answer.", TOTAL_CODE + "\nanswer['content'] = str(total)\nanswer['ready'] = True"
        )

    def fmt(self, note: str, code: str) -> Any:
        if self.engine == "ours":
            return Reply.tool_call("python", {"code": code}, text=note)
        if self.engine == "dspy":
            return (
                f"[[ ## reasoning ## ]]\n{note}\n\n[[ ## code ## ]]\n```python\n{code}\n```\n\n"
                "[[ ## completed ## ]]"
            )
        return f"{note}\n```repl\n{code}\n```"


def _figures(srv: ModelServer, script: Script, started: float) -> dict[str, Any]:
    prompts = [r.prompt_tokens for r in srv.chat_requests]
    return {
        # every prompt the engine sent, the ones the server refused as too long included
        "model_context_peak_tokens": max(prompts) if prompts else 0,
        "window_tokens": WINDOW,
        "requests": len(prompts),
        "total_tokens_sent": sum(prompts),
        "sub_calls": script.sub_calls,
        "scan_steps": script.step,
        "wall_s": round(time.perf_counter() - started, 2),
        "names_after_compaction": script.name_checks,
        # None: no compaction happened, so there was nothing to check
        "names_correct_after_every_compaction": all(c["correct"] for c in script.name_checks)
        if script.name_checks
        else None,
    }


# ---- engines --------------------------------------------------------------------------------------


def run_ours(corpus: str, expected: int, workdir: Path) -> dict[str, Any]:
    """Our Agent through its public API: ``ask(TASK, context=corpus)`` places the corpus in the
    kernel as ``context`` (the model sees its type, size and a preview), and the agent's own
    ``llm_query`` in the kernel sends each sub-call to the same server, logged as a sub-call."""
    import openai

    from ipython_compact import Agent, CompactionSettings, JupyterKernel, SessionStore

    script = Script("ours")
    settings = CompactionSettings(reserve_tokens=RESERVE, keep_recent_tokens=KEEP_RECENT)
    with ModelServer(script=script, context_window=WINDOW) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="bench", max_retries=0)
        store = SessionStore(workdir / "ours.db")
        started = time.perf_counter()
        with JupyterKernel(max_output_chars=20_000) as kernel:
            agent = Agent(
                store=store,
                session="bench",
                client=client,
                model="bench",
                provider="local",
                context_window=WINDOW,
                settings=settings,
                kernel=kernel,
                max_steps=STEPS + 6,
            )
            try:
                result = agent.ask(TASK, context=corpus)
                finished = result.stopped == "final" and str(expected) in result.text
                why = f"stopped={result.stopped}" + (f" ({result.error})" if result.error else "")
            except Exception as exc:
                finished, why = False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
            finally:
                agent.close()
        compactions = len(store.entries("bench", kinds=("compaction",)))
        store.close()
        return {
            "finished": finished,
            "why": why,
            "compactions": compactions,
            **_figures(srv, script, started),
        }


def run_dspy(corpus: str, expected: int, workdir: Path, *, stock: bool = False) -> dict[str, Any]:
    """CompactRLM; ``stock``: plain ``dspy.RLM`` on the same KernelInterpreter (no compaction)."""
    import dspy

    from ipython_compact.core.settings import CompactionSettings
    from ipython_compact.integrations.dspy import CompactRLM, KernelInterpreter
    from ipython_compact.store import SessionStore

    script = Script("dspy")
    with ModelServer(script=script, context_window=WINDOW) as srv:
        lm = dspy.LM("openai/bench", api_base=srv.base_url, api_key="bench", cache=False, num_retries=0)
        store = SessionStore(workdir / "dspy.db")
        if stock:
            rlm = dspy.RLM(
                "context, query -> answer",
                max_iters=STEPS + 6,
                max_llm_calls=STEPS + 6,
                interpreter_factory=KernelInterpreter,
            )
        else:
            rlm = CompactRLM(
                "context, query -> answer",
                store=store,
                window_tokens=WINDOW,
                settings=CompactionSettings(reserve_tokens=RESERVE, keep_recent_tokens=KEEP_RECENT),
                max_iters=STEPS + 6,
                max_llm_calls=STEPS + 6,
            )
        started = time.perf_counter()
        try:
            with dspy.context(lm=lm):
                pred = rlm(context=corpus, query=TASK)
            finished = str(pred.answer) == str(expected)
            why = "SUBMIT" if finished else f"answered {pred.answer!r}"
        except Exception as exc:
            finished, why = False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
        log = getattr(rlm, "log", None)
        compactions = len(log.checkpoints) if log is not None else 0
        store.close()
        return {
            "finished": finished,
            "why": why,
            "compactions": compactions,
            **_figures(srv, script, started),
        }


def run_rlms(corpus: str, expected: int, workdir: Path, *, stock: bool = False) -> dict[str, Any]:
    """rlms with CompactIPythonEnv; ``stock``: rlms' own IPython environment (subprocess kernel)."""
    from rlm import RLM

    from ipython_compact.integrations.rlms import install
    from ipython_compact.store import SessionStore

    install()
    script = Script("rlms")
    with ModelServer(script=script, context_window=WINDOW) as srv:
        store = SessionStore(workdir / "rlms.db")
        rlm = RLM(
            backend="openai",
            backend_kwargs={
                "base_url": srv.base_url,
                "api_key": "bench",
                "model_name": "bench",
                "max_retries": 0,
            },
            environment="ipython",
            compaction=True,
            compaction_threshold_pct=(WINDOW - RESERVE) / RLMS_DEFAULT_LIMIT,
            max_iterations=STEPS + 8,
            environment_kwargs={"kernel_mode": "subprocess"}
            if stock
            else {"ipython_compact": {"store": store, "session": "bench"}},
        )
        started = time.perf_counter()
        try:
            out = rlm.completion(corpus, root_prompt=TASK)
            finished = str(out.response).strip() == str(expected)
            why = "answer ready" if finished else f"answered {str(out.response)[:200]!r}"
        except Exception as exc:
            finished, why = False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
        logged = store.entries("bench", kinds=("custom",)) if not stock else []
        compactions = sum(1 for e in logged if e.data.get("custom_type") == "rlms_compaction")
        store.close()
        return {
            "finished": finished,
            "why": why,
            "compactions": compactions,
            **_figures(srv, script, started),
        }


def run_dspy_stock(corpus: str, expected: int, workdir: Path) -> dict[str, Any]:
    return run_dspy(corpus, expected, workdir, stock=True)


def run_rlms_stock(corpus: str, expected: int, workdir: Path) -> dict[str, Any]:
    return run_rlms(corpus, expected, workdir, stock=True)


# The three engines, then the two engines without our adapters' compaction, for comparison.
ENGINES = {
    "ours": (run_ours, ".venv"),
    "dspy": (run_dspy, ".venv-dspy"),
    "rlms": (run_rlms, ".venv-rlms"),
    "dspy_stock": (run_dspy_stock, ".venv-dspy"),
    "rlms_stock": (run_rlms_stock, ".venv-rlms"),
}


def run_one(name: str) -> dict[str, Any]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    corpus, expected = make_corpus()
    with tempfile.TemporaryDirectory(prefix=f"bench-rlm-{name}-") as tmp:
        os.environ["IPYTHON_COMPACT_DIR"] = str(Path(tmp) / "data")
        return {"expected_answer": expected, **ENGINES[name][0](corpus, expected, Path(tmp))}


# ---- issue 22: a fan-out under a tree budget, and concurrent rollouts (our agent) ------------------

LATENCY = 0.2
"""Seconds the rollouts' server takes per answer (a fast hosted model); rollouts overlap it."""
FANOUT_CHARS = 20_000_000
FANOUT_AGENTS = 32
FANOUT_BATCH = 8
FANOUT_EXCERPTS = 4
CHILD_TASK = "Sum the NEEDLE values in your context"
FANOUT_TASK = (
    f"`context` holds a large corpus. Split it over {FANOUT_AGENTS} sub-agents "
    f"(agent_query_batched, "
    "each chunk as its context) and add up their sums of the NEEDLE values."
)


def fanout_code(chars: int) -> str:
    size = chars // FANOUT_AGENTS
    return (
        f"n, size = {FANOUT_AGENTS}, {size}\n"
        f"tasks = [f'{CHILD_TASK} (chunk {{i}}).' for i in range(n)]\n"
        "sums = []\n"
        f"for b in range(0, n, {FANOUT_BATCH}):\n"
        f"    chunks = [context[i * size:(i + 1) * size] for i in range(b, min(n, b + {FANOUT_BATCH}))]\n"
        f"    sums += agent_query_batched(tasks[b:b + {FANOUT_BATCH}], contexts=chunks)\n"
        "ok = [int(s) for s in sums if not getattr(s, 'failed', False) and s.strip().isdigit()]\n"
        "print('answered', len(ok), 'of', n, 'total', sum(ok))\n"
        "print('\\n'.join(s[:160] for s in sums if getattr(s, 'failed', False))[:2000])"
    )


CHILD_CODE = (
    "import re\n"
    "vals = [int(v) for v in re.findall(r'NEEDLE-\\d+: value=(\\d+)', context)]\n"
    f"step = max(1, len(context) // {FANOUT_EXCERPTS})\n"
    f"notes = llm_query_batched([{SUB_PREFIX!r} + context[i * step:i * step + 300] for i in "
    f"range({FANOUT_EXCERPTS})])\n"
    "print(sum(vals))"
)


class FanoutScript:
    """Root: one fan-out cell, then the total. Child: one cell, then its sum. Sub-calls: a line."""

    def __init__(self, chars: int) -> None:
        self.chars = chars
        self.by_level: dict[str, int] = {"root": 0, "sub_agents": 0, "llm_query": 0}
        self.requests = 0
        self._lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Any:
        messages = req.messages
        users = [m for m in messages if m.get("role") == "user"]
        first = str(users[0].get("content", "")) if users else ""
        level = (
            "llm_query"
            if not (req.body or {}).get("tools")
            else "sub_agents"
            if first.startswith(CHILD_TASK)
            else "root"
        )
        with self._lock:
            self.by_level[level] += req.prompt_tokens
            self.requests += 1
        if level == "llm_query":
            return "sub-model: filler text, no needle"
        tools = [m for m in messages if m.get("role") == "tool"]
        if level == "sub_agents":
            return (
                Reply.tool_call("python", {"code": CHILD_CODE})
                if not tools
                else Reply(text=str(tools[-1].get("content", "")).strip().splitlines()[-1])
            )
        if not tools:
            return Reply.tool_call("python", {"code": fanout_code(self.chars)}, text="Fan out.")
        return Reply(text=f"Done: {str(tools[-1].get('content', ''))[:300]}")


def run_fanout(chars: int, budget: int) -> dict[str, Any]:
    """Our agent on the fan-out task; see the module docstring."""
    import openai

    from ipython_compact import Agent, SessionStore

    corpus, expected = fanout_corpus(chars)
    script = FanoutScript(len(corpus))
    with (
        tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp,
        ModelServer(script=script, context_window=WINDOW) as srv,
    ):
        os.environ["IPYTHON_COMPACT_DIR"] = str(Path(tmp) / "data")
        client = openai.OpenAI(base_url=srv.base_url, api_key="bench", max_retries=0)
        store = SessionStore(Path(tmp) / "fanout.db")
        started = time.perf_counter()
        with Agent(
            store=store,
            session="fanout",
            client=client,
            model="bench",
            context_window=WINDOW,
            token_budget=budget,
            max_sub_agents=FANOUT_AGENTS,
            max_live_sub_agents=FANOUT_BATCH,
            max_concurrent_subcalls=FANOUT_BATCH,
            max_steps=6,
        ) as agent:
            result = agent.ask(FANOUT_TASK, context=corpus)
            status = agent.status()
            wall = time.perf_counter() - started
            cell = [
                e.message["content"][0]["text"]
                for e in store.path("fanout")
                if e.role == "toolResult" and e.message
            ]
        tree = status["tree"]
        prompts = [r.prompt_tokens for r in srv.chat_requests]
        children = {k: v for k, v in tree["by_session"].items() if k != "fanout"}
        store.close()
    return {
        "engine": "ours",
        "corpus_chars": len(corpus),
        "sub_agents_planned": FANOUT_AGENTS,
        "expected_total": expected,
        "stopped": result.stopped,
        "why": result.text[:300],
        "root_cell": (cell[0].splitlines()[0] if cell else None),
        "token_budget": budget,
        "tree_tokens_used": tree["tokens_used"],
        "tokens_by_level": {
            "root": tree["by_session"].get("fanout", 0),
            "sub_agents": sum(children.values()),
        },
        "prompt_tokens_by_level_server": script.by_level,
        "sub_agents_started": tree["sub_agents_started"],
        "sub_agents_with_tokens": sum(1 for v in children.values() if v),
        "sub_calls_root": status["subcalls"],
        "requests": script.requests,
        "peak_request_tokens": max(prompts) if prompts else 0,
        "window_tokens": WINDOW,
        "wall_s": round(wall, 2),
    }


def fanout_corpus(chars: int) -> tuple[str, int]:
    """The fan-out corpus (``chars`` characters, 64 needles, each in the middle of a piece far from
    the root's chunk boundaries) and the expected total."""
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "kernel", "state"]
    line = " ".join(rng.choice(words) for _ in range(12))
    needles = [(k, rng.randrange(1, 1000)) for k in range(FANOUT_AGENTS * 2)]
    body = (line + "\n") * (chars // (len(line) + 1))
    cuts = [i * len(body) // (2 * len(needles)) for i in range(2 * len(needles) + 1)]
    pieces = [
        body[cuts[2 * i] : cuts[2 * i + 1]] + f"NEEDLE-{k}: "
        f"value={v}\n" + body[cuts[2 * i + 1] : cuts[2 * i + 2]]
        for i, (k, v) in enumerate(needles)
    ]
    return "".join(pieces), sum(v for _, v in needles)


def _needle_sum(text: str) -> int:
    return sum(int(v) for v in re.findall(r"NEEDLE-\d+: value=(\d+)", text))


class EngineFanoutScript:
    """The fan-out scripted for dspy and rlms (their reply formats and their sub-call facilities).

    dspy has no sub-agent that takes data: the root's only way to hand a chunk on is a sub-LM
    prompt (``llm_query_batched``), so each chunk travels in the prompt. rlms' ``rlm_query_batched``
    starts a child RLM per prompt with the prompt as the child's ``context`` (``max_depth=2``); the
    child sums its needles, asks ``llm_query_batched`` about 4 excerpts, and answers. Levels are
    told apart by the context size rlms states ("N total characters") and by dspy's field markers.
    """

    def __init__(self, engine: str, chars: int) -> None:
        self.engine = engine
        self.chars = chars
        self.by_level: dict[str, int] = {"root": 0, "sub_agents": 0, "llm_query": 0}
        self.requests_by_level: dict[str, int] = {"root": 0, "sub_agents": 0, "llm_query": 0}
        self.requests = 0
        self.root_turns = 0
        self._lock = threading.Lock()

    def _level(self, messages: list[dict[str, Any]]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in messages)
        if self.engine.startswith("dspy"):
            return "root" if "[[ ## " in text else "llm_query"
        sizes = [int(n.replace(",", "")) for n in re.findall(r"([\d,]+) total characters", text)]
        if not sizes:
            return "llm_query"
        return "root" if max(sizes) >= self.chars // 2 else "sub_agents"

    def __call__(self, req: RecordedRequest) -> Any:
        messages = req.messages
        level = self._level(messages)
        with self._lock:
            self.by_level[level] += req.prompt_tokens
            self.requests_by_level[level] += 1
            self.requests += 1
        last = str(messages[-1].get("content", "")) if messages else ""
        if level == "llm_query":
            return (
                str(_needle_sum(last))
                if last.startswith(CHILD_TASK)
                else ("sub-model: filler text, no needle")
            )
        if level == "sub_agents":
            code = CHILD_CODE + "\nanswer['content'] = str(sum(vals))\nanswer['ready'] = True"
            return f"Sum my chunk.\n```repl\n{code}\n```"
        with self._lock:
            self.root_turns += 1
            done = self.root_turns > 1  # the fan-out cell ran (or failed): answer with what came back
        size = self.chars // FANOUT_AGENTS
        if self.engine.startswith("dspy"):
            if done:
                return (
                    "[[ ## reasoning ## ]]\nSubmit what came back.\n\n[[ ## code ## ]]\n```python\n"
                    "SUBMIT(answer=str(total) if 'total' in globals() else 'no total')\n```\n\n[[ ## "
                    "completed ## ]]"
                )
            code = (
                f"n, size = {FANOUT_AGENTS}, {size}\nsums = []\n"
                f"for b in range(0, n, {FANOUT_BATCH}):\n"
                f"    sums += llm_query_batched([{CHILD_TASK!r} + ':\\n' + context[i * size:(i + 1) * "
                f"size] "
                f"for i in range(b, min(n, b + {FANOUT_BATCH}))])\n"
                "ok = [int(s) for s in sums if str(s).strip().isdigit()]\ntotal = sum(ok)\n"
                "print('answered', len(ok), 'of', n, 'total', total)"
            )
            return (
                f"[[ ## reasoning ## ]]\nFan out.\n\n[[ ## code ## ]]\n```python\n{code}\n```\n\n"
                "[[ ## completed ## ]]"
            )
        if done:
            return "Answer.\n```repl\nanswer['content'] = str(total)\nanswer['ready'] = True\n```"
        code = (
            f"n, size = {FANOUT_AGENTS}, {size}\nsums = []\n"
            f"for b in range(0, n, {FANOUT_BATCH}):\n"
            f"    sums += rlm_query_batched([context[i * size:(i + 1) * size] for i in range(b, min(n, b "
            f"+ {FANOUT_BATCH}))])\n"
            "ok = [int(s) for s in sums if str(s).strip().isdigit()]\ntotal = sum(ok)\n"
            "print('answered', len(ok), 'of', n, 'total', total)\n"
            "print([str(s)[:160] for s in sums if not str(s).strip().isdigit()][:3])"
        )
        return f"Fan out.\n```repl\n{code}\n```"


def run_fanout_engine(engine: str, chars: int, budget: int) -> dict[str, Any]:
    """The fan-out on dspy (CompactRLM, or stock ``dspy.RLM``) or rlms (our environment, or stock);
    each engine's own cap stands in for the tree budget: dspy's ``max_llm_calls`` (a count: half
    the sub-calls), rlms' ``max_tokens`` (the same token number as ours)."""
    corpus, expected = fanout_corpus(chars)
    script = EngineFanoutScript(engine, len(corpus))
    out: dict[str, Any] = {
        "engine": engine,
        "corpus_chars": len(corpus),
        "sub_agents_planned": FANOUT_AGENTS,
        "expected_total": expected,
    }
    with (
        tempfile.TemporaryDirectory(prefix=f"bench-fanout-{engine}-") as tmp,
        ModelServer(script=script, context_window=WINDOW) as srv,
    ):
        os.environ["IPYTHON_COMPACT_DIR"] = str(Path(tmp) / "data")
        started = time.perf_counter()
        try:
            if engine.startswith("dspy"):
                out.update(_fanout_dspy(engine, corpus, srv, Path(tmp)))
            else:
                out.update(_fanout_rlms(engine, corpus, srv, budget, Path(tmp)))
        except Exception as exc:
            out.update(stopped="error", why=f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}")
        wall = time.perf_counter() - started
        prompts = [r.prompt_tokens for r in srv.chat_requests]
        refused = [r for r in srv.chat_requests if r.prompt_tokens > WINDOW]  # never reached the script
        refused_by_level: dict[str, int] = {}
        for r in refused:
            level = script._level(r.messages)
            refused_by_level[level] = refused_by_level.get(level, 0) + r.prompt_tokens
    out.update(
        {
            "prompt_tokens_by_level_server": script.by_level,
            "requests": script.requests,
            "requests_by_level": script.requests_by_level,
            "token_budget": budget,
            "tree_tokens_server": sum(script.by_level.values()),
            "requests_refused_over_window": len(refused),
            "prompt_tokens_refused_by_level": refused_by_level,
            "peak_request_tokens": max(prompts) if prompts else 0,
            "window_tokens": WINDOW,
            "wall_s": round(wall, 2),
        }
    )
    return out


def _fanout_dspy(engine: str, corpus: str, srv: ModelServer, tmp: Path) -> dict[str, Any]:
    import dspy

    from ipython_compact.integrations.dspy import CompactRLM, KernelInterpreter
    from ipython_compact.store import SessionStore

    calls = FANOUT_AGENTS // 2  # dspy's only cap is a count of sub-LM calls: half of the fan-out
    lm = dspy.LM("openai/bench", api_base=srv.base_url, api_key="bench", cache=False, num_retries=0)
    store = SessionStore(tmp / "dspy.db")
    if engine == "dspy_stock":
        rlm = dspy.RLM(
            "context, query -> answer",
            max_iters=4,
            max_llm_calls=calls,
            interpreter_factory=KernelInterpreter,
        )
    else:
        rlm = CompactRLM(
            "context, query -> answer", store=store, window_tokens=WINDOW, max_iters=4, max_llm_calls=calls
        )
    try:
        with dspy.context(lm=lm):
            pred = rlm(context=corpus, query=FANOUT_TASK)
        return {
            "stopped": "SUBMIT",
            "why": f"answered {str(pred.answer)[:200]!r}",
            "budget": f"max_llm_calls={calls}",
            "sub_agents_started": 0,
        }  # dspy has no sub-agent that takes data: chunks go in sub-LM prompts
    finally:
        store.close()


def _fanout_rlms(engine: str, corpus: str, srv: ModelServer, budget: int, tmp: Path) -> dict[str, Any]:
    from rlm import RLM

    from ipython_compact.integrations.rlms import install
    from ipython_compact.store import SessionStore

    install()
    store = SessionStore(tmp / "rlms.db")
    children: list[int] = []
    env_kwargs: dict[str, Any] = (
        {"kernel_mode": "subprocess"} if engine == "rlms_stock" else {"ipython_compact": {"store": store}}
    )
    rlm = RLM(
        backend="openai",
        backend_kwargs={
            "base_url": srv.base_url,
            "api_key": "bench",
            "model_name": "bench",
            "max_retries": 0,
        },
        environment="ipython",
        environment_kwargs=env_kwargs,
        max_depth=2,
        max_iterations=4,
        max_tokens=budget,
        max_concurrent_subcalls=FANOUT_BATCH,
        compaction=engine == "rlms",
        on_subcall_start=lambda depth, model, preview: children.append(depth),
    )
    try:
        result = rlm.completion(corpus, root_prompt=FANOUT_TASK)
        return {
            "stopped": "answer ready",
            "why": f"answered {str(result.response)[:200]!r}",
            "budget": f"max_tokens={budget} (each child gets the whole number again)",
            "sub_agents_started": len(children),
        }
    finally:
        store.close()


def run_rollouts(count: int = 64, with_kernels: int = 8) -> dict[str, Any]:
    """``count`` concurrent ``aask`` rollouts on one shared in-process shell (no code), then
    ``with_kernels`` rollouts with a kernel each (one cell of code); see the module docstring."""
    import asyncio
    import threading

    import openai
    from IPython.core.interactiveshell import InteractiveShell

    from ipython_compact import Agent, SessionStore
    from ipython_compact.agent.kernel_tool import InProcessKernel

    lock = threading.Lock()
    stop = threading.Event()  # never set: a wait of LATENCY seconds
    flight = {"now": 0, "peak": 0}

    def answer(req: RecordedRequest) -> Any:
        with lock:
            flight["now"] += 1
            flight["peak"] = max(flight["peak"], flight["now"])
        try:
            messages = req.messages
            tools = [m for m in messages if m.get("role") == "tool"]
            question = next(str(m["content"]) for m in messages if m.get("role") == "user")
            stop.wait(LATENCY)  # the model's own latency: what concurrent rollouts overlap
            if question.startswith("code") and not tools:
                return Reply(
                    tool_calls=(
                        ToolCall("python", {"code": "import math\nprint(math.factorial(200) % 1000003)"}),
                    )
                )
            return Reply(text=f"answer to {question[:40]}" + (f": {tools[-1]['content']}" if tools else ""))
        finally:
            with lock:
                flight["now"] -= 1

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rollouts-") as tmp, ModelServer(script=answer) as srv:
        os.environ["IPYTHON_COMPACT_DIR"] = str(Path(tmp) / "data")
        # openai's default retries: the test server's listen backlog (5) refuses some of 64 simultaneous
        # connects, which a real harness's client retries too
        client = openai.OpenAI(base_url=srv.base_url, api_key="bench")
        store = SessionStore(Path(tmp) / "rollouts.db")
        shell = InProcessKernel(InteractiveShell.instance())

        def agent(i: int, kernel: Any = shell) -> Agent:
            return Agent(
                store=store,
                session=f"rollout-{i}",
                client=client,
                model="bench",
                context_window=WINDOW,
                kernel=kernel,
                subcalls=kernel is not shell,
                max_steps=4,
            )

        async def many(agents: list[Agent], prefix: str) -> tuple[float, list[str]]:
            started = time.perf_counter()
            results = await asyncio.gather(*(a.aask(f"{prefix} {i}") for i, a in enumerate(agents)))
            return time.perf_counter() - started, [
                r.stopped if r.stopped == "final" else f"{r.stopped}: {r.error}" for r in results
            ]

        agents = [agent(i) for i in range(count)]
        one, _ = asyncio.run(many(agents[:1], "warm-up"))
        one, _ = asyncio.run(many(agents[:1], "alone"))
        flight["peak"] = 0
        wall, stops = asyncio.run(many(agents, "question"))
        out["no_code"] = {
            "rollouts": count,
            "finished": stops.count("final"),
            "wall_s": round(wall, 3),
            "not_finished": sorted({x for x in stops if x != "final"}),
            "one_alone_s": round(one, 3),
            "peak_in_flight": flight["peak"],
        }
        for a in agents:
            a.close()
        kernels = [agent(1000 + i, kernel=None) for i in range(with_kernels)]  # each starts its own kernel
        try:
            one, _ = asyncio.run(many(kernels[:1], "code alone"))
            flight["peak"] = 0
            wall, stops = asyncio.run(many(kernels, "code"))
        finally:
            for a in kernels:
                a.close()
        out["with_kernels"] = {
            "rollouts": with_kernels,
            "finished": stops.count("final"),
            "wall_s": round(wall, 3),
            "one_alone_s": round(one, 3),
            "peak_in_flight": flight["peak"],
        }
        store.close()
    return out


def _in_venvs(args: list[str]) -> dict[str, Any]:
    """Run ``--engine NAME`` (after ``args``) for every engine in its own venv's python; a missing
    venv is reported as skipped, a failed process with its exit code and the end of its stderr."""
    results: dict[str, Any] = {}
    for name, (_, venv) in ENGINES.items():
        python = Path(sys.executable) if name == "ours" else ROOT / venv / "bin" / "python"
        if not python.exists():
            results[name] = {"skipped": f"{venv} is missing (make {venv}/.installed)"}
            continue
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc = subprocess.run(
            [str(python), __file__, *args, "--engine", name],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
            check=False,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        results[name] = (
            json.loads(lines[-1])
            if proc.returncode == 0 and lines
            else {
                "finished": False,
                "why": f"the bench process failed (exit {proc.returncode}): {proc.stderr[-800:]}",
            }
        )
    return results


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "--task":
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        if sys.argv[2] == "fanout":
            chars = int(sys.argv[sys.argv.index("--chars") + 1]) if "--chars" in sys.argv else FANOUT_CHARS
            # about half of what the whole tree spends on this task (52,156 tokens measured with no budget)
            budget = int(sys.argv[sys.argv.index("--budget") + 1]) if "--budget" in sys.argv else 26_000
            engine = sys.argv[sys.argv.index("--engine") + 1] if "--engine" in sys.argv else None
            if engine == "ours":
                print(json.dumps(run_fanout(chars, budget)))
            elif engine is not None:
                print(json.dumps(run_fanout_engine(engine, chars, budget)))
            else:
                print(
                    json.dumps(
                        _in_venvs(["--task", "fanout", "--chars", str(chars), "--budget", str(budget)]),
                        indent=1,
                    )
                )
        elif sys.argv[2] == "rollouts":
            print(json.dumps(run_rollouts(), indent=1))
        else:
            raise SystemExit(f"unknown task {sys.argv[2]!r}: fanout or rollouts")
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--engine":
        print(json.dumps(run_one(sys.argv[2])))
        return
    results = _in_venvs([])
    keys = [
        "finished",
        "why",
        "model_context_peak_tokens",
        "window_tokens",
        "total_tokens_sent",
        "compactions",
        "sub_calls",
        "wall_s",
        "names_correct_after_every_compaction",
    ]
    table = {k: {name: r.get(k) for name, r in results.items()} for k in keys}
    print(
        json.dumps(
            {
                "task": {
                    "corpus_chars": CORPUS_CHARS,
                    "window_tokens": WINDOW,
                    "scan_steps": STEPS,
                    "needles": NEEDLES,
                },
                "table": table,
                "engines": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
