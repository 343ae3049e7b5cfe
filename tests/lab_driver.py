"""A real JupyterLab server and Debian's Chromium, for the browser tests and the panel benchmark.

Why in the package: the browser tests (tests/browser/) and bench/bench_panel_latency.py drive the
same things — a ``jupyter lab`` on a random free port with a token and throwaway Jupyter
directories, a headless Chromium that Playwright launches from ``/usr/bin/chromium`` (it cannot
download browsers here), and a notebook whose cells are run the way Shift+Enter runs them.

What must hold: nothing outside the temporary base directory is written (Jupyter config, data,
runtime, settings, workspaces and ``IPYTHON_COMPACT_DIR`` all live under it), and leaving the
context stops the server, which shuts down every kernel it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("IPYTHON_COMPACT_CHROMIUM", "/usr/bin/chromium")
PANEL = "#ipython-compact-panel"


@dataclass(frozen=True)
class LabServer:
    """Where a running server listens and what it serves."""

    url: str
    token: str
    root: Path
    data_dir: Path
    log_path: Path
    runtime_dir: Path

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Call the server's REST API with the token; returns the decoded JSON (or None)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def lab_url(self, notebook: str) -> str:
        return f"{self.url}/lab/tree/{notebook}?token={self.token}"

    def put_notebook(self, name: str) -> None:
        """Create an empty Python 3 notebook (its kernelspec makes Lab start the kernel on open)."""
        self.api(
            "PUT",
            f"/api/contents/{name}",
            {"type": "notebook", "format": "json", "content": empty_notebook()},
        )

    def kernel_census(self, kernel_id: str, target: str = "ipython_compact") -> tuple[int, int]:
        """(open comms on ``target``, live subshells) of a kernel, asked by a client of our own.

        Why not through the page: the page under test may be reloading or may have closed the
        notebook; a separate jupyter_client connection (from the server's connection file) sees
        the kernel as it is.
        """
        # deferred for start-up: the harness module is imported by tests that never open a kernel
        from jupyter_client.blocking.client import BlockingKernelClient

        client = BlockingKernelClient(connection_file=str(self.runtime_dir / f"kernel-{kernel_id}.json"))
        client.load_connection_file()
        client.start_channels()
        try:
            reply = client.comm_info(target_name=target, reply=True, timeout=10)
            comms = len(reply["content"]["comms"])
            msg = client.session.msg("list_subshell_request", {})
            client.control_channel.send(msg)
            deadline = time.monotonic() + 10
            while True:
                answer = client.control_channel.get_msg(timeout=max(0.1, deadline - time.monotonic()))
                if answer["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                    return comms, len(answer["content"]["subshell_id"])
        finally:
            client.stop_channels()


#: Open a document and wait for it, returning nothing: the command resolves to the widget, and
#: Playwright serializing a widget's object graph fails ("object reference chain is too long").
OPEN_DOCUMENT = "async (path) => { await window.jupyterapp.commands.execute('docmanager:open', {path}); }"


def empty_notebook() -> dict[str, Any]:
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [
            {
                "cell_type": "code",
                "id": "c0",
                "metadata": {},
                "source": "",
                "outputs": [],
                "execution_count": None,
            }
        ],
    }


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(server: LabServer, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{server.log_tail()}")
        try:
            server.api("GET", "/api/status")
            return
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.25)
    raise RuntimeError(f"jupyter lab did not answer within {timeout} s:\n{server.log_tail()}")


@contextmanager
def running_lab(
    base: Path, *, env: Mapping[str, str] | None = None, timeout: float = 180
) -> Iterator[LabServer]:
    """Start ``jupyter lab`` with everything under ``base``; stop it (and its kernels) on exit."""
    root, data_dir = base / "root", base / "compact-data"
    jconfig = base / "jupyter-config"
    for d in (root, data_dir, jconfig / "labconfig", base / "jupyter-data", base / "jupyter-runtime"):
        d.mkdir(parents=True, exist_ok=True)
    # The news prompt would cover the panel in screenshots; nothing else is changed.
    (jconfig / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    port, token = free_port(), secrets.token_hex(16)
    full_env = {
        **os.environ,
        "IPYTHON_COMPACT_DIR": str(data_dir),
        "JUPYTER_CONFIG_DIR": str(jconfig),
        "JUPYTER_DATA_DIR": str(base / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(base / "jupyter-runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(base / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "lab-workspaces"),
        "JUPYTER_PLATFORM_DIRS": "1",
        **(env or {}),
    }
    full_env.pop("IPYTHON_COMPACT_SESSION", None)
    log_path = base / "jupyter-lab.log"
    server = LabServer(f"http://127.0.0.1:{port}", token, root, data_dir, log_path, base / "jupyter-runtime")
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter",
                "lab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root}",
                "--ServerApp.allow_root=True",
                "--LabApp.expose_app_in_browser=True",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ],
            cwd=root,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_ready(server, proc, timeout=timeout)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the server shuts its kernels down, then exits
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@contextmanager
def chromium(executable: str = CHROMIUM) -> Iterator[Any]:
    """A headless Chromium launched by Playwright from the system binary."""
    if not (Path(executable).exists() or shutil.which(executable)):
        raise RuntimeError(
            f"Chromium not found at {executable}: run 'make system-deps' (apt-get install chromium)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable,
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        try:
            yield browser
        finally:
            browser.close()


# ---------------------------------------------------------------------- page helpers


def wait_notebook_kernel(page: Any, path: str | None = None, timeout: float = 180_000) -> None:
    """Wait until the notebook in focus (optionally: this path) has a kernel that is idle."""
    path_check = "" if path is None else f" && w.context.path === {json.dumps(path)}"
    try:
        page.wait_for_function(
            "() => { const a = window.jupyterapp; const w = a && a.shell.currentWidget;"
            " const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;"
            f" return !!k && k.status === 'idle'{path_check}; }}",
            timeout=timeout,
        )
    except Exception as exc:  # say what the page showed instead, so a timeout is diagnosable
        seen = page.evaluate(
            "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
            " const s = w && w.sessionContext; const k = s && s.session && s.session.kernel;"
            " return {path: w && w.context ? w.context.path : null, kernel: k ? k.status : null,"
            " connection: k ? k.connectionStatus : null, session: s ? s.kernelDisplayStatus : null}; }"
        )
        shot = (
            Path("artifacts/screenshots") / f"timeout-{re.sub(r'[^A-Za-z0-9.-]', '_', path or 'current')}.png"
        )
        with contextlib.suppress(Exception):
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot))
        raise TimeoutError(
            f"the notebook {path or '(current)'} has no idle kernel after "
            f"{timeout / 1000:.0f} s: "
            f"the page shows {seen} (screenshot {shot})"
        ) from exc


def wait_kernel_idle(page: Any, timeout: float = 180_000) -> None:
    wait_notebook_kernel(page, None, timeout)


def run_cell(page: Any, code: str, *, wait: bool = True, path: str | None = None) -> None:
    """Put ``code`` in the active cell and run it as Shift+Enter would (run, insert below).

    With ``wait`` the call returns when the cell has finished; without it, as soon as it started.
    ``path``: the notebook to run it in (else the current one). Name it when another notebook is
    open: activating the side panel can hand "current" back to the notebook that last had DOM
    focus, which is not always the one ``show_notebook`` brought to the front.
    """
    page.evaluate(
        """async ([code, wait, path]) => {
            const app = window.jupyterapp;
            let panel = app.shell.currentWidget;
            if (path !== null) {
                panel = Array.from(app.shell.widgets('main')).find(w => w.context && w.context.path === path);
                if (!panel) { throw new Error('no open notebook ' + path); }
            }
            app.shell.activateById(panel.id);
            panel.content.activeCell.model.sharedModel.setSource(code);
            // Named by its widget id: without it the command runs the notebook tracker's current
            // one, which follows DOM focus and can still be another notebook (the code then ran
            // there, and the panel following this one never saw it).
            const done = app.commands.execute('notebook:run-cell-and-insert-below', {widgetId: panel.id});
            if (wait) { await done; }
        }""",
        [code, wait, path],
    )
    if wait:
        wait_kernel_idle(page)


def show_notebook(page: Any, path: str, timeout: float = 120_000) -> None:
    """Bring the open notebook at ``path`` to the front; return when the panel follows it and its kernel is
    idle."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError  # optional: browser tests only

    activate = """(path) => {
            const app = window.jupyterapp;
            for (const w of app.shell.widgets('main')) {
                if (w.context && w.context.path === path) { app.shell.activateById(w.id); return w.id; }
            }
            throw new Error('no open notebook ' + path);
        }"""
    # A click in it, as a user's: JupyterLab's notebook tracker follows DOM focus, and activating a
    # tab from script does not always move focus (another notebook, or the side panel, keeps it).
    # The tab can also lose the front again right after (a panel refresh re-activating the notebook
    # that had focus: its cells are then hidden): activate again until its first cell is visible.
    deadline = time.monotonic() + timeout / 1000
    while True:
        widget_id = page.evaluate(activate, path)
        cell = page.locator(f'[id="{widget_id}"] .jp-Cell').first
        try:
            cell.wait_for(state="visible", timeout=5_000)
            cell.click(timeout=5_000)
            break
        except PlaywrightTimeoutError:
            if time.monotonic() > deadline:
                # never shown to be clicked: focus its active cell from script; what the caller
                # needs, the panel following this notebook, is waited for below
                page.evaluate(
                    """(id) => { const w = window.jupyterapp.shell.widgets('main');
                        for (const x of w) { if (x.id === id) { x.content.activeCell?.node.focus(); } } }""",
                    widget_id,
                )
                break
    # In front *and* followed by the panel, at the same moment. JupyterLab can hand the front back to
    # the notebook that had focus just after the click (seen with a CPU-bound job beside the tests:
    # the panel had followed this notebook, then the other came back, and the wait for this one's
    # kernel ran out): each time it does, bring this one back, until the deadline.
    both = (
        "(path) => { const w = window.jupyterapp.shell.currentWidget;"
        f" const p = document.querySelector('{PANEL}');"
        " return !!w && !!w.context && w.context.path === path && !!p && p.dataset.notebook === path; }"
    )
    while True:
        try:
            page.wait_for_function(both, arg=path, timeout=5_000)
            break
        except PlaywrightTimeoutError:
            if time.monotonic() > deadline:
                break  # said by the wait below, with what the page shows
            page.evaluate(activate, path)
    wait_notebook_kernel(page, path, timeout)


def open_panel(page: Any) -> None:
    page.evaluate("async () => { await window.jupyterapp.commands.execute('ipython-compact:open-panel'); }")
    page.wait_for_selector(PANEL, state="visible")


def wait_panel_state(page: Any, state: str, timeout: float = 120_000) -> None:
    page.wait_for_selector(f'{PANEL}[data-state="{state}"]', timeout=timeout)


def click_load_extension(page: Any, path: str | None = None) -> bool:
    """Press the panel's "Load extension" button as one DOM click, if the panel shows it (and, with
    ``path``, follows that notebook). Whether it was pressed.

    Why not Playwright's click: it waits for the button to stay still for two frames, and while
    JupyterLab hands "current" back and forth between two open notebooks the panel follows each in
    turn, so the button came and went: "element is not stable / detached" for 120 s (CI, stop 39,
    and 1 run in 3 here). A DOM click lands on the button as it is at that instant, as a user's does.
    """
    return bool(
        page.evaluate(
            f"""(path) => {{ const p = document.querySelector('{PANEL}');
            const b = p && p.querySelector('button[data-action="load-extension"]');
            if (!b || (path !== null && p.dataset.notebook !== path)) {{ return false; }}
            b.click(); return true; }}""",
            path,
        )
    )


def ensure_panel_ready(page: Any) -> None:
    """Open the panel and, if this kernel has not loaded the extension yet, load it from the panel."""
    open_panel(page)
    page.wait_for_function(
        f"() => ['ready', 'not-loaded'].includes(document.querySelector('{PANEL}').dataset.state)"
    )
    if page.get_attribute(PANEL, "data-state") == "not-loaded":
        click_load_extension(page)
    wait_panel_state(page, "ready")


def ensure_panel_ready_for(page: Any, path: str, timeout: float = 120_000) -> None:
    """Wait until the panel follows ``path`` and its kernel side is answered; load the extension from the
    panel when that kernel has not loaded it.

    Why not ``ensure_panel_ready``: it looks at whichever notebook the panel follows when it asks.
    Opening the side panel can hand "current" back to another notebook (one that had DOM focus); a
    loaded machine makes that more likely. The extension was then never loaded in ``path``'s kernel,
    the panel showed it "not loaded", and a wait for a name there ran out (issue 35.8).
    """
    ready = (
        f"() => {{ const p = document.querySelector('{PANEL}');"
        f" return !!p && p.dataset.notebook === {json.dumps(path)}"
        " && ['ready', 'not-loaded'].includes(p.dataset.state); }"
    )
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError  # optional: browser tests only

    page.wait_for_function(ready, timeout=timeout)
    if page.get_attribute(PANEL, "data-state") == "not-loaded":
        click_load_extension(page, path)
    try:
        page.wait_for_selector(
            f'{PANEL}[data-notebook={json.dumps(path)}][data-state="ready"]', timeout=timeout
        )
    except PlaywrightTimeoutError as exc:
        seen = page.evaluate(
            f"""() => {{ const p = document.querySelector('{PANEL}');
            return p && [p.dataset.notebook, p.dataset.state,
                         p.querySelector('.jp-IpythonCompact-stateDetail')?.textContent]; }}"""
        )
        raise AssertionError(
            f"the panel never became ready for {path}: (notebook, state, detail) = {seen}"
        ) from exc


def name_row(page: Any, name: str) -> Any:
    """The row for ``name`` in the panel's live namespace table, the kernel's (a Playwright locator; it may
    match nothing yet). Not the rows listed from a snapshot on disk while the kernel cannot answer."""
    return page.locator(f'{PANEL} .jp-IpythonCompact-nsTable .jp-IpythonCompact-names tr[data-name="{name}"]')


def names_updated_at(page: Any) -> int:
    """The browser-clock time (ms) of the panel's last answered namespace request, 0 if none."""
    value = page.get_attribute(f"{PANEL} .jp-IpythonCompact-updated", "data-updated-at")
    return int(value) if value else 0


#: A cell that writes a 32-message conversation into the notebook's session log: enough history
#: for a compaction with a 400-token recent tail (the panel tests' "model conversation").
SEED_TRANSCRIPT = """
def _seed_transcript(turns=16):
    from ipython_compact.files import paths
    from ipython_compact.store import SessionStore
    session = compact.status()["session"]
    store = SessionStore(paths.database_path())
    items = []
    for i in range(turns):
        items.append(("message", {"message": {"role": "user", "timestamp": 1765233665000 + i,
            "content": [{"type": "text",
                         "text": f"Step {i}: load sales_{i}.csv and total the revenue column. " * 8}]}}))
        items.append(("message", {"message": {"role": "assistant", "timestamp": 1765233665500 + i,
            "content": [{"type": "text",
                         "text": f"Loaded sales_{i}.csv; revenue total is {1000 + i}. "
                                 "Next I will plot it. " * 8}]}}))
    store.append_many(session, items)
    store.close()
_seed_transcript()
del _seed_transcript
"""
