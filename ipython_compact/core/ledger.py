"""A deterministic ledger carried across compactions: what was read, changed, run, broken, asked.

Why: after compaction agents re-read files, re-run finished commands and replay requests that were
already done (peer survey §10 items 3 and 9). A model-written summary is not a reliable record of
that; this ledger is built by code from the raw entries and folded forward at every compaction, so
a compacted agent can see "done" and not redo it.

What must hold:
- ``Ledger.update(entries)`` is a pure fold: ``L.update(a).update(b) == L.update(a + b)`` as long
  as a tool call and its result are not split across the two spans (the cut point never splits
  them; a call whose result has not been seen yet stays ``pending`` and is settled later).
- Lists are bounded (newest kept); totals keep counting, so nothing is silently forgotten.
- Files: modified wins over read (a file written after being read is listed as modified only).
  Besides read/write/edit tools, a Python cell's literal paths count (``pd.read_csv("a.csv")`` is a
  read, ``df.to_parquet("b.parquet")`` a write) — but only when the cell succeeded. Files modified
  are shown newest first, one per artifact: a newer version (``churn_v4.pkl``) replaces the older
  (kept in ``replaced_versions``, recallable, never listed as current). Files and commits an output
  names on its first or last lines ("saved models/...", "[main 1a2b3c4] ...") are artifacts too.
- Requests have a state (``core.requests``: open, deferred, done, dropped); the header counts each
  state exactly (lists are bounded, the ones that leave are counted per state), every open or
  deferred request is shown (the newest in full, older ones by entry id).
- Decisions (``core.decisions``): the current revision of every decision the user or the
  assistant stated, each with what it replaced; ``render`` shows the ones the text before the
  block does not state, so a model summary that dropped or paraphrased a decision never leaves
  the agent without it, and one that states it is not repeated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ipython_compact.core import decisions as decision_book
from ipython_compact.core.decisions import DecisionRecord
from ipython_compact.core.drift import render_block
from ipython_compact.core.entries import Entry, text_of_content, tool_calls_of
from ipython_compact.core.facts import clip_sentences, dedupe_sentences, version_key
from ipython_compact.core.history_marks import replaced_mark
from ipython_compact.core.identifiers import CODE_KEYS, variables_in_code
from ipython_compact.core.ledger_records import (
    COMMAND_CHARS,
    MAX_ARTIFACTS,
    MAX_COMMANDS,
    MAX_DROPPED,
    MAX_ERRORS,
    MAX_FILES,
    MAX_NAMES,
    MAX_PENDING,
    MAX_REQUESTS,
    NOT_ANSWERS,
    OUTCOME_CHARS,
    RAW_CHARS,
    READ_TOOLS,
    SHOW_ARTIFACTS,
    SHOW_COMMANDS,
    SHOW_DONE,
    SHOW_DONE_IDS,
    SHOW_DROPPED,
    SHOW_ERRORS,
    SHOW_FILES,
    SHOW_NAMES,
    SHOW_OPEN,
    SHOW_REQUEST_CHARS,
    WRITE_TOOLS,
    ArtifactRecord,
    CommandRecord,
    ErrorRecord,
    Status,
    _command_text,
    _note,
    _path_of,
    _strs,
    code_file_ops,
    is_answer,
    output_artifacts,
    parse_error,
    request_line,
    shown_request,
)
from ipython_compact.core.ledger_records import (
    REQUEST_CHARS as REQUEST_CHARS,
)
from ipython_compact.core.readable import one_line
from ipython_compact.core.requests import STATUSES, RequestBook, RequestRecord, counts
from ipython_compact.core.stance import dropped_values


@dataclass(frozen=True)
class Ledger:
    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    commands: tuple[CommandRecord, ...] = ()
    errors: tuple[ErrorRecord, ...] = ()
    requests: tuple[RequestRecord, ...] = ()
    command_total: int = 0
    command_failed: int = 0
    error_total: int = 0
    request_total: int = 0
    names: tuple[str, ...] = ()  # kernel names defined by cells that succeeded, oldest first
    artifacts: tuple[ArtifactRecord, ...] = ()  # newest last; each the current version of its artifact
    unlisted: tuple[tuple[str, int], ...] = ()  # requests per state that left the bounded lists
    # artifacts a newer version replaced, newest last (recallable, not current)
    replaced_versions: tuple[str, ...] = ()
    # the current revision of every decision, oldest first (``core.decisions``)
    decisions: tuple[DecisionRecord, ...] = ()
    # calls whose result has not been seen yet: (call_id, tool, path-or-"", code reads, code writes, code
    # names)
    _pending: tuple[tuple[str, str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = field(
        default=(), repr=False
    )

    # ---- folding ----------------------------------------------------------------------------
    def update(self, entries: Iterable[Entry]) -> Ledger:
        entries = entries if isinstance(entries, (list, tuple)) else list(entries)  # read twice
        # Ordered dicts as ordered sets: every step below is O(1), so folding a span costs what
        # the span holds (a 200k-entry span must not cost 100x a 20k one).
        read = dict.fromkeys(self.files_read)
        names = dict.fromkeys(self.names)
        modified = dict.fromkeys(self.files_modified)
        commands = list(self.commands)
        errors = {(e.type, e.message): e for e in self.errors}
        book = RequestBook(self.requests)
        artifacts = {version_key(a.text) if a.kind == "file" else a.text: a for a in self.artifacts}
        stale = dict.fromkeys(self.replaced_versions)

        def produced(entry_id: str, kind: Literal["file", "commit"], text: str) -> None:
            key = version_key(text) if kind == "file" else text
            old = artifacts.pop(key, None)
            replaced = (
                old.replaced
                if old is not None and old.text == text
                else (old.text if old is not None else "")
            )
            if old is not None and old.text != text:
                stale.pop(old.text, None)
                stale[old.text] = None
            stale.pop(text, None)  # a version written again is current again
            artifacts[key] = ArtifactRecord(entry_id, kind, text, replaced)

        pending = {
            call_id: (tool, path, reads, writes, defs)
            for call_id, tool, path, reads, writes, defs in self._pending
        }
        totals = {
            "cmd": self.command_total,
            "failed": self.command_failed,
            "err": self.error_total,
            "req": self.request_total,
        }

        def add_error(entry_id: str, text: str) -> None:
            parsed = parse_error(text)
            if parsed is None:
                first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
                if not first:
                    return
                parsed = ("Error", one_line(first, 300))
            totals["err"] += 1
            errors.pop((parsed[0], parsed[1]), None)  # the same error again moves to the end
            errors[(parsed[0], parsed[1])] = ErrorRecord(entry_id, parsed[0], parsed[1])

        # call id -> indices of its pending commands, oldest first (settle takes the newest)
        waiting: dict[str | None, list[int]] = {}
        for i, c in enumerate(commands):
            if c.status == "pending":
                waiting.setdefault(c.call_id, []).append(i)

        def settle(call_id: str | None, status: Status) -> None:
            indices = waiting.get(call_id)
            if not indices:
                return
            i = indices.pop()
            c = commands[i]
            commands[i] = CommandRecord(c.entry_id, c.tool, c.text, status, c.call_id)
            if status == "error":
                totals["failed"] += 1

        for entry in entries:
            msg = entry.message
            if msg is None:
                continue
            role = msg.get("role")
            if role == "user":
                text = text_of_content(msg.get("content"))
                # the raw text, cut: the kept requests are put in their one-line form at the end
                if text.strip() and book.user(entry.id, text, text[:RAW_CHARS]) is not None:
                    totals["req"] += 1
            elif role == "assistant":
                calls = tool_calls_of(msg)
                for call in calls:
                    tool = str(call.get("name", ""))
                    args = call.get("arguments") if isinstance(call.get("arguments"), Mapping) else {}
                    assert isinstance(args, Mapping)
                    path = _path_of(args) or ""
                    call_id = str(call.get("id") or f"{entry.id}:{tool}")
                    code = next((v for k in CODE_KEYS if isinstance(v := args.get(k), str)), "")
                    reads, writes = code_file_ops(code) if code else ((), ())
                    defined = tuple(variables_in_code(code)) if code else ()
                    pending[call_id] = (tool, path, reads, writes, defined)
                    command = _command_text(tool, args)
                    if command is not None:
                        totals["cmd"] += 1
                        waiting.setdefault(call_id, []).append(len(commands))
                        commands.append(CommandRecord(entry.id, tool, command, "pending", call_id))
                stop = msg.get("stopReason")
                if not calls and stop not in NOT_ANSWERS:  # ``is_answer``, with the calls already read
                    text = text_of_content(msg.get("content"))
                    if text.strip():
                        book.answer(text, text[:RAW_CHARS])
                if stop == "error" and isinstance(msg.get("errorMessage"), str):
                    add_error(entry.id, str(msg["errorMessage"]))
            elif role == "toolResult":
                call_id = str(msg.get("toolCallId") or "")
                tool, path, code_reads, code_writes, code_names = pending.pop(
                    call_id, (str(msg.get("toolName", "")), "", (), (), ())
                )
                is_error = bool(msg.get("isError"))
                body = text_of_content(msg.get("content"))
                if not is_error and "Traceback (most recent call last)" in body:
                    is_error = True
                settle(call_id, "error" if is_error else "ok")
                if is_error:
                    add_error(entry.id, body)
                else:
                    for name in code_names:
                        names.pop(name, None)
                        names[name] = None
                    wrote = ([path] if path and WRITE_TOOLS.match(tool) else []) + list(code_writes)
                    looked = ([path] if path and READ_TOOLS.match(tool) else []) + list(code_reads)
                    for written in wrote:
                        read.pop(written, None)
                        modified.pop(written, None)  # newest last: a file written again moves
                        modified[written] = None
                        produced(entry.id, "file", written)
                    for kind, value in output_artifacts(body):
                        produced(entry.id, kind, value)
                    for seen in looked:
                        if seen not in modified:
                            read.setdefault(seen, None)
            elif role == "bashExecution":
                command = str(msg.get("command", ""))
                exit_code = msg.get("exitCode")
                failed = isinstance(exit_code, int) and exit_code != 0
                totals["cmd"] += 1
                commands.append(
                    CommandRecord(
                        entry.id, "bash", one_line(command, COMMAND_CHARS), "error" if failed else "ok"
                    )
                )
                if failed:
                    totals["failed"] += 1
                    add_error(entry.id, str(msg.get("output", "")) or f"exit code {exit_code}")

        # bounded per state: the newest MAX_PENDING open or deferred, MAX_REQUESTS done, MAX_DROPPED
        # withdrawn; the ones that leave are counted per state, so the totals stay exact
        unlisted = dict(self.unlisted)
        limits = {"pending": MAX_PENDING, "done": MAX_REQUESTS, "dropped": MAX_DROPPED}
        taken = dict.fromkeys(limits, 0)
        newest_first: list[RequestRecord] = []
        for r in reversed(book.records()):
            group = "pending" if r.status in ("open", "deferred") else r.status
            if taken[group] < limits[group]:
                taken[group] += 1
                newest_first.append(r)
            else:
                unlisted[r.status] = unlisted.get(r.status, 0) + 1
        requests = [
            RequestRecord(r.entry_id, request_line(r.text), r.status, _note(r.note))
            for r in reversed(newest_first)
        ]
        return Ledger(
            files_read=tuple(list(read)[-MAX_FILES:]),
            files_modified=tuple(list(modified)[-MAX_FILES:]),
            commands=tuple(commands[-MAX_COMMANDS:]),
            errors=tuple(list(errors.values())[-MAX_ERRORS:]),
            requests=tuple(requests),
            artifacts=tuple(list(artifacts.values())[-MAX_ARTIFACTS:]),
            unlisted=tuple((k, v) for k, v in unlisted.items() if v),
            replaced_versions=tuple(list(stale)[-MAX_ARTIFACTS:]),
            decisions=decision_book.fold(self.decisions, entries),
            command_total=totals["cmd"],
            command_failed=totals["failed"],
            error_total=totals["err"],
            request_total=totals["req"],
            names=tuple(list(names)[-MAX_NAMES:]),
            _pending=tuple((k, t, p, r, w, d) for k, (t, p, r, w, d) in pending.items())[-MAX_COMMANDS:],
        )

    def settle_answered(self, later: Iterable[Entry]) -> Ledger:
        """Requests answered after the summarized span — in the kept tail — are settled there.

        ``update`` only sees the summarized entries; a request whose answer is kept verbatim would
        otherwise be listed as open and redone. ``later`` is what comes after the span, in order:
        its messages go through the same state machine (an answer there may also defer a request),
        and only the states of this ledger's requests are kept (the next compaction folds the
        tail itself; withdrawals in it are left to that fold, so none is applied twice)."""
        if not any(r.status in ("open", "deferred") for r in self.requests):
            return self
        book = RequestBook(self.requests)
        answered = False
        for entry in later:
            msg = entry.message
            if msg is None:
                continue
            if msg.get("role") == "user":
                text = text_of_content(msg.get("content"))
                if text.strip():
                    book.user(entry.id, text, request_line(text), withdrawals=False)
            elif is_answer(msg):
                text = text_of_content(msg.get("content"))
                book.answer(text, clip_sentences(dedupe_sentences(text), OUTCOME_CHARS))
                answered = True
        if not answered:
            return self
        return replace(self, requests=tuple(book.records()[: len(self.requests)]))

    # ---- persistence --------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "files_read": list(self.files_read),
            "files_modified": list(self.files_modified),
            "commands": [
                {
                    "entry_id": c.entry_id,
                    "tool": c.tool,
                    "text": c.text,
                    "status": c.status,
                    "call_id": c.call_id,
                }
                for c in self.commands
            ],
            "errors": [{"entry_id": e.entry_id, "type": e.type, "message": e.message} for e in self.errors],
            "requests": [r.to_json() for r in self.requests],
            "names": list(self.names),
            "artifacts": [
                {
                    "entry_id": a.entry_id,
                    "kind": a.kind,
                    "text": a.text,
                    **({"replaced": a.replaced} if a.replaced else {}),
                }
                for a in self.artifacts
            ],
            "unlisted_requests": dict(self.unlisted),
            "replaced_versions": list(self.replaced_versions),
            "decisions": [d.to_json() for d in self.decisions],
            "totals": {
                "commands": self.command_total,
                "failed": self.command_failed,
                "errors": self.error_total,
                "requests": self.request_total,
            },
            "pending": [[k, t, p, list(r), list(w), list(d)] for k, t, p, r, w, d in self._pending],
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any] | None) -> Ledger:
        """Rebuild from ``to_json`` output; raises ValueError saying which field is malformed."""
        if not obj:
            return Ledger()
        try:
            totals = obj.get("totals") or {}
            return Ledger(
                files_read=tuple(str(p) for p in obj.get("files_read") or []),
                files_modified=tuple(str(p) for p in obj.get("files_modified") or []),
                commands=tuple(
                    CommandRecord(
                        str(c["entry_id"]), str(c["tool"]), str(c["text"]), c["status"], c.get("call_id")
                    )
                    for c in obj.get("commands") or []
                ),
                errors=tuple(
                    ErrorRecord(str(e["entry_id"]), str(e["type"]), str(e["message"]))
                    for e in obj.get("errors") or []
                ),
                requests=tuple(RequestRecord.from_json(r) for r in obj.get("requests") or []),
                artifacts=tuple(
                    ArtifactRecord(
                        str(a["entry_id"]), a["kind"], str(a["text"]), str(a.get("replaced") or "")
                    )
                    for a in obj.get("artifacts") or []
                ),
                unlisted=tuple(
                    (str(k), int(v))
                    for k, v in (obj.get("unlisted_requests") or {}).items()
                    if str(k) in STATUSES
                ),
                replaced_versions=tuple(str(p) for p in obj.get("replaced_versions") or []),
                decisions=tuple(DecisionRecord.from_json(d) for d in obj.get("decisions") or []),
                command_total=int(totals.get("commands", 0)),
                command_failed=int(totals.get("failed", 0)),
                error_total=int(totals.get("errors", 0)),
                request_total=int(totals.get("requests", 0)),
                names=tuple(str(n) for n in obj.get("names") or []),
                _pending=tuple(
                    (str(p[0]), str(p[1]), str(p[2]), _strs(p, 3), _strs(p, 4), _strs(p, 5))
                    for p in obj.get("pending") or []
                ),
            )
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
            raise ValueError(f"ledger details are malformed: {exc!r}") from exc

    # ---- rendering ----------------------------------------------------------------------------
    def request_counts(self) -> dict[str, int]:
        """Requests per state: the listed ones plus those that left the bounded lists; ``done``
        is what the total leaves (a ledger stored before states existed listed fewer)."""
        found = counts(self.requests)
        for status, n in self.unlisted:
            found[status] = found.get(status, 0) + n
        found["done"] = max(
            found["done"], self.request_total - found["open"] - found["deferred"] - found["dropped"]
        )
        return found

    def _request_lines(self, replaced: Mapping[str, str], shown: str = "") -> list[str]:
        """Requests: counts per state, the newest done ones, every open or deferred one (the newest
        in full, older ones by recall id), the newest withdrawn ones. A request whose text states a
        rule the user replaced since says so on its line (``replaced``: old text -> entry id). A
        request whose text ``shown`` (the text before the ledger) already holds is named by id and
        state, so the handoff states each request once."""

        def history(text: str) -> str:
            by = next((entry for old, entry in replaced.items() if old in text), None)
            if by:
                return f"; what it says was replaced later (entry {by})"
            return "; what it names as dropped is replaced" if dropped_values(text) else ""

        n = self.request_counts()
        total = sum(n.values())
        states = (f"{n['done']} done, {n['open']} open") + "".join(
            f", {n[k]} {label}" for k, label in (("deferred", "deferred"), ("dropped", "withdrawn")) if n[k]
        )
        lines = [f"user requests ({total} total: {states}; done = already answered, do not redo):"]
        done = [r for r in self.requests if r.status == "done"]
        shown_done = done[-SHOW_DONE:] if SHOW_DONE > 0 else []

        def written_above(text: str) -> bool:
            return bool(shown) and (
                text in shown or shown_request(text, SHOW_REQUEST_CHARS).rstrip(" …") in shown
            )

        before_window = done[: len(done) - len(shown_done)]
        # the summary above may write out more done requests than this window: named with them
        also_above = {id(r) for r in before_window[-SHOW_DONE_IDS:] if written_above(r.text)}
        if also_above:
            shown_done = [r for r in before_window if id(r) in also_above] + shown_done
            before_window = [r for r in before_window if id(r) not in also_above]
        earlier = n["done"] - len(shown_done)
        if earlier > 0:
            older = before_window[-SHOW_DONE_IDS:]
            ids = (
                (f" (newest: entries {', '.join(r.entry_id for r in older)}; recall by id)")
                if older
                else " (recall from the log)"
            )
            lines.append(f"- [x] {earlier} earlier request(s) done{ids}")
        same: list[list[RequestRecord]] = []  # a request repeated verbatim is one line
        for r in shown_done:
            if same and same[-1][0].text == r.text:
                same[-1].append(r)
            else:
                same.append([r])

        above = [g for g in same if written_above(g[0].text)]
        if above:
            same = [g for g in same if g not in above]
            plain = [g for g in above if not history(g[0].text)]
            if plain:
                lines.append(
                    f"- [x] {len(plain)} done, written out in the summary above: entries "
                    f"{', '.join(r.entry_id for g in plain for r in g)}"
                )
            lines.extend(  # what it says was replaced since: the mark stays, the text is not repeated
                f"- [x] done, written out above  (entries {', '.join(r.entry_id for r in g)}"
                f"{history(g[0].text)})"
                for g in above
                if history(g[0].text)
            )
        lines.extend(
            f"- [x] {shown_request(g[0].text, SHOW_REQUEST_CHARS)}  (entry "
            f"{g[0].entry_id}{history(g[0].text)})"
            if len(g) == 1
            else f"- [x] {shown_request(g[0].text, SHOW_REQUEST_CHARS)}  (asked {len(g)} times: entries "
            f"{', '.join(r.entry_id for r in g)}{history(g[0].text)})"
            for g in same
        )
        for r in [r for r in self.requests if r.status == "dropped"][-SHOW_DROPPED:]:
            what = (
                "withdrawn, written out above"
                if written_above(r.text)
                else (f"withdrawn: {shown_request(r.text, SHOW_REQUEST_CHARS)}")
            )
            lines.append(f"- [-] {what}  (entry {r.entry_id}; {clip_sentences(r.note, 80)})")
        # the newest deferred and open ones in full (a promise made is shown as long as it stands), older by
        # id
        pending = [r for r in self.requests if r.status in ("open", "deferred")]
        full = {
            id(r)
            for r in [r for r in pending if r.status == "deferred"][-SHOW_OPEN:]
            + [r for r in pending if r.status == "open"][-SHOW_OPEN:]
        }
        by_id = [r for r in pending if id(r) not in full]
        if by_id:
            lines.append(
                f"- [ ] {len(by_id)} older open or deferred request(s): entries "
                f"{', '.join(r.entry_id for r in by_id)} (recall by id)"
            )
        for r in [r for r in pending if id(r) in full]:
            why = f"; deferred: {clip_sentences(r.note, 120)}" if r.status == "deferred" else ""
            if written_above(r.text):
                # the summary (or an anchor) already writes it out: its state and id, not its text again
                lines.append(f"- [ ] {r.status}, written out above  (entry {r.entry_id}{why})")
            else:
                lines.append(f"- [ ] {r.text}  (entry {r.entry_id}{why})")
        gone = sum(v for k, v in self.unlisted if k in ("open", "deferred"))
        if gone:
            lines.append(f"- [ ] {gone} more open request(s) older than these (not listed; recall by query)")
        return lines

    def _modified_keys(self) -> set[str]:
        return {version_key(p) for p in self.files_modified}

    def _files_line(self) -> str:
        """Files modified, newest first, one per artifact: an older version of a file leaves the
        line (the newer one says it replaced it)."""
        replaced = {a.text: a.replaced for a in self.artifacts if a.kind == "file" and a.replaced}
        seen: set[str] = set()
        current: list[str] = []
        for path in reversed(self.files_modified):
            key = version_key(path)
            if key in seen:
                continue
            seen.add(key)
            current.append(
                f"{path} (replaced {replaced[path]})"
                if replaced.get(path) and replaced[path] != path
                else path
            )
        shown = current[:SHOW_FILES]
        return ", ".join(shown) + (
            f" (+{len(current) - len(shown)} older, not listed)" if len(current) > len(shown) else ""
        )

    def render(self, replaced: Mapping[str, str] | None = None, shown: str = "") -> str:
        """The ``<ledger>`` machine block the model reads after compaction.

        Every section has its own budget (``SHOW_*``) so the block reaches a fixed size early in a
        session and stays there: open requests verbatim, the newest done ones verbatim, older done
        ones as a count plus the newest ids (recallable); a failed attempt followed by the same
        command succeeding is one line; the newest names, files, commands and errors, with totals.
        ``replaced`` maps texts the user replaced since (a revised rule) to the replacing entry.
        ``shown`` is the checkpoint text before the block (the narrative): a done request it
        already writes out is named by entry id only, and a decision it states is left out, so
        the handoff states each request and each decision once.
        """
        lines: list[str] = decision_book.shown_lines(self.decisions, shown)
        if self.requests or self.request_total:
            # a request that stated a decision revised since says so (as one that stated a rule)
            revised = {old: d.entry_id for d in self.decisions for old, _ in d.earlier}
            lines.extend(self._request_lines({**revised, **(replaced or {})}, shown))
        if self.names:
            lines.append(
                "kernel names defined by cells that succeeded (still in the kernel; reuse them): "
                "" + _newest(self.names, SHOW_NAMES)
            )
        if self.files_modified:
            lines.append("files modified: " + self._files_line())  # newest first
        named = [
            a
            for a in reversed(self.artifacts)
            if a.text not in self.files_modified and version_key(a.text) not in self._modified_keys()
        ]
        if named:
            more = (
                (f" (+{len(named) - SHOW_ARTIFACTS} older, not listed)")
                if len(named) > SHOW_ARTIFACTS
                else ""
            )
            lines.append(
                "artifacts named by outputs (newest first): "
                "" + ", ".join(_artifact_text(a) for a in named[:SHOW_ARTIFACTS]) + more
            )
        if self.files_read:
            lines.append("files read: " + _newest(self.files_read, SHOW_FILES))
        if self.commands:
            merged: list[tuple[CommandRecord, int]] = []  # (record, failed attempts just before it)
            for c in self.commands:
                if (
                    merged
                    and c.status == "ok"
                    and merged[-1][0].status == "error"
                    and (merged[-1][0].tool, merged[-1][0].text) == (c.tool, c.text)
                ):
                    merged[-1] = (c, merged[-1][1] + 1)
                else:
                    merged.append((c, 0))
            last = merged[-SHOW_COMMANDS:]
            lines.append(
                f"commands and cells run ({self.command_total} total, {self.command_failed} failed; "
                f"last {len(last)}):"
            )
            lines.extend(
                f"- {c.status}{f' after {n} failed attempt(s)' if n else ''}: {c.tool}: {c.text}  (entry "
                f"{c.entry_id}){replaced_mark(c.text)}"  # a sed s/old/new/: the old value is history
                for c, n in last
            )
        if self.errors:
            shown_errors = self.errors[-SHOW_ERRORS:]
            lines.append(f"errors ({self.error_total} total; last {len(shown_errors)} distinct):")
            lines.extend(f"- {e.type}: {e.message}  (entry {e.entry_id})" for e in shown_errors)
        return render_block("ledger", lines)


def _artifact_text(a: ArtifactRecord) -> str:
    what = f"commit {a.text}" if a.kind == "commit" else a.text
    return f"{what} (entry {a.entry_id}{f'; replaced {a.replaced}' if a.replaced else ''})"


def _newest(items: tuple[str, ...], limit: int) -> str:
    """The newest ``limit`` items, comma-separated, with a count of the older ones left out."""
    shown = items[-limit:]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" (+{more} older, not listed)" if more else "")
