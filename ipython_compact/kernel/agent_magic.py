"""``%%agent``: chat with an agent whose tool runs Python in *this* kernel, step by step in the cell.

Why a cell magic: a notebook user wants the agent to work on the notebook's own variables, and to
watch each step (the model's text, the code it runs, the output, every compaction) appear in the
cell output as it happens. The agent persists per shell, so the next ``%%agent`` cell continues
the same conversation (and the same session log).

Usage::

    %%agent --model gpt-4o-mini --base-url http://127.0.0.1:8000/v1 --window 128000
    Load sales.csv into a data frame and tell me the best month.

Options fall back to the extension's ``CompactConfig`` (``model``, ``base_url``,
``context_window``, ``compaction``) and the API key to ``$OPENAI_API_KEY``. ``--reset`` starts a
fresh agent (the log keeps everything). What must hold: a bad option prints a clear error and
runs nothing; the cell's own text is only ever sent to the model, never executed.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class

from ipython_compact.agent.engine import CompactorEngine, default_engine
from ipython_compact.agent.kernel_tool import InProcessKernel
from ipython_compact.agent.loop import Agent, AgentEvent, summarize_event
from ipython_compact.core.state_notice import SnapshotOutcome
from ipython_compact.kernel.magic_args import HelpShown, MagicParser, arg, build_parser, positive_int

AGENT_ARGS = (
    arg("--model", help="model name (default: CompactConfig.model)"),
    arg("--base-url", dest="base_url", help="OpenAI-compatible server (default: CompactConfig.base_url)"),
    arg("--window", type=positive_int, help="the model's context window in tokens (default: CompactConfig.context_window)"),
    arg("--max-steps", dest="max_steps", type=positive_int, help="tool-call steps per turn (default 12)"),
    arg("--session", help="session name (default: the extension's bound session)"),
    arg("--stream", action="store_true", help="show the model's text as it arrives"),
    arg("--reset", action="store_true", help="start a fresh agent (the log keeps everything)"),
)


def agent_parser() -> MagicParser:
    """The ``%%agent`` parser: the same machinery as ``%compact`` (``kernel/magic_args.py``)."""
    return build_parser("%%agent", "Send the cell's text to an agent that runs Python in this kernel.", AGENT_ARGS)


def parse_options(line: str) -> dict[str, Any]:
    """The options given on the magic's line (only those given); raises ``UsageError`` naming the bad
    one, or ``HelpShown`` for ``--help``."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%%agent: cannot parse the line ({exc}); check the quotes") from None
    parsed = vars(agent_parser().parse_strict(words))
    return {k: v for k, v in parsed.items() if v is not None and v is not False}


@magics_class
class AgentMagics(Magics):  # type: ignore[misc]
    """Holds the notebook's agent between cells."""

    def __init__(self, shell: Any, service: Any = None) -> None:
        super().__init__(shell)
        self.service = service
        self.current: Agent | None = None

    def _build(self, opts: dict[str, Any]) -> Agent:
        import openai

        from ipython_compact.core.settings import CompactionSettings

        config = getattr(self.service, "config", None)
        model = opts.get("model") or (getattr(config, "model", "") or "")
        if not model:
            raise ValueError("no model: pass --model NAME or set %config CompactConfig.model")
        base_url = opts.get("base_url") or (getattr(config, "base_url", "") or None)
        window = int(opts.get("window") or getattr(config, "context_window", None) or 128_000)
        if self.service is not None:
            store = self.service.store
            session = opts.get("session") or self.service.session
            settings = self.service.settings()
            engine: Any = CompactorEngine(self.service._compactor())  # the summarizer %compact uses
        else:
            from ipython_compact import paths
            from ipython_compact.store import SessionStore

            store = SessionStore(paths.database_path())
            session = opts.get("session") or "agent"
            settings = CompactionSettings()
            engine = default_engine(store, settings)
        client = openai.OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY") or "not-needed")
        return Agent(
            store=store, session=session, client=client, model=model, context_window=window, settings=settings,
            engine=engine, kernel=InProcessKernel(self.shell), max_steps=int(opts.get("max_steps") or 12),
            on_event=_printer(bool(opts.get("stream"))), stream=bool(opts.get("stream")),
            snapshot_outcome=self._snapshot_outcome if self.service is not None else None,
        )

    def _snapshot_outcome(self) -> SnapshotOutcome | None:
        """What the extension's automatic snapshots can promise right now (for the state notice)."""
        service = self.service
        if not getattr(service.config, "auto_snapshot", False) and service.last_snapshot is None:
            return None
        if service.last_snapshot_error:
            return SnapshotOutcome(False, (), service.last_snapshot_error)
        report = service.last_snapshot
        if report is None:
            return SnapshotOutcome(False, (), "no snapshot has been written yet")
        return SnapshotOutcome(True, tuple((s.name, s.reason) for s in report.skipped))

    def close(self) -> None:
        """Drop the agent (the extension calls this on unload); a running background compaction
        is given a moment to finish so it does not write to the log after the unload."""
        agent, self.current = self.current, None
        if agent is not None:
            with contextlib.suppress(Exception):  # unload must not fail because a compaction did
                agent.wait_background(timeout=5.0)

    @cell_magic  # type: ignore[misc]
    def agent(self, line: str, cell: str) -> None:
        """Send the cell's text to the agent and stream each step into the output."""
        try:
            opts = parse_options(line)
        except HelpShown as shown:
            print(shown.text)
            return
        except UsageError as exc:
            print(exc)
            return
        try:
            if not cell.strip():
                raise ValueError("the cell is empty: write the message for the agent below %%agent")
            rebuild = ("model", "base_url", "window", "session", "stream")
            if self.current is None or opts.get("reset") or any(k in opts for k in rebuild):
                self.current = self._build(opts)
            elif "max_steps" in opts:
                self.current.max_steps = int(opts["max_steps"])
        except ValueError as exc:
            print(f"%%agent: {exc}")
            return
        try:
            result = self.current.ask(cell.strip())
        except KeyboardInterrupt:  # interrupted while waiting for the model: the turn ends cleanly
            print("[stopped: interrupted] The turn was interrupted.")
            return
        if result.stopped != "final":
            print(f"[stopped: {result.stopped}] {result.text}")


_SHOWN = {"user", "assistant", "tool_call", "tool_result", "compaction_start", "compaction_end", "compaction_queued",
          "compaction_stale", "compaction_dropped", "compaction_requested", "overflow", "kernel_restart", "kernel_failed",
          "error", "continuation"}


def _printer(streaming: bool) -> Callable[[AgentEvent], None]:
    """One line per step; with streaming, the model's text appears as it arrives."""
    line_open = False

    def show(event: AgentEvent) -> None:
        nonlocal line_open
        if event.kind == "assistant_delta":
            if not line_open:
                print("[assistant] ", end="")
                line_open = True
            print(event.text, end="", flush=True)
            return
        if line_open:
            print(flush=True)
            line_open = False
        if event.kind == "assistant" and streaming:
            return  # already shown piece by piece
        if event.kind in _SHOWN:
            print(summarize_event(event), flush=True)

    return show


def register_agent_magic(shell: Any, service: Any = None) -> AgentMagics:
    """Register ``%%agent`` on ``shell`` (the kernel extension calls this when it loads)."""
    magics = AgentMagics(shell, service)
    shell.register_magics(magics)
    return magics
