"""Inbox and live status: the only rows of the database that are updated in place.

Entries are append-only; these tables are not, and their rules differ:
- ``inbox``: summaries waiting for a turn boundary move ``pending`` → ``taken`` | ``stale``
  exactly once (an UPDATE guarded by the current state, inside one transaction, so two takers
  never receive the same item). Stale = its cut no longer lies inside the current context.
- ``live_compactions``: a row per compaction in flight, deleted when it ends; an error becomes
  ``session_status['last_failure']``.
- ``session_status``: small keyed values, overwritten.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from ipython_compact.core.entries import canonical_json
from ipython_compact.store.database import Database
from ipython_compact.store.records import InboxItem, LiveCompaction, LiveStatus
from ipython_compact.store.tree import Tree


class Status:
    """Inbox items, compactions in flight and small per-session status values."""

    def __init__(self, db: Database, tree: Tree) -> None:
        self.db = db
        self.tree = tree

    def inbox_put(
        self, session: str, payload: Mapping[str, Any], *, first_kept_entry_id: str | None = None
    ) -> InboxItem:
        """Queue a summary (or any payload) until the next turn boundary."""
        created = self.db.clock()
        text = canonical_json(dict(payload))
        with self.db.write() as conn:
            sid = self.db.sid(conn, session)
            cur = conn.execute(
                "INSERT INTO inbox (session_id, first_kept_entry_id, payload, created_at) VALUES (?, ?, ?, ?)",
                (sid, first_kept_entry_id, text, created),
            )
            item_id = int(cur.lastrowid or 0)
        return InboxItem(item_id, session, first_kept_entry_id, json.loads(text), "pending", created, None)

    def inbox_items(self, session: str, state: str | None = None) -> list[InboxItem]:
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            return self._inbox_rows(conn, sid, session, state)

    def _inbox_rows(self, conn: sqlite3.Connection, sid: int, session: str, state: str | None) -> list[InboxItem]:
        rows = conn.execute(
            "SELECT item_id, first_kept_entry_id, payload, state, created_at, settled_at FROM inbox "
            "WHERE session_id = ? AND (? IS NULL OR state = ?) ORDER BY item_id",
            (sid, state, state),
        ).fetchall()
        return [InboxItem(r[0], session, r[1], json.loads(r[2]), r[3], r[4], r[5]) for r in rows]

    def _settle_stale(self, conn: sqlite3.Connection, sid: int, session: str, leaf: str | None) -> list[InboxItem]:
        pending = self._inbox_rows(conn, sid, session, "pending")
        if not pending:
            return []
        live_ids: set[str] = set()
        if leaf is not None:
            head = conn.execute(
                "SELECT context_head FROM entries WHERE session_id = ? AND id = ?", (sid, leaf)
            ).fetchone()[0]
            live_ids = {r[0] for r in self.tree.walk_links(conn, sid, leaf, head)}  # ids only: no entry bodies
            live_ids.discard(head)
        now = self.db.clock()
        stale: list[InboxItem] = []
        for item in pending:
            if item.first_kept_entry_id is not None and item.first_kept_entry_id not in live_ids:
                conn.execute("UPDATE inbox SET state = 'stale', settled_at = ? WHERE item_id = ?", (now, item.item_id))
                stale.append(InboxItem(item.item_id, session, item.first_kept_entry_id, item.payload, "stale", item.created_at, now))
        return stale

    def inbox_settle_stale(self, session: str) -> list[InboxItem]:
        """Mark pending items stale whose cut lies at or before the start of the current context
        (a newer compaction already covers it), so the furthest cut stays in effect."""
        with self.db.write() as conn:
            row = self.db.session_row(conn, session)
            sid, leaf = row.sid, row.leaf
            return self._settle_stale(conn, sid, session, leaf)

    def inbox_take(self, session: str) -> list[InboxItem]:
        """Settle stale items, then hand out (and mark taken) every pending one, oldest first.
        Two takers never receive the same item."""
        with self.db.write() as conn:
            row = self.db.session_row(conn, session)
            sid, leaf = row.sid, row.leaf
            self._settle_stale(conn, sid, session, leaf)
            pending = self._inbox_rows(conn, sid, session, "pending")
            now = self.db.clock()
            for item in pending:
                conn.execute("UPDATE inbox SET state = 'taken', settled_at = ? WHERE item_id = ?", (now, item.item_id))
        return [InboxItem(i.item_id, session, i.first_kept_entry_id, i.payload, "taken", i.created_at, now) for i in pending]

    # ------------------------------------------------------------------ live status

    def status_set(self, session: str, key: str, value: Any) -> None:
        text = canonical_json(value)
        with self.db.write() as conn:
            sid = self.db.sid(conn, session)
            conn.execute(
                "INSERT INTO session_status (session_id, key, value, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                (sid, key, text, self.db.clock()),
            )

    def status_get(self, session: str, key: str, default: Any = None) -> Any:
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            row = conn.execute("SELECT value FROM session_status WHERE session_id = ? AND key = ?", (sid, key)).fetchone()
        return default if row is None else json.loads(row[0])

    def live_begin(
        self, session: str, task_id: str, *, reason: str, blocking: bool, detail: Mapping[str, Any] | None = None
    ) -> LiveCompaction:
        """Record a compaction in flight (shown by status displays until ``live_end``)."""
        started = self.db.clock()
        with self.db.write() as conn:
            sid = self.db.sid(conn, session)
            conn.execute(
                "INSERT INTO live_compactions (task_id, session_id, reason, blocking, started_at, detail) VALUES (?, ?, ?, ?, ?, ?)",
                (task_id, sid, reason, int(blocking), started, canonical_json(dict(detail or {}))),
            )
        return LiveCompaction(task_id, session, reason, blocking, started, dict(detail or {}))

    def live_end(self, session: str, task_id: str, *, error: str | None = None) -> None:
        """Remove a compaction from the in-flight list; an ``error`` becomes the last failure."""
        now = self.db.clock()
        with self.db.write() as conn:
            sid = self.db.sid(conn, session)
            row = conn.execute(
                "SELECT reason FROM live_compactions WHERE task_id = ? AND session_id = ?", (task_id, sid)
            ).fetchone()
            conn.execute("DELETE FROM live_compactions WHERE task_id = ? AND session_id = ?", (task_id, sid))
            if error is not None:
                failure = {"task_id": task_id, "reason": None if row is None else row[0], "error": error, "at": now}
                conn.execute(
                    "INSERT INTO session_status (session_id, key, value, updated_at) VALUES (?, 'last_failure', ?, ?) "
                    "ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    (sid, canonical_json(failure), now),
                )

    def live_status(self, session: str) -> LiveStatus:
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            rows = conn.execute(
                "SELECT task_id, reason, blocking, started_at, detail FROM live_compactions WHERE session_id = ? "
                "ORDER BY started_at, task_id",
                (sid,),
            ).fetchall()
            failure = conn.execute(
                "SELECT value FROM session_status WHERE session_id = ? AND key = 'last_failure'", (sid,)
            ).fetchone()
        return LiveStatus(
            in_flight=[LiveCompaction(r[0], session, r[1], bool(r[2]), r[3], json.loads(r[4])) for r in rows],
            last_failure=None if failure is None else json.loads(failure[0]),
        )
