"""Where a session log lives: a SQLite file path or a database URL.

Why one string: ``--db``, ``IPYTHON_COMPACT_DB``, ``CompactConfig`` and ``Agent(store=...)`` all
take the same thing, a file path (the default engine) or ``postgresql://...`` (a server shared
by several hosts), and ``export``/``import`` stream between any two of them.

What must hold:
- A path is never mistaken for a URL (``C:/x`` on Windows, ``./postgresql:x``): only a scheme
  followed by ``://`` makes a URL, and only the schemes below are accepted; any other is a clear
  error naming the schemes known.
- A password never appears where a location is shown (errors, ``verify``, the CLI).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

POSTGRES_SCHEMES = ("postgresql", "postgres")
SQLITE_SCHEME = "sqlite"
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class LocationError(ValueError):
    """A ``--db`` value that names no engine we know."""


def scheme(location: str | Path) -> str | None:
    """The URL scheme of ``location`` (lower case), None for a plain path."""
    if isinstance(location, Path):
        return None
    match = _URL.match(location)
    return match.group(1).lower() if match else None


def is_postgres(location: str | Path) -> bool:
    return scheme(location) in POSTGRES_SCHEMES


def sqlite_path(location: str | Path) -> Path:
    """The file of a SQLite location: a path, or ``sqlite:///abs/path`` / ``sqlite:rel`` style URLs.
    Raises ``LocationError`` for a URL of an engine we do not know."""
    found = scheme(location)
    if found is None:
        return Path(location).expanduser()
    if found == SQLITE_SCHEME:
        rest = str(location)[len("sqlite://") :]
        if not rest:
            raise LocationError(f"{location}: a sqlite URL needs a file (sqlite:///path/to/sessions.db)")
        return Path(rest).expanduser()
    raise LocationError(
        f"{redact(str(location))}: unknown database URL scheme {found!r}; use a file path, "
        "sqlite:///path/to/sessions.db or postgresql://user@host/dbname"
    )


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` (query-string passwords too)."""
    if scheme(url) is None:
        return url
    # Edited in place (urlunsplit would drop the empty host of postgresql:///db?host=/socket).
    shown = re.sub(r"^([^:]+://[^/@:?#]*):[^@/?#]*@", r"\1:***@", url)
    return re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", shown)


def sidecar_name(url: str) -> str:
    """A file name standing for a server database on this host (its pending-writes journal
    lives beside it in the data directory): stable for a URL, without the password."""
    digest = hashlib.sha256(redact(url).encode("utf-8")).hexdigest()[:16]
    return f"postgres-{digest}.db"


__all__ = ["LocationError", "is_postgres", "redact", "scheme", "sidecar_name", "sqlite_path"]
