"""Start-up stays cheap (issue 21, item 5): what ``ipython-compact --help`` imports.

Time is measured in ``bench/bench_startup.py``; here the cause is pinned, which does not depend
on the machine's load: the paths that must be fast do not import the heavy modules (the store,
the summarizers, the compactor, the agent), each checked in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ipython_compact.cli import COMMAND_MODULES, COMMANDS, build_parser

HEAVY_FOR_HELP = (
    "ipython_compact.store",
    "ipython_compact.summarizers",
    "ipython_compact.compaction.compactor",
    "ipython_compact.core.entries",
    *COMMAND_MODULES,
)


def _modules_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["compcat"], []])
def test_the_top_level_help_imports_no_command_module(argv: list[str]) -> None:
    code = (
        "import contextlib, io\nfrom ipython_compact.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    try:\n        main({argv!r})\n    except SystemExit:\n        pass"
    )
    loaded = _modules_after(code)
    assert sorted(m for m in HEAVY_FOR_HELP if m in loaded) == []


def test_one_commands_help_imports_only_its_module() -> None:
    code = (
        "import contextlib, io\nfrom ipython_compact.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['pin', '--help'])\n    except SystemExit:\n        pass"
    )
    loaded = _modules_after(code)
    assert "ipython_compact.cli.compact_commands" in loaded
    assert "ipython_compact.cli.session_commands" not in loaded


def test_every_command_is_registered_by_the_module_the_table_names_with_its_help() -> None:
    parser = build_parser()
    (action,) = [a for a in parser._actions if a.dest == "command"]
    assert {a.dest: a.help for a in action._choices_actions} == {name: h for name, (_, h) in COMMANDS.items()}
    for name, (module, _) in COMMANDS.items():  # the full parser came from the module the table names
        assert action.choices[name].get_default("func").__module__ == module, name
    assert [a.dest for a in action._choices_actions] == list(COMMANDS)  # --help lists the table's order


def test_loading_the_extension_imports_neither_the_compactor_nor_the_agent() -> None:
    """%load_ext pays for the comm, the magics and the store; the summarizing core, the
    summarizers and the agent load when a compaction or a %%agent cell first needs them."""
    loaded = _modules_after("import ipython_compact.kernel.extension")
    heavy = (
        "ipython_compact.compaction.compactor",
        "ipython_compact.summarizers.registry",
        "ipython_compact.agent.loop",
        "ipython_compact.agent.model_resolution",
        "openai",
    )
    assert sorted(m for m in heavy if m in loaded) == []


def test_loading_the_extension_opens_neither_the_store_nor_the_snapshot_machinery() -> None:
    """The SQLite store and the snapshot store (dill, the pickling machinery) load on first use:
    the first status, append, snapshot or restore, not at %load_ext."""
    loaded = _modules_after("import ipython_compact.kernel.extension")
    deferred = (
        "ipython_compact.store.sqlite_store",
        "ipython_compact.store.log",
        "ipython_compact.store.database",
        "sqlite3",
        "ipython_compact.namespace.snapshot.folder",
        "ipython_compact.namespace.snapshot.codec",
        "ipython_compact.core.triage",
        "dill",
    )
    assert sorted(m for m in deferred if m in loaded) == []


@pytest.mark.parametrize(
    ("package", "name", "module"),
    [
        ("ipython_compact.store", "SessionStore", "ipython_compact.store.sqlite_store"),
        ("ipython_compact.store", "LEAF", "ipython_compact.store.sqlite_store"),
        ("ipython_compact.namespace.snapshot", "SnapshotStore", "ipython_compact.namespace.snapshot.folder"),
        ("ipython_compact.namespace.snapshot", "MAGIC", "ipython_compact.namespace.snapshot.signing"),
        (
            "ipython_compact.namespace.snapshot",
            "fingerprint",
            "ipython_compact.namespace.snapshot.fingerprints",
        ),
    ],
)
def test_the_packages_still_export_what_they_load_lazily(package: str, name: str, module: str) -> None:
    code = f"import {module} as m\nfrom {package} import {name}\nprint({name} is m.{name})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"


def test_an_unknown_name_of_a_lazy_package_is_an_attribute_error() -> None:
    import ipython_compact.namespace.snapshot as snapshot
    import ipython_compact.store as store

    for package in (store, snapshot):
        with pytest.raises(AttributeError, match="no_such_name"):
            package.no_such_name  # noqa: B018
