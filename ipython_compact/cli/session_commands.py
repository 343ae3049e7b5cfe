"""Session-log subcommands: import, sessions, log, context, plan, export, verify.

They only read the log, except ``import``, which appends. ``plan`` works on a stored session or
directly on a transcript file (pi JSONL or our export) without touching any database. The import
and plan commands' code lives in ``cli/import_command.py`` and ``cli/plan_command.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ipython_compact.cli import COMMANDS, PROG, CliError, IntOption, open_store, pick_session, session_option
from ipython_compact.cli.budget_options import budget_options
from ipython_compact.cli.import_command import max_bytes_option, run_import
from ipython_compact.cli.message_text import message_text
from ipython_compact.cli.plan_command import run_plan
from ipython_compact.cli.terminal_width import fitted as fitted_output
from ipython_compact.cli.terminal_width import hanging, width
from ipython_compact.core.context import build_context
from ipython_compact.core.entries import COMPACTION, Entry, entry_text
from ipython_compact.core.readable import entry_gist
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.tokens import estimate_context
from ipython_compact.files.safety import UnsafePathError, write_private_file
from ipython_compact.store.importers import FORMATS
from ipython_compact.store.log import IMPORT_BATCH


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "import",
        help=COMMANDS["import"][1],
        description="Read FILE whole and check it before anything is stored; a malformed file stores "
        "nothing. "
        "Into an existing session the entries are appended after its leaf. Entries the session already holds "
        "(the same file imported twice, an export read back into its own session: same id, or the same kind, "
        "time and content) are refused with exit 2 and nothing is stored, unless --new-ids asks for copies. "
        f"Large files are committed {IMPORT_BATCH:,} entries per transaction, so other writers are not "
        f"locked out; their text is indexed for recall by the first search after the import.",
    )
    p.add_argument(
        "files",
        metavar="FILE",
        type=Path,
        nargs="+",
        help="a pi session (.jsonl, v1-v3) or an ipython-compact export; several are imported in "
        "order, "
        "each checked before anything is stored; - reads stdin (needs --session)",
    )
    session_option(p, help_text="target session (default: the file's session name or stem)")
    p.add_argument(
        "--format", choices=FORMATS, default="auto", help="input format (default: detect from line 1)"
    )
    max_bytes_option(p)
    p.add_argument(
        "--new-ids",
        action="store_true",
        help="store every entry as a copy under a fresh id (parents and references re-linked), "
        "even entries the session already holds",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="finish an import that was killed part-way: skip the entries that landed, write the rest",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_import)

    p = subparsers.add_parser("sessions", help=COMMANDS["sessions"][1])
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.add_argument(
        "--tree",
        action="store_true",
        help="show sub-agent sessions under the session that started them (with --json: 'parent' per row)",
    )
    p.set_defaults(func=cmd_sessions)

    p = subparsers.add_parser(
        "log",
        help=COMMANDS["log"][1],
        description="One line per entry on the "
        "current branch. '│' marks entries the model still sees; '·' marks compacted ones.",
    )
    session_option(p)
    p.add_argument("-n", "--limit", type=IntOption(0, 20), metavar="N", help="only the last N entries")
    p.add_argument("--json", action="store_true", help="print the entries as JSON lines (with their writer)")
    p.add_argument(
        "--writers",
        action="store_true",
        help="show which process wrote each entry (role, pid, host): kernel code can write too",
    )
    p.set_defaults(func=cmd_log)

    p = subparsers.add_parser(
        "context",
        help=COMMANDS["context"][1],
        description="What the model would receive now: the newest compaction summary, then every kept and "
        "later message, in full.",
    )
    session_option(p)
    p.add_argument("--json", action="store_true", help="print the message list as JSON")
    p.add_argument(
        "--estimator", choices=("density", "chars4"), default="density", help="token estimator for the header"
    )
    p.add_argument(
        "-n",
        "--tail",
        type=IntOption(0, 20),
        metavar="N",
        help="only the last N messages (the header still counts them all)",
    )
    p.set_defaults(func=cmd_context)

    p = subparsers.add_parser(
        "plan",
        help=COMMANDS["plan"][1],
        description="Plan a compaction without running it, for a stored session or directly for a transcript "
        "FILE.",
    )
    p.add_argument(
        "file",
        metavar="FILE",
        type=Path,
        nargs="?",
        help="a pi JSONL or ipython-compact export, - for stdin (no database needed)",
    )
    session_option(p)
    p.add_argument("--format", choices=FORMATS, default="auto", help="FILE format (default: detect)")
    max_bytes_option(p)
    defaults = CompactionSettings()
    budget_options(p, defaults)
    p.add_argument(
        "--estimator",
        choices=("density", "chars4"),
        default=defaults.estimator,
        help=f"token estimator (default {defaults.estimator})",
    )
    p.add_argument(
        "--window",
        type=IntOption(1, 128000, what="of tokens"),
        metavar="TOKENS",
        help="model context window: also show the threshold decision",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=cmd_plan)

    p = subparsers.add_parser("export", help=COMMANDS["export"][1])
    session_option(p)
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="write to FILE instead of stdout (an existing FILE is kept unless --force)",
    )
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    p.add_argument(
        "--to",
        metavar="PATH|URL",
        help="copy the session into another session database instead "
        "(a file or postgresql://...), streaming, with its ids and hash chain kept",
    )
    p.add_argument(
        "--as", dest="as_name", metavar="NAME", help="with --to: the copy's session name (default: the same)"
    )
    p.set_defaults(func=cmd_export)

    p = subparsers.add_parser(
        "verify",
        help=COMMANDS["verify"][1],
        description="Recompute every entry hash, the append chain, counts and derived columns. This detects "
        "accidental damage (a bad disk or copy, a buggy writer, an edit made without recomputing hashes): "
        "entries altered, lost, added or reordered. The hashes are not keyed, so anyone able to write the "
        "file can recompute them: it is not deliberate tampering that verify rules out.",
    )
    session_option(p, help_text="only this session (default: all)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_verify)


# ---------------------------------------------------------------------------------- import, plan
# Their code lives in import_command and plan_command (split by role); the commands are this
# module's, as COMMANDS names them.


def cmd_import(args: argparse.Namespace) -> int:
    """``import``: pi session files or our exports into the log (``import_command.run_import``)."""
    return run_import(args)


def cmd_plan(args: argparse.Namespace) -> int:
    """``plan``: what a compaction would do now, writing nothing (``plan_command.run_plan``)."""
    return run_plan(args)


# -------------------------------------------------------------------------------------- sessions


def cmd_sessions(args: argparse.Namespace) -> int:
    # start-up: only this command reads the kept counts
    from ipython_compact.compaction.context_figures import AGENTS_COUNT, agents_kept_count, model_sees

    with open_store(args) as store:
        infos = store.sessions()
        rows: list[dict[str, Any]] = []
        for info in infos:
            view = store.context_view(info.name)
            # the last live %%agent's count while the context it counted is unchanged (the gauge's
            # figure), else the density estimate of the log
            counted = agents_kept_count(store, info.name, model_sees(view.entries))
            tokens, counted_by = counted or (
                estimate_context(view.entries, "density", tokens=view.tokens("density")).tokens,
                "default (density)",
            )
            rows.append(
                {
                    "name": info.name,
                    "entries": info.entry_count,
                    "context_entries": len(view.entries),
                    "context_tokens": tokens,
                    "context_estimate": counted_by,
                    "leaf_id": info.leaf_id,
                    "created_at": info.created_at,
                    "last_timestamp": info.last_timestamp,
                }
            )
        if getattr(args, "tree", False):
            rows = _as_tree(store, rows)
    if args.json:
        print(
            json.dumps(
                [{k: v for k, v in r.items() if k != "label"} for r in rows], ensure_ascii=False, indent=2
            )
        )
        return 0
    if not rows:
        print(f"no sessions yet; import one with: {PROG} import FILE.jsonl")
        return 0

    def table(when: Any) -> list[tuple[str, ...]]:
        return [("SESSION", "ENTRIES", "IN VIEW", "~TOKENS", "LEAF", "LAST ACTIVITY")] + [
            (
                r.get("label", r["name"]),
                f"{r['entries']:,}",
                f"{r['context_entries']:,}",
                f"{r['context_tokens']:,}" + ("*" if r["context_estimate"].endswith(AGENTS_COUNT) else ""),
                r["leaf_id"] or "-",
                when(r["last_timestamp"] or r["created_at"]),
            )
            for r in rows
        ]

    full = table(str)
    # a terminal narrower than the table gets the time to the minute (UTC), as `log` drops its
    # time, and a session name too long for the rest of its row on a line of its own
    fitted = fitted_output()
    note = (
        "* as the last live %%agent counted it (its estimate of the model's tokenizer); the rest: "
        "the density estimate"
        if any(r["context_estimate"].endswith(AGENTS_COUNT) for r in rows)
        else None
    )
    if not fitted or _table_width(full) <= width():
        _print_table(full, right=(1, 2, 3))
        if note:
            print(hanging("", note) if fitted else note)
        return 0
    full = table(lambda ts: f"{str(ts)[:10]} {str(ts)[11:16]}" if len(str(ts)) >= 16 else str(ts))
    rest = _table_width([r[1:] for r in full])
    room = max(len(full[0][0]), width() - rest - 2)
    for row in full:
        if len(row[0]) > room:
            print(row[0])  # the name whole; its figures on the next line
            row = ("", *row[1:])
        _print_table(
            [row], right=(1, 2, 3), widths=[room, *(max(len(r[i]) for r in full) for i in range(1, 6))]
        )
    if note:
        print(hanging("", note))
    return 0


def _table_width(rows: Sequence[Sequence[str]]) -> int:
    return sum(max(len(r[i]) for r in rows) for i in range(len(rows[0]))) + 2 * (len(rows[0]) - 1)


def _parent_of(store: Any, session: str) -> str | None:
    """The session that started ``session`` as a sub-agent (its first entry's ``parent_link``), or None."""
    for entry in store.children(session, None):
        if entry.data.get("custom_type") == "parent_link" and isinstance(
            entry.data.get("parent_session"), str
        ):
            return str(entry.data["parent_session"])
    return None


def _as_tree(store: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` ordered depth-first under their parents, each with ``parent`` and an indented ``label``.

    Roots keep the flat list's order; children come in the order they were started. A child
    whose parent session is gone is shown as a root (its ``parent`` still says whose it was).
    """
    by_name = {r["name"]: r for r in rows}
    kids: dict[str | None, list[dict[str, Any]]] = {}
    for r in rows:
        r["parent"] = _parent_of(store, r["name"])
        kids.setdefault(r["parent"] if r["parent"] in by_name else None, []).append(r)
    out: list[dict[str, Any]] = []

    def walk(row: dict[str, Any], lead: str, branch: str, seen: frozenset[str]) -> None:
        row["label"] = branch + row["name"]
        out.append(row)
        children = sorted(
            (c for c in kids.get(row["name"], []) if c["name"] not in seen),
            key=lambda c: (str(c["created_at"]), c["name"]),
        )  # in the order they were started
        for i, child in enumerate(children):
            last = i == len(children) - 1
            walk(
                child,
                lead + ("   " if last else "│  "),
                lead + ("└─ " if last else "├─ "),
                seen | {child["name"]},
            )

    for root in kids.get(None, []):
        walk(root, "", "", frozenset({root["name"]}))
    placed = {r["name"] for r in out}
    for r in rows:  # a cycle of parent links (hand-edited data) still lists every session once
        if r["name"] not in placed:
            r["label"] = r["name"]
            out.append(r)
    return out


def _print_table(
    rows: Sequence[Sequence[str]], right: Sequence[int] = (), widths: Sequence[int] | None = None
) -> None:
    """``rows`` in aligned columns (``right``: right-aligned ones); ``widths`` when the caller fixed
    them (a table printed a row at a time, names too long for their column on lines of their own)."""
    widths = widths or [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)]
        print("  ".join(cells).rstrip())


# ------------------------------------------------------------------------------------------- log


def _describe(entry: Entry) -> str:
    if entry.kind == "message" and entry.message is not None:
        label = str(entry.message.get("role"))
        if label == "toolResult":
            label += f":{entry.message.get('toolName', '?')}"
    else:
        label = entry.kind
    return label


def _preview(entry: Entry, width: int = 70) -> str:
    from ipython_compact.core.readable import one_line  # start-up: only this command needs it

    text = entry_text(entry)
    if entry.kind == COMPACTION:
        text = f"[first kept {entry.data.get('first_kept_entry_id')}] {text}"
    elif entry.kind == "model_change":
        text = f"{entry.data.get('provider')}/{entry.data.get('model_id')}"
    elif not text or entry.kind == "pin":
        text = entry_gist(entry.to_json())  # what a textless entry did (pins, snapshots, file records)
    return one_line(text, width)


def cmd_log(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        session = pick_session(store, args.session)
        length = store.path_length(session)
        # --limit reads only the newest entries; without it the user asked for the whole branch
        shown = store.path(session) if args.limit is None else store.path_tail(session, args.limit)
        view = store.context_view(session)
        tokens = store.token_counts(session, shown, "density") if shown else []
        writers = (
            store.writers(session, [e.id for e in shown]) if (args.json or args.writers) and shown else {}
        )
    in_view = {e.id for e in view.entries}
    first = length - len(shown)
    indexed = list(enumerate(shown, start=first))
    if args.json:
        for index, entry in indexed:
            print(
                json.dumps(
                    {
                        "index": index,
                        **entry.to_json(),
                        "in_context": entry.id in in_view,
                        "tokens": tokens[index - first],
                        "writer": writers.get(entry.id),
                    },
                    ensure_ascii=False,
                )
            )
        return 0
    # a terminal (or $COLUMNS) decides the width; a pipe keeps every column and 70 characters of text
    fitted = fitted_output()
    columns = width() if fitted else 0
    wide = not fitted or columns >= 120  # the time column only where there is room for it and the text
    kind_width = max((len(_describe(e)) for _, e in indexed), default=4)
    header = (
        f"session {session!r}: {length:,} entries on the current branch, {len(view.entries):,} in the "
        "model's view"
    )
    legend = "(│ in view, · compacted)"
    if not fitted or len(header) + 1 + len(legend) <= columns:
        print(f"{header} {legend}")
    else:  # the legend whole on a line of its own, never split after its "│"
        print(hanging("", header, columns))
        print(legend)
    for index, entry in indexed:
        mark = "│" if entry.id in in_view else "·"
        by = f"  [{writers.get(entry.id) or 'writer not recorded'}]" if args.writers else ""
        when = f"{entry.timestamp[:19]:<19} " if wide else ""
        lead = (
            f"{mark} {index:>6} {entry.id:<10} {when}{_describe(entry):<{kind_width}} "
            f"{tokens[index - first]:>7,}  "
        )
        room = max(12, columns - len(lead) - len(by)) if fitted else 70
        print(f"{lead}{_preview(entry, room)}{by}")
    return 0


# --------------------------------------------------------------------------------------- context


def cmd_context(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        session = pick_session(store, args.session)
        view = store.context_view(session)
    messages = build_context(view.entries)
    if args.json:
        print(json.dumps(messages, ensure_ascii=False, indent=2))
        return 0
    estimate = estimate_context(view.entries, args.estimator, tokens=view.tokens(args.estimator))
    start = (
        (f"from entry {view.head_id} (newest compaction's first kept entry)")
        if view.head_id
        else "from the root"
    )
    print(
        f"session {session!r}: {len(messages):,} messages, ~{estimate.tokens:,} tokens ({args.estimator}); "
        f"view starts {start}"
    )
    first = max(0, len(messages) - args.tail) if args.tail else 0
    if first:
        print(
            f"(the last {len(messages) - first:,}; {first:,} earlier messages not shown: drop -n to see them)"
        )
    for index, message in enumerate(messages[first:], start=first + 1):
        print()
        print(message_text(index, message))
    return 0


# ---------------------------------------------------------------------------------- export/verify


def cmd_export(args: argparse.Namespace) -> int:
    from ipython_compact.store.exporters import export_jsonl  # start-up: only this command needs it

    if args.to:
        return _copy_to(args)
    with open_store(args) as store:
        session = pick_session(store, args.session)
        if args.output is None:
            export_jsonl(store, session, sys.stdout)
            return 0
        if args.output.is_dir():
            raise CliError(
                f"{args.output} is a directory",
                f"{PROG} export --session {session} -o {args.output / (session + '.jsonl')}",
            )
        if args.output.is_file() and not args.force:  # a FIFO or device is refused below, as it was
            raise CliError(
                f"{args.output} already exists ({args.output.stat().st_size:,} bytes); nothing was written",
                f"replace it: {PROG} export -s {session} -o {args.output} --force, or pick another FILE",
            )
        if not args.output.parent.is_dir():
            raise CliError(
                f"cannot write {args.output}: the directory {args.output.parent} does not exist",
                f"create it first (mkdir -p {args.output.parent}) or pick another path: {PROG} "
                f"export -o FILE",
            )
        try:
            count = write_private_file(
                args.output, lambda out: export_jsonl(store, session, out), what="the export target"
            )
        except UnsafePathError as exc:
            raise CliError(
                f"{exc}; nothing was written",
                f"pick a regular file: {PROG} export -s {session} "
                f"-o FILE, "
                "or leave out -o to write to standard output",
            ) from exc
        except OSError as exc:
            raise CliError(
                f"cannot write {args.output}: {exc.strerror or exc}; nothing was written there",
                f"free some space or pick another place: {PROG} export -s {session} -o FILE",
            ) from exc
    print(f"exported {count:,} entries of session {session!r} to {args.output}", file=sys.stderr)
    return 0


def _copy_to(args: argparse.Namespace) -> int:
    # deferred for start-up, like every store import of the CLI
    from ipython_compact.store import SessionExistsError, SessionStore  # start-up
    from ipython_compact.store.location import redact  # start-up
    from ipython_compact.store.transfer import copy_session  # start-up

    if args.output is not None:
        raise CliError("--to and -o both name where to write", f"pick one: {PROG} export -s NAME --to URL")
    with open_store(args) as source, SessionStore(args.to) as target:
        session = pick_session(source, args.session)
        try:
            copied = copy_session(source, target, session, name=args.as_name)
        except SessionExistsError as exc:
            raise CliError(
                str(exc), f"copy it under another name: {PROG} export -s {session} --to ... --as NEW-NAME"
            ) from exc
    proof = (
        "same hash chain as the source"
        if copied.identical
        else ("WARNING: hash chain differs from the source")
    )
    print(
        f"copied {copied.entries:,} entries of session {session!r} to {redact(args.to)} as "
        f"{copied.session!r} "
        f"in {copied.batches} transaction(s); {proof}",
        file=sys.stderr,
    )
    return 0 if copied.identical else 1


def cmd_verify(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        report = store.verify(args.session)
        where = store.db.path  # a file, or a server URL without its password
    if args.json:
        print(
            json.dumps({"database": str(where), **dataclasses.asdict(report)}, ensure_ascii=False, indent=2)
        )
        return 0 if report.ok else 1
    if report.ok:
        # a terminal (or $COLUMNS) gets the lines wrapped to its width; a pipe gets them whole
        fit = hanging if fitted_output() else (lambda lead, text: lead + text)
        print(
            fit(
                "",
                f"ok: {report.entries:,} entries in {report.sessions:,} session(s) of {where} verified: "
                "no accidental damage (no entry altered, lost, added or reordered since it was written)",
            )
        )
        print(
            fit(
                "  ",
                "(the hash chain is not keyed: this does not prove that nobody with write access rewrote it)",
            )
        )
        if report.writers:
            said = "; ".join(f"{w} ({n:,})" for w, n in list(report.writers.items())[:8])
            print(fit("  written by: ", said))
        return 0
    print(f"FAILED: {len(report.problems)} problem(s) in {where}:")
    for problem in report.problems:
        print(f"  - {problem}")
    return 1
