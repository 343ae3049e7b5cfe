"""Inbox and live status: the only rows of the database that are updated in place.

Entries are append-only; these tables are not, and their rules differ:
- ``inbox``: summaries waiting for a turn boundary move ``pending`` → ``taken`` | ``stale``
  exactly once (an UPDATE guarded by the current state, inside one transaction, so two takers
  never receive the same item). Stale = its cut no longer lies inside the current context.
- ``live_compactions``: a row per compaction in flight, deleted when it ends; an error becomes
  ``session_status['last_failure']``. Each row names its owner process (``store.process``); a
  row whose owner has certainly ended (killed mid-compaction) is settled by the next process that
  reads live status or begins a compaction: the row goes, and one ``compaction_outcome`` entry
  ``abandoned: process PID on HOST ended while compacting`` is appended in the same transaction.
- An inbox item handed out (``taken``) records its taker; if the taker ended without placing it
  (no compaction with its cut and summary in the log), the next take hands it out again, so a
  queued summary is placed or settled stale at the next turn boundary, never lost.
- ``session_status``: small keyed values, overwritten.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ipython_compact.core.entries import COMPACTION, COMPACTION_OUTCOME, canonical_json
from ipython_compact.store import process
from ipython_compact.store.dialect import Conn
from ipython_compact.store.log import EntryLog
from ipython_compact.store.process import Owner
from ipython_compact.store.records import InboxItem, LiveCompaction, LiveStatus


def _owner(host: str | None, pid: int | None, started: str | None) -> Owner | None:
    return None if host is None or pid is None else Owner(host, int(pid), started)


class Status(EntryLog):
    """Inbox items, compactions in flight and small per-session status values.

    A part of ``SessionStore`` (its base class; settling an abandoned compaction appends to the
    log in the same transaction, hence the log as this class's base)."""

    def inbox_put(
        self, session: str, payload: Mapping[str, Any], *, first_kept_entry_id: str | None = None
    ) -> InboxItem:
        """Queue a summary (or any payload) until the next turn boundary."""
        created = self.db.clock()
        text = canonical_json(dict(payload))
        with self.db.write() as conn:
            sid = self.db.sid(conn, session)
            cur = conn.execute(
                "INSERT INTO inbox (session_id, first_kept_entry_id, payload, created_at) VALUES (?, ?, ?, "
                "?) "
                "RETURNING item_id",
                (sid, first_kept_entry_id, text, created),
            )
            item_id = int(cur.fetchone()[0])
        return InboxItem(item_id, session, first_kept_entry_id, json.loads(text), "pending", created, None)

    def inbox_items(self, session: str, state: str | None = None) -> list[InboxItem]:
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            return self._inbox_rows(conn, sid, session, state)

    def _inbox_rows(self, conn: Conn, sid: int, session: str, state: str | None) -> list[InboxItem]:
        rows = conn.execute(
            "SELECT item_id, first_kept_entry_id, payload, state, created_at, settled_at FROM inbox "
            "WHERE session_id = ? AND (CAST(? AS TEXT) IS NULL OR state = ?) ORDER BY item_id",
            (sid, state, state),
        ).fetchall()
        return [InboxItem(r[0], session, r[1], json.loads(r[2]), r[3], r[4], r[5]) for r in rows]

    def _settle_stale(self, conn: Conn, sid: int, session: str, leaf: str | None) -> list[InboxItem]:
        pending = self._inbox_rows(conn, sid, session, "pending")
        if not pending:
            return []
        live_ids: set[str] = set()
        if leaf is not None:
            head = conn.execute(
                "SELECT context_head FROM entries WHERE session_id = ? AND id = ?", (sid, leaf)
            ).fetchone()[0]
            live_ids = {r[0] for r in self.walk_links(conn, sid, leaf, head)}  # ids only: no entry bodies
            live_ids.discard(head)
        now = self.db.clock()
        stale: list[InboxItem] = []
        for item in pending:
            if item.first_kept_entry_id is not None and item.first_kept_entry_id not in live_ids:
                conn.execute(
                    "UPDATE inbox SET state = 'stale', settled_at = ? WHERE item_id = ?", (now, item.item_id)
                )
                stale.append(
                    InboxItem(
                        item.item_id,
                        session,
                        item.first_kept_entry_id,
                        item.payload,
                        "stale",
                        item.created_at,
                        now,
                    )
                )
        return stale

    def inbox_settle_stale(self, session: str) -> list[InboxItem]:
        """Mark pending items stale whose cut lies at or before the start of the current context
        (a newer compaction already covers it), so the furthest cut stays in effect."""
        with self.db.write() as conn:
            row = self.db.session_row(conn, session)
            sid, leaf = row.sid, row.leaf
            self._reclaim_abandoned(conn, sid)
            return self._settle_stale(conn, sid, session, leaf)

    def _reclaim_abandoned(self, conn: Conn, sid: int) -> int:
        """Items taken by a process that has ended and that it never placed go back to pending.

        "Placed" = a compaction entry in the session with the item's cut and summary (the
        scheduler appends the payload as the entry's data). Returns how many went back."""
        rows = conn.execute(
            "SELECT item_id, first_kept_entry_id, payload, taken_host, taken_pid, taken_started FROM inbox "
            "WHERE session_id = ? AND state = 'taken' AND taken_pid IS NOT NULL",
            (sid,),
        ).fetchall()
        orphans = []
        for item_id, first_kept, payload, host, pid, started in rows:
            owner = _owner(host, pid, started)
            if owner is not None and self.db.owner_ended(conn, owner):
                orphans.append((item_id, first_kept, json.loads(payload)))
        if not orphans:
            return 0
        placed = set()
        for (data,) in conn.execute(
            "SELECT data FROM entries WHERE session_id = ? AND kind = ? ORDER BY seq DESC", (sid, COMPACTION)
        ):
            entry = json.loads(data)
            placed.add((entry.get("first_kept_entry_id"), entry.get("summary")))
        reclaimed = 0
        for item_id, first_kept, payload in orphans:
            if (first_kept, payload.get("summary")) in placed:
                continue
            conn.execute(
                "UPDATE inbox SET state = 'pending', settled_at = NULL, taken_host = NULL, taken_pid = NULL, "
                "taken_started = NULL WHERE item_id = ? AND state = 'taken'",
                (item_id,),
            )
            reclaimed += 1
        return reclaimed

    def inbox_take(self, session: str, *, owner: Owner | None = None) -> list[InboxItem]:
        """Settle stale items, then hand out (and mark taken by ``owner``, default this process)
        every pending one, oldest first. Two takers never receive the same item; an item taken
        by a process that ended before placing it is handed out again."""
        taker = owner or process.current()
        with self.db.write() as conn:
            row = self.db.session_row(conn, session)
            sid, leaf = row.sid, row.leaf
            self._reclaim_abandoned(conn, sid)
            self._settle_stale(conn, sid, session, leaf)
            pending = self._inbox_rows(conn, sid, session, "pending")
            now = self.db.clock()
            for item in pending:
                conn.execute(
                    "UPDATE inbox SET state = 'taken', settled_at = ?, taken_host = ?, taken_pid = ?, "
                    "taken_started = ? "
                    "WHERE item_id = ?",
                    (now, taker.host, taker.pid, taker.started, item.item_id),
                )
        return [
            InboxItem(i.item_id, session, i.first_kept_entry_id, i.payload, "taken", i.created_at, now)
            for i in pending
        ]

    # ------------------------------------------------------------------ live status

    def status_set(self, session: str, key: str, value: Any) -> None:
        with self.db.write() as conn:
            self.db.set_status(conn, self.db.sid(conn, session), key, value)

    def status_get(self, session: str, key: str, default: Any = None) -> Any:
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            row = conn.execute(
                "SELECT value FROM session_status WHERE session_id = ? AND key = ?", (sid, key)
            ).fetchone()
        return default if row is None else json.loads(row[0])

    def live_begin(
        self,
        session: str,
        task_id: str,
        *,
        reason: str,
        blocking: bool,
        detail: Mapping[str, Any] | None = None,
        owner: Owner | None = None,
    ) -> LiveCompaction:
        """Record a compaction in flight (shown by status displays until ``live_end``), owned by
        ``owner`` (default: this process). Abandoned rows of the session are settled first."""
        started = self.db.clock()
        who = owner or process.current()
        with self.db.write() as conn:
            sid = self.db.sid(conn, session)
            self._settle_abandoned(conn, session)
            conn.execute(
                "INSERT INTO live_compactions (task_id, session_id, reason, blocking, started_at, detail, "
                "owner_host, "
                "owner_pid, owner_started) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    task_id,
                    sid,
                    reason,
                    int(blocking),
                    started,
                    canonical_json(dict(detail or {})),
                    who.host,
                    who.pid,
                    who.started,
                ),
            )
        return LiveCompaction(task_id, session, reason, blocking, started, dict(detail or {}), who)

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
                failure = {
                    "task_id": task_id,
                    "reason": None if row is None else row[0],
                    "error": error,
                    "at": now,
                }
                self.db.set_status(conn, sid, "last_failure", failure)

    def _live_rows(self, conn: Conn, sid: int, session: str) -> list[LiveCompaction]:
        rows = conn.execute(
            "SELECT task_id, reason, blocking, started_at, detail, owner_host, owner_pid, owner_started "
            "FROM live_compactions WHERE session_id = ? ORDER BY started_at, task_id",
            (sid,),
        ).fetchall()
        return [
            LiveCompaction(r[0], session, r[1], bool(r[2]), r[3], json.loads(r[4]), _owner(r[5], r[6], r[7]))
            for r in rows
        ]

    def _settle_abandoned(self, conn: Conn, session: str) -> list[LiveCompaction]:
        """Inside a write transaction: remove the session's live rows whose owner has ended, each
        with a ``compaction_outcome`` entry saying so (and the last failure). Returns them."""
        row = self.db.session_row(conn, session)
        abandoned = [
            c
            for c in self._live_rows(conn, row.sid, session)
            if c.owner is not None and self.db.owner_ended(conn, c.owner)
        ]
        if not abandoned:
            return []
        now = self.db.clock()
        outcomes = []
        for c in abandoned:
            assert c.owner is not None
            error = f"abandoned: {c.owner.describe()} ended while compacting"
            conn.execute(
                "DELETE FROM live_compactions WHERE task_id = ? AND session_id = ?", (c.task_id, row.sid)
            )
            outcomes.append(
                (
                    COMPACTION_OUTCOME,
                    {
                        "reason": c.reason,
                        "outcome": "failed",
                        "error": error,
                        "task_id": c.task_id,
                        "started_at": c.started_at,
                        "owner": c.owner.to_json(),
                    },
                )
            )
            failure = {"task_id": c.task_id, "reason": c.reason, "error": error, "at": now}
            self.db.set_status(conn, row.sid, "last_failure", failure)
        self.append_in(conn, row, outcomes, timestamp=now)
        return abandoned

    def live_status(self, session: str) -> LiveStatus:
        """Compactions in flight and the last failure. Rows left by a process that has ended are
        settled first (one write, only when there are some)."""
        with self.db.read() as conn:
            sid = self.db.sid(conn, session)
            live = self._live_rows(conn, sid, session)
            settled = any(c.owner is not None and self.db.owner_ended(conn, c.owner) for c in live)
        if settled:
            with self.db.write() as conn:
                self._settle_abandoned(conn, session)
        with self.db.read() as conn:
            if settled:  # read again: the settled rows are gone
                live = self._live_rows(conn, sid, session)
            failure = conn.execute(
                "SELECT value FROM session_status WHERE session_id = ? AND key = 'last_failure'", (sid,)
            ).fetchone()
        return LiveStatus(in_flight=live, last_failure=None if failure is None else json.loads(failure[0]))
