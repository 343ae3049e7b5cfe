"""The ``ipython-compact`` command: inspect, import, plan and compact session logs from a terminal.

Subcommands live in small modules listed in ``COMMAND_MODULES``; each exposes
``register(subparsers)`` which adds its parsers and sets ``func`` (``(args) -> int``) on them.

What must hold:
- ``--db PATH|URL`` works before or after the subcommand; without it the database is
  ``$IPYTHON_COMPACT_DB`` or ``paths.database_path()`` (``$IPYTHON_COMPACT_DIR`` moves the whole
  data directory). A ``postgresql://`` URL opens the shared server log (docs/team.md).
- Every error goes to stderr, prefixed ``ipython-compact: error:``, with a line saying what to
  type instead, and exit code 2. Results go to stdout.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ipython_compact.cli.terminal_text import shown_not_obeyed, visible_controls
from ipython_compact.core.spelling import closest
from ipython_compact.files.paths import read_only_reason
from ipython_compact.version import __version__

if TYPE_CHECKING:
    from ipython_compact.store import SessionStore  # start-up: only this command needs it

PROG = "ipython-compact"
COMMAND_MODULES: tuple[str, ...] = (
    "ipython_compact.cli.session_commands",
    "ipython_compact.cli.compact_commands",
)
_SESSION, _COMPACT = COMMAND_MODULES

#: Every subcommand: the module that registers it and its one-line help. Listed here so
#: ``ipython-compact --help`` (and a mistyped command) answers without importing any command
#: module: they pull in the store and the summarizers, most of the CLI's start-up time. A command
#: module registers its commands with this help (``COMMANDS[name][1]``).
COMMANDS: dict[str, tuple[str, str]] = {
    "import": (_SESSION, "import a pi session file or an ipython-compact export"),
    "sessions": (_SESSION, "list the sessions in the database"),
    "log": (_SESSION, "the session's entries from the root to the leaf"),
    "context": (_SESSION, "the model's view now: every message in full"),
    "plan": (_SESSION, "what a compaction would summarize, keep and cut right now"),
    "export": (_SESSION, "write a session as ipython-compact JSONL (lossless)"),
    "verify": (_SESSION, "recompute the hash chains: detect accidental damage to the log"),
    "compact": (_COMPACT, "compact a session now (append a compaction entry)"),
    "pin": (_COMPACT, "pin text or an entry so every later checkpoint carries it verbatim"),
    "recall": (_COMPACT, "the original text of logged entries, by id or full-text query"),
    "show": (_COMPACT, "a compaction's summary (default: the newest)"),
    "demo": (_COMPACT, "a guided offline demo in a fresh session (no network needed)"),
}


class CliError(Exception):
    """A user mistake or an unusable input; ``hint`` says what to type instead."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


MAX_COUNT = 1_000_000_000
"""Upper bound of every numeric option: far above any real window, budget or count, far below
what SQLite and Python's C integers accept, so a typo never becomes an OverflowError."""


class IntOption:
    """An argparse ``type`` for a whole number in ``[minimum, maximum]``; ``example`` is a value
    the error's ``try:`` line suggests."""

    def __init__(self, minimum: int, example: int, *, maximum: int = MAX_COUNT, what: str = "") -> None:
        self.minimum, self.maximum, self.example, self.what = minimum, maximum, example, what
        self.__name__ = "whole number"  # argparse names the type in "invalid ... value" messages

    def __call__(self, text: str) -> int:
        try:
            value = int(text.replace("_", "").replace(",", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects a whole number, got {text!r}") from None
        what = f" {self.what}" if self.what else ""
        if value < self.minimum:
            bound = "a positive number" if self.minimum == 1 and self.what else f"{self.minimum:,} or more"
            raise argparse.ArgumentTypeError(f"must be {bound}{what}, got {value}")
        if value > self.maximum:
            raise argparse.ArgumentTypeError(f"must be at most {self.maximum:,}{what}, got {value:,}")
        return value


class Parser(argparse.ArgumentParser):
    """argparse with this command's error shape: one ``error:`` line (with "did you mean" for a
    misspelt command, choice or option) and a ``try:`` line, exit code 2."""

    typed: Sequence[str] = ()
    """The arguments this parser was given, so an error names an option as the user spelt it."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self.typed = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        text, hint = explain_usage_error(self, message)
        _fail(text, hint)
        sys.exit(2)


def explain_usage_error(parser: argparse.ArgumentParser, message: str) -> tuple[str, str]:
    """Rewrite argparse's message for a person: name the option, suggest the likely spelling."""
    help_hint = f"{parser.prog} --help"
    choice = re.match(r"argument (\S+): invalid choice: '(.*)' \(choose from (.*)\)$", message)
    if choice:
        where, word, listed = choice.groups()
        options = re.findall(r"'([^']*)'", listed)
        guess = closest(word, options)
        mean = f"; did you mean {guess!r}?" if guess else f" (choose from {', '.join(options)})"
        if where == "COMMAND":
            return f"unknown command {word!r}{mean}", f"{PROG} {guess} --help" if guess else f"{PROG} --help"
        option = where.split("/")[-1]
        return f"{option}: unknown value {word!r}{mean}", f"{parser.prog} {option} {guess or options[0]}"
    typed = re.match(r"argument (\S+): (.*)$", message)
    if typed:
        spellings = typed.group(1).split("/")
        given = getattr(parser, "typed", ())
        # the spelling the user typed (`-n`, not `--limit`), else the long one
        option = next(
            (o for o in spellings if any(a == o or a.startswith(o + "=") for a in given)), spellings[-1]
        )
        action = next((a for a in parser._actions if option in a.option_strings), None)
        example = getattr(getattr(action, "type", None), "example", None)
        hint = f"{parser.prog} {option} {example}" if example is not None else help_hint
        return f"{option} {typed.group(2)}", hint
    return message, help_hint


def unknown_options_error(parser: argparse.ArgumentParser, extras: Sequence[str]) -> tuple[str, str]:
    """The message for arguments no parser took: "did you mean" the nearest option of the command."""
    options = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
    for word in extras:
        if word.startswith("-"):
            guess = closest(word.split("=", 1)[0], options)
            if guess:
                return (
                    f"unknown option {word!r} for {parser.prog}; did you mean {guess!r}?"
                ), f"{parser.prog} --help"
    return f"unrecognized arguments: {' '.join(extras)}", f"{parser.prog} --help"


def db_option(parser: argparse.ArgumentParser, *, default: object = None) -> None:
    parser.add_argument(
        "--db",
        metavar="PATH|URL",
        default=default,
        help="session database: a file, or postgresql://user@host/dbname (default: $IPYTHON_COMPACT_DB, "
        "else $IPYTHON_COMPACT_DIR/sessions.db or the user data dir)",
    )


def session_name(text: str) -> str:
    """argparse ``type`` for ``-s``: a blank name would silently mean "the most recent session"."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must name a session, got {text!r}")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise argparse.ArgumentTypeError(f"must not contain control characters, got {text!r}")
    return text


session_name.example = "NAME"  # type: ignore[attr-defined]


def session_option(
    parser: argparse.ArgumentParser, help_text: str = "session name (default: the most recently active)"
) -> None:
    """``-s/--session NAME``, spelled the same by every command that works on one session."""
    parser.add_argument("-s", "--session", metavar="NAME", type=session_name, help=help_text)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``argv``, only the modules of the commands named in it are imported
    (the others get a parser with their help line only, enough for ``--help`` and typo hints)."""
    parser = Parser(
        prog=PROG,
        description="Context compaction for LLM agents in a Python kernel: import, inspect, plan and compact "
        "session logs.",
        epilog=f"Run '{PROG} COMMAND --help' for the options of one command. Logged text is printed "
        "exactly into a pipe or a file; on a terminal, control characters other than newline and tab "
        "(escape sequences, carriage returns, bidirectional overrides) are shown as \\u001b-style "
        "escapes, never obeyed. --json output on a terminal stays valid JSON.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    db_option(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = set(COMMAND_MODULES) if argv is None else {COMMANDS[a][0] for a in argv if a in COMMANDS}
    for module_name in COMMAND_MODULES:
        if module_name in wanted:
            importlib.import_module(module_name).register(subparsers)
    for name, (_, help_text) in COMMANDS.items():
        if name not in subparsers.choices:
            subparsers.add_parser(name, help=help_text)
    order = list(COMMANDS)  # --help lists them in the table's order, whichever were imported
    subparsers._choices_actions.sort(key=lambda action: order.index(action.dest))
    # Accept --db after the subcommand too (SUPPRESS keeps a global --db from being overwritten).
    for sub in subparsers.choices.values():
        if not any("--db" in action.option_strings for action in sub._actions):
            db_option(sub, default=argparse.SUPPRESS)
    return parser


def database_from(args: argparse.Namespace) -> Path | str:
    """The ``--db`` value, ``$IPYTHON_COMPACT_DB`` or the default file: a path, or a server URL."""
    # deferred for start-up, like every store import of the CLI
    from ipython_compact.files.paths import ENV_DIR, database_location  # start-up
    from ipython_compact.store.location import scheme  # start-up

    db = getattr(args, "db", None)
    if db:
        return db if scheme(db) else Path(db).expanduser()
    try:
        return database_location()
    except OSError as exc:
        where = exc.filename or os.environ.get(ENV_DIR) or "the data directory"
        raise CliError(
            f"cannot create the data directory {where}: {exc.strerror or exc}",
            f"point {ENV_DIR} at a writable directory, or pass a database file: {PROG} --db PATH ...",
        ) from exc


CLI_BUSY_TIMEOUT = 60.0
"""Seconds a CLI command waits for another process's write to finish before it says the database
is locked (the kernel's own store keeps 5 s: it must never hold a cell that long)."""


def open_store(args: argparse.Namespace) -> SessionStore:
    from ipython_compact.store import SessionStore  # start-up: only this command needs it

    # A command a person typed waits out another writer (an import's first transaction, a
    # compaction) for longer than a kernel's 5 s: on a loaded machine those run past it (CI failed
    # "database is locked" when two imports raced to create one session).
    return SessionStore(database_from(args), busy_timeout=CLI_BUSY_TIMEOUT)


def pick_session(store: SessionStore, name: str | None) -> str:
    """The named session, or the most recently appended-to one when no name is given."""
    if name is not None:
        store.get_session(name)  # raises UnknownSessionError listing the known names
        return name
    sessions = store.sessions()
    if not sessions:
        raise CliError(
            f"the database {store.db_path} has no sessions yet", f"import one: {PROG} import FILE.jsonl"
        )
    return sessions[-1].name


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = getattr(args, "command", None)
        sub = _subparser(parser, command) if command else parser
        return _fail(*unknown_options_error(sub, extras))
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        with shown_not_obeyed():  # logged text never drives the terminal (cli/terminal_text.py)
            return int(args.func(args))
    except CliError as exc:
        return _fail(str(exc), exc.hint)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        return _failure(exc)


def console() -> NoReturn:
    """The console command (``[project.scripts]``): ``main``, then the process ends without
    tearing the interpreter down object by object.

    Why: a command that read a long session holds hundreds of MB of small objects; freeing them
    one by one at exit took 1–1.5 s after a 3 s read of a 100,000-entry file, and the system takes
    the memory back at once anyway. What a normal exit does that matters still happens first:
    non-daemon threads are joined, exit handlers run (temporary folders, logging), stdout and
    stderr are flushed. Every file and database a command writes, it closes itself (``with``).
    An exception out of ``main`` (a bug, ``--help``'s ``SystemExit``) exits the normal way."""
    import atexit  # start-up: only the exit path needs it
    import contextlib  # start-up: only the exit path needs it
    import threading  # start-up: only the exit path needs it

    code = main()
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # a pipe closed early (`| head`), a stream already closed: nothing left to flush into
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _failure(exc: Exception) -> int:
    """Exit 2 with one sentence and what to type for a command that raised ``exc``; re-raise a bug."""
    # deferred for start-up: the store's errors matter only once a command failed (and by then
    # the command has imported the store)
    from ipython_compact.store import (  # start-up: only this command needs it
        DatabaseLockedError,
        DriverMissingError,
        StoreError,
        UnknownSessionError,
    )

    if isinstance(exc, UnknownSessionError):
        return _fail(str(exc), f"list them with: {PROG} sessions")
    if isinstance(exc, DriverMissingError):  # the message is the one line to act on: the install command
        return _fail(str(exc), None)
    if isinstance(exc, DatabaseLockedError):
        return _fail(str(exc), "wait for the other process to finish, then run the same command again")
    if isinstance(exc, StoreError):
        if exc.path is None:
            return _fail(str(exc), None)
        db = Path(exc.path)
        if _looks_like_jsonl(db):
            return _fail(
                f"{db} is a JSONL transcript, not a database",
                f"import it into the database: {PROG} import {db}   (--db takes a .db file)",
            )
        reason = read_only_reason(db)
        if reason:
            return _fail(
                reason,
                f"copy it somewhere writable and use the copy: cp {db} /tmp/{db.name} && "
                f"{PROG} --db /tmp/{db.name} ...",
            )
        return _fail(str(exc), f"pass another database: {PROG} --db PATH ...")
    if isinstance(exc, BrokenPipeError):
        # Output piped into `head` and closed early: not an error worth a traceback.
        sys.stderr.close()
        return 0
    if isinstance(exc, OSError):
        # A file the user named (an export target, an import source) cannot be opened or written.
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(
            f"{where}{exc.strerror or exc}",
            "check the path and its permissions, then run the same command again",
        )
    raise exc


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            found: argparse.ArgumentParser = action.choices[command]
            return found
    return parser


def _looks_like_jsonl(path: Path) -> bool:
    """Whether ``path`` is a regular file starting with ``{`` (read without blocking on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, 1) == b"{"
    except OSError:
        return False
    finally:
        os.close(fd)


def _fail(message: str, hint: str | None) -> int:
    if sys.stderr.isatty():  # a session name or a path from the log may hold a terminal escape
        message, hint = visible_controls(message), None if hint is None else visible_controls(hint)
    print(f"{PROG}: error: {message}", file=sys.stderr)
    if hint:
        print(f"  try: {hint}", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
