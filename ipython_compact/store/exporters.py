"""Writing a session out as our JSONL: one header line, then one line per entry.

The format is what ``importers.load_transcript`` reads back, and the round trip is lossless:
ids, parent links, timestamps, data (canonical JSON, so the bytes are stable) and the leaf.
Entries are written in append order, so every parent precedes its children.

    {"type": "ipython_compact_session", "version": 1, "name": ..., "leaf_id": ..., "created_at": ...,
    "entry_count": N}
    {"id": ..., "parent_id": ..., "kind": ..., "timestamp": ..., "data": {...}}
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import TextIO

from ipython_compact.core.entries import canonical_json
from ipython_compact.store.importers import JSONL_TYPE, JSONL_VERSION
from ipython_compact.store.sqlite_store import SessionStore


def export_lines(store: SessionStore, session: str) -> Iterator[str]:
    """The export, line by line (no trailing newlines)."""
    info = store.get_session(session)
    yield canonical_json(
        {
            "type": JSONL_TYPE,
            "version": JSONL_VERSION,
            "name": info.name,
            "leaf_id": info.leaf_id,
            "created_at": info.created_at,
            "entry_count": info.entry_count,
        }
    )
    # Streamed (one batch in memory, not the session); entries appended after the header was
    # written are left for the next export, so the header's count stays true.
    for entry in islice(store.iter_entries(session), info.entry_count):
        yield canonical_json(entry.to_json())


def export_jsonl(store: SessionStore, session: str, out: TextIO) -> int:
    """Write the export to ``out``; returns the number of entries written."""
    count = -1
    for count, line in enumerate(export_lines(store, session)):  # noqa: B007 - count is the result
        out.write(line)
        out.write("\n")
    return count


def export_text(store: SessionStore, session: str) -> str:
    return "".join(line + "\n" for line in export_lines(store, session))
