"""``%compact`` and its subcommands, each with ``--help``.

``%compact`` alone (or ``%compact now [focus]``) compacts now; any text that is not a subcommand
is taken as focus text. Wrong usage raises ``UsageError`` naming what to type instead; nothing is
changed by a command that failed to parse.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from ipython_compact.compactor import CompactionError, NothingToCompact
from ipython_compact.kernel import display as D
from ipython_compact.kernel.service import Busy, KernelService, Unavailable
from ipython_compact.store.errors import DatabaseLockedError, StoreError


class _HelpShown(Exception):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}. Type `{self.prog} --help` for usage.")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _HelpShown(self.format_help())

    def print_help(self, file: Any = None) -> None:
        raise _HelpShown(self.format_help())


def _parser(name: str, help_text: str) -> _Parser:
    return _Parser(prog=f"%compact {name}" if name else "%compact", description=help_text, add_help=True)


SUBCOMMANDS: dict[str, str] = {
    "now": "Compact the session now, optionally steering the summary with focus text.",
    "preview": "Dry run: what would be summarized, kept, externalized and discarded.",
    "status": "Tokens in context, the window, and both threshold lines.",
    "names": "The user-defined names in the kernel with cheap facts (like %who).",
    "snapshot": "Write a snapshot of the namespace now (incremental unless --full).",
    "restore": "Bring names back from the newest valid snapshot (after a restart).",
    "log": "The newest entries of the session log.",
    "show": "One log entry in full.",
    "recall": "The original text of compacted entries, by id or by search.",
    "pin": "Keep a text verbatim through every compaction (alone or with --list: the active pins).",
    "unpin": "Remove a pin by its id.",
    "tree": "The branch tips of the session tree.",
    "branch": "Move the session's leaf to an entry (start a branch there).",
    "export": "Write the session (root to leaf) as JSONL.",
    "import": "Append a pi or ipython-compact JSONL transcript to this session.",
    "session": "Show the bound session, or switch to another (remembered across restarts).",
}


SNAPSHOT_VERIFICATION = (
    "This snapshot verifies fully: a large array (> 1 MiB) that looks unchanged is re-hashed, so an "
    "in-place edit anywhere in it is saved. Automatic snapshots after cells are cheaper: with "
    "CompactConfig.verify_unchanged = 'sampled' (the default) they trust 64 sampled blocks, so an "
    "in-place edit between the samples is missed until the next full verification — every "
    "CompactConfig.full_verify_every-th automatic snapshot (default 10) or any explicit one, such as "
    "this command. Until then a restore returns that array as it was before the edit. `%compact status` "
    "shows when the last full verification happened."
)


def _build_parsers() -> dict[str, _Parser]:
    p: dict[str, _Parser] = {}
    for name, text in SUBCOMMANDS.items():
        p[name] = _parser(name, text)
    p["now"].add_argument("focus", nargs="*", help="focus text for the summary")
    p["preview"].add_argument("focus", nargs="*", help="focus text for the summary")
    p["names"].add_argument("--limit", type=int, default=None, help="list at most this many names")
    p["snapshot"].add_argument("--full", action="store_true", help="serialize and write every value again")
    p["snapshot"].epilog = SNAPSHOT_VERIFICATION
    p["restore"].add_argument("names", nargs="*", help="only these names (default: all)")
    p["log"].add_argument("-n", type=int, default=20, help="how many entries (default 20; 0 for all)")
    p["show"].add_argument("entry_id", help="the entry id (see %%compact log)")
    p["recall"].add_argument("entry_id", nargs="?", help="an entry id")
    p["recall"].add_argument("--query", "-q", help="full-text search instead of an id")
    p["recall"].add_argument("--limit", type=int, default=5, help="at most this many search hits (default 5)")
    p["pin"].add_argument("text", nargs="*", help="the text to keep verbatim")
    p["pin"].add_argument("--list", action="store_true", help="list active pins")
    p["unpin"].add_argument("pin_id", help="the pin id (see %%compact pin --list)")
    p["branch"].add_argument("entry_id", help="the entry to continue from")
    p["branch"].add_argument("--no-summary", action="store_true", help="do not summarize the branch left behind")
    p["import"].add_argument("path", help="the transcript file (pi session or our JSONL export)")
    p["export"].add_argument("path", help="the JSONL file to write")
    p["session"].add_argument("name", nargs="?", help="switch to this session")
    return p


def _overview() -> str:
    width = max(len(n) for n in SUBCOMMANDS)
    lines = ["usage: %compact [SUBCOMMAND] [ARGS] — `%compact SUBCOMMAND --help` for each", "",
             "With no subcommand (or text that is not one) it compacts now, using the text as focus.", ""]
    lines += [f"  {n.ljust(width)}  {t}" for n, t in SUBCOMMANDS.items()]
    return "\n".join(lines)


@magics_class
class CompactMagics(Magics):  # type: ignore[misc]
    """The ``%compact`` line magic."""

    def __init__(self, shell: Any, service: KernelService) -> None:
        super().__init__(shell=shell)
        self.service = service
        self.parsers = _build_parsers()
        self.handlers: dict[str, Callable[[argparse.Namespace], Any]] = {
            "now": self._now, "preview": self._preview, "status": self._status, "names": self._names,
            "snapshot": self._snapshot, "restore": self._restore, "log": self._log, "show": self._show,
            "recall": self._recall, "pin": self._pin, "unpin": self._unpin, "tree": self._tree,
            "branch": self._branch, "export": self._export, "import": self._import, "session": self._session,
        }

    @line_magic  # type: ignore[misc]
    def compact(self, line: str) -> Any:
        """Context compaction for this kernel's session. `%compact --help` lists the subcommands."""
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"%compact: cannot parse the line ({exc}); check the quotes") from None
        if argv and argv[0] in ("-h", "--help", "help"):
            return D.text_bundle(_overview())
        if argv and argv[0] == "compact":
            argv = argv[1:]
        if not argv or argv[0] not in self.parsers:
            if argv and argv[0].startswith("-"):
                raise UsageError(f"%compact: unknown option {argv[0]!r}. Type `%compact --help` for the subcommands.")
            argv = ["now", *argv]
        name, rest = argv[0], argv[1:]
        try:
            args = self.parsers[name].parse_args(rest)
        except _HelpShown as shown:
            return D.text_bundle(shown.text)
        try:
            with self.service.fileops.paused():
                return self.handlers[name](args)
        except Busy as exc:
            raise UsageError(f"%compact {name}: {exc}") from None
        except CompactionError as exc:
            if isinstance(exc, NothingToCompact):
                hint = ("Nothing was changed. History to compact comes from `%%agent` turns or "
                        "`%compact import FILE.jsonl`; `%compact status` shows the tokens in context.")
            else:
                hint = "Type `%compact preview` to see what would be compacted."
            raise UsageError(f"%compact {name}: {exc}. {hint}") from None
        except Unavailable as exc:
            raise UsageError(f"%compact {name}: {exc}. Install the full package (`pip install ipython-compact`)."
                             ) from None
        except (KeyError, LookupError) as exc:
            raise UsageError(f"%compact {name}: {exc}. Type `%compact log` to see entry ids.") from None
        except ValueError as exc:
            raise UsageError(f"%compact {name}: {exc}. Type `%compact {name} --help` for usage.") from None
        except DatabaseLockedError as exc:
            raise UsageError(f"%compact {name}: {exc}. Nothing was changed; run it again in a moment.") from None
        except StoreError as exc:  # the session database itself is unusable (damaged, not ours, read-only)
            from ipython_compact.cli import read_only_reason

            reason = read_only_reason(Path(exc.path)) if exc.path is not None else None
            if reason:
                raise UsageError(f"%compact {name}: {reason}. Nothing was changed; point IPYTHON_COMPACT_DIR at a "
                                 "writable directory and restart the kernel.") from None
            raise UsageError(f"%compact {name}: {exc}. Nothing was changed; move the file aside, or point "
                             "IPYTHON_COMPACT_DIR at another directory and restart the kernel.") from None
        except OSError as exc:  # a file the user named cannot be read or written
            where = f"{exc.filename}: " if exc.filename else ""
            raise UsageError(f"%compact {name}: {where}{exc.strerror or exc}. Nothing was changed; "
                             "check the path and its permissions.") from None

    # ------------------------------------------------------------------ handlers
    def _now(self, a: argparse.Namespace) -> Any:
        focus = " ".join(a.focus) or None
        result = self.service.compact(focus=focus)
        comp = result["compaction"]
        shown = {"id": comp.get("entry_id") or comp.get("id"), "reason": "manual", **comp}
        return D.summary_bundle(shown, result.get("notice"))

    def _preview(self, a: argparse.Namespace) -> Any:
        try:
            plan = self.service.preview(" ".join(a.focus) or None)
        except NothingToCompact as exc:
            # A dry run's honest answer, not a mistake: a fresh session has nothing to compact yet.
            tokens = self.service.status().get("tokens")
            return D.text_bundle(f"Nothing would be compacted now: {exc}. The context holds "
                                 f"{D.cell_text(tokens)} tokens; `%compact status` shows the threshold lines.",
                                 title="Compaction preview (nothing changed)")
        shown = D.text_bundle(plan.get("text") or json.dumps(plan, indent=1), title="Compaction preview (nothing changed)")
        shown.data = plan
        return shown

    def _status(self, a: argparse.Namespace) -> Any:
        return D.mapping_bundle(f"Session {self.service.session}", self.service.status())

    @staticmethod
    def _at_least(value: int | None, low: int, option: str) -> None:
        if value is not None and value < low:
            raise ValueError(f"{option} must be {low} or more, got {value}")

    def _names(self, a: argparse.Namespace) -> Any:
        self._at_least(a.limit, 0, "--limit")
        return D.names_bundle(self.service.names(limit=a.limit).to_json())

    def _snapshot(self, a: argparse.Namespace) -> Any:
        report = self.service.snapshot(full=a.full)
        return D.mapping_bundle(f"Snapshot generation {report.generation}", report.to_json())

    def _restore(self, a: argparse.Namespace) -> Any:
        report = self.service.restore(names=a.names or None)
        if report.generation is None:
            detail = "; ".join(report.refused) or "no snapshot exists for this session yet"
            raise ValueError(f"nothing to restore ({detail}); take one with `%compact snapshot`")
        shown = report.to_json()
        accounted = set(report.restored) | {s.name for s in report.failed} | {s.name for s in report.quarantined}
        missing = [n for n in a.names if n not in accounted]
        if missing and not accounted:
            raise ValueError(f"not in snapshot generation {report.generation}: {', '.join(missing)}; "
                             "`%compact restore` with no names brings back everything it holds")
        if missing:
            shown["not_in_snapshot"] = missing
        return D.mapping_bundle(f"Restored from snapshot generation {report.generation}", shown)

    def _log(self, a: argparse.Namespace) -> Any:
        self._at_least(a.n, 0, "-n")
        rows = self.service.log(limit=a.n)  # entries without text come described, not blank
        return D.rows_bundle(f"Last {len(rows)} entries of {self.service.session}", ["id", "kind", "role", "text"],
                             [[r["id"], r["kind"], r["role"] or "", r["text"]] for r in rows], rows)

    def _show(self, a: argparse.Namespace) -> Any:
        entry = self.service.show(a.entry_id)
        return D.entry_bundle(entry)

    def _recall(self, a: argparse.Namespace) -> Any:
        if (a.entry_id is None) == (a.query is None):
            raise ValueError("give an entry id or --query TEXT (one of them)")
        self._at_least(a.limit, 1, "--limit")
        try:
            hits = self.service.recall(entry_id=a.entry_id, query=a.query, limit=a.limit)
        except ValueError as exc:
            if a.entry_id is None:
                raise
            raise UsageError(f"%compact recall: {exc}. Type `%compact log` to see entry ids, "
                             "or `%compact recall --query WORDS` to search.") from None
        return D.text_bundle("\n\n".join(f"[{h['id']}] {h['kind']} {h['role'] or ''}\n{h['text']}" for h in hits)
                             or "No matching entries.", title=f"{len(hits)} recalled")

    def _pin(self, a: argparse.Namespace) -> Any:
        if a.list or not a.text:
            pins = self.service.pins()
            if not pins:
                return D.text_bundle("No active pins. Pin a text with `%compact pin TEXT`.")
            return D.rows_bundle("Active pins", ["pin id", "text"], [[k, v] for k, v in pins.items()], pins)
        text = " ".join(a.text)
        if not text.strip():
            raise ValueError("give the text to pin, e.g. `%compact pin the API key lives in env var X`")
        return D.mapping_bundle("Pinned", self.service.pin(text))

    def _unpin(self, a: argparse.Namespace) -> Any:
        return D.mapping_bundle("Unpinned", self.service.unpin(a.pin_id))

    def _tree(self, a: argparse.Namespace) -> Any:
        tips = self.service.tree()
        return D.rows_bundle("Branch tips", ["id", "kind", "leaf", "text"],
                             [[t["id"], t["kind"], "*" if t["leaf"] else "", t["text"]] for t in tips], tips)

    def _branch(self, a: argparse.Namespace) -> Any:
        moved = self.service.branch(a.entry_id, summarize=not a.no_summary)
        return D.mapping_bundle("Leaf moved", {"session": self.service.session, **moved})

    def _import(self, a: argparse.Namespace) -> Any:
        source = Path(a.path).expanduser()
        if not source.is_file():
            raise ValueError(f"file {source} does not exist")
        from ipython_compact.store import ImportFormatError

        try:
            imported = self.service.import_transcript(source)
        except ImportFormatError as exc:
            where = f"fix line {exc.line} of {source}" if exc.line is not None else "check the file"
            raise UsageError(f"%compact import: {exc}. Nothing was imported; {where} "
                             "(a pi session or an ipython-compact export, one JSON object per line).") from None
        return D.mapping_bundle("Imported", imported)

    def _export(self, a: argparse.Namespace) -> Any:
        target = Path(a.path).expanduser()
        if target.is_dir():
            raise ValueError(f"{target} is a directory; give a file name, e.g. `%compact export {target / 'session.jsonl'}`")
        if not target.parent.is_dir():
            raise ValueError(f"directory {target.parent} does not exist")
        count = self.service.export(target)
        return D.mapping_bundle("Exported", {"path": str(target), "entries": count})

    def _session(self, a: argparse.Namespace) -> Any:
        if a.name:
            self.service.switch(a.name)
        return D.mapping_bundle("Session binding", self.service.binding.to_json())
