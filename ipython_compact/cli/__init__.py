"""The ``ipython-compact`` command: inspect, import, plan and compact session logs from a terminal.

Subcommands live in small modules listed in ``COMMAND_MODULES``; each exposes
``register(subparsers)`` which adds its parsers and sets ``func`` (``(args) -> int``) on them.

What must hold:
- ``--db PATH`` works before or after the subcommand; without it the database is
  ``paths.database_path()`` (``$IPYTHON_COMPACT_DIR`` moves the whole data directory).
- Every error goes to stderr, prefixed ``ipython-compact: error:``, with a line saying what to
  type instead, and exit code 2. Results go to stdout.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ipython_compact.paths import read_only_reason
from ipython_compact.version import __version__

if TYPE_CHECKING:
    from ipython_compact.store import SessionStore

PROG = "ipython-compact"
COMMAND_MODULES: tuple[str, ...] = (
    "ipython_compact.cli.session_commands",
    "ipython_compact.cli.compact_commands",
)


class CliError(Exception):
    """A user mistake or an unusable input; ``hint`` says what to type instead."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def db_option(parser: argparse.ArgumentParser, *, default: object = None) -> None:
    parser.add_argument(
        "--db",
        metavar="PATH",
        default=default,
        help="session database file (default: $IPYTHON_COMPACT_DIR/sessions.db or the user data dir)",
    )


def session_option(parser: argparse.ArgumentParser, help_text: str = "session name (default: the most recently active)") -> None:
    """``-s/--session NAME``, spelled the same by every command that works on one session."""
    parser.add_argument("-s", "--session", metavar="NAME", help=help_text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Context compaction for LLM agents in a Python kernel: import, inspect, plan and compact session logs.",
        epilog=f"Run '{PROG} COMMAND --help' for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    db_option(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    # Accept --db after the subcommand too (SUPPRESS keeps a global --db from being overwritten).
    for sub in subparsers.choices.values():
        if not any("--db" in action.option_strings for action in sub._actions):
            db_option(sub, default=argparse.SUPPRESS)
    return parser


def database_from(args: argparse.Namespace) -> Path:
    db = getattr(args, "db", None)
    if db:
        return Path(db).expanduser()
    from ipython_compact.paths import ENV_DIR, database_path

    try:
        return database_path()
    except OSError as exc:
        where = exc.filename or os.environ.get(ENV_DIR) or "the data directory"
        raise CliError(
            f"cannot create the data directory {where}: {exc.strerror or exc}",
            f"point {ENV_DIR} at a writable directory, or pass a database file: {PROG} --db PATH ...",
        ) from exc


def open_store(args: argparse.Namespace) -> SessionStore:
    from ipython_compact.store import SessionStore

    return SessionStore(database_from(args))


def pick_session(store: SessionStore, name: str | None) -> str:
    """The named session, or the most recently appended-to one when no name is given."""
    if name:
        store.get_session(name)  # raises UnknownSessionError listing the known names
        return name
    sessions = store.sessions()
    if not sessions:
        raise CliError(f"the database {store.db_path} has no sessions yet", f"import one: {PROG} import FILE.jsonl")
    return sessions[-1].name


def main(argv: Sequence[str] | None = None) -> int:
    from ipython_compact.store import DatabaseLockedError, StoreError, UnknownSessionError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except CliError as exc:
        return _fail(str(exc), exc.hint)
    except UnknownSessionError as exc:
        return _fail(str(exc), f"list them with: {PROG} sessions")
    except DatabaseLockedError as exc:
        return _fail(str(exc), "wait for the other process to finish, then run the same command again")
    except StoreError as exc:
        if exc.path is None:
            return _fail(str(exc), None)
        db = Path(exc.path)
        if _looks_like_jsonl(db):
            return _fail(f"{db} is a JSONL transcript, not a database",
                         f"import it into the database: {PROG} import {db}   (--db takes a .db file)")
        reason = read_only_reason(db)
        if reason:
            return _fail(reason, f"copy it somewhere writable and use the copy: cp {db} /tmp/{db.name} && {PROG} --db /tmp/{db.name} ...")
        return _fail(str(exc), f"pass another database: {PROG} --db PATH ...")
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error worth a traceback.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        # A file the user named (an export target, an import source) cannot be opened or written.
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", "check the path and its permissions, then run the same command again")


def _looks_like_jsonl(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(1) == b"{"
    except OSError:
        return False


def _fail(message: str, hint: str | None) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    if hint:
        print(f"  try: {hint}", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
