"""The core's import graph points one way: no cycle, and no import inside a function to hide one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "ipython_compact" / "core"
PREFIX = "ipython_compact.core."


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def core_graph(core: Path = CORE) -> dict[str, set[str]]:
    """Module name -> core modules it imports (any import statement anywhere in the file)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(core.glob("*.py")):
        deps: set[str] = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
                deps.add(node.module.removeprefix(PREFIX))
            elif isinstance(node, ast.Import):
                deps.update(a.name.removeprefix(PREFIX) for a in node.names if a.name.startswith(PREFIX))
        graph[path.stem] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None (depth-first search with colours)."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep):], dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"a"}}, ["a", "a"]),
        ({"a": set(), "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
    ],
)
def test_find_cycle(graph: dict[str, set[str]], cycle: list[str] | None) -> None:
    assert find_cycle(graph) == cycle


def test_core_import_graph_has_no_cycle() -> None:
    graph = core_graph()
    assert {"tokens", "context", "preparation", "cutpoints", "view"} <= set(graph)
    assert find_cycle(graph) is None


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_core_imports_only_at_module_level(path: Path) -> None:
    tree = _tree(path)
    top = set(map(id, tree.body))
    nested = [
        node.lineno for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top
    ]
    assert nested == [], f"{path.name}: imports inside a function or block at lines {nested}"
