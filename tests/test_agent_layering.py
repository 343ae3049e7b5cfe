"""The agent sits below the kernel side: nothing in ``ipython_compact/agent`` (nor the other
orchestration modules it uses) imports ``ipython_compact.kernel``, at module level or inside a
function. The kernel side may import the agent, never the reverse."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ipython_compact

ROOT = Path(ipython_compact.__file__).parent
MODULES = sorted([*(ROOT / "agent").glob("*.py"), ROOT / "compactor.py", ROOT / "client.py",
                  *(ROOT / "summarizers").glob("*.py")])


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_orchestration_never_imports_the_kernel_side(path: Path) -> None:
    bad = [n for n in _imports(path) if n == "ipython_compact.kernel" or n.startswith("ipython_compact.kernel.")]
    assert bad == [], f"{path.relative_to(ROOT)} imports the kernel side: {bad}"


def test_the_scan_sees_the_agent_package() -> None:
    assert len([p for p in MODULES if p.parent.name == "agent"]) >= 10
