"""Compaction subcommands: compact, pin, recall, show, demo.

``compact`` appends a compaction entry (``--dry-run`` only prints the plan); ``pin`` appends pin
and unpin entries; ``recall`` and ``show`` only read; ``demo`` builds a fresh session in the data
directory from a generated transcript and compacts it offline, so it runs on a fresh machine with
no network. A failed compaction exits 2 and says which entry recorded the failure.
"""

from __future__ import annotations

import argparse
import json
import os
import textwrap
from typing import Any

from ipython_compact.cli import (
    COMMANDS,
    PROG,
    CliError,
    IntOption,
    database_from,
    open_store,
    pick_session,
    session_option,
)
from ipython_compact.cli.budget_options import budget_options
from ipython_compact.cli.terminal_width import fitted, hanging, wrap_text
from ipython_compact.core.context import build_context
from ipython_compact.core.entries import COMPACTION, Entry
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.summarizers.registry import summarizer_names


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    defaults = CompactionSettings()
    p = subparsers.add_parser(
        "compact",
        help=COMMANDS["compact"][1],
        description="Summarize the older part of the session's context into a checkpoint and append it. "
        "History is never changed: the compaction is a new entry. --dry-run shows what would be summarized, "
        "kept, externalized and discarded.",
    )
    session_option(p)
    p.add_argument(
        "--summarizer",
        choices=summarizer_names(),
        default="auto",
        help="auto: openai when IPYTHON_COMPACT_MODEL is set, else offline (default)",
    )
    p.add_argument("--model", help="model for --summarizer openai (default: $IPYTHON_COMPACT_MODEL)")
    p.add_argument("--base-url", help="OpenAI-compatible base URL (default: $OPENAI_BASE_URL)")
    p.add_argument("--focus", metavar="TEXT", help="what the summary should keep in particular")
    p.add_argument("--dry-run", action="store_true", help="print the plan only; write nothing")
    budget_options(p, defaults)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_compact)

    p = subparsers.add_parser(
        "pin",
        help=COMMANDS["pin"][1],
        description="Pinned text (or the text of a pinned entry) is copied verbatim from the log into every "
        "later compaction. Without arguments, list the active pins.",
    )
    session_option(p)
    p.add_argument("text", nargs="?", help="text to pin")
    p.add_argument("--entry", metavar="ID", help="pin an entry of the log instead of text")
    p.add_argument("--unpin", metavar="PIN_ID", help="remove an active pin (pin-N)")
    p.set_defaults(func=cmd_pin)

    p = subparsers.add_parser(
        "recall",
        help=COMMANDS["recall"][1],
        description="Give ENTRY_ID (as in a pointer '[entry ID · N lines · recall ID]') or --query WORDS.",
    )
    session_option(p)
    p.add_argument("entry_id", nargs="?", metavar="ENTRY_ID", help="an entry id (see `log`)")
    p.add_argument("-q", "--query", "--search", metavar="WORDS", help="full-text search instead of an id")
    p.add_argument(
        "-n",
        "--limit",
        type=IntOption(1, 5),
        default=5,
        metavar="N",
        help="at most N search hits (default 5)",
    )
    p.add_argument("--json", action="store_true", help="print the hits as JSON")
    p.set_defaults(func=cmd_recall)

    p = subparsers.add_parser("show", help=COMMANDS["show"][1])
    session_option(p)
    p.add_argument("compaction_id", nargs="?", metavar="ID", help="a compaction entry id (see --list)")
    p.add_argument("--list", action="store_true", help="list the compactions on the current branch")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=cmd_show)

    p = subparsers.add_parser(
        "demo",
        help=COMMANDS["demo"][1],
        description="Generate an agent transcript with planted facts into a fresh session in the data "
        "directory, compact it a few times with the offline summarizer, and show the plan, the summary "
        "and how the context stays bounded while the log grows.",
    )
    p.add_argument(
        "--rounds",
        type=IntOption(1, 16),
        default=16,
        metavar="N",
        help="agent turns added before each compaction",
    )
    p.add_argument(
        "--compactions",
        type=IntOption(1, 3),
        default=3,
        metavar="K",
        help="how many compactions to run (default 3)",
    )
    p.add_argument(
        "--keep-recent-tokens",
        type=IntOption(0, 3000),
        default=3000,
        metavar="N",
        help="newest tokens kept verbatim (default 3,000, small so the demo compacts often)",
    )
    p.add_argument("--full-summary", action="store_true", help="print the final summary without trimming")
    p.set_defaults(func=cmd_demo)


def _summarizer(args: argparse.Namespace) -> Any:
    # deferred for CLI start-up time, like this module's other command imports
    from ipython_compact.summarizers import SummarizerError, make_summarizer

    try:
        return make_summarizer(args.summarizer, model=args.model, base_url=args.base_url)
    except SummarizerError as exc:
        # the summarizer speaks to Python callers (``model=...``); here the flag is --model
        raise CliError(
            str(exc).replace("pass model=...", "pass --model NAME"),
            f"{PROG} compact --summarizer openai --model NAME --base-url URL   or   --summarizer offline",
        ) from exc


def cmd_compact(args: argparse.Namespace) -> int:
    # deferred for start-up: `ipython-compact --help` and the read-only commands skip the engine
    from ipython_compact.compaction.compactor import (
        CompactionError,
        CompactionFailed,
        Compactor,
        NothingToCompact,
        SessionMoved,
    )
    from ipython_compact.core.settings import SettingsError  # start-up: only this command needs it

    try:
        settings = CompactionSettings(
            keep_recent_tokens=args.keep_recent_tokens, reserve_tokens=args.reserve_tokens
        )
    except SettingsError as exc:
        raise CliError(str(exc), f"{PROG} compact --keep-recent-tokens 20000 --reserve-tokens 16384") from exc
    summarizer = None if args.dry_run else _summarizer(args)
    with open_store(args) as store:
        session = pick_session(store, args.session)
        compactor = Compactor(store, summarizer, settings)
        try:
            if args.dry_run:
                plan = compactor.plan(session, focus=args.focus)
                print(
                    json.dumps(plan.to_json(), ensure_ascii=False, indent=2) if args.json else plan.render()
                )
                return 0
            result = compactor.compact(session, reason="manual", focus=args.focus)
        except NothingToCompact as exc:
            why = exc.why
            reason = why.render("--keep-recent-tokens") if why is not None else str(exc)
            if args.dry_run:  # a dry run's honest answer, as `plan` gives it: not an error
                print(
                    json.dumps({"compactable": False, "reason": reason})
                    if args.json
                    else f"nothing would be compacted: {reason}"
                )
                return 0
            if why is not None and why.case == "within_tail":
                smaller = max(1, why.tail_tokens // 2)
                hint = f"lower the tail budget: {PROG} compact -s {session} --keep-recent-tokens {smaller}"
            elif why is not None and why.case in ("entry_too_big", "no_cut_point"):
                hint = f"see the entries and their tokens: {PROG} log -s {session} -n 10"
            else:
                hint = f"see what would be summarized: {PROG} plan -s {session}"
            raise CliError(reason, hint) from exc
        except CompactionFailed as exc:
            where = f" (recorded as entry {exc.outcome_entry.id})" if exc.outcome_entry is not None else ""
            hint = (
                "check --model and --base-url (and $OPENAI_API_KEY)"
                if exc.code in ("http_error", "connection")
                else "retry later"
            )
            raise CliError(f"{exc}{where}", f"{hint}, or: {PROG} compact --summarizer offline") from exc
        except SessionMoved as exc:
            raise CliError(
                str(exc),
                f"see what changed, then plan again: {PROG} log -s {session} -n 5; "
                f"{PROG} compact -s {session}",
            ) from exc
        except CompactionError as exc:
            raise CliError(str(exc), f"check the log: {PROG} verify -s {session}") from exc
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
        return 0
    d = result.details
    print(
        f"compacted session {session!r}: {result.tokens_before:,} -> {result.tokens_after:,} tokens in "
        f"context "
        f"(compaction entry {result.entry.id}, {d['summarizer']} summarizer)"
    )
    print(result.plan.render())
    print(
        f"  drift guard: {d['drift']['checked']} exact strings checked, {d['drift']['appended']} appended "
        f"verbatim"
    )
    print(f"show it: {PROG} show {result.entry.id}" + (f" -s {session}" if args.session else ""))
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    from ipython_compact.compaction.compactor import Compactor  # start-up: only this command needs it
    from ipython_compact.core.readable import one_line  # start-up: only this command needs it

    given = [
        flag
        for flag, value in (("TEXT", args.text), ("--entry", args.entry), ("--unpin", args.unpin))
        if value is not None
    ]
    if len(given) > 1:
        raise CliError(
            f"give one of TEXT, --entry or --unpin, not {' and '.join(given)}",
            f"{PROG} pin 'TEXT'   or   {PROG} pin --entry ID   or   {PROG} pin --unpin pin-N",
        )
    if args.text is not None and not args.text.strip():
        raise CliError("the text to pin is empty", f"{PROG} pin 'never write into /data/raw'")
    with open_store(args) as store:
        session = pick_session(store, args.session)
        compactor = Compactor(store)
        try:
            if args.unpin:
                compactor.unpin(session, args.unpin)
                print(f"unpinned {args.unpin}")
            elif args.text is not None or args.entry is not None:
                entry = compactor.pin(session, text=args.text, entry_id=args.entry)
                print(
                    f"pinned {entry.data['pin_id']} (entry {entry.id}); every later compaction carries it "
                    f"verbatim"
                )
            pins = compactor.active_pins(session)
        except ValueError as exc:
            raise CliError(
                str(exc), f"{PROG} pin 'TEXT'   or   {PROG} pin --entry ID   or   {PROG} pin --unpin pin-N"
            ) from exc
    if not (args.unpin or args.text is not None or args.entry is not None):
        if not pins:
            print(f"no active pins in session {session!r}")
        for pin in pins:
            source = f"entry {pin.entry_id}" if pin.entry_id else "text"
            print(f"{pin.pin_id} ({source}): {one_line(pin.text, 100)}")
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from ipython_compact.compaction.compactor import Compactor  # start-up: only this command needs it

    if (args.entry_id is None) == (args.query is None):
        raise CliError(
            "give an ENTRY_ID or --query WORDS (one of them)",
            f"{PROG} recall 1a2b3c4d   or   {PROG} recall --query 'address already in use'",
        )
    with open_store(args) as store:
        session = pick_session(store, args.session)
        try:
            hits = Compactor(store).recall(
                session, entry_id=args.entry_id, query=args.query, limit=args.limit
            )
        except ValueError as exc:
            raise CliError(str(exc), f"find ids with: {PROG} log -s {session}") from exc
    if args.json:
        print(json.dumps([h.to_json() for h in hits], ensure_ascii=False, indent=2))
        return 0
    if not hits:
        print(f"no entries match {args.query!r}")
    fit = fitted()
    for hit in hits:
        role = f" {hit.role}" if hit.role else ""
        count = len(hit.text.splitlines())
        lines = f"{count:,} line{'' if count == 1 else 's'}"
        head = f"── entry {hit.id} · {hit.kind}{role} · {hit.timestamp} · {lines}"
        # a terminal gets the text wrapped at words (the terminal broke them mid-way); a pipe, exact
        print(hanging("", head) if fit else head)
        print(wrap_text(hit.text) if fit else hit.text)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from ipython_compact.compaction.compactor import Compactor  # start-up: only this command needs it
    from ipython_compact.compaction.timeline import summary_of  # start-up: only this command needs it

    with open_store(args) as store:
        session = pick_session(store, args.session)
        if args.compaction_id:
            try:
                entry = store.get(args.compaction_id, session)
            except Exception as exc:
                raise CliError(str(exc), f"list them with: {PROG} show --list -s {session}") from exc
            if entry.kind != COMPACTION:
                raise CliError(
                    f"entry {entry.id} is a {entry.kind!r} entry, not a compaction",
                    f"{PROG} show --list -s {session}",
                )
            compactions = [entry]
        else:
            compactions = Compactor(store).compactions(session)
        # the figures the panel's timeline and `%compact log` show, read the same way (one number
        # for one thing, issue 35): an imported pi compaction's after is read off the log
        shown = [_compaction_json(e) | _timeline_figures(summary_of(store, session, e)) for e in compactions]
    if args.list:
        if args.json:
            print(json.dumps(shown, ensure_ascii=False, indent=2))
            return 0
        if not compactions:
            print(f"no compactions in session {session!r}")
        for d in shown:
            print(_list_line(d))
        return 0
    if not compactions:
        raise CliError(f"session {session!r} has no compaction yet", f"{PROG} compact -s {session}")
    entry, d = compactions[-1], shown[-1]
    if args.json:
        print(json.dumps(d | {"summary": entry.data.get("summary")}, ensure_ascii=False, indent=2))
        return 0
    print(
        hanging(
            "",
            f"compaction {entry.id} · {entry.timestamp} · reason {d['reason']} · "
            f"{d['tokens_before']:,} tokens before · {_after_text(d)} · first kept "
            f"{d['first_kept_entry_id'] or '-'}",
        )
    )
    summary = str(entry.data.get("summary", ""))
    print(wrap_text(summary) if fitted() else summary)  # a pipe gets the summary exact
    return 0


def _timeline_figures(card: Any) -> dict[str, Any]:
    """The figures ``show`` takes from the timeline's reading of the log (``compaction.timeline``)."""
    return {
        "reason": card["reason"],
        "tokens_after": card["tokens_after"],
        "context_after": card["context_after"],
        "estimate": card["estimate"],
    }


def _after_text(d: dict[str, Any]) -> str:
    """The context right after, and the compaction's own figure when it differs (as the cell and
    the panel name them)."""
    now, own = d["context_after"], d["tokens_after"]
    if now is None:
        return "after not known" if own is None else f"{own:,} tokens (checkpoint and kept tail)"
    said = [f"checkpoint and kept tail {own:,}"] if isinstance(own, int) and own != now else []
    estimate = str(d.get("estimate") or "")
    if estimate and not estimate.startswith("default"):  # the live agent's, as its gauge showed it
        said.append(f"estimated by {estimate}")
    return f"{now:,} tokens in context" + (f" ({'; '.join(said)})" if said else "")


def _list_line(d: dict[str, Any]) -> str:
    """One compaction a line, within 80 columns: id, time, reason, before -> context after."""
    now = d["context_after"] if d["context_after"] is not None else d["tokens_after"]
    after = "?" if now is None else f"{now:,}"
    return (
        f"{d['id']}  {d['timestamp']}  {d['reason']:<9} {d['tokens_before']:>9,} -> {after:>7} "
        f"in context{'  ' + d['summarizer'] if d['summarizer'] else ''}"
    )


def _compaction_json(entry: Entry) -> dict[str, Any]:
    details = entry.data.get("details") if isinstance(entry.data.get("details"), dict) else {}
    assert isinstance(details, dict)
    return {
        "id": entry.id,
        "timestamp": entry.timestamp,
        "reason": entry.data.get("reason"),
        "tokens_before": int(entry.data.get("tokens_before") or 0),
        "tokens_after": details.get("tokens_after"),
        "context_after": None,
        "estimate": None,
        "first_kept_entry_id": entry.data.get("first_kept_entry_id"),
        "summarizer": details.get("summarizer"),
        "focus": details.get("focus"),  # what the user asked the summary to keep in particular, or null
    }


def cmd_demo(args: argparse.Namespace) -> int:
    from ipython_compact.cli.demo_transcript import TranscriptGenerator  # start-up: only the demo needs it
    from ipython_compact.compaction.compactor import (  # start-up: only this command needs it
        Compactor,
        NothingToCompact,
    )
    from ipython_compact.core.tokens import estimate_context  # start-up: only this command needs it

    settings = CompactionSettings(keep_recent_tokens=args.keep_recent_tokens)
    # deferred for start-up, like every store import of the CLI
    from ipython_compact.store.location import redact  # start-up

    db = redact(str(database_from(args)))
    from ipython_compact.files.paths import ENV_DIR  # start-up: only this command needs it

    # `make demo` sets IPYTHON_COMPACT_DIR; a user's shell usually does not, so the commands shown
    # name the database, or they would look in the default data directory and find no 'demo'.
    at = f" --db {db}" if (getattr(args, "db", None) or os.environ.get(ENV_DIR)) else ""
    rule = "─" * 78
    fit = fitted()  # a terminal: every line wrapped at words to its width; a pipe: whole lines

    def say(text: str, lead: str = "") -> None:
        print(hanging(lead, text) if fit else lead + text)

    with open_store(args) as store:
        names = {s.name for s in store.sessions()}
        name, n = "demo", 1
        while name in names:
            n += 1
            name = f"demo-{n}"
        store.create_session(name)
        print(rule)
        say(f"ipython-compact demo · session {name!r} in {db}")
        intro = (
            "A generated kernel-agent transcript (goal, user constraints, paths, versions, errors, ids,",
            "variables, a few 2,400-line outputs, duplicates and retried cells) is compacted offline.",
        )
        if fit:
            say(" ".join(intro))
        else:
            print("\n".join(intro))
        print(rule)
        gen = TranscriptGenerator(seed=2026)
        compactor = Compactor(store, None, settings)
        rows: list[tuple[str, int, int, int]] = []
        pinned: list[str] = []

        def measure(label: str) -> None:
            path = store.context_path(name)
            messages = build_context(path)
            tokens = estimate_context(messages).tokens
            # a stored count, not a read of every entry
            rows.append((label, store.get_session(name).entry_count, len(messages), tokens))

        result = None
        for k in range(1, args.compactions + 1):
            for msgs in gen.rounds(args.rounds):
                store.append_many(name, [("message", {"message": m}) for m in msgs])
            if k == 2:
                pin = compactor.pin(
                    name, text="The stakeholder review is on 2026-12-04; send the AUC table to Dana first."
                )
                pinned.append(str(pin.data["text"]))
                print()
                say(f"pinned {pin.data['pin_id']}: {pin.data['text']}")
            measure(f"after {gen.round} turns")
            try:
                plan = compactor.plan(name)
                print(f"\n[{k}] dry run ({PROG} compact --dry-run):")
                shown = textwrap.indent(plan.render(), "  ")
                print(wrap_text(shown) if fit else shown)
                result = compactor.compact(name, reason="manual")
            except NothingToCompact as exc:  # also: a compaction that would not shrink the context
                raise CliError(
                    f"{exc} (after {gen.round} turns with --keep-recent-tokens {args.keep_recent_tokens:,})",
                    f"{PROG} demo --rounds 16   (more turns per compaction, or a smaller "
                    f"--keep-recent-tokens)",
                ) from exc
            d = result.details
            measure(f"after compaction {k}")
            # one number for one thing: "->" is the context as the table below measures it; the
            # compaction's own figure (checkpoint and kept tail, without the checkpoint's framing)
            # is named as such when it differs
            now = rows[-1][3]
            own = f" (checkpoint and kept tail {result.tokens_after:,})" if now != result.tokens_after else ""
            say(
                f"[{k}] compacted: {result.tokens_before:,} -> {now:,} tokens in context{own}; checkpoint "
                f"{len(result.summary):,} chars; "
                f"drift guard checked {d['drift']['checked']} exact strings, appended "
                f"{d['drift']['appended']}"
            )
        assert result is not None
        print(f"\n{rule}")
        say(f"the newest checkpoint ({PROG} show -s {name}{at}):")
        print(rule)
        summary = result.summary
        if not args.full_summary and len(summary) > 6000:
            cut = summary.rfind("\n", 0, 6000)
            summary = summary[:cut] + (
                f"\n[... {len(result.summary) - cut:,} more characters: {PROG} show -s {name}{at}]"
            )
        print(wrap_text(summary) if fit else summary)
        pointers = result.details.get("externalized") or []
        if pointers:
            target = str(pointers[-1]["entry_id"])
            (hit,) = compactor.recall(name, entry_id=target)
            lines = hit.text.splitlines()
            print(f"\n{rule}")
            say(
                f"recall of an externalized output ({PROG} recall {target} -s {name}{at}): "
                f"{len(lines):,} lines, first 3:"
            )
            for line in lines[:3]:
                print(f"  {line}")
        print(f"\n{rule}\nthe log grows, the context stays bounded:")
        print(f"  {'moment':<24}{'log entries':>12}{'context msgs':>14}{'context tokens':>16}")
        for label, count, n_msgs, n_tokens in rows:
            print(f"  {label:<24}{count:>12,}{n_msgs:>14,}{n_tokens:>16,}")
        view = "\n".join(json.dumps(m, ensure_ascii=False) for m in build_context(store.context_path(name)))
        facts = gen.facts
        checks = [("goal", [facts.goal]), ("constraints", facts.constraints), ("pinned text", pinned)]
        checks += [(cls, values) for cls, values in sorted(facts.by_class.items())]

        def kept(values: list[str]) -> int:
            return sum(1 for v in values if json.dumps(v, ensure_ascii=False)[1:-1] in view)

        found = ", ".join(f"{label} {kept(values)}/{len(values)}" for label, values in checks if values)
        print()
        say(f"planted facts still verbatim in the model's context: {found}")
        report = store.verify(name)
        print(
            f"\nlog verified: {report.entries:,} entries, hash chain "
            f"{'intact' if report.ok else 'BROKEN: ' + '; '.join(report.problems)}"
        )
        say(
            f"next: {PROG} log -s {name}{at} · {PROG} context -s {name}{at} · {PROG} recall --query "
            f"'KeyError' -s {name}{at}"
        )
    return 0
