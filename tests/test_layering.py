"""The import graph points down the layers of docs/contracts.md, with no cycle, and hides nothing.

Every ``import`` counts, including the ones inside functions: an import moved into a function
still makes the importing module depend on the imported one, and was how cycles used to hide.
Three rules, each a test:

1. Between packages, imports go strictly down the ranks below (a package may not import one of
   the same rank or above). The package root (``ipython_compact/__init__.py``: the public API
   and ``load_ipython_extension``) is the top; nothing inside imports it.
2. Inside ``core`` the module graph has no cycle.
3. An import inside a function is allowed only with a comment on its line or the line above that
   says why it is deferred (start-up time of the CLI or the kernel extension, or an optional
   heavy dependency), so a deferred import is always a decision someone wrote down.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ipython_compact"

RANKS: dict[str, int] = {
    "core": 0,
    "files": 1,
    "version": 1,
    "store": 2,
    "summarizers": 2,
    "namespace": 2,
    "testing": 2,
    "compaction": 3,
    "agent": 4,
    "host": 4,
    "cli": 4,
    "kernel": 5,
    "jupyter": 6,  # the server extension: serves a notebook's persisted session as the kernel side reads it
    "integrations": 6,
    "__init__": 7,
}

DEFERRED_REASONS = ("start-up", "startup", "optional", "heavy")

#: Deferred imports that predate rule 3 and still need a reason or a move to the top; this list
#: only shrinks.
NOT_YET_EXPLAINED: set[str] = set()


def _all_modules() -> set[str]:
    return {_module_name(p) for p in PACKAGE.rglob("*.py")}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) for every ipython_compact import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                # `from ipython_compact.core import tokens` imports the submodule tokens; names that
                # are not submodules import the module itself
                for alias in child.names:
                    submodule = f"{child.module}.{alias.name}"
                    target = submodule if submodule in _all_modules() else child.module
                    found.append((target, child.lineno, in_function))
            elif isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_function) for alias in child.names)
            visit(child, nested)

    visit(tree, False)
    return found


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "labextension" not in p.parts)


def _internal_edges() -> list[tuple[str, str, Path, int]]:
    modules = {_module_name(p) for p in _sources()}
    edges = []
    for path in _sources():
        source = _module_name(path)
        for target, line, _ in _imports(path):
            if target.startswith("ipython_compact") and target in modules and target != source:
                edges.append((source, target, path, line))
    return edges


def test_every_package_has_a_rank() -> None:
    packages = {_package(_module_name(p)) for p in _sources()}
    assert packages <= set(RANKS), f"give these packages a rank in RANKS: {sorted(packages - set(RANKS))}"


def test_packages_import_only_lower_ranks() -> None:
    wrong = []
    for source, target, path, line in _internal_edges():
        src, tgt = _package(source), _package(target)
        if src != tgt and RANKS.get(tgt, 99) >= RANKS.get(src, -1):
            wrong.append(
                f"{path.relative_to(PACKAGE.parent)}:{line}: {src} (rank {RANKS.get(src)}) imports "
                f"{target} (rank {RANKS.get(tgt)})"
            )
    assert not wrong, "imports that point up or sideways:\n" + "\n".join(wrong)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle in ``graph`` as a list of nodes (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := walk(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("scope", ["packages", "core modules"])
def test_no_import_cycle(scope: str) -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target, _, _ in _internal_edges():
        if scope == "packages":
            if _package(source) != _package(target):
                graph[_package(source)].add(_package(target))
        elif _package(source) == "core" and _package(target) == "core":
            graph[source].add(target)
    assert _cycle(graph) is None, f"import cycle among {scope}: {' -> '.join(_cycle(graph) or [])}"


def test_deferred_imports_say_why() -> None:
    silent = []
    for path in _sources():
        lines = path.read_text(encoding="utf-8").splitlines()
        seen_lines = set()
        for _, line, in_function in _imports(path):
            if not in_function or line in seen_lines:
                continue
            seen_lines.add(line)
            nearby = (lines[line - 1] + " " + (lines[line - 2] if line > 1 else "")).lower()
            if not any(reason in nearby for reason in DEFERRED_REASONS):
                silent.append(f"{path.relative_to(PACKAGE.parent)}: {lines[line - 1].strip()}")
    silent = [s for s in silent if s not in NOT_YET_EXPLAINED]
    assert not silent, (
        "imports inside functions without a comment saying why they are deferred "
        "(move them to the top, or say 'start-up'/'optional'/'heavy'):\n" + "\n".join(silent)
    )
