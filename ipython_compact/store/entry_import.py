"""Importing many entries into a session: batched transactions with pauses for other writers, a
marker that keeps a second import out, duplicates found by content, the full-text index deferred.

What must hold: an import lands whole or, stopped part-way, says how far it got
(``PartialImportError``); other writers get the lock between batches. A base of ``EntryLog``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ipython_compact.core.entries import Entry
from ipython_compact.store import process
from ipython_compact.store.database import SessionRow, check_session_name
from ipython_compact.store.dialect import Conn
from ipython_compact.store.entry_hashing import content_key
from ipython_compact.store.entry_writes import EntryWrites, PreparedRow
from ipython_compact.store.errors import (
    DatabaseLockedError,
    InvalidEntryError,
    PartialImportError,
    SessionExistsError,
    StoreError,
)
from ipython_compact.store.process import Owner
from ipython_compact.store.records import LEAF, _Default
from ipython_compact.store.tree import Batch

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


IMPORT_MARKER = "import_in_progress"
"""``session_status`` key held while a batched import runs: {owner, total}. A second import
into the session waits for it to go (or for its owner to end)."""


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


class EntryImports(EntryWrites):
    """Imports over one database."""

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
            except (_ImportRunning, DatabaseLockedError) as busy:
                # Another import holds the session: its marker names it (later batches), or its
                # first transaction (creation and up to a whole batch) holds the write lock past the
                # busy timeout, as on a loaded machine. Either way this one waits, up to ``wait``.
                if time.monotonic() <= deadline:
                    time.sleep(0.1)
                    continue
                if isinstance(busy, _ImportRunning):
                    raise DatabaseLockedError(
                        f"{self.db.path}: another import into session {session!r} is still running "
                        f"({busy.owner.describe()}) after {wait:g} s; nothing was written",
                        path=self.db.path,
                    ) from None
                raise
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
        self, session: str, rows: list[PreparedRow], leaf: str | None, cache: Batch, last: bool
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
