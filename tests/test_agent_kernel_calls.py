"""The one table of kernel calls (issue 19.2): every entry is reachable in a kernel by its module
and name, every caller's arguments fit, and a call's arguments can only ever be literals."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

import ipython_compact
from ipython_compact.agent import kernel_state, requests, rlm_kernel
from ipython_compact.agent.kernel_calls import KERNEL_CALLS, SHELL, kernel_call

PACKAGE = Path(ipython_compact.__file__).parent


@pytest.mark.parametrize("name", sorted(KERNEL_CALLS))
def test_every_entry_is_found_by_the_code_a_kernel_runs(name: str) -> None:
    fn = KERNEL_CALLS[name]
    assert getattr(importlib.import_module(fn.__module__), fn.__name__) is fn


def test_a_call_is_an_import_of_the_module_and_a_call_of_the_function() -> None:
    expected = "__import__('ipython_compact.agent.requests', fromlist=['take_json']).take_json()"
    assert kernel_call(requests.take_json) == expected


def _call_sites() -> list[tuple[str, str, int, list[str]]]:
    """(file:line, the function's dotted path, positional count, keyword names) of every
    ``kernel_call`` in the package; the module alias is resolved through the file's imports."""
    sites = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = {
            a.asname or a.name: f"{n.module}.{a.name}"
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module
            for a in n.names
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "kernel_call"
            ):
                where, target = f"{path.relative_to(PACKAGE)}:{node.lineno}", node.args[0]
                assert isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name), (
                    f"{where}: pass the function itself, as module.function"
                )
                assert not any(isinstance(a, ast.Starred) for a in node.args), f"{where}: no *args"
                sites.append(
                    (
                        where,
                        f"{aliases.get(target.value.id, target.value.id)}.{target.attr}",
                        len(node.args) - 1,
                        [k.arg for k in node.keywords if k.arg is not None],
                    )
                )
    return sites


def test_every_caller_in_the_package_passes_arguments_its_entry_accepts() -> None:
    by_path = {f"{fn.__module__}.{fn.__name__}": fn for fn in KERNEL_CALLS.values()}
    sites = _call_sites()
    wrong = []
    for where, dotted, positional, keywords in sites:
        fn = by_path.get(dotted)
        if fn is None:
            wrong.append(f"{where}: {dotted} is not in KERNEL_CALLS")
            continue
        try:
            inspect.signature(fn).bind(*[None] * positional, **dict.fromkeys(keywords))
        except TypeError as exc:
            wrong.append(f"{where}: {dotted}: {exc}")
    assert wrong == []
    callers = {where.split(":")[0] for where, *_ in sites}
    assert callers >= {
        "agent/kernel_tool.py",
        "agent/rlm.py",
        "integrations/kernel_runner.py",
        "integrations/rlms.py",
    }
    assert len(sites) >= 15


def test_no_module_writes_a_kernel_call_by_hand() -> None:
    """The old way (a hand-written `__import__('ipython_compact...', fromlist=...)` string) is gone."""
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "fromlist=" in p.read_text(encoding="utf-8") and p.name != "kernel_calls.py"
    ]
    assert offenders == []


HOSTILE = "x'); __import__('os').system('echo owned'); ('"


@pytest.mark.parametrize(
    ("args", "kwargs", "rendered"),
    [
        ((HOSTILE,), {}, repr(HOSTILE)),
        (("dir/with 'quotes' and \\ backslash",), {}, repr("dir/with 'quotes' and \\ backslash")),
        (
            (SHELL, "http://127.0.0.1:1/call", "tok", ["a", "b"]),
            {"submit_fields": None, "submit_tool": "__s__"},
            "get_ipython(), 'http://127.0.0.1:1/call', 'tok', ['a', 'b'], submit_fields=None, "
            "submit_tool='__s__'",
        ),
        ((SHELL, {"k": [1, 2.5, True, None]}), {}, "get_ipython(), {'k': [1, 2.5, True, None]}"),
    ],
)
def test_arguments_are_rendered_as_literals_only(
    args: tuple[Any, ...], kwargs: dict[str, Any], rendered: str
) -> None:
    fn = {1: kernel_state.snapshot_json, 2: kernel_state.hide_names}.get(
        len(args), KERNEL_CALLS["install_host_tools"]
    )
    code = kernel_call(fn, *args, **kwargs)
    assert code.endswith(f".{fn.__name__}({rendered})")
    call = ast.parse(code, mode="eval").body
    assert isinstance(call, ast.Call)
    values = [*call.args, *(k.value for k in call.keywords)]
    literals = [v for v in values if ast.unparse(v) != "get_ipython()"]
    assert [ast.literal_eval(v) for v in literals] == [a for a in [*args, *kwargs.values()] if a is not SHELL]


def test_a_hostile_string_stays_data_when_the_kernel_runs_the_call(tmp_path: Path) -> None:
    seen: list[str] = []
    namespace = {
        "__builtins__": {
            "__import__": lambda *a, **k: type(
                "M", (), {"load_context": staticmethod(lambda path, name: seen.append(path) or "ok")}
            )
        }
    }
    assert eval(kernel_call(rlm_kernel.load_context, HOSTILE, "context"), namespace) == "ok"
    assert seen == [HOSTILE]


class _Str(str):
    def __repr__(self) -> str:
        return "__import__('os').getcwd()"


@pytest.mark.parametrize(
    ("fn", "args", "error", "message"),
    [
        (print, (), ValueError, "'print' is not a kernel call"),
        (kernel_state.snapshot_json, (), TypeError, "kernel call snapshot_json: missing a required argument"),
        (kernel_state.snapshot_json, ("a", "b"), TypeError, "kernel call snapshot_json: too many positional"),
        (
            kernel_state.snapshot_json,
            (object(),),
            ValueError,
            "snapshot_json argument 0: a kernel call takes plain literals",
        ),
        (kernel_state.snapshot_json, (_Str("x"),), ValueError, "not _Str"),
        (rlm_kernel.take_final_json, (float("nan"),), ValueError, "nan is not a finite number"),
        (kernel_state.hide_names, (SHELL, {1: "a"}), ValueError, "dict keys must be str"),
        (requests.take_json, (SHELL,), TypeError, "kernel call take_json: too many positional"),
    ],
)
def test_bad_calls_are_refused_before_anything_is_sent(
    fn: Any, args: tuple[Any, ...], error: type, message: str
) -> None:
    with pytest.raises(error) as info:
        kernel_call(fn, *args)
    assert message in str(info.value)
