"""The panel's persisted-session request never freezes Jupyter Server (issue 31, red team four).

Found by attack: ``GET /ipython-compact/session`` ran on the server's event loop, so with snapshots
on a stalled object-storage endpoint ``/api/status`` got no answer within 10 s: every user and
every kernel of that server froze with it. Now the request is read on a worker thread under a
deadline; the loop stays free and a request that overruns gets a 504 naming what was slow.

A real ``jupyter lab`` (``lab_driver.running_lab``) with this extension, a real SQLite log holding
the notebook's session, and a TCP endpoint that accepts and never answers as the S3 endpoint.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from lab_driver import LabServer, running_lab
from stalled_endpoint import StalledEndpoint

from ipython_compact.namespace.snapshot.keys import load_or_create_key
from ipython_compact.store import SessionStore

pytestmark = pytest.mark.slow


def _get(server: LabServer, path: str, timeout: float) -> tuple[int, Any]:
    req = urllib.request.Request(f"{server.url}{path}", headers={"Authorization": f"token {server.token}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _notebook_session(tmp_path: Path) -> Path:
    """The lab's root (``tmp_path/root``, as ``running_lab`` serves it) with the logged session of
    ``a.ipynb`` in ``tmp_path/compact-data`` (returned): what both tests ask the server about."""
    root, data_dir = tmp_path / "root", tmp_path / "compact-data"
    root.mkdir()
    data_dir.mkdir()
    store = SessionStore(data_dir / "sessions.db")
    store.create_session(f"notebook:{root / 'a.ipynb'}")
    store.close()
    return data_dir


def test_a_stalled_snapshot_bucket_does_not_freeze_the_server(tmp_path: Path) -> None:
    data_dir = _notebook_session(tmp_path)
    load_or_create_key(data_dir / "key")
    with StalledEndpoint() as stalled:
        env = {
            "IPYTHON_COMPACT_SNAPSHOTS": "s3://bucket/snapshots",
            "AWS_ENDPOINT_URL": stalled.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            # Long enough that /api/status is answered while the session request is still stuck, on a
            # loaded machine too; the order of the answers is asserted, not their seconds.
            "IPYTHON_COMPACT_SERVER_TIMEOUT": "15",
        }
        with running_lab(tmp_path, env=env) as server:
            answer: dict[str, Any] = {}

            def ask() -> None:
                answer["reply"] = _get(server, "/ipython-compact/session?path=a.ipynb", timeout=120)

            asker = threading.Thread(target=ask)
            asker.start()
            assert stalled.accepted.wait(60), "the session request never reached the snapshot bucket"
            status, body = _get(server, "/api/status", timeout=120)  # while the session request is stuck
            assert status == 200 and "started" in body, body
            # A frozen loop answers /api/status only after the session request's 504: it must come first.
            assert "reply" not in answer, answer
            asker.join(120)
            assert not asker.is_alive()
            code, reply = answer["reply"]
            assert code == 504, reply
            assert "s3://bucket/snapshots" in reply["message"] and "15 s" in reply["message"], reply


def test_the_session_answers_as_before_when_nothing_is_slow(tmp_path: Path) -> None:
    _notebook_session(tmp_path)
    with running_lab(tmp_path) as server:
        code, reply = _get(server, "/ipython-compact/session?path=a.ipynb", timeout=30)
        assert code == 200, reply
        assert reply["exists"] is True and reply["snapshots"] == []
        code, reply = _get(server, "/ipython-compact/session?path=../a.ipynb", timeout=30)
        assert code == 400
