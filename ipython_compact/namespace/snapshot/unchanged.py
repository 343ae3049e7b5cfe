"""The whole-namespace lane: many small unchanged names proved unchanged in a few C-level passes.

Why: an unchanged automatic snapshot of 100,000 small names (ints, floats, strings, small lists)
cost more than pickling them once, all of it per-name Python work (a dict lookup, an identity
test, a pickle and a hash per small container). This lane replaces that work, for the names of
these kinds, by three batched comparisons with what the previous save saw:

1. the names, in order (one list comparison);
2. each immutable value (``QUICK_TYPES``: int, float, bool, None, str) is the very object saved
   last time (``operator.is_`` mapped over two lists; the lane holds those objects, so an id
   cannot be reused by another one);
3. the small builtin containers of scalars (``decide._flat``), pickled together by the C pickler
   in one call (under the save's per-name timer), give the very bytes they gave last time.

What must hold: the lane takes a name only when the per-name path would reuse the same entry.
Equal combined pickle bytes mean every container holds equal content with the same sharing, so
its own pickle, which keyed its entry, is unchanged too. Every payload file the lane's entries
point at must still exist (checked against the listing taken under the writer lock). Any
difference, a timeout or an error means no lane: the save takes the per-name path, which then
rebuilds the lane. Names of other kinds (arrays, frames, objects, skipped names) always take the
per-name path. Not used for ``full`` saves, nor across a fork (identities do not cross a pipe).
"""

from __future__ import annotations

import operator
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ipython_compact.namespace.snapshot.blobs import ref_file
from ipython_compact.namespace.snapshot.codec import Deadline, SerializeTimeout
from ipython_compact.namespace.snapshot.decide import QUICK_TYPES, Cached, flat_container
from ipython_compact.namespace.snapshot.fingerprints import CONTAINERS

_NAME = operator.itemgetter(0)
_VALUE = operator.itemgetter(1)


def _getter(indices: tuple[int, ...]) -> Any:
    """A C-level callable giving ``seq``'s items at ``indices`` as a tuple (built once per lane)."""
    if not indices:
        return lambda seq: ()
    if len(indices) == 1:
        (only,) = indices
        return lambda seq: (seq[only],)
    return operator.itemgetter(*indices)


def _containers_bytes(containers: tuple[Any, ...]) -> bytes | None:
    try:
        return pickle.dumps(containers, protocol=5)
    except SerializeTimeout:
        raise
    except Exception:
        return None


@dataclass
class LaneHit:
    """What the lane proved unchanged: their entries, cache and quick-lane rows, ready to copy."""

    entries: dict[str, dict[str, Any]]
    cache: dict[str, Cached]
    seen: dict[str, tuple[Any, dict[str, Any], Cached]]
    total: int
    others: list[tuple[str, Any]]  # the names the per-name path must decide, in order


@dataclass(frozen=True)
class PortableLane:
    """A lane without the objects it holds, for a forked child to send to its kernel
    (``UnchangedLane.adopted`` finds the objects again among the kernel's bindings at the fork)."""

    names: list[str]
    skip: dict[str, str]
    immutable_at: tuple[int, ...]
    container_at: tuple[int, ...]
    other_at: tuple[int, ...]
    containers: bytes | None


@dataclass
class UnchangedLane:
    """What one save saw, for the next save to compare with (built by ``build``)."""

    names: list[str]
    skip: dict[str, str]
    immutable_at: tuple[int, ...]
    immutables: tuple[Any, ...]  # held: their identities must stay unique
    container_at: tuple[int, ...]
    containers: bytes | None  # the C pickler's bytes of those containers, in order
    other_at: tuple[int, ...]
    entries: dict[str, dict[str, Any]]
    cache: dict[str, Cached]
    seen: dict[str, tuple[Any, dict[str, Any], Cached]]
    total: int
    refs: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.refs = frozenset(ref_file(e["ref"]) for e in self.entries.values())
        self._immutable_items = _getter(self.immutable_at)  # C-level picks, built once
        self._container_items = _getter(self.container_at)
        self._other_items = _getter(self.other_at)

    def portable(self) -> PortableLane:
        return PortableLane(
            self.names, self.skip, self.immutable_at, self.container_at, self.other_at, self.containers
        )

    @classmethod
    def adopted(
        cls,
        lane: PortableLane,
        objects: Mapping[str, Any],
        cache: Mapping[str, Cached],
        seen: Mapping[str, tuple[Any, dict[str, Any], Cached]],
    ) -> UnchangedLane | None:
        """A forked child's lane in its kernel: ``objects`` are the kernel's bindings at the fork
        (the very objects the child saved), ``cache`` and ``seen`` what the kernel adopted from the
        child; None when any name the lane needs is missing from them."""
        names = lane.names
        entries: dict[str, dict[str, Any]] = {}
        lane_cache: dict[str, Cached] = {}
        lane_seen: dict[str, tuple[Any, dict[str, Any], Cached]] = {}
        immutables = []
        total = 0
        for i in lane.immutable_at:
            row = seen.get(names[i])
            if row is None:
                return None
            lane_seen[names[i]] = row
            entries[names[i]], lane_cache[names[i]] = row[1], row[2]
            immutables.append(row[0])
            total += row[2].size
        for i in lane.container_at:
            name = names[i]
            hit = cache.get(name)
            if hit is None or name not in objects:
                return None
            entries[name] = {
                "ref": hit.ref,
                "bytes": hit.size,
                "format": hit.fmt,
                "code": hit.code,
                "type": type(objects[name]).__qualname__,
            }
            lane_cache[name] = hit
            total += hit.size
        return cls(
            list(names),
            dict(lane.skip),
            lane.immutable_at,
            tuple(immutables),
            lane.container_at,
            lane.containers,
            lane.other_at,
            entries,
            lane_cache,
            lane_seen,
            total,
        )

    @classmethod
    def build(
        cls,
        items: list[tuple[str, Any]],
        skip: Mapping[str, str],
        entries: Mapping[str, dict[str, Any]],
        cache: Mapping[str, Cached],
        seen: Mapping[str, tuple[Any, dict[str, Any], Cached]],
        deadline: Deadline,
    ) -> UnchangedLane | None:
        """The lane for the next save from this save's outcome; None when it cannot be built
        (an odd name or value that raises is no reason to fail the save: no lane then)."""
        try:
            return cls._build(items, skip, entries, cache, seen, deadline)
        except (SerializeTimeout, Exception):  # SerializeTimeout is a BaseException: named on purpose
            return None

    @classmethod
    def _build(
        cls,
        items: list[tuple[str, Any]],
        skip: Mapping[str, str],
        entries: Mapping[str, dict[str, Any]],
        cache: Mapping[str, Cached],
        seen: Mapping[str, tuple[Any, dict[str, Any], Cached]],
        deadline: Deadline,
    ) -> UnchangedLane | None:
        immutable_at: list[int] = []
        container_at: list[int] = []
        other_at: list[int] = []
        lane_entries: dict[str, dict[str, Any]] = {}
        lane_cache: dict[str, Cached] = {}
        lane_seen: dict[str, tuple[Any, dict[str, Any], Cached]] = {}
        total = 0
        for i, (name, value) in enumerate(items):
            kind = type(value)
            row = seen.get(name) if kind in QUICK_TYPES else None
            if row is not None and row[0] is value and type(name) is str:
                immutable_at.append(i)
                lane_seen[name] = row
                lane_entries[name], lane_cache[name] = row[1], row[2]
                total += row[2].size
                continue
            hit = cache.get(name) if kind in CONTAINERS else None
            entry = entries.get(name)
            if (
                hit is not None
                and entry is not None
                and hit.fingerprint[:1] == ("p",)
                and not hit.code
                and flat_container(value)
            ):
                container_at.append(i)
                lane_entries[name], lane_cache[name] = entry, hit
                total += hit.size
                continue
            other_at.append(i)
        if len(set(map(_NAME, items))) != len(items):
            return None  # a name listed twice: the per-name path decides which binding wins
        containers = None
        if container_at:
            try:
                with deadline.limit():
                    containers = _containers_bytes(tuple(map(_VALUE, _getter(tuple(container_at))(items))))
            except SerializeTimeout:
                return None
            if containers is None:
                return None
        return cls(
            list(map(_NAME, items)),
            dict(skip),
            tuple(immutable_at),
            tuple(map(_VALUE, _getter(tuple(immutable_at))(items))),
            tuple(container_at),
            containers,
            tuple(other_at),
            lane_entries,
            lane_cache,
            lane_seen,
            total,
        )

    def match(
        self,
        items: list[tuple[str, Any]],
        skip: Mapping[str, str],
        present: set[str],
        deadline: Deadline,
    ) -> LaneHit | None:
        """The names proved unchanged since ``build`` (see the module doc), or None (also when
        comparing raises: the per-name path then decides every name)."""
        try:
            return self._match(items, skip, present, deadline)
        except SerializeTimeout:
            return None
        except Exception:
            return None

    def _match(
        self,
        items: list[tuple[str, Any]],
        skip: Mapping[str, str],
        present: set[str],
        deadline: Deadline,
    ) -> LaneHit | None:
        if len(items) != len(self.names) or skip != self.skip or not self.refs <= present:
            return None
        if list(map(_NAME, items)) != self.names:
            return None
        if not all(map(operator.is_, map(_VALUE, self._immutable_items(items)), self.immutables)):
            return None
        if self.containers is not None:
            try:
                with deadline.limit():
                    now = _containers_bytes(tuple(map(_VALUE, self._container_items(items))))
            except SerializeTimeout:
                return None
            if now is None or now != self.containers:
                return None
        return LaneHit(self.entries, self.cache, self.seen, self.total, list(self._other_items(items)))
