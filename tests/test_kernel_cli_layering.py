"""The kernel side and the CLI never import each other (issue 10): what both show comes from the
core (``core/readable.py``) or ``paths`` — imports inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ipython_compact"


def imported_modules(path: Path) -> set[str]:
    """Every module an ``import``/``from`` statement in ``path`` names, at any depth."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"), [("kernel", "ipython_compact.cli"), ("cli", "ipython_compact.kernel")]
)
def test_kernel_and_cli_do_not_import_each_other(package: str, forbidden: str) -> None:
    offenders = {
        f"{path.name}: {module}"
        for path in sorted((PACKAGE / package).glob("*.py"))
        for module in imported_modules(path)
        if module == forbidden or module.startswith(forbidden + ".")
    }
    assert not offenders


def test_the_checker_sees_imports_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from ipython_compact.cli import main\n", encoding="utf-8")
    assert "ipython_compact.cli" in imported_modules(sample)
