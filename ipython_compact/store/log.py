"""The log: appending entries (one transaction per call) and reading them back by id, kind or text.

What must hold:
- Entry rows are never updated or deleted (triggers enforce it); every append, batch and import
  lands whole or not at all.
- Each entry stores both token estimates (``core.tokens.estimate_entry_tokens_both``) taken at append,
  so thresholds and cut points never re-scan history, and the derived tree columns
  (depth, ``context_head``, ``mark``, ``compactions``) that ``integrity.verify`` recomputes.
- ``hash`` = sha256(parent hash + canonical JSON of the entry); ``chain`` = sha256(previous chain
  of the session + hash).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, cast

from ipython_compact.core.entries import COMPACTION, KINDS, Entry, canonical_json, entry_text
from ipython_compact.core.settings import ESTIMATORS, Estimator
from ipython_compact.core.tokens import estimate_entry_tokens_both
from ipython_compact.store import process
from ipython_compact.store.database import ENTRY_COLUMNS, SessionRow, check_session_name, row_entry
from ipython_compact.store.dialect import Conn
from ipython_compact.store.errors import (
    DatabaseLockedError,
    InvalidEntryError,
    LeafMovedError,
    PartialImportError,
    SessionExistsError,
    StoreError,
    UnknownEntryError,
)
from ipython_compact.store.json_text import data_text_utf8, storable_text
from ipython_compact.store.migrations import MARK_KINDS
from ipython_compact.store.process import Owner
from ipython_compact.store.records import ANY_LEAF, LEAF, SearchHit, _Default
from ipython_compact.store.tree import Batch, ParentInfo, Tree


def entry_hash(parent_hash: str, entry: Entry) -> str:
    """The tree hash: binds an entry's content to its parent's hash."""
    payload = parent_hash + "\n" + canonical_json(entry.to_json())
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _orjson() -> tuple[Callable[[bytes], Any], Callable[[Any], bytes]] | tuple[None, None]:
    try:
        import orjson  # optional at run time: a missing wheel falls back to the stdlib
    except ImportError:  # pragma: no cover - a dependency, absent only in odd installs
        return None, None
    return orjson.loads, orjson.dumps


fast_json_loads, _fast_json_dumps = _orjson()
"""orjson's ``loads`` (3-4x the stdlib's speed), or None. It reads an integer past 64 bits as a
float where the stdlib keeps it exact: callers send text with ``has_long_digit_run`` to the stdlib."""
_DIGITS_AS_NINE = bytes(0x39 if 0x30 <= i <= 0x39 else i for i in range(256))
_NINETEEN_NINES = b"9" * 19


def has_long_digit_run(raw: bytes) -> bool:
    """A run of 19+ ASCII digits that is not the fraction of a decimal (translate + ``find``: 4x
    faster than a regex). Fraction digits (after a ``.``) only make a float, which orjson reads
    to the same double as the stdlib; an integer part or an exponent that long it does not."""
    digits = raw.translate(_DIGITS_AS_NINE)
    at = digits.find(_NINETEEN_NINES)
    while at >= 0:  # ``find`` gives the leftmost match, so ``at`` starts a run
        if at == 0 or raw[at - 1] != 0x2E:  # not after "."
            return True
        end = at + len(_NINETEEN_NINES)
        while end < len(digits) and digits[end] == 0x39:
            end += 1
        at = digits.find(_NINETEEN_NINES, end)
    return False


def read_back(data_text: str) -> Any:
    """``json.loads(data_text)`` for a ``stored_data_text``, by orjson where it reads the same
    (several times faster on an import's long texts); a run of 19+ digits, or anything orjson
    refuses (a lone surrogate), takes the stdlib."""
    if fast_json_loads is not None:
        try:
            raw = data_text.encode("utf-8")
            if not has_long_digit_run(raw):
                return fast_json_loads(raw)
        except ValueError:  # UnicodeEncodeError included
            pass
    return json.loads(data_text)


def _json_string(text: str) -> str:
    """``json.dumps(text, ensure_ascii=False)``; ids, kinds and timestamps are plain ASCII, which
    needs no escaping and no encoder call."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return json.dumps(text, ensure_ascii=False)


def stored_entry_hash(parent_hash: str, entry: Entry, data_text: str, data_utf8: bytes | None = None) -> str:
    """``entry_hash(parent_hash, entry)`` from the entry's ``stored_data_text``, which must be the
    canonical JSON of ``entry.data`` (as it is for a stored entry: its data is that text read back).

    Why: an import serialized every entry's data twice, once to store it and once to hash it.
    The five keys of ``Entry.to_json`` in sorted order, so the text is ``canonical_json``'s.
    ``data_utf8``, the text's UTF-8 bytes when the caller has them, is hashed as it is."""
    parent = "null" if entry.parent_id is None else _json_string(entry.parent_id)
    head = f'{parent_hash}\n{{"data":'
    tail = (
        f',"id":{_json_string(entry.id)},"kind":{_json_string(entry.kind)},"parent_id":{parent},'
        f'"timestamp":{_json_string(entry.timestamp)}}}'
    )
    if data_utf8 is None:
        return hashlib.sha256((head + data_text + tail).encode("utf-8")).hexdigest()
    digest = hashlib.sha256(head.encode("utf-8"))
    digest.update(data_utf8)
    digest.update(tail.encode("utf-8"))
    return digest.hexdigest()


def chain_hash(previous_chain: str, hash_: str) -> str:
    """The append-order hash: binds an entry to everything appended to its session before it."""
    return hashlib.sha256((previous_chain + "\n" + hash_).encode("utf-8")).hexdigest()


def stored_data_text(data: Mapping[str, Any]) -> str:
    """The exact text an entry's data is stored as (sorted keys, no spaces, no NaN)."""
    return json.dumps(dict(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_key(kind: str, timestamp: str, data_text: str) -> bytes:
    """What makes two entries the same content whatever their ids and parents: kind, time, data."""
    return hashlib.blake2b(f"{kind}\n{timestamp}\n{data_text}".encode(), digest_size=16).digest()


class _Rows:
    """Rows already fetched, read like a cursor."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


class _LockedReads:
    """A ``Conn`` for the thread that prepares an import's next batch while a writer thread
    stores the last one: each statement runs whole under the database's lock (``Database.read``)
    and its rows are fetched before the lock is let go, so the two threads never interleave on
    one connection. Only reads: entries are never changed once stored, so a parent read outside
    the writing transaction is the parent that transaction sees."""

    def __init__(self, db: Any) -> None:
        self._db = db

    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = (), /) -> _Rows:
        with self._db.read() as conn:
            return _Rows(list(conn.execute(sql, parameters)))


_INSERT_ENTRY = (
    "INSERT INTO entries (session_id, id, parent_id, kind, timestamp, data, tokens_density, tokens_chars4,"
    " depth, context_head, hash, chain, mark, compactions, writer)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

_ENTRY_FIELDS = _INSERT_ENTRY.count("?")


@lru_cache(maxsize=8)
def _insert_entries(count: int) -> str:
    """``_INSERT_ENTRY`` for ``count`` rows in one statement (the same few sizes recur, so the
    text and the connection's prepared statement are made once)."""
    head, _, values = _INSERT_ENTRY.partition(" VALUES ")
    return f"{head} VALUES {','.join([values] * count)}"


_PreparedRow = list[Any]
"""An entry row in ``_INSERT_ENTRY``'s column order; session id and chain are set at write time."""


IMPORT_BATCH = 2000
"""Entries per transaction of a large import: short enough that other writers (a kernel
appending after a cell, busy timeout 5 s) get the lock in between."""
IMPORT_PAUSE = 0.05
"""Seconds between an import's batches while another connection has the database open. SQLite's
busy handler polls a waiting writer every few to 100 ms; without a gap the importer would take
the lock straight back and starve it. With nobody else there (``Database.others_may_write``) no
writer can be waiting, and the batches follow each other at once."""
IMPORT_WRITER = "ipython-compact-import-writer"
"""Name prefix of the thread that stores an import's batches (``EntryLog.import_batched``)."""
IMPORT_OTHERS_EVERY = 0.25
"""Seconds between an import's looks for other connections (``Database.others_may_write`` reads
``/proc/locks``, several milliseconds on a busy host): a writer that opens the file meanwhile waits
at most this long, and a batch, before the import starts pausing for it."""
FTS_PENDING = "fts_pending"
"""``session_status`` key of a session whose imported entries are not in the full-text index yet:
{"ranges": [[first_seq, last_seq], ...]}. Written in the transaction that inserts the rows;
``index_pending`` (run by every search first) indexes them and removes the key."""
FTS_CHUNK = 5000
"""Entries ``index_pending`` indexes per transaction."""
IMPORT_MARKER = "import_in_progress"
"""``session_status`` key held while a batched import runs: {owner, total}. A second import
into the session waits for it to go (or for its owner to end)."""


@dataclass(frozen=True)
class Existing:
    """What the target session holds, read inside the import's first transaction."""

    created: bool
    """The session did not exist: this import creates it."""
    leaf: str | None
    ids: frozenset[str]
    content: dict[bytes, str]
    """``content_key`` → id of an entry already in the session with that content."""
    keys: dict[str, bytes]
    """id → ``content_key`` of every entry already in the session."""


@dataclass(frozen=True)
class ImportPlan:
    entries: list[Entry]
    leaf_id: str | None
    """The new leaf (one of ``entries``), or None to leave the leaf where it is."""
    json_values: bool = False
    """Every entry's data holds only what JSON reading makes (dicts, lists, strings, ints, finite
    floats, booleans, None), as a file read by ``store.importers`` does: its stored text is then
    written by ``json_text.data_text`` and not read back (the same values would come back)."""


@dataclass(frozen=True)
class ImportWritten:
    entries: list[Entry]
    created: bool
    batches: int
    pauses: int = 0
    """Gaps left between batches for other writers (none when nobody else had the database open)."""


class _ImportRunning(Exception):
    def __init__(self, owner: Owner) -> None:
        super().__init__(owner.describe())
        self.owner = owner


class EntryLog(Tree):
    """Appends and entry reads over one database (the tree answers ancestry questions).

    A part of ``SessionStore`` (its base class): the methods here are the store's own, defined
    once; ``self.db`` is the store's ``Database``."""

    def append(
        self,
        session: str,
        kind: str,
        data: Mapping[str, Any],
        *,
        parent_id: str | _Default | None = LEAF,
        timestamp: str | None = None,
        entry_id: str | None = None,
        move_leaf: bool = True,
        expect_leaf: str | _Default | None = ANY_LEAF,
    ) -> Entry:
        """Append one entry (under the leaf by default) and, by default, make it the leaf."""
        return self.append_many(
            session,
            [(kind, data)],
            parent_id=parent_id,
            timestamp=timestamp,
            entry_ids=[entry_id],
            move_leaf=move_leaf,
            expect_leaf=expect_leaf,
        )[0]

    def append_many(
        self,
        session: str,
        items: Iterable[tuple[str, Mapping[str, Any]]],
        *,
        parent_id: str | _Default | None = LEAF,
        timestamp: str | None = None,
        entry_ids: Sequence[str | None] | None = None,
        move_leaf: bool = True,
        expect_leaf: str | _Default | None = ANY_LEAF,
    ) -> list[Entry]:
        """Append ``(kind, data)`` items as a chain in one transaction: each is the child of the
        one before, the first hangs under ``parent_id`` (the leaf by default).

        ``expect_leaf`` makes the append a compare and swap: it happens only if the session's leaf
        is still that id (None: still empty/unset), checked inside the write transaction, so of
        two writers that planned against the same leaf only the first lands; the other gets
        ``LeafMovedError`` and nothing is written."""
        items = list(items)
        with self.db.write() as conn:
            row = self.db.session_row(conn, session)
            if expect_leaf is not ANY_LEAF and expect_leaf != row.leaf:
                raise LeafMovedError(
                    f"session {session!r} moved: its leaf is {row.leaf!r}, not {expect_leaf!r} as planned; "
                    f"nothing was written",
                    path=self.db.path,
                    expected=None if isinstance(expect_leaf, _Default) else expect_leaf,
                    actual=row.leaf,
                )
            return self.append_in(
                conn,
                row,
                items,
                parent_id=parent_id,
                timestamp=timestamp,
                entry_ids=entry_ids,
                move_leaf=move_leaf,
            )

    def append_in(
        self,
        conn: Conn,
        row: SessionRow,
        items: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        parent_id: str | _Default | None = LEAF,
        timestamp: str | None = None,
        entry_ids: Sequence[str | None] | None = None,
        move_leaf: bool = True,
    ) -> list[Entry]:
        """``append_many`` inside a write transaction the caller holds (``row`` read in it), so
        another write (settling an abandoned compaction) and its log entry land together."""
        sid, leaf, count, tip = row.sid, row.leaf, row.count, row.tip
        parent = leaf if parent_id is LEAF else parent_id
        assert not isinstance(parent, _Default)
        entries: list[Entry] = []
        cache = Batch()
        when = timestamp or self.db.clock()
        for i, (kind, data) in enumerate(items):
            wanted = entry_ids[i] if entry_ids is not None and i < len(entry_ids) else None
            entry = Entry(
                id=wanted or self.db.new_id(), parent_id=parent, kind=kind, timestamp=when, data=dict(data)
            )
            stored, tip = self._insert(conn, sid, entry, tip, cache, fresh_id=not wanted)
            entries.append(stored)
            parent = stored.id
        self._finish(
            conn, sid, count + len(entries), tip, entries[-1].id if entries and move_leaf else None, cache
        )
        return entries

    def import_entries(
        self,
        session: str,
        entries: Sequence[Entry],
        *,
        leaf_id: str | _Default | None = LEAF,
        create: bool = False,
    ) -> list[Entry]:
        """Append entries keeping their ids, timestamps and parent links (one transaction).

        Entries whose ``parent_id`` is None hang under the session's current leaf, so importing
        into a non-empty session appends after it. Parents must come before their children.
        ``leaf_id`` picks the new leaf among the imported entries (default: the last one; None:
        leave the leaf where it is). ``create`` makes the session in the same transaction, so a
        failed import leaves no empty session behind.
        """
        with self.db.write() as conn:
            if create:
                check_session_name(session, self.db.path)
                if (
                    conn.execute(
                        "INSERT INTO sessions (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING "
                        "RETURNING session_id",
                        (session, self.db.clock()),
                    ).fetchone()
                    is None
                ):
                    raise SessionExistsError(
                        f"session {session!r} already exists in {self.db.path}", path=self.db.path
                    )
            row = self.db.session_row(conn, session)
            sid, leaf, count, tip = row.sid, row.leaf, row.count, row.tip
            cache = Batch()
            stored_entries: list[Entry] = []
            for entry in entries:
                if entry.parent_id is None and leaf is not None:
                    entry = Entry(entry.id, leaf, entry.kind, entry.timestamp, entry.data)
                stored, tip = self._insert(conn, sid, entry, tip, cache)
                stored_entries.append(stored)
            if leaf_id is LEAF:
                new_leaf = stored_entries[-1].id if stored_entries else None
            else:
                new_leaf = leaf_id if isinstance(leaf_id, str) else None
                if new_leaf is not None and new_leaf not in cache:
                    raise InvalidEntryError(
                        f"import leaf {new_leaf!r} is not among the imported entries", path=self.db.path
                    )
            self._finish(conn, sid, count + len(stored_entries), tip, new_leaf, cache)
        return stored_entries

    def import_batched(
        self,
        session: str,
        plan: Callable[[Existing], ImportPlan],
        *,
        batch_size: int = IMPORT_BATCH,
        wait: float = 60.0,
        progress: Callable[[int, int], None] | None = None,
    ) -> ImportWritten:
        """Create the session if missing, let ``plan`` decide what to write from what the session
        holds, and write it ``batch_size`` entries per transaction.

        ``progress(written, total)`` is told after each committed transaction (on the calling
        thread; what it raises ends the import as an interrupt would).

        What must hold:
        - Creating, reading the existing entries, ``plan`` and the first batch share one
          transaction: of two imports racing to create a session, the second waits and then sees
          the first's entries (``plan`` may refuse duplicates; nothing is written then).
        - Roots of the import hang under the leaf the first transaction saw; the leaf moves to
          ``plan``'s leaf only with the last batch, so nobody's view shows half an import.
        - While later batches remain, ``IMPORT_MARKER`` names this process; another import into
          the session waits up to ``wait`` seconds for it (an ended owner's marker is ignored).
        - A batch that fails after others landed raises ``PartialImportError`` saying exactly what
          was written (entries, last id, the leaf); the first failing raises as it is.
        """
        # An import builds rows, texts and hashes: values without cycles, so the cyclic collector
        # finds nothing, and its passes over a heap holding the whole transcript were a third of
        # the time of a 100,000-entry import. Paused only for the import (``load_transcript`` does
        # the same while it reads).
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            return self._import_batched(session, plan, batch_size=batch_size, wait=wait, progress=progress)
        finally:
            if paused:
                gc.enable()

    def _import_batched(
        self,
        session: str,
        plan: Callable[[Existing], ImportPlan],
        *,
        batch_size: int,
        wait: float,
        progress: Callable[[int, int], None] | None,
    ) -> ImportWritten:
        me = process.current()
        deadline = time.monotonic() + wait
        while True:
            try:
                with self.db.write() as conn:
                    check_session_name(session, self.db.path)
                    created = (
                        conn.execute(
                            "INSERT INTO sessions (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO "
                            "NOTHING "
                            "RETURNING session_id",
                            (session, self.db.clock()),
                        ).fetchone()
                        is not None
                    )
                    row = self.db.session_row(conn, session)
                    if not created:
                        self._check_no_import_running(conn, row.sid)
                    planned = plan(self._existing(conn, row, created))
                    entries = [
                        Entry(e.id, row.leaf, e.kind, e.timestamp, e.data)
                        if e.parent_id is None and row.leaf
                        else e
                        for e in planned.entries
                    ]
                    if planned.leaf_id is not None and planned.leaf_id not in {e.id for e in entries}:
                        raise InvalidEntryError(
                            f"import leaf {planned.leaf_id!r} is not among the imported entries",
                            path=self.db.path,
                        )
                    cache = Batch()
                    more = len(entries) > batch_size
                    json_values = planned.json_values
                    self._write_batch(
                        conn, row, entries[:batch_size], None if more else planned.leaf_id, cache, json_values
                    )
                    if more:
                        self.db.set_status(
                            conn, row.sid, IMPORT_MARKER, {"owner": me.to_json(), "total": len(entries)}
                        )
                break
            except _ImportRunning as running:
                if time.monotonic() > deadline:
                    raise DatabaseLockedError(
                        f"{self.db.path}: another import into session {session!r} is still running "
                        f"({running.owner.describe()}) after {wait:g} s; nothing was "
                        f"written",
                        path=self.db.path,
                    ) from None
                time.sleep(0.1)
            except DatabaseLockedError:
                # another import's first transaction (creation and up to a whole batch) holds the
                # write lock for longer than the busy timeout on a loaded machine: the import waits
                # for it as for a running import's marker, up to ``wait``
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        written, batches, pauses = min(len(entries), batch_size), 1, 0
        # Later batches overlap: batch k+1 is prepared here (Python: texts, estimates, hashes)
        # while a writer thread stores batch k (SQLite, which lets go of the GIL). One write at a
        # time, in order; ``written`` counts only committed batches. Leaving the executor, on any
        # exception too, waits for the write in flight: no write goes on after this call.
        # start-up: only an import of more than one batch needs the writer thread
        from concurrent.futures import Future, ThreadPoolExecutor

        reads = _LockedReads(self.db)
        in_flight: tuple[Future[None], int] | None = None
        next_look = time.monotonic()

        def settle() -> None:
            nonlocal in_flight, written, batches
            if in_flight is None:
                return
            future, count = in_flight
            in_flight = None
            future.result()
            written += count
            batches += 1
            if progress is not None:
                progress(written, len(entries))

        try:
            with ThreadPoolExecutor(1, thread_name_prefix=IMPORT_WRITER) as writer:
                if progress is not None:
                    progress(written, len(entries))
                for start in range(batch_size, len(entries), batch_size):
                    chunk = entries[start : start + batch_size]
                    last = start + batch_size >= len(entries)
                    leaf = planned.leaf_id if last else None
                    rows = self._prepare_rows(reads, row.sid, chunk, cache, json_values=json_values)
                    settle()
                    now = time.monotonic()
                    if now >= next_look:
                        next_look = now + IMPORT_OTHERS_EVERY
                        if self.db.others_may_write():
                            time.sleep(IMPORT_PAUSE)  # let a waiting writer in
                            pauses += 1
                            next_look = now  # someone is there: look again before the next batch
                    write = partial(self._later_rows, session, rows, leaf, cache, last)
                    future = writer.submit(self._retry_locked, write, deadline=time.monotonic() + wait)
                    in_flight = (future, len(chunk))
                settle()
        except BaseException as exc:
            with contextlib.suppress(StoreError):
                settle()  # the write that was in flight when something else failed: count it if it landed
            # the marker goes whatever ended the import (an interrupt too): nobody waits for it
            with contextlib.suppress(Exception), self.db.write() as conn:
                conn.execute(
                    "DELETE FROM session_status WHERE session_id = ? AND key = ?", (row.sid, IMPORT_MARKER)
                )
            if not isinstance(exc, StoreError):
                raise
            leaf = self.leaf(session)
            last_id = entries[written - 1].id
            raise PartialImportError(
                f"{self.db.path}: the import into session {session!r} stopped after {written:,} of "
                f"{len(entries):,} "
                f"entries ({batches} transaction(s) committed, the last written entry is {last_id!r}); the "
                f"session's "
                f"leaf is still {leaf!r}, so the written entries are not on its current branch. Cause: {exc}",
                path=self.db.path,
                written=written,
                total=len(entries),
                last_id=last_id,
                leaf=leaf,
            ) from exc
        return ImportWritten(entries, created, batches, pauses)

    def _check_no_import_running(self, conn: Conn, sid: int) -> None:
        row = conn.execute(
            "SELECT value FROM session_status WHERE session_id = ? AND key = ?", (sid, IMPORT_MARKER)
        ).fetchone()
        if row is None:
            return
        owner = Owner.from_json(json.loads(row[0]).get("owner"))
        if owner is None or self.db.owner_ended(conn, owner):  # killed mid-import: its marker means nothing
            conn.execute("DELETE FROM session_status WHERE session_id = ? AND key = ?", (sid, IMPORT_MARKER))
            return
        raise _ImportRunning(owner)

    def _existing(self, conn: Conn, row: SessionRow, created: bool) -> Existing:
        content: dict[bytes, str] = {}
        keys: dict[str, bytes] = {}
        if not created:
            for entry_id, kind, timestamp, data in conn.execute(
                "SELECT id, kind, timestamp, data FROM entries WHERE session_id = ? ORDER BY seq", (row.sid,)
            ):
                key = keys[entry_id] = content_key(kind, timestamp, data)
                content.setdefault(key, entry_id)
        return Existing(created, row.leaf, frozenset(keys), content, keys)

    def _write_batch(
        self,
        conn: Conn,
        row: SessionRow,
        entries: Sequence[Entry],
        leaf: str | None,
        cache: Batch,
        json_values: bool,
    ) -> None:
        rows = self._prepare_rows(conn, row.sid, entries, cache, json_values=json_values)
        self._write_rows(conn, row, rows, leaf, cache)

    def _later_rows(
        self, session: str, rows: list[_PreparedRow], leaf: str | None, cache: Batch, last: bool
    ) -> None:
        """Store an import's later batch, prepared outside this transaction (``_prepare_rows``):
        its chain and counts follow the session row as it is now (other writers may have moved
        count and tip)."""
        with self.db.write() as conn:
            row = self.db.session_row(conn, session)
            self._write_rows(conn, row, rows, leaf, cache)
            if last:
                conn.execute(
                    "DELETE FROM session_status WHERE session_id = ? AND key = ?", (row.sid, IMPORT_MARKER)
                )

    @staticmethod
    def _retry_locked(write: Callable[[], None], *, deadline: float) -> None:
        """Run ``write``; while the database stays locked, retry with backoff until ``deadline``."""
        delay = 0.05
        while True:
            try:
                write()
                return
            except DatabaseLockedError:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _finish(self, conn: Conn, sid: int, count: int, tip: str, leaf: str | None, batch: Batch) -> None:
        """Record the batch on the session row: count, chain tip, newest seq and (maybe) the leaf."""
        if not batch.last_seq:
            if leaf is not None:
                conn.execute("UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (leaf, sid))
            return
        conn.execute(
            "UPDATE sessions SET entry_count = ?, chain_tip = ?, last_seq = ?, leaf_id = COALESCE(?, "
            "leaf_id) "
            "WHERE session_id = ?",
            (count, tip, batch.last_seq, leaf, sid),
        )

    def _checked(self, entry: Entry, *, json_values: bool = False) -> tuple[Entry, str, bytes | None]:
        """The entry as it will be stored (its data read back from its stored text), that text and
        (when at hand) its UTF-8 bytes; ``InvalidEntryError`` naming the entry for a bad id, kind,
        timestamp or data.

        ``json_values``: the data holds only what JSON reading makes (an import's), so its stored
        text is written by ``json_text.data_text`` and reading it back would give the same values."""
        if not isinstance(entry.id, str) or not entry.id:
            raise InvalidEntryError(f"entry {entry.id!r}: id must be a non-empty string", path=self.db.path)
        if entry.kind not in KINDS:
            raise InvalidEntryError(
                f"entry {entry.id!r}: unknown kind {entry.kind!r} "
                f"(expected one of {', '.join(sorted(KINDS))})",
                path=self.db.path,
            )
        if not isinstance(entry.timestamp, str) or not entry.timestamp:
            raise InvalidEntryError(
                f"entry {entry.id!r}: timestamp must be a non-empty string", path=self.db.path
            )
        if json_values:
            return (entry, *data_text_utf8(entry.data))
        try:
            text = storable_text(stored_data_text(entry.data), f"entry {entry.id!r}")
        except (TypeError, ValueError) as exc:
            raise InvalidEntryError(
                f"entry {entry.id!r}: data is not JSON-serialisable ({exc})", path=self.db.path
            ) from exc
        return Entry(entry.id, entry.parent_id, entry.kind, entry.timestamp, read_back(text)), text, None

    def _derived(self, conn: Conn, sid: int, stored: Entry, cache: Batch) -> ParentInfo:
        """The derived columns of ``stored`` (depth, context head, parent hash, mark before this
        entry, compactions), after checking its parent and, for a compaction, its first kept entry."""
        where = f"entry {stored.id!r}"
        if stored.parent_id is None:
            depth, head, parent_hash, mark, compactions = 0, None, "", None, 0
        else:
            parent = self.parent_info(conn, sid, stored.parent_id, cache)
            if parent is None:
                raise InvalidEntryError(
                    f"{where}: parent {stored.parent_id!r} does not exist in the session", path=self.db.path
                )
            depth, head, parent_hash, mark = parent.depth + 1, parent.context_head, parent.hash, parent.mark
            compactions = parent.compactions
        if stored.kind == COMPACTION:
            compactions += 1
            first_kept = stored.data.get("first_kept_entry_id")
            if not isinstance(first_kept, str) or not first_kept:
                raise InvalidEntryError(
                    f"{where}: a compaction needs data.first_kept_entry_id", path=self.db.path
                )
            if not self.is_ancestor_or_self(conn, sid, first_kept, stored.parent_id, cache):
                raise InvalidEntryError(
                    f"{where}: first_kept_entry_id {first_kept!r} is not on the path to this compaction",
                    path=self.db.path,
                )
            head = first_kept
        return ParentInfo(depth, head, parent_hash, mark, compactions)

    def _insert(
        self, conn: Conn, sid: int, entry: Entry, tip: str, cache: Batch, *, fresh_id: bool = False
    ) -> tuple[Entry, str]:
        """Insert one entry inside the caller's transaction.

        A taken id is found by the insert itself (``ON CONFLICT DO NOTHING`` on the unique
        ``(session_id, id)``, no lookup first: one round trip per entry less on a server). A
        taken id the caller chose is refused; a ``fresh_id`` (made by ``new_id``) is replaced by
        another, up to 100 times, and the entry's hash follows its id."""
        stored, data_text_, _ = self._checked(entry)
        taken = f"entry {entry.id!r}: an entry with this id already exists in the session"
        if not fresh_id and entry.id in cache:
            raise InvalidEntryError(taken, path=self.db.path)
        derived = self._derived(conn, sid, stored, cache)
        estimates = estimate_entry_tokens_both(stored, _fast_json_dumps)
        for _ in range(100):
            row, info = self._entry_row(sid, stored, data_text_, None, derived, estimates)
            new_tip = row[11] = chain_hash(tip, info.hash)
            seq = self._insert_row(conn, tuple(row))
            if seq is not None:
                break
            if not fresh_id:
                raise InvalidEntryError(taken, path=self.db.path)
            stored = Entry(self.db.new_id(), stored.parent_id, stored.kind, stored.timestamp, stored.data)
        else:
            raise StoreError(
                f"{self.db.path}: could not find a free entry id after 100 tries", path=self.db.path
            )
        text = entry_text(stored)
        if text:
            conn.execute(self.db.dialect.fts_insert, (seq, self.db.dialect.fts_text(text)))
        cache.last_seq = int(seq)
        cache.info[stored.id] = info
        cache.parents[stored.id] = stored.parent_id
        return stored, new_tip

    def _entry_row(
        self,
        sid: int,
        stored: Entry,
        text: str,
        utf8: bytes | None,
        derived: ParentInfo,
        estimates: tuple[int, int],
    ) -> tuple[_PreparedRow, ParentInfo]:
        """``stored``'s row in ``_INSERT_ENTRY``'s column order, its chain not set yet, and what
        its children need of it (``ParentInfo``: its own hash and mark). ``derived`` is what
        ``_derived`` found from its parent; ``estimates`` its two token estimates."""
        mark = stored.id if stored.kind in MARK_KINDS else derived.mark
        hash_ = stored_entry_hash(derived.hash, stored, text, utf8)
        row: _PreparedRow = [
            sid,
            stored.id,
            stored.parent_id,
            stored.kind,
            stored.timestamp,
            text,
            *estimates,
            derived.depth,
            derived.context_head,
            hash_,
            "",  # the chain: set by whoever inserts, from the tip as it is then
            mark,
            derived.compactions,
            self.db.writer,
        ]
        return row, ParentInfo(derived.depth, derived.context_head, hash_, mark, derived.compactions)

    def _prepare_rows(
        self, conn: Conn, sid: int, entries: Sequence[Entry], cache: Batch, *, json_values: bool
    ) -> list[_PreparedRow]:
        """An import's batch as rows, with the same checks, derived columns, hashes and estimates
        as ``_insert`` entry by entry, but no chain yet (``_write_rows`` sets it). Parents outside
        ``cache`` are read through ``conn``. Ids are the caller's: a taken one is refused."""
        rows: list[_PreparedRow] = []
        for entry in entries:
            stored, text, utf8 = self._checked(entry, json_values=json_values)
            if entry.id in cache:
                raise InvalidEntryError(
                    f"entry {entry.id!r}: an entry with this id already exists in the session",
                    path=self.db.path,
                )
            derived = self._derived(conn, sid, stored, cache)
            estimates = estimate_entry_tokens_both(stored, _fast_json_dumps)
            row, cache.info[stored.id] = self._entry_row(sid, stored, text, utf8, derived, estimates)
            cache.parents[stored.id] = stored.parent_id
            rows.append(row)
        return rows

    def _write_rows(
        self, conn: Conn, row: SessionRow, rows: Sequence[_PreparedRow], leaf: str | None, cache: Batch
    ) -> None:
        """Insert prepared rows inside the caller's write transaction (``row`` read in it): the
        chain from the session's tip as it is now, one ``executemany``, the full-text indexing
        left to ``index_pending`` (``FTS_PENDING`` records the rows in this same transaction: an
        import killed later leaves nothing unrecorded), then the session row."""
        # A server is asked first; SQLite finds a taken id in the insert itself (the unique key
        # refuses the statement, which changes nothing) and is asked which one only then: the
        # question cost a tenth of an import's writing.
        if self.db.dialect.insert_finds_clash:
            self._refuse_taken(conn, row.sid, rows)
        tip = row.tip
        for r in rows:
            r[0] = row.sid
            tip = r[11] = chain_hash(tip, r[10])
        if rows:
            try:
                first, last = self._insert_rows(conn, rows)
            except sqlite3.IntegrityError:
                self._refuse_taken(conn, row.sid, rows)
                raise
            cache.last_seq = last
            self._defer_indexing(conn, row.sid, first, last)
        self._finish(conn, row.sid, row.count + len(rows), tip, leaf, cache)

    def _refuse_taken(self, conn: Conn, sid: int, rows: Sequence[_PreparedRow]) -> None:
        """``InvalidEntryError`` naming the first of ``rows`` whose id the session holds."""
        taken_ids = self._ids_in_session(conn, sid, [r[1] for r in rows])
        for r in rows:
            if r[1] in taken_ids:
                raise InvalidEntryError(
                    f"entry {r[1]!r}: an entry with this id already exists in the session", path=self.db.path
                )

    def _ids_in_session(self, conn: Conn, sid: int, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the session already holds (500 per query)."""
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(
                str(r[0])
                for r in conn.execute(
                    f"SELECT id FROM entries WHERE session_id = ? AND id IN ({marks})", (sid, *chunk)
                )
            )
        return found

    def _insert_rows(self, conn: Conn, rows: Sequence[Sequence[Any]]) -> tuple[int, int]:
        """Insert entry rows whose ids are known to be free; the first and last ``seq`` given.
        SQLite: one ``executemany`` (inside one write transaction the ``seq`` values it gives are
        consecutive); a server: row by row, as ``_insert_row`` does."""
        if self.db.dialect.insert_finds_clash:
            seqs = [self._insert_row(conn, tuple(row)) for row in rows]
            if any(s is None for s in seqs):
                raise InvalidEntryError("an entry id was taken while importing", path=self.db.path)
            return min(int(s) for s in seqs if s is not None), max(int(s) for s in seqs if s is not None)
        # Many rows per statement, not ``executemany``: that steps row by row and takes the GIL
        # back after each, so while the next batch is prepared on another thread every row
        # waited out the interpreter's switch interval (a 100,000-entry import's writes took
        # 5.8 s instead of 1.4). One statement runs its rows with the GIL let go throughout.
        sqlite = cast(sqlite3.Connection, conn)
        limit = sqlite.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) if hasattr(sqlite, "getlimit") else 999
        per = max(1, limit // _ENTRY_FIELDS)
        for start in range(0, len(rows), per):
            part = rows[start : start + per]
            sqlite.execute(_insert_entries(len(part)), [value for row in part for value in row])
        last = int(conn.execute("SELECT last_insert_rowid()").fetchone()[0])
        return last - len(rows) + 1, last

    def _defer_indexing(self, conn: Conn, sid: int, first: int, last: int) -> None:
        """Record rows ``first..last`` of the session as not yet in the full-text index."""
        found = conn.execute(
            "SELECT value FROM session_status WHERE session_id = ? AND key = ?", (sid, FTS_PENDING)
        ).fetchone()
        ranges: list[list[int]] = [] if found is None else json.loads(found[0])["ranges"]
        if ranges and ranges[-1][1] + 1 == first:
            ranges[-1][1] = last
        else:
            ranges.append([first, last])
        self.db.set_status(conn, sid, FTS_PENDING, {"ranges": ranges})

    def index_pending(self) -> int:
        """Add the entries imports left out to the full-text index (``FTS_PENDING``); how many.

        Each transaction indexes up to ``FTS_CHUNK`` entries and shrinks the recorded ranges with
        them, so a process killed part-way leaves the rest recorded, never an entry indexed twice
        or forgotten. Two processes doing it at once take turns; the second finds less to do."""
        with self.db.read() as conn:
            sids = [
                int(r[0])
                for r in conn.execute("SELECT session_id FROM session_status WHERE key = ?", (FTS_PENDING,))
            ]
        done = 0
        for sid in sids:
            while True:
                with self.db.write() as conn:
                    found = conn.execute(
                        "SELECT value FROM session_status WHERE session_id = ? AND key = ?",
                        (sid, FTS_PENDING),
                    ).fetchone()
                    if found is None:
                        break
                    ranges: list[list[int]] = json.loads(found[0])["ranges"]
                    first, last = ranges[0]
                    upto = min(last, first + FTS_CHUNK - 1)
                    rows = conn.execute(
                        f"SELECT seq, {ENTRY_COLUMNS} FROM entries "
                        "WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
                        (sid, first, upto),
                    ).fetchall()
                    for seq, entry_id, parent_id, kind, timestamp, data, *_ in rows:
                        text = entry_text(Entry(entry_id, parent_id, kind, timestamp, read_back(data)))
                        if text:
                            conn.execute(self.db.dialect.fts_insert, (seq, self.db.dialect.fts_text(text)))
                    done += len(rows)
                    rest = ([[upto + 1, last]] if upto < last else []) + ranges[1:]
                    if rest:
                        self.db.set_status(conn, sid, FTS_PENDING, {"ranges": rest})
                    else:
                        conn.execute(
                            "DELETE FROM session_status WHERE session_id = ? AND key = ?", (sid, FTS_PENDING)
                        )
        return done

    def _insert_row(self, conn: Conn, row: tuple[Any, ...]) -> int | None:
        """Insert an entry row (``row`` in the column order below); its ``seq``, or None when the
        session already holds an entry with that id (``row[1]``). A server finds the clash in the
        insert itself (``ON CONFLICT DO NOTHING``: one round trip); SQLite, in-process, looks
        first, since its RETURNING and ON CONFLICT paths measured twice as slow for a 2,000-entry
        import as a lookup and a plain insert."""
        sql = _INSERT_ENTRY
        if self.db.dialect.insert_finds_clash:
            found = conn.execute(
                sql + " ON CONFLICT (session_id, id) DO NOTHING RETURNING seq", row
            ).fetchone()
            return None if found is None else int(found[0])
        if conn.execute("SELECT 1 FROM entries WHERE session_id = ? AND id = ?", (row[0], row[1])).fetchone():
            return None
        return int(conn.execute(sql, row).lastrowid)

    # ------------------------------------------------------------------ reading

    def writers(self, session: str, ids: Iterable[str] | None = None) -> dict[str, str | None]:
        """Who wrote each entry of ``session`` (or only ``ids``): ``id → writer`` (None: written
        before writers were recorded)."""
        wanted = None if ids is None else list(ids)
        out: dict[str, str | None] = {}
        with self.db.read() as conn:
            sid = self.db.session_row(conn, session).sid
            if wanted is None:
                rows = conn.execute("SELECT id, writer FROM entries WHERE session_id = ?", (sid,)).fetchall()
            else:
                rows = []
                for i in range(0, len(wanted), 500):
                    chunk = wanted[i : i + 500]
                    marks = ",".join("?" * len(chunk))
                    rows += conn.execute(
                        f"SELECT id, writer FROM entries WHERE session_id = ? AND id IN ({marks})",
                        (sid, *chunk),
                    ).fetchall()
        for entry_id, writer in rows:
            out[str(entry_id)] = writer
        return out

    def get(self, entry_id: str, session: str | None = None) -> Entry:
        """One entry by id. Ids are unique within a session; without ``session`` the id must be
        unique in the whole database."""
        with self.db.read() as conn:
            if session is not None:
                sid = self.db.sid(conn, session)
                rows = conn.execute(
                    f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND id = ?", (sid, entry_id)
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ? LIMIT 2", (entry_id,)
                ).fetchall()
        if not rows:
            where = f"session {session!r}" if session else str(self.db.path)
            raise UnknownEntryError(f"no entry {entry_id!r} in {where}", path=self.db.path)
        if len(rows) > 1:
            raise UnknownEntryError(
                f"entry id {entry_id!r} exists in several sessions: name the session", path=self.db.path
            )
        return row_entry(rows[0])

    def entries(
        self, session: str, *, kinds: Iterable[str] | None = None, after_newest: str | None = None
    ) -> list[Entry]:
        """Entries of the session in append order (parents before children), branches included.

        ``kinds`` keeps only those kinds; ``after_newest=K`` keeps only entries appended after the
        newest entry of kind ``K`` (all when there is none). Both are index lookups (migration
        ``0004_kind_index``), so "what happened since the last compaction" costs what came after
        it, not the whole history.
        """
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            where = "session_id = ?"
            params: list[Any] = [sid]
            if after_newest is not None:
                row = conn.execute(
                    "SELECT MAX(seq) FROM entries WHERE session_id = ? AND kind = ?", (sid, after_newest)
                ).fetchone()
                if row[0] is not None:
                    where += " AND seq > ?"
                    params.append(row[0])
            if kinds is not None:
                wanted = sorted(set(kinds))
                if not wanted:
                    return []
                where += f" AND kind IN ({', '.join('?' * len(wanted))})"
                params.extend(wanted)
            rows = conn.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE {where} ORDER BY seq", params)
            return [row_entry(r) for r in rows]

    def iter_entries(self, session: str, *, batch: int = 1000) -> Iterator[Entry]:
        """Every entry of the session in append order, read ``batch`` rows at a time (keyset on
        ``seq``), so an export or a copy between stores holds one batch in memory, not the log.
        Entries appended while iterating are included; none is skipped or repeated."""
        after = 0
        while True:
            with self.db.read() as conn:
                sid = self.db.sid(conn, session)
                rows = conn.execute(
                    f"SELECT seq, {ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq "
                    f"LIMIT ?",
                    (sid, after, batch),
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield row_entry(row[1:])
            after = int(rows[-1][0])

    def chain_tip(self, session: str) -> str:
        """The session's append-chain hash: equal tips mean the same entries in the same order
        (a copy between stores that kept ids and order has the source's tip)."""
        with self.db.read() as conn:
            return self.db.session_row(conn, session).tip

    def entry_count(self, session: str) -> int:
        """How many entries the session holds (all branches); one row read."""
        with self.db.read() as conn:
            return self.db.session_row(conn, session).count

    def entry_ids(self, session: str) -> set[str]:
        """Every id used in the session (cheap: no entry bodies are read)."""
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            return {row[0] for row in conn.execute("SELECT id FROM entries WHERE session_id = ?", (sid,))}

    def children(self, session: str, entry_id: str | None) -> list[Entry]:
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            rows = conn.execute(
                f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND parent_id "
                f"{self.db.dialect.is_same} ? "
                "ORDER BY seq",
                (sid, entry_id),
            )
            return [row_entry(r) for r in rows]

    def branch_tips(self, session: str) -> list[Entry]:
        """Entries with no children: the ends of every branch of the session tree."""
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            rows = conn.execute(
                f"SELECT {ENTRY_COLUMNS} FROM entries e WHERE session_id = ? AND NOT EXISTS "
                "(SELECT 1 FROM entries c WHERE c.session_id = e.session_id AND c.parent_id = e.id) ORDER BY "
                "seq",
                (sid,),
            )
            return [row_entry(r) for r in rows]

    def token_counts(
        self, session: str, entries: Sequence[Entry], estimator: Estimator = "density"
    ) -> list[int]:
        """Stored estimates for ``entries`` of ``session``, in the same order."""
        if estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {estimator!r}; expected one of {', '.join(ESTIMATORS)}")
        column = "tokens_density" if estimator == "density" else "tokens_chars4"
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            found: dict[str, int] = {}
            ids = [e.id for e in entries]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for entry_id, tokens in conn.execute(
                    f"SELECT id, {column} FROM entries WHERE session_id = ? AND id IN ({marks})",
                    (sid, *chunk),
                ):
                    found[entry_id] = int(tokens)
        missing = [i for i in ids if i not in found]
        if missing:
            raise UnknownEntryError(f"no entries {missing[:5]} in session {session!r}", path=self.db.path)
        return [found[i] for i in ids]

    def search(
        self, text: str, *, session: str | None = None, limit: int = 20, raw: bool = False
    ) -> list[SearchHit]:
        """Full-text search over entry text, best match first.

        By default every word of ``text`` must occur (words are quoted, so FTS syntax in user text
        is harmless); ``raw=True`` passes a query in the engine's own syntax through unchanged
        (SQLite: FTS5; PostgreSQL: ``websearch_to_tsquery``).
        """
        if "\x00" in text:
            if raw:
                raise InvalidEntryError(
                    "the search query holds a NUL character, which full-text search cannot take; remove it",
                    path=self.db.path,
                )
            text = text.replace("\x00", " ")  # SQLite ends the string at NUL ("unterminated string")
        query = self.db.dialect.search_query(text, raw)
        if query is None:
            return []
        self.index_pending()  # what imports left out of the index goes in before anyone searches
        sql = (
            f"SELECT s.name, e.{ENTRY_COLUMNS.replace(', ', ', e.')}, f.rank, e.seq "
            f"{self.db.dialect.search_from(raw)}"
        )
        params: list[Any] = [query]
        with self.db.read() as conn:
            if session is not None:
                sql += " AND e.session_id = ?"
                params.append(self.db.sid(conn, session))
            sql += " ORDER BY f.rank LIMIT ?"
            params.append(limit)
            try:
                rows = conn.execute(sql, params).fetchall()
            except Exception as exc:
                if self.db.is_query_syntax_error(exc):
                    raise ValueError(f"bad search query {text!r}: {exc}") from exc
                raise
        return [
            SearchHit(session=r[0], entry=row_entry(r[1:8]), rank=float(r[8]), seq=int(r[9])) for r in rows
        ]
