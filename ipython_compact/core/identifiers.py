"""What an exact identifier is: its classes, the patterns that find one, the noise that is not one.

Why: the drift guard (``core.drift``) tracks exact strings a future action depends on; finding them is
a table of patterns and noise lists, apart from tracking and the guard's block. Split out of
``drift`` (issue 32: no core module over 650 lines).

What must hold: deterministic (same text, same identifiers, same order: first occurrence); pure,
stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

IdentifierClass = Literal["path", "version", "error", "id", "commit", "variable", "url", "metric"]
IDENTIFIER_CLASSES: Final = ("path", "version", "error", "id", "commit", "variable", "url", "metric")


_EXT = (
    r"(?:py|pyi|ipynb|ts|tsx|js|jsx|json|jsonl|toml|yaml|yml|md|rst|txt|csv|tsv|sh|cfg|ini|rs|go|c|h|cc|cpp|"
    r"hpp|java|sql|db|sqlite|parquet|log|lock|html|css|xml|pkl|npz|npy|h5|pt|ckpt|png|jpg|jpeg|gif|svg|pdf)"
)

_PATTERNS: Final[tuple[tuple[IdentifierClass, re.Pattern[str]], ...]] = (
    ("url", re.compile(r"https?://[^\s<>\"'`)\]]+[^\s<>\"'`)\].,;:]")),
    (
        "error",
        re.compile(
            r"(?m)^\s*((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault|Warning)): "
            r"?(.{1,200})$"
        ),
    ),
    ("path", re.compile(r"(?<![\w/.~-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*[\w@+-](?![\w/])")),
    ("path", re.compile(r"(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\." + _EXT + r"\b(?!\()")),  # not a call: json.load(
    ("version", re.compile(r"\b[A-Za-z][\w-]*(?:==|>=|<=|~=|@| )v?\d+(?:\.\d+)+(?:[-+.]?[A-Za-z0-9]+)*\b")),
    ("version", re.compile(r"(?<![\w.])v?\d+\.\d+\.\d+(?:[-+.][A-Za-z0-9]+)*\b")),
    ("id", re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")),
    ("commit", re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")),
    ("id", re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,7}\b")),
    ("id", re.compile(r"(?<![\w&])#\d{2,5}\b")),  # issue refs; six digits are a colour (#444444)
    # run / experiment / checkpoint ids: a word, a separator, then a run of letters and digits with a digit
    (
        "id",
        re.compile(
            r"(?<![\w/.-])[A-Za-z]{2,}(?:[-_][A-Za-z]+)*[-_](?=[A-Za-z0-9]*\d)[A-Za-z0-9]{4,}(?:[-_][A-Za-z0-9]+)*\b(?![/.]\w)"
        ),
    ),
    # metric=value pairs (auc=0.763, rows=4211, lr=3e-4); never read from code (assignments there)
    (
        "metric",
        re.compile(
            r"(?<![\w.=-])[A-Za-z][\w.-]{1,30}=(?!=)(?:-?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?%?|(?=[0-9a-f]*\d)[0-9a-f]{7,64})(?![\w=])"
        ),
    ),
    # a test run's counts
    ("metric", re.compile(r"\b\d+ (?:passed|failed|skipped|xfailed|xpassed|errors?)\b")),
)

# per pattern of ``_PATTERNS``: substrings one of which every match contains (empty: no hint)
_PATTERN_HINTS: Final[tuple[tuple[str, ...], ...]] = (
    ("http",),
    ("Error", "Exception", "Exit", "Interrupt", "Fault", "Warning"),
    ("/",),
    (".",),
    (),  # ("==", ">=", "<=", "~=", "@", " "): nearly every text has a space; the gate decides
    (".",),
    ("-",),
    (),
    ("-",),
    ("#",),
    ("-", "_"),
    ("=",),
    ("passed", "failed", "skipped", "error"),  # xfailed/xpassed contain failed/passed
)

# per pattern: a cheap test every text with a match passes (None: none), tried only when the
# substring hints passed. The patterns with backtracking or lookaheads at every word are the
# costly scans; these one-pass checks skip them on text that cannot match. Each test is computed
# at most once per text (two patterns share "a digit, a dot, a digit").
_HEX_TABLE: Final = bytes((ord("x") if chr(i) in "0123456789abcdef" else ord(" ")) for i in range(256))


def _has_hex_run(text: str) -> bool:
    """Whether ``text`` holds 7 ASCII hex digits in a row (what a commit match needs). Bytes
    translation is one C pass; non-ASCII characters become '?' (never hex)."""
    return b"xxxxxxx" in text.encode("ascii", "replace").translate(_HEX_TABLE)


_DIGIT_DOT_DIGIT: Final = re.compile(r"\d\.\d")
_EXT_GATE: Final = re.compile(r"\." + _EXT + r"\b")
_METRIC_GATE: Final = re.compile(r"=-?[\da-f]")  # \d: the pattern reads any Unicode digit
_PATTERN_GATES: Final[tuple[str | None, ...]] = (
    None,
    None,
    None,
    "ext",  # ...\.EXT\b
    "digit-dot-digit",  # \d+(?:\.\d+)+
    "digit-dot-digit",  # \d+\.\d+\.\d+
    None,
    "hex-run",  # [0-9a-f]{7,40}
    None,
    None,
    None,
    "metric",  # =(?!=)(?:-?\d... | [0-9a-f]{7,64})
    None,
)
_GATE_TESTS: Final[dict[str, Callable[[str], bool]]] = {
    "ext": lambda text: _EXT_GATE.search(text) is not None,
    "digit-dot-digit": lambda text: "." in text and _DIGIT_DOT_DIGIT.search(text) is not None,
    "hex-run": _has_hex_run,
    "metric": lambda text: "=" in text and _METRIC_GATE.search(text) is not None,
}

_SCANS: Final = tuple(
    (cls, pattern, hints, gate)
    for (cls, pattern), hints, gate in zip(_PATTERNS, _PATTERN_HINTS, _PATTERN_GATES, strict=True)
)

_VARIABLE_RE: Final = re.compile(
    r"(?m)^(?:(?:def|class)\s+([A-Za-z]\w*)|([A-Za-z]\w*)(?:\s*,\s*[A-Za-z]\w*)*\s*(?::[^=\n]+)?=(?!=)|(?:from\s+\S+\s+)?import\s+[\w.]+\s+as\s+([A-Za-z]\w*))"
)
#: Tool-call argument keys whose value is Python source (the ledger reads the same keys).
CODE_KEYS: Final = ("code", "source", "cell")
_TOOL_WORDS: Final = frozenset(
    [
        "python",
        "cuda",
        "cudnn",
        "node",
        "nodejs",
        "npm",
        "numpy",
        "pandas",
        "scipy",
        "torch",
        "pytorch",
        "jax",
        "tensorflow",
        "gcc",
        "clang",
        "llvm",
        "java",
        "go",
        "rust",
        "ruby",
        "ubuntu",
        "debian",
        "fedora",
        "alpine",
        "postgres",
        "postgresql",
        "mysql",
        "sqlite",
        "redis",
        "django",
        "flask",
        "fastapi",
        "react",
        "vue",
        "version",
        "release",
        "ipython",
        "jupyterlab",
        "jupyter",
        "ipykernel",
        "openai",
        "dill",
        "pip",
        "setuptools",
        "transformers",
        "docker",
        "kubernetes",
    ]
)
_VERSIONISH_WORDS: Final = frozenset(
    {
        "in",
        "at",
        "of",
        "to",
        "the",
        "and",
        "or",
        "is",
        "was",
        "by",
        "line",
        "lines",
        "step",
        "page",
        "p",
        "entry",
        "recall",
    }
)
# shell noise: paths every shell session names and no action depends on
_SHELL_PATHS: Final = frozenset(
    {
        "/dev/null",
        "/dev/stdout",
        "/dev/stderr",
        "/dev/stdin",
        "/dev/tty",
        "/usr/bin/env",
        "/bin/sh",
        "/bin/bash",
        "/bin/zsh",
        "/tmp",
        "/tmp/",
    }
)
# dotted words that look like files but are code or product names
_NOT_FILES: Final = frozenset(
    {
        "console.log",
        "node.js",
        "vue.js",
        "next.js",
        "nuxt.js",
        "react.js",
        "three.js",
        "d3.js",
        "express.js",
        "chart.js",
        "socket.io",
    }
)
# first segments that make a plain ``word/word`` a directory path rather than "and/or"-style prose
_DIR_WORDS: Final = frozenset(
    [
        "src",
        "lib",
        "libs",
        "packages",
        "package",
        "tests",
        "test",
        "docs",
        "doc",
        "core",
        "utils",
        "modes",
        "tools",
        "app",
        "apps",
        "bin",
        "data",
        "scripts",
        "examples",
        "components",
        "internal",
        "pkg",
        "cmd",
        "include",
        "notebooks",
        "work",
        "derived",
        "bench",
        "build",
        "dist",
        "config",
        "models",
        "results",
        "outputs",
        "runs",
        "checkpoints",
        "raw",
        "home",
        "usr",
        "var",
        "etc",
        "opt",
    ]
)
# keys of tool plumbing and layout, not results (pi's "Use offset=2001 to continue", colours)
_NOT_METRICS: Final = frozenset(
    {
        "offset",
        "limit",
        "line",
        "lines",
        "page",
        "width",
        "height",
        "padding",
        "paddingx",
        "paddingy",
        "margin",
        "timeout",
        "start",
        "end",
        "index",
        "idx",
        "len",
        "count",
        "max_tokens",
        "temperature",
    }
)
_FILE_EXT_RE: Final = re.compile(r"\." + _EXT + r"$")


def is_noise(cls: IdentifierClass, value: str) -> bool:
    """True for strings the patterns catch that no future action depends on.

    Slash-joined prose words (``and/or``, ``I/O``, ``model/thinking``, ``s/old/new``), shell
    plumbing (``/dev/null``, ``/usr/bin/env``), code or product names that end like files
    (``console.log``, ``Node.js``), and a version that is really a file name's tail
    (``01.27.21.png``).
    """
    if cls == "path":
        if value in _SHELL_PATHS or value.startswith("/dev/"):
            return True
        if value.lower() in _NOT_FILES:
            return True
        if value[:1] not in ("/", "~", ".") and "/" in value:
            parts = value.split("/")
            if all(p.isalpha() for p in parts if p):  # prose unless it starts like a source tree
                return not (
                    parts[0].lower() in _DIR_WORDS and all(p.islower() and len(p) > 2 for p in parts[1:] if p)
                )
            if len(parts[0]) <= 1:  # sed / vim substitutions: s/old/new, s/0
                return True
    if cls == "version" and _FILE_EXT_RE.search(value):
        return True
    return cls == "metric" and value.split("=", 1)[0].lower() in _NOT_METRICS


@dataclass(frozen=True)
class Identifier:
    """An exact string that must survive, its class, and where and how often it was seen.

    ``last`` is a position in the stream of folded entries (1 = the first entry ever folded; it only
    grows), ``mentions`` counts the entries that named it, ``result`` says it was printed on the
    last lines of an output (a run id, a final metric, a traceback's error). All feed ``relevance``.
    """

    text: str
    cls: IdentifierClass
    entry_id: str | None = None
    mentions: int = 1
    last: int = 0
    result: bool = False
    # a metric's subjects (its key and what a line says before it): a new value replaces it
    subjects: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "cls": self.cls,
            "entry_id": self.entry_id,
            "mentions": self.mentions,
            "last": self.last,
        }
        if self.result:
            out["result"] = True
        if self.subjects:
            out["subjects"] = list(self.subjects)
        return out

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> Identifier:
        cls = str(obj.get("cls", "id"))
        if cls not in IDENTIFIER_CLASSES:
            raise ValueError(f"identifier {obj!r}: unknown class {cls!r}")
        try:
            mentions, last = int(obj.get("mentions", 1)), int(obj.get("last", 0))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"identifier {obj!r}: mentions and last must be integers") from exc
        if mentions < 1 or last < 0:
            raise ValueError(f"identifier {obj!r}: mentions must be >= 1 and last >= 0")
        entry_id = None if obj.get("entry_id") is None else str(obj["entry_id"])
        return Identifier(
            str(obj["text"]),
            cls,  # type: ignore[arg-type]
            entry_id,
            mentions,
            last,
            bool(obj.get("result", False)),
            tuple(str(x) for x in obj.get("subjects") or ()),
        )


def extract_identifiers(text: str) -> list[tuple[IdentifierClass, str]]:
    """Exact identifiers in ``text``, first occurrence order, without duplicates."""
    found: dict[str, IdentifierClass] = {}
    spans: list[tuple[int, int]] = []
    hits: list[tuple[int, IdentifierClass, str]] = []
    gates: dict[str, bool] = {}
    for cls, pattern, hints, gate in _SCANS:
        if hints:
            for hint in hints:
                if hint in text:
                    break
            else:
                continue  # the pattern needs one of these substrings: skip a scan that cannot match
        if gate is not None:
            passed = gates.get(gate)
            if passed is None:
                passed = gates[gate] = _GATE_TESTS[gate](text)
            if not passed:
                continue
        for m in pattern.finditer(text):
            if cls == "error":
                start, end = m.start(1), m.end(2)
                value = text[start:end].rstrip()
            else:
                start, end = m.span()
                value = m.group(0)
            if any(s <= start and end <= e for s, e in spans):
                continue  # inside a longer identifier already taken (a path inside a URL, ...)
            if cls == "version" and " " in value:
                word, number = value.split(" ", 1)
                known = word.lower() in _TOOL_WORDS or (word.isupper() and len(word) >= 2)
                if word.lower() in _VERSIONISH_WORDS or not known:
                    if number.count(".") < 2 and not number.startswith("v"):
                        continue
                    value, start = number, start + len(word) + 1
            if cls == "path" and (value.count("/") == 1 and value.endswith("/")):
                continue
            if is_noise(cls, value):
                spans.append((start, end))  # also keeps a shorter pattern from taking a piece of it
                continue
            spans.append((start, end))
            hits.append((start, cls, value))
    hits.sort(key=lambda h: (h[0], -len(h[2])))
    kept_end = -1
    for start, cls, value in hits:
        if start + len(value) <= kept_end:
            continue  # inside a longer identifier found by a later pattern (a hash inside sha256=…)
        kept_end = max(kept_end, start + len(value))
        if value not in found and len(value) >= 3:
            found[value] = cls
    return [(cls, value) for value, cls in found.items()]


def variables_in_code(code: str) -> list[str]:
    """Top-level names a code cell defines (assignments, def, class, ``import x as y``)."""
    names: list[str] = []
    for m in _VARIABLE_RE.finditer(code):
        name = m.group(1) or m.group(2) or m.group(3)
        if name and not name.startswith("_") and name not in names and len(name) >= 2:
            names.append(name)
    return names
