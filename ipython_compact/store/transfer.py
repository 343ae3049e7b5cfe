"""Moving a session between two stores (a SQLite file and a PostgreSQL server, either way).

Why: a session started on a laptop moves to the team's server, or a run on the server is taken
home to inspect offline (docs/team.md). The copy streams: entries are read in append order a
batch at a time and written a batch per transaction, so a session of any length moves in bounded
memory.

What must hold:
- Ids, parents, kinds, timestamps and data are kept, and entries are written in the source's
  append order into a new session, so the target's hash chain equals the source's: the copy is
  proved identical by comparing chain tips (``Copied.identical``), not trusted.
- The target session's leaf stays unset until the last batch has landed, then becomes the
  source's leaf: nobody's view shows half a session. A copy that fails part way leaves a session
  without a leaf and says how far it got (``PartialImportError``); nothing in the source changes.
- An existing target session is refused (``SessionExistsError``): a copy never merges.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from ipython_compact.core.entries import Entry
from ipython_compact.store.errors import PartialImportError, StoreError
from ipython_compact.store.log import IMPORT_BATCH
from ipython_compact.store.sqlite_store import SessionStore


@dataclass(frozen=True)
class Copied:
    session: str
    entries: int
    batches: int
    leaf_id: str | None
    identical: bool
    """The target's append chain equals the source's (same entries, same order)."""


def _chunks(entries: Iterator[Entry], size: int) -> Iterator[list[Entry]]:
    while chunk := list(islice(entries, size)):
        yield chunk


def copy_session(
    source: SessionStore,
    target: SessionStore,
    session: str,
    *,
    name: str | None = None,
    batch_size: int = IMPORT_BATCH,
) -> Copied:
    """Copy ``session`` of ``source`` into a new session ``name`` (default: the same name) of
    ``target``, streaming; see the module rules."""
    name = name or session
    info = source.get_session(session)
    written = batches = 0
    last: str | None = None
    stream = islice(source.iter_entries(session, batch=batch_size), info.entry_count)
    try:
        for chunk in _chunks(stream, batch_size):
            target.import_entries(name, chunk, leaf_id=None, create=batches == 0)
            written += len(chunk)
            batches += 1
            last = chunk[-1].id
        if batches == 0:
            target.create_session(name)
        target.set_leaf(name, info.leaf_id)
    except StoreError as exc:
        if batches == 0:
            raise
        raise PartialImportError(
            f"{target.db.path}: the copy of session {session!r} stopped after {written:,} of "
            f"{info.entry_count:,} entries "
            f"(the last written is {last!r}); the copy {name!r} has no leaf yet. Cause: {exc}",
            path=target.db.path,
            written=written,
            total=info.entry_count,
            last_id=last,
            leaf=None,
        ) from exc
    identical = target.chain_tip(name) == _tip_after(source, session, info.entry_count)
    return Copied(name, written, batches, info.leaf_id, identical)


def _tip_after(store: SessionStore, session: str, count: int) -> str:
    """The source's chain tip after its first ``count`` entries (appends may have come since)."""
    if store.entry_count(session) == count:
        return store.chain_tip(session)
    with store.db.read() as conn:
        sid = store.db.sid(conn, session)
        row = conn.execute(
            "SELECT chain FROM entries WHERE session_id = ? ORDER BY seq LIMIT 1 OFFSET ?", (sid, count - 1)
        ).fetchone()
    return "" if row is None else str(row[0])


__all__ = ["Copied", "copy_session"]
