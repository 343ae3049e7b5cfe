"""The core package never depends on the engine extras, and the adapters use only public names."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import ipython_compact

PACKAGE = Path(ipython_compact.__file__).parent
ENGINE_MODULES = ("dspy", "rlm", "litellm", "tiktoken")


def test_importing_the_package_and_the_shared_adapter_parts_imports_no_engine() -> None:
    code = (
        "import sys, json, ipython_compact, ipython_compact.compaction.compactor, "
        "ipython_compact.agent.loop, "
        "ipython_compact.cli, ipython_compact.integrations, ipython_compact.integrations.kernel_runner, "
        "ipython_compact.integrations.iteration_log, ipython_compact.agent.subcall_broker\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {ENGINE_MODULES!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout) == []


def _private_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ipython_compact"):
            module_parts = (node.module or "").split(".")
            bad += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
            bad += [str(node.module) for p in module_parts if p.startswith("_") and p != "__init__"]
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "ipython_compact." in node.value
        ):
            bad += [
                w
                for w in node.value.replace("'", " ").split()
                if w.startswith("ipython_compact.") and "._" in w
            ]
    return bad


def test_the_adapters_import_only_public_names_of_ipython_compact() -> None:
    files = sorted((PACKAGE / "integrations").glob("*.py"))
    assert {f.name for f in files} >= {"dspy.py", "rlms.py", "kernel_runner.py", "iteration_log.py"}
    assert {f.name: _private_imports(f) for f in files} == {f.name: [] for f in files}


def test_no_module_outside_integrations_imports_the_adapters() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if "integrations" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        # an engine import is `import rlm`, `from rlm...`, not `... import rlm_kernel` of our own
        if "ipython_compact.integrations" in text or re.search(r"\b(import|from) (dspy|rlm)\b(?!_)", text):
            offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []
