"""Seeded pi session files (v3 JSONL objects), built the way pi's SessionManager builds them.

Why: ``chars4`` promises pi's exact rules, and the only convincing proof is differential: many
varied sessions, each run through pi's own code in Node and through ours, compared field by field
(tests/test_pi_fuzz.py). Hand-written fixtures miss the combinations that broke before (branches,
several compactions on one path, settings changes before a user message, custom messages...).

What a session holds (all drawn from ``random.Random(seed)``; the same seed gives the same file):
- turns: a user message (sometimes with an image, sometimes string content), 0-4 tool rounds
  (assistant tool calls with ``read``/``write``/``edit``/``bash``/``calc`` arguments, numbers
  JavaScript prints differently from Python, integer-like keys; tool results that are sometimes
  huge, errors or images), and a closing assistant message; assistants carry usage, and some are
  aborted or errored (with usage pi must ignore);
- settings changes (model, thinking level) often right before a user message, user ``!`` bash
  executions (some excluded from context), extension ``custom_message`` and ``custom`` entries,
  labels, session names;
- tree navigation as pi's ``navigateTree`` does it: selecting a user or custom message moves the
  leaf to its parent, anything else to itself, optionally with a branch summary at the new leaf
  (at the root too, which starts a second root);
- 0-3 compactions: the first kept entry is a valid pi cut point at or after the previous
  compaction's first kept entry, extended back over non-message entries as pi's ``findCutPoint``
  extends it (so mid-turn cuts and cuts that start at a setting change occur);
- text with ASCII, accents, CJK, emoji and now and then a lone surrogate (JavaScript writes one when
  it splits an emoji).

``fork_session`` writes what pi's ``createBranchedSession`` writes for a leaf: the path without
its label entries, then the path's labels re-created at the end — so a child of a dropped label
names a parent that is not in the file.

The file's leaf is its last entry (pi loads it that way), so ``PiSessionFile.leaf_id`` is always the
last entry's id, whatever the builder's in-memory leaf was.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

JSON = dict[str, Any]

__all__ = ["PiSessionBuilder", "PiSessionFile", "fork_session", "generate_pi_session", "path_of_objects"]

_WORDS = (
    "the",
    "model",
    "kernel",
    "frame",
    "value",
    "train",
    "error",
    "plot",
    "data",
    "column",
    "fix",
    "cache",
    "split",
    "merge",
    "test",
    "résumé",
    "naïve",
    "数据",
    "模型",
    "ошибка",
    "😀",
    "🚀",
    "x²",
)
_FILES = (
    "src/app.py",
    "src/model.py",
    "README.md",
    "data/raw.csv",
    "tests/test_app.py",
    "notes/日本.md",
    "img/🚀.png",
    "a/\uff21.txt",
    "b/😀.txt",
    "docs/z.md",
)
_NUMBERS: tuple[Any, ...] = (
    1e-05,
    1e-07,
    2.5e-06,
    0.1,
    3.0,
    -0.0,
    1e16,
    1e21,
    1.2345e25,
    123456.789,
    5e-324,
    12345678901234567890,
    2**53 + 1,
    42,
    -7,
    1.7976931348623157e308,
    0.30000000000000004,
)
_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="
_BASE_TIME = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


@dataclass
class PiSessionFile:
    """A generated pi v3 session: header + entries in file order (what pi writes, one per line)."""

    seed: int
    header: JSON
    entries: list[JSON]
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def leaf_id(self) -> str | None:
        return str(self.entries[-1]["id"]) if self.entries else None

    def objects(self) -> list[JSON]:
        return [self.header, *self.entries]

    def numbered(self) -> list[tuple[int, JSON]]:
        """``(line_number, object)`` pairs, as ``core.pi_format.parse_pi_session`` takes them."""
        return list(enumerate(json.loads(json.dumps(self.objects())), start=1))

    def jsonl(self) -> str:
        """The file's text (ASCII-escaped JSON lines, as JSON.parse and json.loads both read them)."""
        return "".join(json.dumps(obj) + "\n" for obj in self.objects())


def path_of_objects(entries: Sequence[JSON], leaf_id: str | None) -> list[JSON]:
    """pi's ``getBranch``: leaf → root through ``parentId``, stopping at a parent not in the file."""
    by_id = {e["id"]: e for e in entries}
    path: list[JSON] = []
    current = by_id.get(leaf_id) if leaf_id is not None else None
    seen: set[str] = set()
    while current is not None and current["id"] not in seen:
        seen.add(current["id"])
        path.append(current)
        parent = current.get("parentId")
        current = by_id.get(parent) if parent else None
    path.reverse()
    return path


class PiSessionBuilder:
    """The parts of pi's ``SessionManager`` a session file records: append, branch, label, fork."""

    def __init__(self, rng: random.Random, session_id: str) -> None:
        self.rng = rng
        self.entries: list[JSON] = []
        self.by_id: dict[str, JSON] = {}
        self.labels: dict[str, str] = {}
        self.label_times: dict[str, str] = {}
        self.leaf_id: str | None = None
        self.clock = 0
        self.header: JSON = {
            "type": "session",
            "version": 3,
            "id": session_id,
            "timestamp": self._now(),
            "cwd": "/work/project",
        }

    def _now(self) -> str:
        self.clock += self.rng.randint(1, 90)
        moment = _BASE_TIME + timedelta(seconds=self.clock)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock % 1000:03d}Z"

    def now_ms(self) -> int:
        return int((_BASE_TIME + timedelta(seconds=self.clock)).timestamp() * 1000)

    def _new_id(self) -> str:
        while True:
            entry_id = f"{self.rng.getrandbits(32):08x}"
            if entry_id not in self.by_id:
                return entry_id

    def append(
        self, entry_type: str, parent_id: str | None = None, *, use_leaf: bool = True, **fields: Any
    ) -> str:
        entry: JSON = {
            "type": entry_type,
            "id": self._new_id(),
            "parentId": self.leaf_id if use_leaf else parent_id,
            "timestamp": self._now(),
            **fields,
        }
        self.entries.append(entry)
        self.by_id[entry["id"]] = entry
        self.leaf_id = entry["id"]
        return str(entry["id"])

    def message(self, message: JSON) -> str:
        return self.append("message", message=message)

    def label(self, target_id: str, label: str | None) -> str:
        entry_id = self.append("label", targetId=target_id, label=label)
        if label:
            self.labels[target_id] = label
            self.label_times[target_id] = self.by_id[entry_id]["timestamp"]
        else:
            self.labels.pop(target_id, None)
        return entry_id

    def branch_with_summary(self, from_id: str | None, summary: str, details: Any, from_hook: bool) -> str:
        self.leaf_id = from_id
        return self.append(
            "branch_summary",
            from_id,
            use_leaf=False,
            fromId=from_id or "root",
            summary=summary,
            details=details,
            fromHook=from_hook,
        )

    def path(self) -> list[JSON]:
        return path_of_objects(self.entries, self.leaf_id)


def fork_session(source: PiSessionFile, leaf_id: str, rng: random.Random) -> PiSessionFile:
    """What pi's ``createBranchedSession(leaf_id)`` writes (labels of the path re-created last)."""
    path = path_of_objects(source.entries, leaf_id)
    kept = [dict(e) for e in path if e["type"] != "label"]
    labels: dict[str, tuple[str, str]] = {}
    for entry in source.entries:  # the label map as _buildIndex replays it over the whole file
        if entry["type"] == "label":
            if entry.get("label"):
                labels[entry["targetId"]] = (entry["label"], entry["timestamp"])
            else:
                labels.pop(entry["targetId"], None)
    ids = {e["id"] for e in kept}
    parent = kept[-1]["id"] if kept else None
    out = list(kept)
    for target, (label, stamp) in labels.items():
        if target not in ids:
            continue
        entry_id = f"{rng.getrandbits(32):08x}"
        while entry_id in ids:
            entry_id = f"{rng.getrandbits(32):08x}"
        ids.add(entry_id)
        out.append(
            {
                "type": "label",
                "id": entry_id,
                "parentId": parent,
                "timestamp": stamp,
                "targetId": target,
                "label": label,
            }
        )
        parent = entry_id
    header = {
        **source.header,
        "id": f"fork-{source.header['id']}",
        "parentSession": f"/sessions/{source.header['id']}.jsonl",
    }
    dropped = {e["id"] for e in path if e["type"] == "label"}
    notes = {
        "fork_of": source.seed,
        "fork_leaf": leaf_id,
        "dangling_parents": sum(1 for e in kept if e.get("parentId") in dropped),
    }
    return PiSessionFile(source.seed, header, out, notes)


# ---------------------------------------------------------------------------------------------
# Content
# ---------------------------------------------------------------------------------------------


class _Content:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.calls = 0

    def text(self, low: int, high: int) -> str:
        rng = self.rng
        words = [
            rng.choice(_WORDS) if rng.random() < 0.25 else rng.choice(_WORDS[:15])
            for _ in range(rng.randint(low, high))
        ]
        text = " ".join(words)
        if rng.random() < 0.15:
            text += "\n```python\nx = df['" + rng.choice(_WORDS) + "'].mean()\n```\n"
        if rng.random() < 0.04:
            text += "\ud83d"  # half an emoji, as JavaScript's slice leaves it
        return text

    def huge(self) -> str:
        line = self.text(8, 14)
        return "\n".join(f"{i:06d} {line}" for i in range(self.rng.randint(400, 2500)))

    def image(self) -> JSON:
        return {"type": "image", "data": _PNG, "mimeType": "image/png"}

    def arguments(self, name: str) -> JSON:
        rng = self.rng
        if name in ("read", "write", "edit"):
            args: JSON = {"path": rng.choice(_FILES)}
            if name == "write":
                args["content"] = self.text(5, 40)
            elif name == "edit":
                args["oldText"], args["newText"] = self.text(1, 6), self.text(1, 6)
            elif rng.random() < 0.4:
                args["offset"], args["limit"] = rng.randint(0, 500), rng.choice((50, 100, 2000))
            return args
        if name == "bash":
            return {
                "command": f"python -m pytest -q {rng.choice(_FILES)}",
                "timeout": rng.choice((30, 120.0, 0.5)),
            }
        values = [rng.choice(_NUMBERS) for _ in range(rng.randint(1, 4))]
        return {
            "expr": self.text(1, 3),
            "values": values,
            "2": rng.choice(_NUMBERS),
            "1": {"nested": [rng.choice(_NUMBERS)]},
            "opts": {"tol": rng.choice(_NUMBERS), "10": True, "b": None},
        }

    def usage(self, context: int, stop: str) -> JSON:
        rng = self.rng
        total = context + rng.randint(0, 400)
        cache_read = rng.randint(0, total // 2)
        output = rng.randint(1, 800)
        usage = {
            "input": max(total - cache_read - output, 0),
            "output": output,
            "cacheRead": cache_read,
            "cacheWrite": 0,
            "totalTokens": total if rng.random() < 0.8 else 0,
            "cost": {"input": 0.001, "output": 0.002, "cacheRead": 0, "cacheWrite": 0, "total": 0.003},
        }
        if stop in ("aborted", "error") and rng.random() < 0.5:
            usage.update(input=0, output=0, cacheRead=0, totalTokens=0)
        return usage


# ---------------------------------------------------------------------------------------------
# The session
# ---------------------------------------------------------------------------------------------


def _is_cut_point(entry: JSON) -> bool:
    if entry["type"] == "message":
        return bool(entry["message"]["role"] != "toolResult")
    return entry["type"] in ("branch_summary", "custom_message")


def _boundary(path: Sequence[JSON]) -> int:
    for i in range(len(path) - 1, -1, -1):
        if path[i]["type"] == "compaction":
            first = path[i]["firstKeptEntryId"]
            return next((k for k, e in enumerate(path) if e["id"] == first), i + 1)
    return 0


class _Session:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.b = PiSessionBuilder(self.rng, f"{self.rng.getrandbits(64):016x}-sess")
        self.c = _Content(self.rng)
        self.context = 3000  # a running "provider-side" context size for usage figures

    def assistant(self, blocks: list[JSON], stop: str) -> JSON:
        self.context += sum(len(json.dumps(b)) // 4 for b in blocks)
        msg: JSON = {
            "role": "assistant",
            "content": blocks,
            "api": "openai-completions",
            "provider": "openai",
            "model": "gpt-test",
            "usage": self.c.usage(self.context, stop),
            "stopReason": stop,
            "timestamp": self.b.now_ms(),
        }
        if stop == "error":
            msg["errorMessage"] = "provider returned 529 overloaded"
        return msg

    def turn(self) -> None:
        rng, c, b = self.rng, self.c, self.b
        if rng.random() < 0.2:
            if rng.random() < 0.5:
                b.append("model_change", provider="openai", modelId=rng.choice(("gpt-test", "gpt-big")))
            else:
                b.append("thinking_level_change", thinkingLevel=rng.choice(("off", "low", "high")))
        content: Any = c.text(3, 60)
        if rng.random() < 0.15:
            content = [{"type": "text", "text": content}, c.image()]
        elif rng.random() < 0.5:
            content = [{"type": "text", "text": content}]
        b.message({"role": "user", "content": content, "timestamp": b.now_ms()})
        for _ in range(rng.choice((0, 1, 1, 2, 3, 4))):
            blocks: list[JSON] = []
            if rng.random() < 0.4:
                blocks.append({"type": "thinking", "thinking": c.text(5, 50)})
            if rng.random() < 0.5:
                blocks.append({"type": "text", "text": c.text(2, 30)})
            calls = []
            for _ in range(rng.choice((1, 1, 2, 3))):
                c.calls += 1
                name = rng.choice(("read", "read", "write", "edit", "bash", "calc"))
                call = {
                    "type": "toolCall",
                    "id": f"call_{self.seed}_{c.calls}",
                    "name": name,
                    "arguments": c.arguments(name),
                }
                blocks.append(call)
                calls.append(call)
            stop = "toolUse" if rng.random() < 0.9 else rng.choice(("aborted", "error"))
            b.message(self.assistant(blocks, stop))
            if stop != "toolUse":
                return
            for call in calls:
                roll = rng.random()
                result: list[JSON] = [{"type": "text", "text": c.huge() if roll < 0.08 else c.text(2, 120)}]
                if roll > 0.93:
                    result.append(c.image())
                b.message(
                    {
                        "role": "toolResult",
                        "toolCallId": call["id"],
                        "toolName": call["name"],
                        "content": result,
                        "isError": rng.random() < 0.1,
                        "timestamp": b.now_ms(),
                    }
                )
        stop = rng.choice(("stop",) * 8 + ("aborted", "error"))
        blocks = [{"type": "text", "text": c.text(3, 80)}] if stop == "stop" or rng.random() < 0.5 else []
        b.message(self.assistant(blocks, stop))

    def bash(self) -> None:
        rng, b = self.rng, self.b
        exit_code = rng.choice((0, 0, 1, None))
        message: JSON = {
            "role": "bashExecution",
            "command": rng.choice(("ls -la", "git status", "make test")),
            "output": self.c.text(0, 60) if rng.random() < 0.9 else "",
            "exitCode": exit_code,
            "cancelled": exit_code is None,
            "truncated": rng.random() < 0.1,
            "timestamp": b.now_ms(),
        }
        if message["truncated"]:
            message["fullOutputPath"] = "/tmp/pi-bash-1.log"
        if rng.random() < 0.2:
            message["excludeFromContext"] = True
        b.message(message)

    def extension(self) -> None:
        rng, c, b = self.rng, self.c, self.b
        if rng.random() < 0.6:
            content: Any = c.text(2, 60) if rng.random() < 0.5 else [{"type": "text", "text": c.text(2, 40)}]
            if isinstance(content, list) and rng.random() < 0.3:
                content.append(c.image())
            b.append(
                "custom_message",
                customType="todo-reminder",
                content=content,
                display=rng.random() < 0.7,
                details={"n": rng.randint(0, 9)},
            )
        else:
            b.append(
                "custom",
                customType="plan-state",
                data={"step": rng.randint(0, 9), "ratio": rng.choice(_NUMBERS)},
            )

    def navigate(self) -> None:
        rng, b = self.rng, self.b
        target = rng.choice(b.entries)
        if (target["type"] == "message" and target["message"]["role"] == "user") or target[
            "type"
        ] == "custom_message":
            new_leaf = target.get("parentId")
        else:
            new_leaf = target["id"]
        if rng.random() < 0.5:
            details = {"readFiles": rng.sample(_FILES, 2), "modifiedFiles": rng.sample(_FILES, 1)}
            summary_id = b.branch_with_summary(
                new_leaf, "Branch summary: " + self.c.text(5, 80), details, rng.random() < 0.2
            )
            if rng.random() < 0.3:
                b.label(summary_id, "checkpoint")
        else:
            b.leaf_id = new_leaf
            if rng.random() < 0.3:
                b.label(target["id"], rng.choice(("retry-here", "good")))

    def compact(self) -> bool:
        rng, b = self.rng, self.b
        path = b.path()
        if not path or path[-1]["type"] == "compaction" or sum(e["type"] == "compaction" for e in path) >= 3:
            return False
        start = _boundary(path)
        cuts = [i for i in range(start, len(path)) if _is_cut_point(path[i])]
        if not cuts:
            return False
        cut = rng.choice(cuts[len(cuts) // 3 :] or cuts)
        while cut > start and path[cut - 1]["type"] not in ("message", "compaction"):
            cut -= 1
        from_hook = rng.random() < 0.15
        details: Any = {
            "readFiles": rng.sample(_FILES, rng.randint(0, 3)),
            "modifiedFiles": rng.sample(_FILES, rng.randint(0, 2)),
        }
        if from_hook:
            details = {"hook": "custom-compactor", "readFiles": ["hook-only.md"]}
        b.append(
            "compaction",
            summary="## Goal\n" + self.c.text(10, 120),
            firstKeptEntryId=path[cut]["id"],
            tokensBefore=self.context,
            details=details,
            fromHook=from_hook,
        )
        self.context = self.context // 3
        return True

    def run(self, steps: int, compactions: int) -> None:
        rng, b = self.rng, self.b
        planned = sorted(rng.sample(range(2, steps), min(compactions, max(steps - 2, 0))))
        for step in range(steps):
            if step in planned:
                self.compact()
                continue
            roll = rng.random()
            if roll < 0.62 or not b.entries:
                self.turn()
            elif roll < 0.70:
                self.bash()
            elif roll < 0.80:
                self.extension()
            elif roll < 0.88 and len(b.entries) > 3:
                self.navigate()
            elif roll < 0.94 and b.entries:
                b.label(rng.choice(b.entries)["id"], rng.choice(("start", "bug", None)))
            else:
                b.append("session_info", name=self.c.text(1, 4))
        if not b.entries or b.entries[-1]["id"] != b.leaf_id:
            self.turn()  # the file's leaf is its last entry: end on something appended at the leaf


def generate_pi_session(
    seed: int, *, steps: int | None = None, compactions: int | None = None
) -> PiSessionFile:
    """A pi v3 session for ``seed``: ``steps`` actions (default 4-40) and up to ``compactions``
    compaction attempts (default 0-4; at most 3 end up on any one path)."""
    session = _Session(seed)
    rng = session.rng
    n_steps = steps if steps is not None else rng.randint(4, 40)
    n_compactions = compactions if compactions is not None else rng.choice((0, 1, 1, 2, 2, 3, 4))
    session.run(n_steps, n_compactions)
    b = session.b
    on_path = sum(e["type"] == "compaction" for e in path_of_objects(b.entries, b.entries[-1]["id"]))
    return PiSessionFile(seed, b.header, b.entries, {"compactions_on_path": on_path})
