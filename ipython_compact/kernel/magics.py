"""``%compact`` and its subcommands, each with ``--help``.

``%compact`` alone, ``%compact now [FOCUS]`` or ``%compact --focus FOCUS`` compacts now. Any other
first word that is not a subcommand is a ``UsageError`` with the closest subcommand ("did you mean
`status`?"): a typo must never run a compaction. Wrong usage raises ``UsageError`` naming what to
type instead; nothing is changed by a command that failed to parse. ``--help`` is printed, never
returned as the cell's value.

Adding a subcommand is one edit: a method on ``CompactMagics`` decorated with
``@COMMANDS.subcommand(name, help, arg(...), ...)`` (``kernel/magic_args.py``). An exception a
handler lets through is turned into a ``UsageError`` by the first matching row of ``ERROR_HINTS``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from ipython_compact.compaction.results import CompactionError, NothingToCompact
from ipython_compact.files.paths import read_only_reason
from ipython_compact.kernel import display, plain_text, report_rows
from ipython_compact.kernel.magic_args import HelpShown, Registry, arg, did_you_mean
from ipython_compact.kernel.plain_text import fields, terminal_width
from ipython_compact.kernel.service import Busy, KernelService, Unavailable
from ipython_compact.namespace.snapshot import SnapshotError
from ipython_compact.store.errors import (
    DatabaseLockedError,
    DuplicateImportError,
    ImportFormatError,
    StoreError,
)

COMMANDS = Registry("%compact")
NAMES_LIMIT = 100  # `%compact names` lists this many by default: 10,000 rows help no one in a cell

SNAPSHOT_VERIFICATION = (
    "This snapshot verifies fully: a large array (> 1 MiB) that looks unchanged is re-hashed, so an "
    "in-place edit anywhere in it is saved. Automatic snapshots after cells are cheaper: with "
    "CompactConfig.verify_unchanged = 'sampled' (the default) they trust 64 sampled blocks, so an "
    "in-place edit between the samples is missed until the next full verification — every "
    "CompactConfig.full_verify_every-th automatic snapshot (default 10) or any explicit one, such as "
    "this command. Until then a restore returns that array as it was before the edit. `%compact status` "
    "shows when the last full verification happened."
)


def _store_error(name: str, exc: BaseException) -> str:
    """The session database itself is unusable (damaged, not ours, read-only)."""
    path = getattr(exc, "path", None)
    reason = read_only_reason(Path(path)) if path is not None else None
    if reason:
        return (
            f"%compact {name}: {reason}. Nothing was changed; point IPYTHON_COMPACT_DIR at a "
            "writable directory and restart the kernel."
        )
    return (
        f"%compact {name}: {exc}. Nothing was changed; move the file aside, or point "
        "IPYTHON_COMPACT_DIR at another directory and restart the kernel."
    )


def _os_error(name: str, exc: BaseException) -> str:
    """A file the user named cannot be read or written."""
    assert isinstance(exc, OSError)
    where = f"{exc.filename}: " if exc.filename else ""
    return (
        f"%compact {name}: {where}{exc.strerror or exc}. Nothing was changed; check the path and its "
        f"permissions."
    )


def _nothing_hint(exc: BaseException) -> str:
    """What to look at after a refusal: its own reason already says what would help, except for a
    session with no conversation yet."""
    why = getattr(exc, "why", None)
    if "would not make" in str(exc):
        return "`%compact preview` shows what would be summarized and kept."
    if why is None or why.case == "no_conversation":
        return (
            "History to compact comes from `%%agent` turns or `%compact import FILE.jsonl`; "
            "`%compact status` shows the tokens in context."
        )
    return "`%compact log` lists the entries with their ids."


#: What a handler's exception means to the user, first match wins (subclasses before their bases).
ERROR_HINTS: tuple[tuple[type[BaseException], Callable[[str, BaseException], str]], ...] = (
    (Busy, lambda name, exc: f"%compact {name}: {exc}"),
    (SnapshotError, lambda name, exc: f"%compact {name}: {exc}."),  # the message says what to do
    (
        NothingToCompact,
        lambda name, exc: f"%compact {name}: {exc}. Nothing was changed. {_nothing_hint(exc)}",
    ),
    (
        CompactionError,
        lambda name, exc: f"%compact {name}: {exc}. Type `%compact preview` to see what would be compacted.",
    ),
    (
        Unavailable,
        lambda name, exc: (
            f"%compact {name}: {exc}. Install the full package (`pip install ipython-compact`)."
        ),
    ),
    (LookupError, lambda name, exc: f"%compact {name}: {exc}. Type `%compact log` to see entry ids."),
    (ValueError, lambda name, exc: f"%compact {name}: {exc}. Type `%compact {name} --help` for usage."),
    (
        DatabaseLockedError,
        lambda name, exc: f"%compact {name}: {exc}. Nothing was changed; run it again in a moment.",
    ),
    (StoreError, _store_error),
    (OSError, _os_error),
)


def usage_error(name: str, exc: BaseException) -> UsageError | None:
    """The ``UsageError`` for ``exc`` raised by subcommand ``name``, or None when no row matches."""
    for kind, text in ERROR_HINTS:
        if isinstance(exc, kind):
            return UsageError(text(name, exc))
    return None


def fitted_error(error: UsageError, *, in_kernel: bool) -> UsageError:
    """``error`` wrapped at spaces to the terminal, so a long refusal never breaks mid-word where
    terminal IPython prints it (after ``UsageError: ``). Unchanged in a kernel (the front end wraps
    its own output) and when output is not a terminal (a pipe, a test's captured stream)."""
    try:
        terminal = sys.stdout.isatty()
    except (AttributeError, ValueError):
        terminal = False
    if in_kernel or not terminal:
        return error
    prefix = " " * len("UsageError: ")
    text = plain_text.wrap_block(prefix + str(error), terminal_width())
    return UsageError(text[len(prefix) :])


def overview(width: int | None = None) -> str:
    rows = [(f"  {n}", COMMANDS[n].help) for n in COMMANDS.names()]
    lines = [
        "usage: %compact [SUBCOMMAND] [ARGS] — `%compact SUBCOMMAND --help` for each",
        "",
        "`%compact` alone, `%compact now [FOCUS]` or `%compact --focus FOCUS` compacts now.",
        "",
    ]
    return "\n".join(lines) + "\n" + fields(rows, width or terminal_width())


def _not_a_subcommand(word: str, line: str) -> UsageError:
    """The error for a first word that is no subcommand: never taken as focus text, so a typo such
    as ``%compact stauts`` cannot start a compaction."""
    if word.startswith("-"):
        return UsageError(
            f"%compact: unknown option {word!r}{did_you_mean(word, ['--focus', '--help'])}. "
            "Type `%compact --help` for the subcommands."
        )
    return UsageError(
        f"%compact: {word!r} is not a subcommand{did_you_mean(word, COMMANDS.names()) or '.'} "
        f"Nothing was run. "
        f"To compact with focus text, type `%compact now {line}`; `%compact --help` lists the "
        f"subcommands."
    )


def _focus(a: argparse.Namespace) -> str | None:
    """Focus text from the words after ``now``/``preview`` and ``--focus`` (both may be given)."""
    words = [*a.focus, *([a.focus_option] if a.focus_option else [])]
    return " ".join(words).strip() or None


FOCUS_ARGS = (
    arg("focus", nargs="*", help="focus text for the summary"),
    arg("--focus", dest="focus_option", metavar="TEXT", help="focus text (the same as the words)"),
)


def _at_least(value: int | None, low: int, option: str) -> None:
    if value is not None and value < low:
        raise ValueError(f"{option} must be {low} or more, got {value}")


@magics_class
class CompactMagics(Magics):  # type: ignore[misc]
    """The ``%compact`` line magic."""

    def __init__(self, shell: Any, service: KernelService) -> None:
        super().__init__(shell=shell)
        self.service = service

    @line_magic  # type: ignore[misc]
    def compact(self, line: str) -> Any:
        """Context compaction for this kernel's session. `%compact --help` lists the subcommands."""
        try:
            return self._compact(line)
        except UsageError as exc:
            raise fitted_error(exc, in_kernel=getattr(self.shell, "kernel", None) is not None) from None

    def _compact(self, line: str) -> Any:
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"%compact: cannot parse the line ({exc}); check the quotes") from None
        if argv and argv[0] in ("-h", "--help", "help"):
            print(overview())
            return None
        if argv and argv[0] == "compact":
            argv = argv[1:]
        if not argv or argv[0] == "--focus" or argv[0].startswith("--focus="):
            argv = ["now", *argv]
        elif argv[0] not in COMMANDS:
            raise _not_a_subcommand(argv[0], line.strip())
        name, rest = argv[0], argv[1:]
        command = COMMANDS[name]
        try:
            args = command.parser(COMMANDS.magic).parse_strict(rest)
        except HelpShown as shown:
            print(shown.text)
            return None
        try:
            with self.service.fileops.paused():
                return command.handler(self, args)
        except Exception as exc:
            error = usage_error(name, exc)
            if error is None:
                raise
            raise error from None

    # ------------------------------------------------------------------ handlers
    @COMMANDS.subcommand(
        "now", "Compact the session now, optionally steering the summary with focus text.", *FOCUS_ARGS
    )
    def _now(self, a: argparse.Namespace) -> Any:
        result = self.service.compact(focus=_focus(a))
        comp = result["compaction"]
        shown = {"id": comp.get("entry_id") or comp.get("id"), "reason": "manual", **comp}
        return display.summary_bundle(shown, result.get("notice"))

    @COMMANDS.subcommand(
        "preview", "Dry run: what would be summarized, kept, externalized and discarded.", *FOCUS_ARGS
    )
    def _preview(self, a: argparse.Namespace) -> Any:
        try:
            plan = self.service.preview(_focus(a))
        except NothingToCompact as exc:
            # A dry run's honest answer, not a mistake: a fresh session has nothing to compact yet.
            return display.text_bundle(
                f"Nothing would be compacted now: {exc}. `%compact status` shows the threshold lines.",
                title="Compaction preview (nothing changed)",
            )
        shown = display.text_bundle(
            plan.get("text") or json.dumps(plan, indent=1), title="Compaction preview (nothing changed)"
        )
        shown.data = plan
        return shown

    @COMMANDS.subcommand("status", "Tokens in context, the window, and both threshold lines.")
    def _status(self, a: argparse.Namespace) -> Any:
        # `estimate` names the token estimate in force: the live agent's (its model's tokenizer,
        # learned from usage, or the default), else the configured estimator's
        return report_rows.status_bundle(dict(self.service.status()))

    @COMMANDS.subcommand(
        "names",
        "The user-defined names in the kernel with cheap facts (like %who).",
        arg(
            "--limit",
            type=int,
            default=NAMES_LIMIT,
            help=f"list at most this many names (default {NAMES_LIMIT}; 0 for all)",
        ),
    )
    def _names(self, a: argparse.Namespace) -> Any:
        _at_least(a.limit, 0, "--limit")
        last = self.service.last_snapshot  # its skip reasons are facts; the probe's are judged from types
        lost = {s.name: s.reason for s in last.skipped} if last is not None else {}
        return report_rows.names_bundle(self.service.names(limit=a.limit or None).to_json(), lost=lost)

    @COMMANDS.subcommand(
        "snapshot",
        "Write a snapshot of the namespace now (incremental unless --full).",
        arg("--full", action="store_true", help="serialize and write every value again"),
        epilog=SNAPSHOT_VERIFICATION,
    )
    def _snapshot(self, a: argparse.Namespace) -> Any:
        report = self.service.snapshot(full=a.full)
        return report_rows.snapshot_bundle(report.to_json())

    @COMMANDS.subcommand(
        "restore",
        "Bring names back from the newest snapshot holding your work (after a restart).",
        arg("names", nargs="*", help="only these names (default: all); named ones are overwritten"),
        arg(
            "--names",
            dest="name_list",
            default="",
            help="only these names, comma-separated; named ones are overwritten",
        ),
        arg(
            "--overwrite",
            action="store_true",
            help="also replace names you defined since with a different value (kept by default)",
        ),
        arg(
            "--generation",
            type=int,
            default=None,
            help="restore this generation (see %%compact snapshots) instead of the newest",
        ),
    )
    def _restore(self, a: argparse.Namespace) -> Any:
        wanted = [*a.names, *[n.strip() for n in a.name_list.split(",") if n.strip()]]
        report = self.service.restore(names=wanted or None, generation=a.generation, overwrite=a.overwrite)
        shown = report.to_json()
        shown["not_saved"] = [s.to_json() for s in report.not_saved]
        if report.generation is None:  # a warning with what is available, never a success
            text = "\n".join([*report.warnings, *(f"refused: {r}" for r in report.refused)])
            return display.text_bundle(text, title="Warning: nothing was restored")
        accounted = (
            set(report.restored)
            | set(report.kept)
            | {s.name for s in report.failed}
            | {s.name for s in report.quarantined}
        )
        missing = [n for n in wanted if n not in accounted]
        if missing and not accounted:
            raise ValueError(
                f"not in snapshot generation {report.generation}: {', '.join(missing)}; "
                "`%compact restore` with no names brings back everything it holds"
            )
        if missing:
            shown["not_in_snapshot"] = missing
        return report_rows.restore_bundle(shown, own_process=self.service.snapshots.process)

    @COMMANDS.subcommand(
        "snapshots",
        "List snapshot generations: number, time, kernel, names, size, verified.",
        arg(
            "--discard",
            type=int,
            default=None,
            metavar="N",
            help="delete every snapshot of the earlier kernel that wrote generation N",
        ),
    )
    def _snapshots(self, a: argparse.Namespace) -> Any:
        if a.discard is not None:
            gone = self.service.discard_snapshots(a.discard)
            return display.mapping_bundle("Discarded", {"generations": gone})
        rows = self.service.snapshot_list()
        if not rows:
            return display.text_bundle(
                f"No snapshots for session {self.service.session} in {self.service.snapshot_dir}."
            )

        def kernel(r: dict[str, Any]) -> str:
            who = "this kernel" if r["own"] else f"pid {r['pid']}" if r["pid"] else "?"
            return who + (" (provisional)" if r["provisional"] else "")

        def names(r: dict[str, Any]) -> str:
            if not r["names"]:
                return "0"
            shown = ", ".join(r["names"][:6])
            more = len(r["names"]) - 6
            return f"{len(r['names'])}: {shown}" + (f" +{more} more" if more > 0 else "")

        def when(r: dict[str, Any]) -> str:  # 2026-12-01T20:19:17.624Z -> 2026-12-01 20:19:17
            return str(r["timestamp"] or "")[:19].replace("T", " ")

        # names last: the one column of any width, so a narrow terminal wraps only it
        table = [
            [
                r["generation"],
                when(r),
                kernel(r),
                r["origin"] or "",
                display.fmt_bytes(r["bytes"]),
                "yes" if r["verified"] else f"no: {r['problem']}",
                names(r),
            ]
            for r in rows
        ]
        return display.rows_bundle(
            f"Snapshots of {self.service.session}",
            ["generation", "time (UTC)", "kernel", "taken", "size", "verified", "names"],
            table,
            rows,
        )

    @COMMANDS.subcommand(
        "log",
        "The newest entries of the session log.",
        arg("-n", type=int, default=20, help="how many entries (default 20; 0 for all)"),
    )
    def _log(self, a: argparse.Namespace) -> Any:
        _at_least(a.n, 0, "-n")
        rows = self.service.log(limit=a.n)  # entries without text come described, not blank
        return display.rows_bundle(
            f"Last {len(rows)} entries of {self.service.context_session()}",
            ["id", "kind", "role", "text"],
            [[r["id"], r["kind"], r["role"] or "", r["text"]] for r in rows],
            rows,
        )

    @COMMANDS.subcommand(
        "show", "One log entry in full.", arg("entry_id", help="the entry id (see %%compact log)")
    )
    def _show(self, a: argparse.Namespace) -> Any:
        return display.entry_bundle(self.service.show(a.entry_id))

    @COMMANDS.subcommand(
        "recall",
        "The original text of compacted entries, by id or by search.",
        arg("entry_id", nargs="?", help="an entry id"),
        arg("--query", "-q", "--search", help="full-text search instead of an id"),
        arg("--limit", type=int, default=5, help="at most this many search hits (default 5)"),
    )
    def _recall(self, a: argparse.Namespace) -> Any:
        if (a.entry_id is None) == (a.query is None):
            raise ValueError("give an entry id or --query TEXT (one of them)")
        _at_least(a.limit, 1, "--limit")
        try:
            hits = self.service.recall(entry_id=a.entry_id, query=a.query, limit=a.limit)
        except ValueError as exc:
            if a.entry_id is None:
                raise
            raise UsageError(
                f"%compact recall: {exc}. Type `%compact log` to see entry ids, "
                "or `%compact recall --query WORDS` to search."
            ) from None
        return display.text_bundle(
            "\n\n".join(f"[{h['id']}] {h['kind']} {h['role'] or ''}\n{h['text']}" for h in hits)
            or "No matching entries.",
            title=f"{len(hits)} recalled",
        )

    @COMMANDS.subcommand(
        "pin",
        "Keep a text verbatim through every compaction (alone or with --list: the active pins).",
        arg("text", nargs="*", help="the text to keep verbatim"),
        arg("--list", action="store_true", help="list active pins"),
    )
    def _pin(self, a: argparse.Namespace) -> Any:
        if a.list or not a.text:
            pins = self.service.pins()
            if not pins:
                return display.text_bundle("No active pins. Pin a text with `%compact pin TEXT`.")
            return display.rows_bundle(
                "Active pins", ["pin id", "text"], [[k, v] for k, v in pins.items()], pins
            )
        text = " ".join(a.text)
        if not text.strip():
            raise ValueError("give the text to pin, e.g. `%compact pin the API key lives in env var X`")
        return display.mapping_bundle("Pinned", self.service.pin(text))

    @COMMANDS.subcommand(
        "unpin", "Remove a pin by its id.", arg("pin_id", help="the pin id (see %%compact pin --list)")
    )
    def _unpin(self, a: argparse.Namespace) -> Any:
        return display.mapping_bundle("Unpinned", self.service.unpin(a.pin_id))

    @COMMANDS.subcommand("tree", "The branch tips of the session tree.")
    def _tree(self, a: argparse.Namespace) -> Any:
        tips = self.service.tree()
        return display.rows_bundle(
            "Branch tips",
            ["id", "kind", "leaf", "text"],
            [[t["id"], t["kind"], "*" if t["leaf"] else "", t["text"]] for t in tips],
            tips,
        )

    @COMMANDS.subcommand(
        "branch",
        "Move the session's leaf to an entry (start a branch there).",
        arg("entry_id", help="the entry to continue from"),
        arg("--no-summary", action="store_true", help="do not summarize the branch left behind"),
    )
    def _branch(self, a: argparse.Namespace) -> Any:
        moved = self.service.branch(a.entry_id, summarize=not a.no_summary)
        return display.mapping_bundle("Leaf moved", {"session": self.service.session, **moved})

    @COMMANDS.subcommand(
        "export",
        "Write the session (root to leaf) as JSONL.",
        arg("path", help="the JSONL file to write"),
        arg("--force", action="store_true", help="replace the file when it exists"),
    )
    def _export(self, a: argparse.Namespace) -> Any:
        target = Path(a.path).expanduser()
        if target.is_dir():
            raise ValueError(
                f"{target} is a directory; give a file name, e.g. `%compact export "
                f"{target / 'session.jsonl'}`"
            )
        if not target.parent.is_dir():
            raise ValueError(f"directory {target.parent} does not exist")
        if target.is_file() and not a.force:  # as the CLI's `export -o`: never replaced without a word
            raise ValueError(
                f"{target} already exists ({target.stat().st_size:,} bytes); nothing was written. "
                f"Replace it with `%compact export {a.path} --force`, or pick another file"
            )
        count = self.service.export(target)
        return display.mapping_bundle("Exported", {"path": str(target), "entries": count})

    @COMMANDS.subcommand(
        "import",
        "Append a pi or ipython-compact JSONL transcript to this session.",
        arg("path", help="the transcript file (pi session or our JSONL export)"),
        arg(
            "--new-ids",
            action="store_true",
            help="store entries the session already holds again, as a copy under fresh ids",
        ),
    )
    def _import(self, a: argparse.Namespace) -> Any:
        source = Path(a.path).expanduser()
        if source.is_dir():
            raise ValueError(f"{source} is a directory; give a .jsonl file in it (a pi session or an export)")
        if not source.is_file():
            raise ValueError(f"file {source} does not exist")
        # start-up: the progress display only when importing
        from ipython_compact.kernel.import_progress import ImportProgress

        progress = ImportProgress(source, in_kernel=getattr(self.shell, "kernel", None) is not None)
        progress.reading()
        ok = False
        try:
            imported = self.service.import_transcript(source, new_ids=a.new_ids, progress=progress.stored)
            ok = True
        except DuplicateImportError as exc:
            raise UsageError(
                f"%compact import: {exc}. To store them again as a copy under fresh ids: "
                f"`%compact import {a.path} --new-ids`."
            ) from None
        except ImportFormatError as exc:
            where = f"fix line {exc.line} of {source}" if exc.line is not None else "check the file"
            raise UsageError(
                f"%compact import: {exc}. Nothing was imported; {where} "
                "(a pi session or an ipython-compact export, one JSON object per "
                "line)."
            ) from None
        finally:
            progress.done(ok=ok)
        return display.mapping_bundle("Imported", imported)

    @COMMANDS.subcommand(
        "session",
        "Show the bound session, or switch to another (remembered across restarts).",
        arg("name", nargs="?", help="switch to this session"),
    )
    def _session(self, a: argparse.Namespace) -> Any:
        if a.name:
            self.service.switch(a.name)
        return display.mapping_bundle("Session binding", self.service.binding.to_json())
