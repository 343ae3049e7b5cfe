"""``verify``: recompute every stored hash, chain link and derived column of the log.

What it proves, and no more: with the plain (unkeyed) sha256 chain, that no entry was altered,
removed, inserted or reordered *by accident* — disk damage, a bad copy, a buggy writer, an edit
made without recomputing hashes — and that the derived columns agree with the tree. Anyone who
can write the file can also recompute every hash, so it does not prove the absence of deliberate
tampering.
"""

from __future__ import annotations

from ipython_compact.core.entries import COMPACTION
from ipython_compact.store.database import ENTRY_COLUMNS, Database, row_entry
from ipython_compact.store.dialect import Conn
from ipython_compact.store.errors import StoreError
from ipython_compact.store.log import chain_hash, entry_hash
from ipython_compact.store.migrations import MARK_KINDS
from ipython_compact.store.records import VerifyReport

#: What a database of ours must hold besides the entries: recall (FTS), the inbox and live status
#: tables, and the triggers that make entries append-only. ``verify`` once said "ok" with any of
#: them dropped.
REQUIRED_SCHEMA: tuple[tuple[str, str], ...] = (
    ("table", "sessions"),
    ("table", "entries"),
    ("table", "entries_fts"),
    ("table", "inbox"),
    ("table", "live_compactions"),
    ("table", "session_status"),
    ("table", "migrations"),
    ("trigger", "entries_no_update"),
    ("trigger", "entries_no_delete"),
)


class Integrity:
    """``verify``, a part of ``SessionStore`` (its base class); ``self.db`` is the store's ``Database``."""

    db: Database

    def verify(self, session: str | None = None) -> VerifyReport:
        """Recompute every hash and chain link; report what does not match.

        Proves: no entry was altered (tree hash), none was removed or inserted out of order
        (session chain, count and tip), every parent and the leaf exist, and each stored
        ``context_head`` matches the compactions on the path.
        """
        problems: list[str] = []
        total = 0
        try:
            self.db.check_not_replaced()
        except StoreError as exc:
            problems.append(str(exc))
        with self.db.read() as conn:
            present = self.db.schema_objects(conn)
            for kind, name in REQUIRED_SCHEMA:
                if (kind, name) not in present:
                    what = "the append-only guard " if kind == "trigger" else ""
                    problems.append(
                        f"{what}{kind} {name!r} is missing: the database was altered outside ipython-compact"
                    )
            migrations_known = self.db.known_migrations()
            for name in self.db.applied_migrations(conn):
                if name not in migrations_known:
                    problems.append(f"unknown migration {name!r} recorded")
            if session is None:
                targets = conn.execute(
                    "SELECT session_id, name, leaf_id, entry_count, chain_tip FROM sessions ORDER BY "
                    "session_id"
                ).fetchall()
            else:
                sid = self.db.sid(conn, session)
                targets = conn.execute(
                    "SELECT session_id, name, leaf_id, entry_count, chain_tip FROM sessions WHERE session_id "
                    "= ?",
                    (sid,),
                ).fetchall()
            for sid, name, leaf_id, count, tip in targets:
                total += self._verify_session(conn, sid, name, leaf_id, count, tip, problems)
            writers: dict[str, int] = {}
            for sid, *_ in targets:
                for writer, n in conn.execute(
                    "SELECT writer, COUNT(*) FROM entries WHERE session_id = ? GROUP BY writer", (sid,)
                ):
                    key = writer if isinstance(writer, str) else "(not recorded)"
                    writers[key] = writers.get(key, 0) + int(n)
        return VerifyReport(
            ok=not problems,
            sessions=len(targets),
            entries=total,
            problems=problems,
            writers=dict(sorted(writers.items(), key=lambda kv: -kv[1])),
        )

    def _verify_session(
        self, conn: Conn, sid: int, name: str, leaf_id: str | None, count: int, tip: str, problems: list[str]
    ) -> int:
        # id -> (hash, context_head, mark, compactions)
        seen: dict[str, tuple[str, str | None, str | None, int]] = {}
        chain = ""
        n = 0
        rows = conn.execute(
            f"SELECT {ENTRY_COLUMNS}, context_head, hash, chain, mark, compactions FROM entries WHERE "
            f"session_id = ? "
            "ORDER BY seq",
            (sid,),
        )
        for row in rows:
            n += 1
            try:
                entry = row_entry(row)
            except (ValueError, TypeError) as exc:
                problems.append(f"{name}: entry {row[0]!r} has unreadable data ({exc})")
                continue
            stored_head, stored_hash, stored_chain, stored_mark, stored_count = (
                row[7],
                row[8],
                row[9],
                row[10],
                row[11],
            )
            if entry.parent_id is None:
                parent_hash, head, mark, ncomp = "", None, None, 0
            elif entry.parent_id in seen:
                parent_hash, head, mark, ncomp = seen[entry.parent_id]
            else:
                problems.append(
                    f"{name}: entry {entry.id!r} names parent {entry.parent_id!r}, which is missing"
                )
                parent_hash, head, mark, ncomp = "?", None, None, 0
            if entry.kind == COMPACTION:
                head = entry.data.get("first_kept_entry_id")
            if entry.kind in MARK_KINDS:
                mark = entry.id
            if mark != stored_mark:
                problems.append(f"{name}: entry {entry.id!r} has mark {stored_mark!r}, expected {mark!r}")
            ncomp += entry.kind == COMPACTION
            if ncomp != stored_count:
                problems.append(
                    f"{name}: entry {entry.id!r} counts {stored_count} compactions on its path, "
                    f"expected {ncomp}"
                )
            if entry_hash(parent_hash, entry) != stored_hash:
                problems.append(f"{name}: entry {entry.id!r} does not match its hash (altered)")
            if head != stored_head:
                problems.append(
                    f"{name}: entry {entry.id!r} has context head {stored_head!r}, expected {head!r}"
                )
            chain = chain_hash(chain, stored_hash)
            if chain != stored_chain:
                problems.append(
                    f"{name}: append chain breaks at entry {entry.id!r} (an earlier entry was "
                    f"removed or reordered)"
                )
                chain = stored_chain
            seen[entry.id] = (stored_hash, stored_head, stored_mark, int(stored_count))
        if n != count:
            problems.append(
                f"{name}: {n} entries stored but the session recorded {count} (entries lost or added)"
            )
        if chain != tip:
            problems.append(
                f"{name}: append chain ends at {chain[:12]!r} but the session recorded {tip[:12]!r}"
            )
        if leaf_id is not None and leaf_id not in seen:
            problems.append(f"{name}: leaf {leaf_id!r} does not exist")
        return n
