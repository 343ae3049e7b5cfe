"""Generated agent transcripts with planted facts, for the demo, the fidelity benchmark and tests.

Why: measuring whether compaction keeps what matters needs sessions where we know exactly what
matters. Each generated round is a realistic kernel-agent turn (a user request, an assistant tool
call running Python, the tool result, a closing answer) and some rounds plant a fact of a known
class: the goal (round 0), user constraints, file paths, versions, error messages, ids and issue
refs, kernel variable names. Some tool outputs are huge (to be externalized), some user messages
are exact repeats (to be discarded), and some calls fail and are retried (superseded attempts).

Deterministic: the same seed gives the same transcript. Messages are pi-shaped, ready for
``SessionStore.append(session, "message", {"message": ...})``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

GOAL = (
    "Build a churn model for the telecom dataset in data/churn.csv: clean it, train a gradient "
    "boosting classifier, and report AUC on the 2026-Q3 holdout."
)
CONSTRAINTS = (
    "Always use CUDA 12.4 for the GPU runs, not any newer toolkit.",
    "Never write into /data/raw; put derived files under /work/derived.",
    "Keep the random seed fixed at 1337 for every experiment.",
    "Use pandas==2.2.3 exactly, the cluster image pins it.",
    "Do not drop customers with missing tenure; impute them instead.",
    "Prefer LightGBM over XGBoost when both work.",
    "Report every metric with three decimals.",
    "Make sure the holdout split is by customer_id, never by row.",
)


@dataclass
class Facts:
    """What was planted, by class (identifier classes match ``core.drift``)."""

    goal: str = GOAL
    constraints: list[str] = field(default_factory=list)
    by_class: dict[str, list[str]] = field(default_factory=dict)

    def add(self, cls: str, value: str) -> None:
        bucket = self.by_class.setdefault(cls, [])
        if value not in bucket:
            bucket.append(value)


def _user(text: str, ts: int) -> JSON:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


def _assistant(text: str, calls: list[JSON], ts: int) -> JSON:
    content: list[JSON] = []
    if text:
        content.append({"type": "text", "text": text})
    content.extend(calls)
    return {
        "role": "assistant",
        "content": content,
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": ts,
    }


def _result(call_id: str, text: str, is_error: bool, ts: int) -> JSON:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "python",
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
        "timestamp": ts,
    }


class TranscriptGenerator:
    """Rounds of a kernel-agent session; ``facts`` records everything planted so far."""

    def __init__(
        self,
        seed: int = 7,
        *,
        big_output_every: int = 9,
        big_output_lines: int = 2400,
        filler_words: int = 60,
    ) -> None:
        self.rng = random.Random(seed)
        self.facts = Facts()
        self.round = 0
        self.ts = 1_780_000_000_000
        self.big_output_every = big_output_every
        self.big_output_lines = big_output_lines
        self.filler_words = filler_words
        self._calls = 0

    def _tick(self) -> int:
        self.ts += 1000
        return self.ts

    def _filler(self, n: int) -> str:
        words = (
            "feature",
            "column",
            "rows",
            "merge",
            "encoding",
            "split",
            "baseline",
            "score",
            "check",
            "fold",
            "sample",
            "window",
            "lag",
            "mean",
            "variance",
            "outlier",
            "bucket",
            "plot",
            "table",
            "model",
        )
        return " ".join(self.rng.choice(words) for _ in range(n))

    def rounds(self, n: int) -> Iterator[list[JSON]]:
        for _ in range(n):
            yield self.next_round()

    def next_round(self) -> list[JSON]:
        """One turn: messages in order."""
        r = self.round
        self.round += 1
        rng = self.rng
        msgs: list[JSON] = []
        request = GOAL if r == 0 else f"Step {r}: look at {self._filler(6)} and tell me what changes."
        if r % 5 == 1:
            c = CONSTRAINTS[(r // 5) % len(CONSTRAINTS)]
            if c not in self.facts.constraints:
                self.facts.constraints.append(c)
            request += " " + c
        if r % 3 == 2:
            path = f"/work/derived/features_v{r}/part-{r:04d}.parquet"
            self.facts.add("path", path)
            request += f" Save the result to {path}."
        if r % 4 == 3:
            version = f"lightgbm=={4 + r % 3}.{r % 10}.{r % 7}"
            self.facts.add("version", version)
            request += f" Pin {version} for this step."
        if r % 6 == 4:
            ticket = f"DATA-{1000 + r}"
            self.facts.add("id", ticket)
            request += f" This is tracked in {ticket}."
        if r > 0 and r % 11 == 0:
            msgs.append(_user("Quick status check: where are we?", self._tick()))
            msgs.append(_assistant("Still on track; continuing with the current step.", [], self._tick()))
            msgs.append(_user("Quick status check: where are we?", self._tick()))  # exact duplicate
            msgs.append(_assistant("Still on track; continuing with the current step.", [], self._tick()))
        msgs.append(_user(request, self._tick()))

        if r % 4 == 1:  # a named result worth remembering; other rounds reuse scratch names
            var = f"frame_{r}"
            self.facts.add("variable", var)
        else:
            var = "frame"
        code = f"{var} = load_step({r}, seed=1337)\nsummary = describe({var})\nprint(summary)"
        fail = r % 7 == 5
        self._calls += 1
        cid = f"call_{self._calls}"
        msgs.append(
            _assistant(
                f"I will compute step {r} in the kernel.",
                [{"type": "toolCall", "id": cid, "name": "python", "arguments": {"code": code}}],
                self._tick(),
            )
        )
        if fail:
            err = f"KeyError: 'tenure_bucket_{r}'"
            self.facts.add("error", err)
            tb = f'Traceback (most recent call last):\n  File "<cell>", line 1, in <module>\n{err}'
            msgs.append(_result(cid, tb, True, self._tick()))
            self._calls += 1
            cid2 = f"call_{self._calls}"
            msgs.append(
                _assistant(
                    f"The column was missing; I will rebuild it and retry step {r}.",
                    [{"type": "toolCall", "id": cid2, "name": "python", "arguments": {"code": code}}],
                    self._tick(),
                )
            )
            msgs.append(
                _result(
                    cid2, f"rows={rng.randint(1000, 9999)} auc=0.{rng.randint(700, 899)}", False, self._tick()
                )
            )
        elif self.big_output_every and r % self.big_output_every == self.big_output_every - 1:
            lines = [f"{i:05d} {self._filler(8)}" for i in range(self.big_output_lines)]
            msgs.append(_result(cid, "\n".join(lines), False, self._tick()))
        else:
            msgs.append(
                _result(
                    cid,
                    f"rows={rng.randint(1000, 9999)} {self._filler(self.filler_words)}",
                    False,
                    self._tick(),
                )
            )
        commit = f"{rng.getrandbits(40):010x}"
        if r % 5 == 3 and any(ch.isalpha() for ch in commit) and any(ch.isdigit() for ch in commit):
            self.facts.add("commit", commit)
            tail = f" Committed as {commit}."
        else:
            tail = ""
        msgs.append(
            _assistant(
                f"Done with step {r}: {self._filler(12)}.{tail} Next I will check the {self._filler(3)}.",
                [],
                self._tick(),
            )
        )
        return msgs
