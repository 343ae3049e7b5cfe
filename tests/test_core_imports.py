"""The core imports at module level only (tests/test_layering.py proves its graph has no cycle).

The core is pure and cheap to import, so it has no start-up reason to defer an import; an import
inside a function there could only hide a cycle (tokens → context → preparation → cutpoints →
tokens once hid behind one).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "ipython_compact" / "core"


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_core_imports_only_at_module_level(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    top = set(map(id, tree.body))
    nested = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top
    ]
    assert nested == [], f"{path.name}: imports inside a function or block at lines {nested}"
