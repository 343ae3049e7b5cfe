"""The call tree in the log and the CLI (issue 22, item 7): ``ipython-compact sessions --tree`` puts
each sub-agent's session under the session that started it, and the parent's log line for a
sub-agent names the child. Real parts: the sub-agent registry writing to a real SQLite file, and
the installed ``ipython-compact`` script run as a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ipython_compact import SessionStore
from ipython_compact.agent.session_log import SessionLog
from ipython_compact.agent.sub_agents import SubAgentRegistry

SCRIPT = Path(sys.executable).with_name("ipython-compact")


class Child:
    def __init__(self, name: str, session: str) -> None:
        self.name = name

    def ask(self, text: str) -> str:
        return f"{self.name} did {text}"

    def close(self) -> None:
        pass


def cli(db: Path, *args: str) -> str:
    done = subprocess.run(
        [str(SCRIPT), *args, "--db", str(db)], capture_output=True, text=True, timeout=120, env={**os.environ}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def build(db: Path) -> None:
    store = SessionStore(db)
    store.create_session("alone")
    store.append("alone", "custom", {"custom_type": "note"})
    store.create_session("root")
    root = SubAgentRegistry(SessionLog(store, "root"), Child)
    root.ask("first job", "a")
    root.ask("second job", "b")
    inner = SubAgentRegistry(SessionLog(store, "root/a"), Child)  # a sub-agent's own sub-agent
    inner.ask("deeper job", "deep")
    store.close()


def test_sessions_tree_nests_children_under_their_parents(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    build(db)
    names = [re.split(r"\s{2,}(?=\d)", line)[0] for line in cli(db, "sessions", "--tree").splitlines()[1:]]
    rows = json.loads(cli(db, "sessions", "--tree", "--json"))
    flat = [line.split("  ")[0] for line in cli(db, "sessions").splitlines()[1:]]
    assert names[names.index("root") :] == ["root", "├─ root/a", "│  └─ root/a/deep", "└─ root/b"]
    assert sorted((r["name"], r["parent"]) for r in rows) == [
        ("alone", None),
        ("root", None),
        ("root/a", "root"),
        ("root/a/deep", "root/a"),
        ("root/b", "root"),
    ]
    # without --tree: flat, as before
    assert sorted(flat) == ["alone", "root", "root/a", "root/a/deep", "root/b"]


def test_the_parents_log_line_names_the_child(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    build(db)
    lines = [line for line in cli(db, "log", "--session", "root").splitlines() if "sub-agent" in line]
    assert len(lines) == 4
    assert "sub-agent a started (root/a): first job" in lines[0]
    assert "sub-agent a answered (final, 15 characters, 0 tokens)" in lines[1]
    assert "sub-agent b started (root/b): second job" in lines[2]
