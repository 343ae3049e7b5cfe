"""``%%agent``: chat with an agent whose tool runs Python in *this* kernel, step by step in the cell.

Why a cell magic: a notebook user wants the agent to work on the notebook's own variables, and to
watch each step (the model's text, the code it runs, the output, every compaction) appear in the
cell output as it happens. The agent persists per shell, so the next ``%%agent`` cell continues
the same conversation (and the same session log).

Usage::

    %%agent --model gpt-4o-mini --base-url http://127.0.0.1:8000/v1 --window 128000
    Load sales.csv into a data frame and tell me the best month.

Settings need not be retyped: ``%config AgentConfig.model = …`` (and ``base_url``,
``context_window``, ``max_steps``, ``stream``), then ``CompactConfig``'s; the window, unless given,
is read from the server's ``/v1/models`` card (``kernel/agent_settings.py``). The API key comes
from ``$OPENAI_API_KEY``. ``--reset`` starts a fresh agent (the log keeps everything), as does a line
naming another model, server, window, session or ``--stream``; a line repeating the live agent's own
options keeps it, and what its estimate learned of the model's tokenizer.

The turn is shown as a transcript (``kernel/transcript.py``): in a notebook one live display that
fills in as the agent works, then the answer in full as Markdown; in a terminal each step printed
as it completes. What must hold: a bad option prints a clear error and runs nothing; the cell's
own text is only ever sent to the model, never executed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import sys
import textwrap
import threading
import time
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class

from ipython_compact.agent.events import AgentEvent, TurnFailed
from ipython_compact.core.state_notice import SnapshotOutcome
from ipython_compact.kernel import plain_text
from ipython_compact.kernel.agent_settings import PUBLIC_API, AgentSettings, server_window
from ipython_compact.kernel.agent_settings import resolve as resolve_settings
from ipython_compact.kernel.config import AgentConfig
from ipython_compact.kernel.magic_args import HelpShown, MagicParser, arg, build_parser, positive_int
from ipython_compact.kernel.transcript import Transcript, answer_bundle, step_plain

if TYPE_CHECKING:
    from ipython_compact.agent.loop import Agent

AGENT_ARGS = (
    arg("--model", help="model name (default: AgentConfig.model, then CompactConfig.model)"),
    arg(
        "--base-url",
        dest="base_url",
        help="OpenAI-compatible server (default: AgentConfig.base_url, then CompactConfig.base_url)",
    ),
    arg(
        "--window",
        type=positive_int,
        help="the model's context window in tokens (default: "
        "AgentConfig.context_window, "
        "then the server's /v1/models card, then "
        "CompactConfig.context_window)",
    ),
    arg(
        "--max-steps",
        dest="max_steps",
        type=positive_int,
        help="tool-call steps per turn (default: AgentConfig.max_steps)",
    ),
    arg("--session", help="session name (default: the extension's bound session)"),
    arg("--stream", action="store_true", help="show the model's text as it arrives"),
    arg(
        "--reset",
        action="store_true",
        help="start a fresh agent on the same model and server (the log keeps everything)",
    ),
)


#: Options a later cell keeps from an earlier one until it names another value.
CARRIED = ("model", "base_url", "window", "session")


def agent_parser() -> MagicParser:
    """The ``%%agent`` parser: the same machinery as ``%compact`` (``kernel/magic_args.py``)."""
    return build_parser(
        "%%agent",
        "Send the cell's text to an agent that runs Python in this kernel.",
        AGENT_ARGS,
        AGENT_EPILOG,
    )


#: What the answer's display does with markup (a model repeats what it read: its answer is untrusted).
AGENT_EPILOG = (
    "The answer is shown in full, its Markdown rendered by a CommonMark parser. Raw HTML in it is "
    "shown as text, an image stays a link (shown, it would be fetched from a URL the model chose), "
    "and only http:, https:, mailto: and relative links are links."
)


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
        self.settings: AgentSettings | None = None
        self.agent_config = AgentConfig(parent=shell)
        self._output: CellOutput | None = None
        self._line: dict[str, Any] = {}  # the options in CARRIED an earlier cell's line gave
        self._compaction: dict[str, Any] = {}  # CompactConfig.compaction as the agent's settings hold it

    def _card_window(self, model: str, base_url: str | None) -> tuple[int, str] | None:
        import openai  # deferred: only a %%agent cell needs the client (start-up)

        client = openai.OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY") or "not-needed")
        return server_window(client, model, float(self.agent_config.lookup_timeout))

    def _build(self, opts: dict[str, Any]) -> Agent:
        import openai  # deferred: only a %%agent cell needs the client (start-up)

        # deferred for start-up: only a %%agent cell needs the agent (~200 ms %load_ext paid)
        from ipython_compact.agent.kernel_tool import InProcessKernel
        from ipython_compact.agent.loop import Agent  # deferred with it (start-up)

        # start-up: a %%agent cell needs these; %load_ext must not pay for them
        from ipython_compact.agent.model_resolution import settings_for_window
        from ipython_compact.compaction.compactor import Compactor  # start-up
        from ipython_compact.summarizers.registry import make_summarizer  # start-up

        config = getattr(self.service, "config", None)
        chosen = resolve_settings(opts, self.agent_config, config, self._card_window)
        if self.service is not None:
            store = self.service.store
            session = opts.get("session") or self.service.session
            settings = _sized_for(
                self.service.settings(), config.settings_mapping() if config else {}, chosen.window
            )
            summarizer = make_summarizer(
                getattr(config, "summarizer", "offline"),
                model=getattr(config, "model", None),
                base_url=getattr(config, "base_url", None),
            )  # the one %compact uses
            compactor: Any = Compactor(store, summarizer, settings)
        else:
            from ipython_compact.store import SessionStore  # deferred: start-up (extension-less path)

            store = SessionStore()  # $IPYTHON_COMPACT_DB, else the data directory's sessions.db
            session = opts.get("session") or "agent"
            settings = settings_for_window(chosen.window)
            compactor = None  # the Agent's default: a Compactor with the offline summarizer
        client = openai.OpenAI(
            base_url=chosen.base_url, api_key=os.environ.get("OPENAI_API_KEY") or "not-needed"
        )
        agent = Agent(
            store=store,
            session=session,
            client=client,
            model=chosen.model,
            context_window=chosen.window,
            settings=settings,
            compactor=compactor,
            kernel=InProcessKernel(self.shell),
            max_steps=chosen.max_steps,
            on_event=self._on_event,
            stream=chosen.stream,
            fenced_code=bool(self.agent_config.fenced_code),
            snapshot_outcome=self._snapshot_outcome if self.service is not None else None,
        )
        self.settings = chosen  # `%compact status` and the panel read the live agent's own figures
        self._compaction = config.settings_mapping() if config is not None else {}
        return agent

    def _sync(self) -> None:
        """Bring the live agent's settings up to ``CompactConfig.compaction`` as it is now: a refusal
        says "set it with `%config CompactConfig.compaction = …`", and the next `%compact now` must
        use what was set, not the settings the agent was built with. Raises ValueError (the agent
        keeps its settings) when the new ones cannot work with its window."""
        agent, config = self.current, getattr(self.service, "config", None)
        if agent is None or config is None or config.settings_mapping() == self._compaction:
            return
        wanted = config.settings_mapping()
        # start-up: only with a live agent (its own module is loaded by then)
        from ipython_compact.agent.context_report import use_settings

        use_settings(agent, _sized_for(self.service.settings(), wanted, agent.context_window))
        self._compaction = wanted

    def live(self) -> Agent | None:
        """The live agent with its settings up to date (``_sync``), for ``%compact`` and the panel;
        settings that cannot work are left for the next ``%%agent`` cell to report."""
        with contextlib.suppress(ValueError):
            self._sync()
        return self.current

    def _on_event(self, event: AgentEvent) -> None:
        output = self._output
        if output is not None:
            output.event(event)

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
        with contextlib.suppress(ValueError, AttributeError):
            getattr(self.shell, "configurables", []).remove(self.agent_config)
        if agent is not None:
            with contextlib.suppress(Exception):  # unload must not fail because a compaction did
                agent.wait_background(timeout=5.0)

    @cell_magic  # type: ignore[misc]
    def agent(self, line: str, cell: str) -> None:
        """Send the cell's text to the agent; the turn appears as a transcript (`%%agent --help`)."""
        # The magic's own work (the model client, the card lookup) opens files nobody asked for:
        # not recorded. Only the agent's tool calls are (``fileops.agent_turn``).
        with self.service.fileops.paused() if self.service is not None else contextlib.nullcontext():
            self._cell(line, cell)

    def _cell(self, line: str, cell: str) -> None:
        try:
            opts = parse_options(line)
        except HelpShown as shown:
            print(shown.text)
            return
        except UsageError as exc:
            print(exc)
            return
        live = getattr(self.shell, "kernel", None) is not None  # a notebook's kernel, not terminal IPython
        try:
            if not cell.strip():
                raise ValueError("the cell is empty: write the message for the agent below %%agent")
            # a line that repeats the live agent's own options keeps it, and what it learned of the
            # model's tokenizer (rebuilt every cell, its estimate was never past "after 1 request")
            kept = {**self._line, "stream": bool(self.settings.stream) if self.settings else False}
            rebuild = ("model", "base_url", "window", "session", "stream")
            changed = any(k in opts and opts[k] != kept.get(k) for k in rebuild)
            built = self.current is None or bool(opts.get("reset")) or changed
            if built:
                # what an earlier line named (model, server, window, session) holds until a line
                # names another: `--reset` or `--window N` alone never falls back to the public API
                opts = {**self._line, **opts}
                self.current = self._build(opts)
                self._line = {k: opts[k] for k in CARRIED if k in opts}
            else:
                self._sync()  # a %config CompactConfig.compaction since the last cell
            if not built and "max_steps" in opts:
                assert self.current is not None
                self.current.max_steps = int(opts["max_steps"])
        except ValueError as exc:
            print(f"%%agent: {exc}")
            return
        agent, chosen = self.current, self.settings
        assert agent is not None and chosen is not None
        output = self._output = CellOutput(live=live, stream=chosen.stream)
        if built:
            server = chosen.base_url or os.environ.get("OPENAI_BASE_URL") or PUBLIC_API
            output.note(
                f"{chosen.model} at {server} · window {chosen.window:,} tokens, from {chosen.window_source}"
            )
        turn = self.service.fileops.agent_turn() if self.service is not None else contextlib.nullcontext()
        try:
            with turn:  # only the tool calls' file opens are recorded, as the agent's
                result = agent.ask(cell.strip())
        except TurnFailed as failed:  # the turn is in the log; the cell says why it failed
            result = failed.result
        except ValueError as exc:  # refused before anything was logged (a question larger than the window)
            output.finish(None)
            print(f"%%agent: {exc}")
            return
        except KeyboardInterrupt:  # interrupted while waiting for the model: the turn ends cleanly
            output.finish(None)
            print("[stopped: interrupted] The turn was interrupted.")
            return
        finally:
            self._output = None
        output.finish(result.text if result.stopped == "final" else None)
        if result.stopped != "final":
            print(f"[stopped: {result.stopped}] {result.text}")


class CellOutput:
    """Where one cell's transcript goes: a live display in a notebook, printed steps in a terminal."""

    UPDATE_EVERY = 0.25  # seconds between live redraws while text streams in

    def __init__(self, *, live: bool, stream: bool) -> None:
        self.transcript = Transcript()
        self.live = live
        self.stream = stream
        self.handle: Any = None
        self._drawn = 0.0
        self._line_open = False

    def note(self, text: str) -> None:
        self.event(AgentEvent("settings", text))  # shown like any one-line event

    def event(self, event: AgentEvent) -> None:
        done = self.transcript.add(event)
        if self.live:
            if threading.current_thread() is threading.main_thread():  # display only from the cell's thread
                urgent = event.kind != "assistant_delta"
                if urgent or time.monotonic() - self._drawn >= self.UPDATE_EVERY:
                    self._draw(running=True)
            return
        if event.kind == "assistant_delta" and self.stream:
            print(event.text, end="", flush=True)
            self._line_open = True
            return
        if self._line_open and event.kind == "assistant":
            print(flush=True)
            self._line_open = False
        if done is not None and not (self.stream and done.kind == "note"):
            print(_fitted(done) + "\n", flush=True)

    def _draw(self, *, running: bool) -> None:
        from IPython.display import display  # deferred: a notebook's kernel only (start-up)

        bundle = self.transcript.bundle(running=running)
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)  # type: ignore[no-untyped-call]
        else:
            self.handle.update(bundle, raw=True)
        self._drawn = time.monotonic()

    def finish(self, answer: str | None) -> None:
        """Draw the finished transcript and, when the turn ended with one, the answer in full."""
        if self.live:
            from IPython.display import display  # deferred: a notebook's kernel only (start-up)

            if self.transcript.steps or self.handle is not None:
                self._draw(running=False)
            if answer:
                display(answer_bundle(answer), raw=True)  # type: ignore[no-untyped-call]
            return
        if self._line_open:
            print(flush=True)
        if answer and not self.stream:
            print(
                plain_text.wrap_block(answer, plain_text.terminal_width()) if _on_a_tty() else answer,
                flush=True,
            )


def _on_a_tty() -> bool:
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stdout
        return False


def _fitted(step: Any) -> str:
    """A step as a terminal shows it: a one-line event and a note wrapped at words to the terminal
    (the terminal broke "AgentConfig.contex / t_window" mid-word at 80 columns), an event's
    continuation under its text; code and its output as they are (code is not reflowed)."""
    if not _on_a_tty():  # redirected (a file, a test's capture): whole lines
        return step_plain(step)
    width = plain_text.terminal_width()
    if step.kind == "event":
        return (
            "\n".join(
                textwrap.wrap(
                    step.text,
                    width,
                    initial_indent=f"{step.mark} ",
                    subsequent_indent="  ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )
            or f"{step.mark} {step.text}"
        )
    if step.kind == "note":
        return plain_text.wrap_block(step.text, width)
    return step_plain(step)


def register_agent_magic(shell: Any, service: Any = None) -> AgentMagics:
    """Register ``%%agent`` on ``shell`` (the kernel extension calls this when it loads)."""
    magics = AgentMagics(shell, service)
    shell.register_magics(magics)
    shell.configurables.append(magics.agent_config)  # so `%config AgentConfig` lists and sets it
    return magics


#: The settings that size a compaction against the window; the user's own values always win.
SIZE_KEYS = frozenset({"reserve_tokens", "keep_recent_tokens", "background_tokens"})


def _sized_for(settings: Any, configured: dict[str, Any], window: int) -> Any:
    """``settings`` with each of the reserve, recent tail and background line the user did not set
    (``CompactConfig.compaction``) scaled to ``window``, as ``Agent`` does for a window given to it:
    pi's defaults (reserve 16,384) make a ``--window 2500`` agent refuse every request. A partial
    override (``{'keep_recent_tokens': 200}``) keeps the other sizes scaled.

    Raises ValueError naming the setting when the user's own reserve leaves no room in the window.
    """
    from ipython_compact.agent.model_resolution import settings_for_window  # start-up: a %%agent cell only

    scaled = settings_for_window(window)
    sized = dataclasses.replace(settings, **{k: getattr(scaled, k) for k in SIZE_KEYS - configured.keys()})
    if sized.reserve_tokens >= window:
        raise ValueError(
            f"CompactConfig.compaction sets reserve_tokens={sized.reserve_tokens:,}, which is not smaller "
            f"than the model's {window:,}-token window. Set it below the window (for this window: "
            f"%config CompactConfig.compaction = {{'reserve_tokens': {scaled.reserve_tokens}}}) or leave "
            f"it out to have it scaled."
        )
    return sized
