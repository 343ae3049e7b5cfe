"""The core must stay pure: only the standard library, and no clock, randomness or I/O modules."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "ipython_compact" / "core"
FORBIDDEN = {
    "sqlite3",
    "openai",
    "dill",
    "IPython",
    "ipykernel",
    "comm",
    "jupyter_client",
    "time",
    "random",
    "datetime",
    "uuid",
    "os",
    "socket",
    "subprocess",
    "threading",
    "asyncio",
    "secrets",
    "io",
    "pathlib",
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_core_module_imports_only_pure_stdlib(path: Path) -> None:
    imported = _imports(path)
    allowed_local = {"ipython_compact", "__future__"}
    for name in imported - allowed_local:
        assert name in sys.stdlib_module_names, f"{path.name} imports non-stdlib module {name!r}"
        assert name not in FORBIDDEN, f"{path.name} imports {name!r}, which the pure core must not use"
    # Local imports must stay inside the core.
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ipython_compact"):
            assert node.module.startswith("ipython_compact.core"), (
                f"{path.name} imports {node.module} from outside the core"
            )
