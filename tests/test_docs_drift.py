"""The docs cannot drift from the code: every name they cite exists, every signature they quote matches.

Docs that describe removed classes or half a constructor mislead a newcomer more than no docs. This
test reads the Markdown the project ships (``docs/*.md`` and the README) and checks each backticked
code span:

- ``pkg/module.py`` paths name a file of the package;
- ``Name(params)`` / ``a.b.name(params)`` calls resolve to a function or class of the package, and the
  parameters quoted are the real ones: every quoted name exists, and, unless the quote says it leaves
  some out (``...`` / ``…``), every real parameter is quoted;
- CamelCase and UPPER_CASE names (classes, constants) exist somewhere in the package.

Bare snake_case words are not checked: in prose they are as often field names, JSON keys or settings as
functions. The CLI's help is checked separately: ``docs/cli.md`` is generated from the parsers
(``python -m ipython_compact.cli.help_doc``) and must equal a fresh rendering.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ipython_compact

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ipython_compact"
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]

# Extras whose modules import optional engines at the top; their names are still indexed when importable.
OPTIONAL_MODULES = ("ipython_compact.integrations.dspy", "ipython_compact.integrations.rlms")

# Names the docs cite that are not ours (other projects, the standard library, TypeScript, JSON shapes).
FOREIGN = {
    "ModuleNotFoundError",
    "ValueError",
    "TypeError",
    "KeyError",
    "RuntimeError",
    "NameError",
    "OSError",
    "FileNotFoundError",
    "PermissionError",
    "TimeoutError",
    "UsageError",
    "KeyboardInterrupt",
    "SIGINT",
    "SIGTERM",
    "SIGKILL",
    "APIConnectionError",
    "BadRequestError",
    "RateLimitError",
    "OpenAI",
    "AsyncOpenAI",
    "SessionManager",
    "RLM",
    "LocalREPL",
    "PythonInterpreter",
    "Signature",
    "Predict",
    "LM",
    "dspy",
    "JSON",
    "JSONL",
    "HTML",
    "UTF",
    "UTC",
    "ISO",
    "PID",
    "API",
    "CLI",
    "URL",
    "FTS",
    "FTS5",
    "WAL",
    "IPython",
    "JupyterLab",
    "Jupyter",
    "TypeScript",
    "Node",
    "Chromium",
    "Playwright",
    "SQLite",
    "PostgreSQL",
    "NaN",
    "Infinity",
    "True",
    "False",
    "None",
    "HMAC",
    "SHA",
    "NotebookModel",
    "PanelModel",
    "Op",
    "Promise",
    "ISignal",
    "Kernel",
    "IComm",
    "DataFrame",
    "Series",
    "ndarray",
    "NotImplemented",
    "KernelConnection",
    "MappingKernelManager",
    "PageConfig",
    "SHOW_VARS",
    "DuckDB",
    "ceil",
    "load_step",  # code inside the generated transcripts the fidelity notes quote
}
FOREIGN_PREFIXES = ("np.", "pd.", "os.", "dspy.", "this.", "JSON.", "rlm.", "math.")

# Where a constant may live when it is no Python attribute: environment variables read by the code,
# flags passed to the OS, names the TypeScript panel defines, settings the tests read.
SOURCES = "\n".join(
    p.read_text(encoding="utf-8", errors="replace")
    for pattern in ("ipython_compact/**/*.py", "labextension/src/**/*.ts", "tests/**/*.py", "Makefile")
    for p in ROOT.glob(pattern)
)


def _modules() -> Iterator[Any]:
    for info in pkgutil.walk_packages(ipython_compact.__path__, "ipython_compact."):
        if info.name.startswith("ipython_compact.labextension"):
            continue
        try:
            yield importlib.import_module(info.name)
        except ImportError:
            if info.name.startswith(OPTIONAL_MODULES):
                continue
            raise


def _index() -> dict[str, list[Any]]:
    """Every public name defined in the package (module attributes and class members) → the objects."""
    found: dict[str, list[Any]] = {}

    def add(name: str, obj: Any) -> None:
        bucket = found.setdefault(name, [])
        if not any(o is obj for o in bucket):
            bucket.append(obj)

    import lab_driver  # the Lab harness the contracts cite lives with the tests

    for module in [*_modules(), lab_driver]:
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", module.__name__) and not name.startswith("__"):
                add(name, obj)
            if inspect.isclass(obj) and (obj.__module__ or "").startswith("ipython_compact"):
                for member, value in vars(obj).items():
                    if not member.startswith("__"):
                        add(member, value)
                for field in dataclasses.fields(obj) if dataclasses.is_dataclass(obj) else ():
                    add(field.name, field)
    return found


INDEX = _index()


def _spans(path: Path) -> Iterator[tuple[int, str]]:
    """Backticked spans outside fenced blocks, with their line numbers (spans may wrap one line)."""
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for match in re.finditer(r"`((?:(?!\n\s*\n)[^`])+)`", text):
        yield text.count("\n", 0, match.start()) + 1, " ".join(match.group(1).split())


def _split_top(params: str) -> list[str]:
    parts, depth, quote, current = [], 0, "", []
    for ch in params:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _quoted_params(params: str) -> tuple[set[str], bool]:
    """The parameter names a quote gives, and whether it claims to be complete."""
    names: set[str] = set()
    complete = True
    for part in _split_top(params):
        if part in ("*", "/") or part.startswith("->"):
            continue
        if "..." in part or "…" in part:
            complete = False
            continue
        annotated = re.match(r"\s*\*{0,2}[A-Za-z_]\w*\s*:", part) is not None  # `names: list | None`
        for alternative in [part] if annotated else part.split("|"):  # `entry_id=None | query=None`
            head = re.match(r"\s*\*{0,2}([A-Za-z_]\w*)\s*(?:[:=]|$)", alternative)
            if head is not None:
                names.add(head.group(1))
            elif alternative.strip() == part.split("|")[0].strip():
                complete = False  # a description such as `[(kind, data), ...]` or `"auto"`, not a name
    return names, complete


def _real_params(obj: Any) -> set[str] | None:
    target = obj.__func__ if isinstance(obj, (classmethod, staticmethod)) else obj
    if isinstance(target, property):
        return None
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    return {p for p in signature.parameters if p not in ("self", "cls")}


CALL = re.compile(r"^(?:ipython_compact\.)?([A-Za-z_][\w.]*)\((.*?)\)(?:\s*(?:->|\.|$))")


def _candidates(dotted: str) -> list[Any]:
    """Objects a (possibly dotted) name can mean: the exact path when it resolves, else same-named ones."""
    parts = dotted.split(".")
    for start in range(len(parts)):
        module_name = "ipython_compact." + ".".join(parts[:start]) if start else "ipython_compact"
        try:
            obj: Any = importlib.import_module(module_name.rstrip("."))
        except ImportError:
            continue
        try:
            for attr in parts[start:]:
                obj = inspect.getattr_static(obj, attr)
        except AttributeError:
            continue
        return [obj]
    return INDEX.get(parts[-1], [])


def _problems(path: Path, *, signatures: bool) -> Iterator[str]:
    """What ``path`` cites that the code lacks; ``signatures``: its calls quote full signatures."""
    for line, span in _spans(path):
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{line}: `{span}`"
        file_ref = re.fullmatch(
            r"(?:ipython_compact/)?((?:core|store|agent|kernel|cli|namespace|summarizers|"
            r"integrations|testing)/[\w/]+\.py)",
            span,
        )
        if file_ref:
            if not (PACKAGE / file_ref.group(1)).is_file():
                yield f"{where}: no such file in the package"
            continue
        call = CALL.match(span)
        if call:
            dotted, params = call.group(1), call.group(2)
            objects = [
                o for o in _candidates(dotted) if callable(o) or isinstance(o, (classmethod, staticmethod))
            ]
            if not objects:
                if (
                    dotted.split(".")[-1] not in FOREIGN
                    and not dotted.startswith(FOREIGN_PREFIXES)
                    and not re.search(
                        rf"^\s*(?:async )?(?:def|class) "
                        rf"{re.escape(dotted.split('.')[-1])}\b",
                        SOURCES,
                        re.M,
                    )
                ):
                    yield f"{where}: `{dotted}` is not a function or class of the package"
                continue
            quoted, complete = _quoted_params(params)
            if not signatures:
                # Elsewhere a call is an example (`agent.ask(question, context=BIG)`): its positional
                # arguments are the example's own names; only the keywords it passes must exist.
                quoted, complete = set(re.findall(r"(?:^|,)\s*([A-Za-z_]\w*)\s*=", params)), False
            verdicts = []
            for obj in objects:
                real = _real_params(obj)
                if real is None:
                    verdicts.append("")
                    continue
                unknown = sorted(quoted - real)
                missing = sorted(real - quoted) if complete and params.strip() else []
                verdicts.append(
                    "; ".join(
                        ([f"not parameters: {', '.join(unknown)}"] if unknown else [])
                        + (
                            [f"parameters left out (add them or write …): {', '.join(missing)}"]
                            if missing
                            else []
                        )
                    )
                )
            if all(verdicts):
                yield f"{where}: {min(verdicts, key=len)}"
            continue
        for name in re.findall(
            r"(?<![\w./-])([A-Z][a-z]+[A-Z]\w*|[A-Z][A-Z0-9]*_[A-Z0-9_]+)(?![\w/-])", span
        ):
            if (
                name not in INDEX
                and name not in FOREIGN
                and not re.search(
                    rf"^\s*(?:class|def) "
                    rf"{name}\b|^\s*{name}\s*[:=]|[\"']{name}[\"']|\.{name}\b|\b(?:const|let|var) {name}\b",
                    SOURCES,
                    re.M,
                )
            ):
                yield f"{where}: `{name}` is not defined in the package"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_cited_name_and_signature_matches_the_code(doc: Path) -> None:
    problems = list(_problems(doc, signatures=doc.name == "contracts.md"))
    assert not problems, "the docs cite what the code no longer has:\n" + "\n".join(problems)


def test_the_checker_catches_a_removed_name_and_a_missing_parameter(tmp_path: Path) -> None:
    stale = tmp_path / "stale.md"
    stale.write_text(
        "- `agent.engine.CompactorEngine(compactor)` and `CoreEngine`\n"
        "- `core/thresholds.py` — `threshold_lines(window)`\n"
        "- `core/nowhere.py`\n",
        encoding="utf-8",
    )
    problems = "\n".join(_problems(stale, signatures=True))
    assert "CompactorEngine` is not a function or class" in problems
    assert "`CoreEngine` is not defined" in problems
    assert "parameters left out" in problems and "settings" in problems
    assert "core/nowhere.py`: no such file" in problems


def test_the_cli_reference_is_the_cli_help() -> None:
    from ipython_compact.cli.help_doc import render

    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert committed == render(), (
        "docs/cli.md differs from the CLI's help: run `python -m ipython_compact.cli.help_doc > docs/cli.md`"
    )


def test_the_magics_reference_is_the_magics_help() -> None:
    from ipython_compact.kernel.help_doc import render

    committed = (ROOT / "docs" / "magics.md").read_text(encoding="utf-8")
    assert committed == render(), (
        "docs/magics.md differs from the magics' help: run `python -m ipython_compact.kernel.help_doc > "
        "docs/magics.md`"
    )
