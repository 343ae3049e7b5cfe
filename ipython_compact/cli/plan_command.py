"""The ``plan`` subcommand: what a compaction would summarize, keep and cut right now, for a stored
session or a transcript file read without any database (nothing is written).

Split from ``cli/session_commands.py`` (which registers it and wraps it as ``cmd_plan``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from ipython_compact.cli import PROG, CliError, open_store, pick_session
from ipython_compact.cli.import_command import format_hint, import_limits
from ipython_compact.cli.terminal_width import hanging
from ipython_compact.core.entries import Entry
from ipython_compact.core.preparation import Preparation, prepare_compaction
from ipython_compact.core.settings import CompactionSettings, SettingsError
from ipython_compact.core.thresholds import decide, threshold_lines
from ipython_compact.core.tokens import estimate_context, estimate_entry_tokens
from ipython_compact.store.importers import load_transcript


def _settings(args: argparse.Namespace) -> CompactionSettings:
    try:
        return CompactionSettings(
            keep_recent_tokens=args.keep_recent_tokens,
            reserve_tokens=args.reserve_tokens,
            estimator=args.estimator,
        )
    except SettingsError as exc:
        raise CliError(str(exc), f"{PROG} plan --keep-recent-tokens 20000 --reserve-tokens 16384") from exc


def run_plan(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.file is not None:
        if args.session:
            raise CliError(
                "give either FILE or --session, not both",
                f"{PROG} plan FILE   or   {PROG} plan --session NAME",
            )
        from ipython_compact.store import ImportFormatError  # start-up: only this command needs it

        try:
            transcript = load_transcript(args.file, args.format, limits=import_limits(args))
        except ImportFormatError as exc:
            raise CliError(str(exc), format_hint(exc, args.file, "plan")) from exc
        try:
            path = transcript.path()
        except ValueError as exc:
            raise CliError(f"{args.file}: {exc}", None) from exc
        positions = {e.id: i for i, e in enumerate(transcript.entries)}
        tokens = [estimate_entry_tokens(e, settings.estimator) for e in path]
        source: dict[str, Any] = {"file": str(args.file), "format": transcript.format}
        offset = 0
    else:
        with open_store(args) as store:
            session = pick_session(store, args.session)
            view = store.context_view(session)
            info = store.get_session(session)
        path = view.entries
        tokens = view.tokens(settings.estimator)
        # Indices count along the current branch from its root; the view starts at view.offset.
        offset = view.offset
        positions = {e.id: offset + i for i, e in enumerate(path)}
        source = {"session": session, "entries": info.entry_count}
    prep = prepare_compaction(path, settings, tokens=tokens)
    report = _plan_report(path, tokens, settings, prep, positions, offset)
    report["source"] = source
    if args.window is not None:
        if args.window <= settings.reserve_tokens:
            raise CliError(
                f"--window {args.window:,} leaves no room: it must be larger than --reserve-tokens "
                f"({settings.reserve_tokens:,})",
                f"{PROG} plan --window 128000   or   {PROG} plan --window {args.window} --reserve-tokens "
                f"{args.window // 4}",
            )
        lines = threshold_lines(args.window, settings)
        report["window"] = args.window
        report["threshold_lines"] = {"blocking": lines.blocking, "background": lines.background}
        report["decision"] = decide(report["context_tokens"], args.window, settings)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        _print_plan(report)
    return 0


def _plan_report(
    path: Sequence[Entry],
    tokens: Sequence[int],
    settings: CompactionSettings,
    prep: Preparation | None,
    positions: dict[str, int],
    offset: int,
) -> dict[str, Any]:
    estimate = estimate_context(list(path), settings.estimator, tokens=list(tokens))
    report: dict[str, Any] = {
        "estimator": settings.estimator,
        "keep_recent_tokens": settings.keep_recent_tokens,
        "reserve_tokens": settings.reserve_tokens,
        "context_tokens": estimate.tokens,
        "usage_tokens": estimate.usage_tokens,
        "trailing_tokens": estimate.trailing_tokens,
    }
    if prep is None:
        from ipython_compact.compaction.refusals import why_nothing  # start-up: only on a refusal

        reason = (
            "the branch is empty"
            if not path
            else why_nothing("", path, tokens, settings, estimate.tokens).detail("--keep-recent-tokens")
        )
        report.update(
            compactable=False,
            reason=reason,
            first_kept_entry_id=None,
            first_kept_index=-1,
            turn_start_index=-1,
            is_split_turn=False,
            messages_to_summarize=0,
            tokens_before=estimate.tokens,
        )
        return report
    index_of = {e.id: i for i, e in enumerate(path)}

    def span_tokens(entries: Sequence[Entry]) -> int:
        return sum(tokens[index_of[e.id]] for e in entries)

    report.update(
        compactable=True,
        first_kept_entry_id=prep.first_kept_entry_id,
        first_kept_index=positions[prep.first_kept_entry_id],
        turn_start_index=positions[path[prep.turn_start_index].id] if prep.turn_start_index >= 0 else -1,
        is_split_turn=prep.is_split_turn,
        messages_to_summarize=len(prep.messages_to_summarize),
        turn_prefix_messages=len(prep.turn_prefix),
        kept_messages=len(prep.kept),
        tokens_before=prep.tokens_before,
        summarize_tokens=span_tokens(prep.messages_to_summarize),
        turn_prefix_tokens=span_tokens(prep.turn_prefix),
        kept_tokens=span_tokens(prep.kept),
        summarize_from_id=prep.messages_to_summarize[0].id if prep.messages_to_summarize else None,
        summarize_to_id=prep.messages_to_summarize[-1].id if prep.messages_to_summarize else None,
        boundary_start_index=offset + prep.boundary_start,
        has_previous_summary=prep.previous_summary is not None,
        read_files=list(prep.read_files),
        modified_files=list(prep.modified_files),
    )
    return report


def _print_plan(r: dict[str, Any]) -> None:
    source = r["source"]
    what = (
        (f"file {source['file']} ({source['format']})")
        if "file" in source
        else f"session {source['session']!r}"
    )
    print(f"compaction plan for {what}")
    print(
        hanging(
            "  settings          ",
            f"estimator {r['estimator']}, --keep-recent-tokens {r['keep_recent_tokens']:,}, "
            f"--reserve-tokens {r['reserve_tokens']:,}",
        )
    )
    anchor = (
        (f" (usage anchor {r['usage_tokens']:,} + {r['trailing_tokens']:,} estimated after it)")
        if r["usage_tokens"]
        else ""
    )
    print(f"  context now       ~{r['context_tokens']:,} tokens{anchor}")
    if "decision" in r:
        lines = r["threshold_lines"]
        background = "off" if lines["background"] is None else f"{lines['background']:,}"
        print(
            f"  thresholds        window {r['window']:,}: blocking above {lines['blocking']:,}, background "
            f"above "
            f"{background} -> {r['decision']}"
        )
    if not r["compactable"]:
        print(hanging("  nothing to compact: ", r["reason"]))
        return
    print(
        f"  would summarize   {r['messages_to_summarize']} messages, ~{r['summarize_tokens']:,} tokens"
        + (f" ({r['summarize_from_id']} .. {r['summarize_to_id']})" if r["summarize_from_id"] else "")
    )
    if r["is_split_turn"] and not r["turn_prefix_messages"]:
        # pi's flag (chars4) at a cut on an entry that opens its own turn: neither pi nor we make a
        # prefix summary of nothing (issue 36)
        print(
            hanging(
                "  split turn        ",
                f"yes, as pi flags it: the turn starts at the kept entry itself (index "
                f"{r['turn_start_index']}), so nothing is summarized as a turn prefix",
            )
        )
    elif r["is_split_turn"]:
        print(
            f"  split turn        yes: the turn starts at index {r['turn_start_index']}; its first "
            f"{r['turn_prefix_messages']} messages (~{r['turn_prefix_tokens']:,} tokens) get a separate "
            f"prefix summary"
        )
    else:
        print("  split turn        no")
    print(
        f"  would keep        {r['kept_messages']} messages verbatim, ~{r['kept_tokens']:,} tokens, "
        f"from entry {r['first_kept_entry_id']} (index {r['first_kept_index']})"
    )
    print(
        f"  previous summary  {'yes: it is updated, not replaced' if r['has_previous_summary'] else 'none'}"
    )
    if r["read_files"] or r["modified_files"]:
        print(f"  files             {len(r['read_files'])} read, {len(r['modified_files'])} modified")
