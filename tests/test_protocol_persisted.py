"""What the panel reads besides the live kernel: the call tree and the snapshots on disk.

The call tree (the ``calls`` op, and the server's persisted session) follows the ``parent_link``
entries sub-agents write; the persisted snapshots are read from their signed manifests, so after
a kernel restart the panel lists what a restore would bring back before the extension is loaded.
Real SQLite logs and real snapshot folders; nothing is unpickled by the server.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from ipython_compact.files import paths
from ipython_compact.jupyter.server_extension import persisted_session, persisted_snapshots
from ipython_compact.kernel.call_tree import PARENT_LINK, call_tree
from ipython_compact.kernel.extension import extension_for
from ipython_compact.store import SessionStore


def _link(store: SessionStore, child: str, parent: str, name: str) -> None:
    store.ensure_session(child)
    store.append(
        child,
        "custom",
        {
            "custom_type": PARENT_LINK,
            "parent_session": parent,
            "parent_entry": None,
            "name": name,
            "task": "t",
        },
    )


def test_the_call_tree_is_depth_first_in_start_order(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "log.sqlite")
    try:
        store.ensure_session("root")
        store.append("root", "custom", {"custom_type": "note", "data": {}})
        _link(store, "root/a", "root", "alpha")
        _link(store, "root/b", "root", "beta")
        _link(store, "root/a/x", "root/a", "deep")
        _link(store, "other/c", "other", "unrelated")
        store.ensure_session("alone")
        tree = call_tree(store, "root")
        assert [(n["session"], n["parent"], n["name"], n["depth"]) for n in tree] == [
            ("root", None, None, 0),
            ("root/a", "root", "alpha", 1),
            ("root/a/x", "root/a", "deep", 2),
            ("root/b", "root", "beta", 1),
        ]
        assert tree[0]["entries"] == 1 and tree[1]["entries"] == 1
        assert [n["session"] for n in call_tree(store, "alone")] == ["alone"]
        assert len(call_tree(store, "root", max_nodes=2)) == 2
    finally:
        store.close()


def test_a_cycle_of_links_lists_each_session_once(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "log.sqlite")
    try:
        _link(store, "p", "q", "one")
        _link(store, "q", "p", "two")
        assert [n["session"] for n in call_tree(store, "p")] == ["p", "q"]
    finally:
        store.close()


def test_persisted_snapshots_list_names_and_types_without_unpickling(ip: Any) -> None:
    ip.run_cell("import collections\ncounts = collections.Counter('abca')\ntitle = 'x' * 10\nn = 7")
    ip.run_line_magic("compact", "snapshot")
    ip.run_cell("n = 8\nextra = [1, 2]")
    ip.run_line_magic("compact", "snapshot")
    ext = extension_for(ip)
    assert ext is not None
    service = ext.service
    served = persisted_session("a.ipynb", service.session, "env")
    snapshots = served["snapshots"]
    assert [s["generation"] for s in snapshots] == sorted((s["generation"] for s in snapshots), reverse=True)
    newest = snapshots[0]
    by_name = {row["name"]: row for row in newest["names"]}
    assert {"counts", "title", "n", "extra"} <= set(by_name)
    assert by_name["counts"]["type"] == "Counter" and by_name["title"]["type"] == "str"
    assert newest["bytes"] > 0 and newest["origin"] == "explicit"
    assert "extra" not in {row["name"] for row in snapshots[1]["names"]}
    assert [c["session"] for c in served["calls"]] == [service.session]


def test_no_key_or_folder_means_no_snapshots_and_nothing_is_created(tmp_path: Path) -> None:
    folder, key = tmp_path / "snaps", tmp_path / "key"
    assert persisted_snapshots(folder, key, "s") == []
    assert not folder.exists() and not key.exists()
    folder.mkdir()
    assert persisted_snapshots(folder, key, "s") == []
    assert not key.exists()


def test_a_tampered_manifest_is_left_out(ip: Any) -> None:
    ip.run_cell("kept = 1")
    ip.run_line_magic("compact", "snapshot")
    ext = extension_for(ip)
    assert ext is not None
    folder = ext.service.snapshot_dir
    manifests = sorted(p for p in folder.iterdir() if p.is_file() and "manifest" in p.name)
    assert manifests
    target = manifests[-1]
    os.chmod(target, stat.S_IRUSR | stat.S_IWUSR)
    raw = target.read_bytes()
    assert b'"kept"' in raw
    target.write_bytes(raw.replace(b'"kept"', b'"kqpt"'))
    listed = persisted_snapshots(folder, paths.key_path(), ext.service.session)
    assert listed and all("kqpt" not in {row["name"] for row in s["names"]} for s in listed)
