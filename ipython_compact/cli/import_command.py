"""The ``import`` subcommand: read pi session files or our exports into the session log, one file at a
time, with progress on a terminal and a hint naming the format when a file is not one.

Split from ``cli/session_commands.py`` (which registers it and wraps it as ``cmd_import``); ``plan``
shares its size limits and format hint.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ipython_compact.cli import PROG, CliError, IntOption, open_store
from ipython_compact.files.status_line import StatusLine, reading_text, stored_text
from ipython_compact.store.importers import ImportLimits, import_transcript, load_transcript


def max_bytes_option(parser: argparse.ArgumentParser) -> None:
    default = ImportLimits().max_bytes
    parser.add_argument(
        "--max-bytes",
        type=IntOption(1, default, maximum=1 << 40),
        default=default,
        metavar="N",
        help=f"refuse inputs larger than N bytes (default {default:,})",
    )


def import_limits(args: argparse.Namespace) -> ImportLimits:
    return dataclasses.replace(ImportLimits(), max_bytes=args.max_bytes)


def run_import(args: argparse.Namespace) -> int:
    # deferred for start-up, like every store import of the CLI
    from ipython_compact.store import ImportFormatError  # start-up: only this command needs it

    status = StatusLine()
    transcripts = []
    try:
        for file in args.files:  # read and check every input before the database is even opened
            status.show(reading_text(_shown_name(file), _size_of(file)), final=True)
            try:
                transcripts.append(load_transcript(file, args.format, limits=import_limits(args)))
            except ImportFormatError as exc:
                raise CliError(
                    str(exc) + ("; nothing was imported" if len(args.files) > 1 else ""),
                    format_hint(exc, file, "import"),
                ) from exc
        for file, transcript in zip(args.files, transcripts, strict=True):
            args.file = file
            _import_one(args, transcript, status)
    finally:
        status.clear()
    return 0


def _shown_name(file: str) -> str:
    """The file as a progress line names it: its name (a long path would not fit), or stdin."""
    return "stdin" if file == "-" else Path(file).name


def _size_of(file: str) -> int:
    """Bytes in ``file``; 0 for stdin, or a file gone meanwhile."""
    try:
        return os.stat(file).st_size if file != "-" else 0
    except OSError:
        return 0


def _stored(status: StatusLine, file: str) -> Callable[[int, int], None]:
    def tell(written: int, total: int) -> None:
        status.show(stored_text(_shown_name(file), written, total), final=written == total)

    return tell


def _import_one(args: argparse.Namespace, transcript: Any, status: StatusLine | None = None) -> None:
    # deferred for start-up, like every store import of the CLI
    from ipython_compact.store import (
        DuplicateImportError,
        ImportFormatError,
        InvalidEntryError,
        PartialImportError,
    )

    with open_store(args) as store:
        try:
            result = import_transcript(
                store,
                transcript,
                args.session,
                new_ids=args.new_ids,
                resume=args.resume,
                progress=None if status is None or not status.active else _stored(status, args.file),
            )
        except DuplicateImportError as exc:
            raise CliError(str(exc), exc.hint) from exc
        except PartialImportError as exc:
            raise CliError(
                str(exc),
                "the log is append-only, so what landed stays: import the file into a "
                "fresh "
                f"session instead: {PROG} import {args.file} -s NEW-NAME",
            ) from exc
        except (ImportFormatError, InvalidEntryError) as exc:
            raise CliError(str(exc), format_hint(exc, args.file, "import")) from exc
    if status is not None:
        status.clear()
    if args.json:
        print(json.dumps(dataclasses.asdict(result), ensure_ascii=False))
        return
    where = (
        f"new session {result.session!r}"
        if result.created
        else (f"existing session {result.session!r} (appended after its leaf)")
    )
    noun = "entry" if result.imported == 1 else "entries"
    print(f"imported {result.imported:,} {noun} ({result.format}) into {where}; leaf {result.leaf_id}")
    if result.new_ids:
        print("  stored as copies: every entry got a fresh id (--new-ids)")
    elif result.renamed_ids:
        print(f"  {result.renamed_ids:,} ids were already taken in that session and got fresh ones")
    if result.repaired_surrogates:
        print(
            f"  {result.repaired_surrogates:,} lone UTF-16 surrogate(s) (half an emoji, as JavaScript "
            f"writes it) "
            "stored as U+FFFD"
        )


def format_hint(exc: Any, file: Path, command: str) -> str:
    """What to do about an unreadable transcript: the path, the line, or the format."""
    if getattr(exc, "hint", None):
        return str(exc.hint)
    line = getattr(exc, "line", None)
    if "no such file" in str(exc):
        return f"check the path: ls {file}"
    if line == 1 and "first line must be" in str(exc):
        return f"let it detect the format from line 1: {PROG} {command} {file} --format auto"
    if line is not None and line > 1:
        return f"fix line {line} of {file} (each line must be one JSON object of the session format)"
    if line is not None and "JSON" in str(exc):
        return f"fix line {line} of {file} (each line must be one JSON object)"
    return f"check the file, or force a format: {PROG} {command} {file} --format pi|jsonl"
