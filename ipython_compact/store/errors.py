"""Errors the session store raises.

Every error names the database file it concerns, so a message read in a terminal or a log says
which file to look at. Nothing stored is changed when one of these is raised: every write runs in
one transaction that is rolled back on error.
"""

from __future__ import annotations

from pathlib import Path


class StoreError(Exception):
    """Base class; ``path`` is the database file (or the input file for import errors)."""

    def __init__(self, message: str, *, path: Path | str | None = None) -> None:
        super().__init__(message)
        # A server's log is named by its URL (password removed), which is no file path.
        self.path: Path | str | None = None if path is None else path if "://" in str(path) else Path(path)


class CorruptDatabaseError(StoreError):
    """The file is not an SQLite database, or its pages are damaged."""


class DatabaseLockedError(StoreError):
    """Another process held the write lock for longer than the busy timeout."""


class DatabaseReplacedError(StoreError):
    """The database file was deleted or replaced while a process had it open; nothing was written."""


class UnknownSessionError(StoreError, KeyError):
    """No session has that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class UnknownEntryError(StoreError, KeyError):
    """No entry with that id in the session."""

    def __str__(self) -> str:
        return str(self.args[0])


class InvalidEntryError(StoreError, ValueError):
    """An entry that would break the log's invariants (bad kind, data, parent or head)."""


class LeafMovedError(StoreError):
    """A write planned against one leaf found another: someone appended or moved the leaf in
    between (compare and swap failed). Nothing was written."""

    def __init__(
        self, message: str, *, path: Path | str | None = None, expected: str | None, actual: str | None
    ) -> None:
        super().__init__(message, path=path)
        self.expected = expected
        self.actual = actual


class SessionExistsError(StoreError, ValueError):
    """``create_session`` was asked for a name that is taken."""


class ImportFormatError(StoreError, ValueError):
    """An input file could not be read; the message names the file and line. ``hint``, when
    set, says what to do about this particular problem."""

    def __init__(
        self,
        message: str,
        *,
        path: Path | str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, path=path)
        self.line = line
        self.hint = hint


class DuplicateImportError(StoreError, ValueError):
    """An import would store entries the target session already holds (same id and content, or
    the same content under another id: the same file imported twice, an export read back into
    its own session). Nothing was written; ``hint`` says what to type instead."""

    def __init__(
        self,
        message: str,
        *,
        path: Path | str | None = None,
        duplicates: int,
        same_id: int,
        total: int,
        hint: str,
    ) -> None:
        super().__init__(message, path=path)
        self.duplicates, self.same_id, self.total, self.hint = duplicates, same_id, total, hint


class PartialImportError(StoreError):
    """A large import (committed in batches) failed after some batches landed. The message says
    exactly what was written: ``written`` of ``total`` entries, through ``last_id``, and where
    the session's leaf is (``leaf``: unchanged by the import)."""

    def __init__(
        self,
        message: str,
        *,
        path: Path | str | None = None,
        written: int,
        total: int,
        last_id: str | None,
        leaf: str | None,
    ) -> None:
        super().__init__(message, path=path)
        self.written, self.total, self.last_id, self.leaf = written, total, last_id, leaf


class JournalError(StoreError):
    """The pending-writes journal (``store/pending.py``) cannot be read, rewritten or replayed
    here (``path``: what is in the way, e.g. its replay lock is a folder). Nothing in it is lost:
    it stays on disk for the next replay, and the message says what to remove or fix."""


class DriverMissingError(StoreError):
    """A ``postgresql://`` log was asked for where its driver (the ``postgres`` extra: psycopg and
    psycopg_pool) cannot be imported; the message names the install command."""
