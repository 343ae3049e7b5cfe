"""Generated sessions with probes: what a compacted context must still answer, and the exact answer.

Why: string retention alone says whether planted text survived, not whether an agent could carry
on. Published compaction evaluations ask *probes* instead (recall, artifact, continuation and
decision questions); here every planted fact comes with its probe question, its exact answer and
its subject (the words a pointer's gist must name for the fact to count as one recall away).

Four kinds of session, each ``chunks`` chunks long (one chunk per rolling compaction):

- ``analysis``: data analysis in a kernel. Each chunk trains a model variant; the training log is
  long (externalized) and its *last line* names the run id and AUC; the cell writes a feature file
  and leaves a kernel variable; some chunks decide something (a calibration, an imputation).
- ``debugging``: tests fail with long tracebacks whose last line is the error; a file is patched,
  the fix committed; the root cause is stated.
- ``single_turn``: one user request, then many tool calls without another user message (split
  turns): shards are downloaded and verified (checksum on the last line of a long log), mirrors
  are switched.
- ``multi_file``: an API rename across files: files are read (long outputs) and edited, symbols
  renamed, the new location of each symbol stated.

User messages also carry distractors the anchor extractor must not take for constraints: bug
reports, questions, pasted errors. Deterministic: same kind, seed and length → same session.
Messages are pi-shaped, ready for ``SessionStore.append(session, "message", {"message": ...})``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Final, Literal

JSON = dict[str, Any]
ProbeKind = Literal["recall", "artifact", "continuation", "decision"]
PROBE_KINDS: Final = ("recall", "artifact", "continuation", "decision")
SESSION_KINDS: Final = ("analysis", "debugging", "single_turn", "multi_file")


@dataclass(frozen=True)
class Probe:
    """One planted fact: a question, its exact answer, its subject, and where it was planted.

    ``chunk`` is 1-based (the compaction after which the fact was first compactable);
    ``last_line`` is True when the answer was printed on the last line of a tool output.
    """

    kind: ProbeKind
    question: str
    answer: str
    subject: str
    chunk: int
    last_line: bool = False


@dataclass
class GeneratedSession:
    kind: str
    goal: str
    constraints: list[str]
    chunks: list[list[JSON]] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)

    def user_texts(self) -> list[str]:
        """The text of every user message, in order."""
        return [_text(m) for chunk in self.chunks for m in chunk if m["role"] == "user"]


def _text(msg: JSON) -> str:
    return "".join(
        b.get("text", "") for b in msg.get("content", []) if isinstance(b, dict) and b.get("type") == "text"
    )


class Writer:
    """Builds pi-shaped messages with increasing timestamps and call ids (also the precision bench's)."""

    def __init__(self, start_ms: int = 1_790_000_000_000) -> None:
        self.ts = start_ms
        self.calls = 0
        self.out: list[JSON] = []

    def _tick(self) -> int:
        self.ts += 1000
        return self.ts

    def user(self, text: str) -> None:
        self.out.append(
            {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": self._tick()}
        )

    def say(self, text: str) -> None:
        self.out.append(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "stopReason": "stop",
                "timestamp": self._tick(),
            }
        )

    def call(self, tool: str, args: JSON, output: str, *, text: str = "", error: bool = False) -> None:
        self.calls += 1
        cid = f"call_{self.calls}"
        content: list[JSON] = [{"type": "text", "text": text}] if text else []
        content.append({"type": "toolCall", "id": cid, "name": tool, "arguments": args})
        self.out.append(
            {"role": "assistant", "content": content, "stopReason": "toolUse", "timestamp": self._tick()}
        )
        self.out.append(
            {
                "role": "toolResult",
                "toolCallId": cid,
                "toolName": tool,
                "content": [{"type": "text", "text": output}],
                "isError": error,
                "timestamp": self._tick(),
            }
        )

    def take(self) -> list[JSON]:
        out, self.out = self.out, []
        return out


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n - 1)) + rng.choice("abcdef")


_WORDS: Final = (
    "feature",
    "column",
    "rows",
    "merge",
    "encoding",
    "split",
    "baseline",
    "score",
    "fold",
    "sample",
    "window",
    "lag",
    "bucket",
    "table",
)
DISTRACTORS: Final = (
    "i think the loader doesn't handle empty files correctly.",
    "hm, the plot looked odd when i opened it, that should never happen.",
    "why did the last cell take so long?",
    "i don't think the cache works correctly.",
    "Error: 400 messages.12: each tool call must have a matching result in the next message",
)


def _filler(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _log(rng: random.Random, lines: int, prefix: str) -> list[str]:
    return [f"{prefix} {i:04d} loss={1 / (i + 2):.4f} {_filler(rng, 5)}" for i in range(lines)]


# --------------------------------------------------------------------------------------- kinds
ANALYSIS_GOAL: Final = (
    "Find the best churn model on data/churn.csv: try gradient boosting variants in the "
    "kernel and report AUC on the 2026-Q3 holdout."
)
ANALYSIS_CONSTRAINTS: Final = (
    "Always keep the random seed at 1337.",
    "Never write into /data/raw; derived files go under /work/derived.",
    "Report every AUC with three decimals.",
)
_DECISIONS: Final = (
    ("calibration", "isotonic calibration", "the reliability curve bends at the top"),
    ("imputation", "median imputation", "tenure is skewed"),
    ("encoding", "target encoding", "plan_type has 400 levels"),
    ("split", "grouped 5-fold split", "customers repeat across months"),
    ("early stopping", "early stopping at 50 rounds", "validation loss flattens by then"),
)


def _analysis(w: Writer, s: GeneratedSession, k: int, rng: random.Random) -> None:
    variant = f"gbm_{k:02d}{_hex(rng, 2)}"
    run = f"run-{_hex(rng, 6)}"
    auc = f"auc=0.{rng.randint(700, 899)}"
    path = f"/work/derived/{variant}/features.parquet"
    var = f"feat_{variant}"
    if k == 1:
        w.user(" ".join([ANALYSIS_GOAL, *ANALYSIS_CONSTRAINTS]))
    elif k % 7 == 3:
        w.user(f"Train variant {variant} next. {DISTRACTORS[k % len(DISTRACTORS)]}")
    else:
        w.user(f"Train variant {variant} with {_filler(rng, 3)} features.")
    code = (
        f"{var} = build_features('{variant}', seed=1337)\n{var}.to_parquet('{path}')\nmodel = "
        f"train('{variant}', {var})"
    )
    w.call(
        "python",
        {"code": code},
        "\n".join([*_log(rng, 400, "epoch"), f"finished {run}: {auc}"]),
        text=f"Training {variant} in the kernel.",
    )
    s.probes += [
        Probe("recall", f"Which run id did the {variant} training finish as?", run, variant, k, True),
        Probe("recall", f"What AUC did {variant} reach?", auc, variant, k, True),
        Probe("artifact", f"Where were the {variant} features written?", path, variant, k),
        Probe("continuation", f"Which kernel variable holds the {variant} features?", var, variant, k),
    ]
    if k % 3 == 0:
        aspect, choice, why = _DECISIONS[(k // 3) % len(_DECISIONS)]
        w.say(f"For {variant} I decided on {choice} because {why}.")
        s.probes.append(Probe("decision", f"Which {aspect} was chosen for {variant}?", choice, variant, k))
    # the result is only in the log
    w.say(f"Done with {variant}. Next I will compare it with the previous variant.")


DEBUG_GOAL: Final = "Make the test suite of the billing service green again; fix root causes, not symptoms."
DEBUG_CONSTRAINTS: Final = (
    "Do not skip or xfail any test.",
    "Keep every fix under 40 changed lines.",
    "Never push to main directly; use a fix/ branch per failure.",
)
_CAUSES: Final = (
    "a stale cache",
    "an off-by-one in the pager",
    "a timezone-naive timestamp",
    "a shared mutable default",
    "a missing await",
)


def _debugging(w: Writer, s: GeneratedSession, k: int, rng: random.Random) -> None:
    test = f"test_invoice_{k:02d}{_hex(rng, 2)}"
    module = f"src/billing/ledger_{k:02d}.py"
    error = (
        f"KeyError: 'amount_{_hex(rng, 4)}'"
        if k % 2
        else (f"AssertionError: expected {rng.randint(100, 999)} got {rng.randint(100, 999)}")
    )
    commit = _hex(rng, 10)
    branch = f"fix/{test}"
    if k == 1:
        w.user(" ".join([DEBUG_GOAL, *DEBUG_CONSTRAINTS]))
    elif k % 6 == 4:
        w.user(f"Now look at {test}. {DISTRACTORS[k % len(DISTRACTORS)]}")
    else:
        w.user(f"Now look at {test}.")
    frames = [
        f'  File "/srv/billing/src/billing/layer_{i}.py", line {rng.randint(10, 400)}, in step_{i}\n   '
        f" value = handler_{i}(payload)"
        for i in range(30)
    ]
    trace = "\n".join(
        [f"tests/{test}.py::{test} FAILED", "Traceback (most recent call last):", *frames, error]
    )
    w.call("bash", {"command": f"pytest -x tests/{test}.py"}, trace, text=f"Running {test}.", error=True)
    cause = _CAUSES[k % len(_CAUSES)]
    w.say(f"The root cause is {cause} in {module} because the handler reuses state between invoices.")
    w.call(
        "edit",
        {"path": module, "old_text": "cache = {}", "new_text": "cache = None"},
        f"Applied 1 replacement in {module}.",
    )
    w.call(
        "bash",
        {"command": f"git checkout -b {branch} && git commit -am 'fix {test}'"},
        f"[{branch} {commit}] fix {test}\n 1 file changed, 3 insertions(+), 2 deletions(-)",
    )
    s.probes += [
        Probe("recall", f"Which error did {test} fail with?", error, test, k, True),
        Probe("artifact", f"Which file was patched to fix {test}?", module, test, k),
        Probe("continuation", f"Which branch holds the fix for {test}?", branch, test, k),
        Probe("recall", f"Which commit fixed {test}?", commit, test, k),
    ]
    if k % 2 == 0:
        s.probes.append(Probe("decision", f"What was the root cause of the {test} failure?", cause, test, k))
    w.say(f"Done: {test} passes now, fixed in {commit} on {branch}. Next I will run the full suite.")


SINGLE_GOAL: Final = (
    "Download, verify and index every shard of the 2026 clickstream dump into "
    "/data/shards, "
    "then report the total row count."
)
SINGLE_CONSTRAINTS: Final = (
    "Never delete a shard that failed verification; move it to /data/quarantine.",
    "Use at most 4 parallel downloads.",
)


def _single_turn(w: Writer, s: GeneratedSession, k: int, rng: random.Random) -> None:
    shard = f"shard-{k:03d}"
    digest = f"sha256={_hex(rng, 16)}"
    rows = f"rows={rng.randint(100_000, 999_999)}"
    path = f"/data/shards/{shard}.arrow"
    if k == 1:
        w.user(" ".join([SINGLE_GOAL, *SINGLE_CONSTRAINTS]))
    log = [
        f"GET part {i:03d} {rng.randint(1, 9)}.{rng.randint(0, 9)} MB/s {_filler(rng, 3)}" for i in range(300)
    ]
    w.call(
        "bash",
        {"command": f"fetch --shard {k} --out {path}"},
        "\n".join([*log, f"verified {shard} {digest} {rows}"]),
        text=f"Fetching {shard}.",
    )
    w.call("python", {"code": f"idx_{k:03d} = index_shard('{path}')"}, f"indexed {path}: {rows}")
    s.probes += [
        Probe("recall", f"What checksum did {shard} verify with?", digest, shard, k, True),
        Probe("recall", f"How many rows does {shard} have?", rows, shard, k, True),
        Probe("artifact", f"Where was {shard} stored?", path, shard, k),
        Probe("continuation", f"Which kernel variable holds the {shard} index?", f"idx_{k:03d}", shard, k),
    ]
    if k % 4 == 2:
        mirror = f"https://mirror{k:02d}.example.org/clickstream"
        w.call(
            "bash",
            {"command": f"fetch --shard {k + 1} --probe"},
            "TimeoutError: primary did not answer within 30 s",
            error=True,
        )
        w.call(
            "bash",
            {"command": f"fetch --mirror {mirror} --probe"},
            f"mirror ok: {mirror}",
            text=f"I'll switch to the mirror {mirror} because the primary timed out for {shard}.",
        )
        s.probes.append(
            Probe("decision", f"Which mirror was chosen after the timeout at {shard}?", mirror, shard, k)
        )


MULTI_GOAL: Final = (
    "Rename the account API across the web app: every fetch_user* function becomes "
    "fetch_account*, callers included, and keep the tests passing."
)
MULTI_CONSTRAINTS: Final = (
    "Keep the old names as deprecated aliases for one release.",
    "Do not touch the generated files under src/gen/.",
)


def _multi_file(w: Writer, s: GeneratedSession, k: int, rng: random.Random) -> None:
    old = f"fetch_user_{k:02d}{_hex(rng, 2)}"
    new = old.replace("fetch_user", "fetch_account")
    path = f"src/app/views/panel_{k:02d}.py"
    caller = f"src/app/routes/route_{k:02d}.py"
    if k == 1:
        w.user(" ".join([MULTI_GOAL, *MULTI_CONSTRAINTS]))
    elif k % 5 == 2:
        w.user(f"Next do {old}. {DISTRACTORS[k % len(DISTRACTORS)]}")
    source = [f"    line_{i} = helper_{i}(request)  # {_filler(rng, 4)}" for i in range(220)]
    w.call(
        "read",
        {"path": path},
        "\n".join([f"def {old}(request):", *source, f"# end of {path}"]),
        text=f"Reading {path}.",
    )
    w.call(
        "edit",
        {"path": path, "old_text": f"def {old}(", "new_text": f"def {new}("},
        f"Applied 1 replacement in {path}.",
    )
    w.call(
        "edit",
        {"path": caller, "old_text": f"{old}(", "new_text": f"{new}("},
        f"Applied 2 replacements in {caller}.",
    )
    s.probes += [
        Probe("artifact", f"Which file defined {old} before the rename?", path, old, k),
        Probe("artifact", f"Which route file calls {new}?", caller, new, k),
        Probe("decision", f"What was {old} renamed to?", new, old, k),
    ]
    tests = f"{rng.randint(200, 400)} passed"
    run = [
        *(f"tests/views/test_panel_{k:02d}.py::case_{i} PASSED" for i in range(60)),
        f"===== {tests} in {rng.randint(2, 9)}.{rng.randint(10, 99)}s =====",
    ]
    w.call("bash", {"command": f"pytest -q tests/views/test_panel_{k:02d}.py"}, "\n".join(run))
    s.probes.append(
        Probe("continuation", f"How many tests passed after renaming {old}?", tests, new, k, True)
    )
    commit = _hex(rng, 7)
    w.call(
        "bash",
        {"command": f"git commit -am 'rename {old}'"},
        f"[rename-accounts {commit}] rename {old}\n 2 files changed, 3 insertions(+), 3 deletions(-)",
    )
    s.probes.append(Probe("recall", f"Which commit renamed {old}?", commit, old, k))
    w.say(f"Done with {old} → {new} in {path} and {caller}. Next I will rename the following function.")


_BUILDERS: Final = {
    "analysis": _analysis,
    "debugging": _debugging,
    "single_turn": _single_turn,
    "multi_file": _multi_file,
}
_GOALS: Final = {
    "analysis": (ANALYSIS_GOAL, ANALYSIS_CONSTRAINTS),
    "debugging": (DEBUG_GOAL, DEBUG_CONSTRAINTS),
    "single_turn": (SINGLE_GOAL, SINGLE_CONSTRAINTS),
    "multi_file": (MULTI_GOAL, MULTI_CONSTRAINTS),
}


def make_session(kind: str, *, seed: int = 2026, chunks: int = 30) -> GeneratedSession:
    """A generated session of ``chunks`` chunks with its probes (deterministic)."""
    if kind not in _BUILDERS:
        raise ValueError(f"unknown session kind {kind!r}; expected one of {', '.join(SESSION_KINDS)}")
    if chunks < 1:
        raise ValueError(f"chunks must be at least 1, got {chunks}")
    rng = random.Random(f"{kind}:{seed}")
    goal, constraints = _GOALS[kind]
    session = GeneratedSession(kind, goal, list(constraints))
    writer = Writer()
    for k in range(1, chunks + 1):
        _BUILDERS[kind](writer, session, k, rng)
        session.chunks.append(writer.take())
    return session
