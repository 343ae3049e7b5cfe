"""Argument parsing shared by ``%compact`` and ``%%agent``: one registry, one parser class.

Why: a ``%compact`` subcommand used to be three edits (a help line, a parser, a handler table);
``%%agent`` had its own hand-written option loop. Here a subcommand is declared once, next to its
handler, with ``@subcommand(name, help, arg(...), ...)``, and both magics parse with ``MagicParser``.

What must hold:
- A parse error raises ``UsageError`` naming the command and how to get its help; nothing runs.
- ``--help`` never becomes a cell's ``Out[n]`` value: it raises ``HelpShown``, whose text the magic
  prints.
- An unknown word is answered with the closest known one ("did you mean ..."), never guessed at.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

from IPython.core.error import UsageError

from ipython_compact.core.spelling import closest


class HelpShown(Exception):
    """``--help`` was asked for; ``text`` is the help to print."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class MagicParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that raises instead of printing and exiting (a magic must not exit)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}. Type `{self.prog} --help` for usage.")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise HelpShown(self.format_help())

    def print_help(self, file: Any = None) -> None:
        raise HelpShown(self.format_help())

    def parse_strict(self, argv: Sequence[str]) -> argparse.Namespace:
        """``parse_args`` that names an unknown option with the closest known one."""
        args, unknown = self.parse_known_args(list(argv))
        if unknown:
            word = unknown[0]
            known = [s for a in self._actions for s in a.option_strings]
            if word.startswith("-"):
                self.error(f"unknown option {word!r}{did_you_mean(word, known)}")
            self.error(f"unexpected argument {word!r}")
        return args


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean `x`?"`` for the closest of ``choices``, or ``""`` when none is close."""
    guess = closest(word, choices)
    return f"; did you mean `{guess}`?" if guess else ""


@dataclass(frozen=True)
class Arg:
    """One ``add_argument`` call, kept as data so a subcommand's options sit beside its handler."""

    flags: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


def arg(*flags: str, **options: Any) -> Arg:
    return Arg(tuple(flags), options)


def build_parser(prog: str, description: str, args: Iterable[Arg], epilog: str | None = None) -> MagicParser:
    # wraps to $COLUMNS
    parser = MagicParser(prog=prog, description=description, epilog=epilog, add_help=True)
    for a in args:
        parser.add_argument(*a.flags, **a.options)
    return parser


F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Subcommand:
    """A subcommand: its name, one-line help, parser arguments, and handler ``(magics, args) -> result``."""

    name: str
    help: str
    args: tuple[Arg, ...]
    handler: Callable[..., Any]
    epilog: str | None = None

    def parser(self, magic: str) -> MagicParser:
        return build_parser(f"{magic} {self.name}", self.help, self.args, self.epilog)


class Registry:
    """Subcommands of one magic, in the order they were declared (that order is the help's order)."""

    def __init__(self, magic: str) -> None:
        self.magic = magic
        self.commands: dict[str, Subcommand] = {}

    def subcommand(self, name: str, help: str, *args: Arg, epilog: str | None = None) -> Callable[[F], F]:
        """Decorate a handler method: registering it and its parser is the only edit a new subcommand
        needs."""

        def register(fn: F) -> F:
            if name in self.commands:
                raise ValueError(f"{self.magic} {name} is registered twice")
            self.commands[name] = Subcommand(name, help, tuple(args), fn, epilog)
            return fn

        return register

    def __contains__(self, name: object) -> bool:
        return name in self.commands

    def __getitem__(self, name: str) -> Subcommand:
        return self.commands[name]

    def names(self) -> list[str]:
        return list(self.commands)


def positive_int(text: str) -> int:
    """An argparse ``type`` for counts that must be 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs an integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value
