"""The whole-namespace lane: many small unchanged names proved unchanged in a few C-level passes.

Why: an unchanged automatic snapshot of 100,000 small names (ints, floats, strings, small lists)
cost more than pickling them once, all of it per-name Python work (a dict lookup, an identity
test, a pickle and a hash per small container). This lane replaces that work, for the names of
these kinds, by a few batched comparisons with what the previous save saw:

1. every name and every value is the very object seen last time, in the same order: the pairs
   are flattened once (``list.extend`` mapped over them, one C-level pass that copies each
   tuple's two items without making an iterator; the only pass that opens the pairs: on the
   kernel's freshly listed pairs a pass costs as much as pickling the values) and the addresses
   compared with the last save's in one ``memcmp`` (``identity.py``;
   ``operator.is_`` mapped over the two lists where addresses cannot be read). The lane holds the
   last save's names and values, so an address cannot be reused by another object. A name is
   the very string the namespace held last time (the kernel's dict keys); one that is only equal
   takes the slower path below, as does a rebound value;
2. on that slower path, only the lane's own values must be the very objects seen (``operator.is_``
   over them) and the names equal, in order (exact strings, see ``_build``);
3. the small mutable builtin containers of scalars (list, dict, set of ``decide._flat``) give
   the very bytes they gave last time. Tuples and frozensets of scalars cannot change: identity
   suffices. Lists and dicts holding only ints, floats, bools and None (``_ATOMIC``: no object in
   them can be shared, so no pickle memo can differ) are written by ``marshal`` (version 2: no
   references; exact types, floats bit for bit), three times faster than the pickler; the others
   are pickled together by the C pickler in one call (under the save's per-name timer), memo and
   all, so a change in which strings they share is seen too.

So a value of another kind (an array, a frame, an object: ``other_at``) that was rebound leaves the
lane's names in the lane; those other names go the per-name way as always. The pairs are taken as
what the save's contract says they are, ``(name, value)`` tuples: a sequence that flattens to last
time's names and values is last time's namespace.

What must hold: the lane takes a name only when the per-name path would reuse the same entry.
Identity of an immutable value means the same value and type (``1`` and ``True``, ``0.0`` and
``-0.0`` are different objects). Equal combined pickle bytes mean every mutable container holds
equal content with the same sharing, so its own pickle, which keyed its entry, is unchanged too;
equal ``marshal`` bytes of containers that held only ``_ATOMIC`` values mean the same (``marshal``
refuses any other type, and atomic values are never memoized by the pickler).
Every payload file the lane's entries point at must still exist (checked against the listing
taken under the writer lock). Any difference, a timeout or an error means no lane: the save takes
the per-name path, which then rebuilds the lane. Names of other kinds (arrays, frames, objects,
skipped names) always take the per-name path. Not used for ``full`` saves; across a fork the
kernel rebuilds it from its own objects at the fork (``UnchangedLane.adopted``).
"""

from __future__ import annotations

import marshal
import operator
import pickle
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ipython_compact.namespace.snapshot.blobs import ref_file
from ipython_compact.namespace.snapshot.codec import Deadline, SerializeTimeout
from ipython_compact.namespace.snapshot.decide import QUICK_TYPES, Cached, flat_container
from ipython_compact.namespace.snapshot.fingerprints import CONTAINERS
from ipython_compact.namespace.snapshot.identity import item_addresses, same_objects

_MUTABLE = frozenset({list, dict, set})  # the containers whose content can change in place
_ATOMIC = frozenset({int, float, bool, type(None)})  # never memoized by the pickler: nothing to share
_MARSHAL_VERSION = 2  # no references (version 3 on marks objects by their reference count)
_ABSENT = object()  # a value the kernel no longer had at the fork: never the same object again


def _getter(indices: tuple[int, ...]) -> Any:
    """A C-level callable giving ``seq``'s items at ``indices`` as a tuple (built once per lane)."""
    if not indices:
        return lambda seq: ()
    if len(indices) == 1:
        (only,) = indices
        return lambda seq: (seq[only],)
    return operator.itemgetter(*indices)


def _flattened(items: Iterable[Any]) -> list[Any]:
    """``[name, value, name, value, ...]`` of ``items`` in one C-level pass."""
    flat: list[Any] = []
    deque(map(flat.extend, items), 0)  # extend copies a tuple's items directly
    return flat


def _atomic(value: Any) -> bool:
    """A list, or a dict keyed and valued, of ``_ATOMIC`` values only (``marshal`` writes it)."""
    if type(value) is list:
        return all(type(v) in _ATOMIC for v in value)
    if type(value) is dict:
        return all(type(k) in _ATOMIC for k in value) and all(type(v) in _ATOMIC for v in value.values())
    return False


def _containers_bytes(containers: tuple[Any, ...]) -> bytes | None:
    try:
        return pickle.dumps(containers, protocol=5)
    except SerializeTimeout:
        raise
    except Exception:
        return None


def _marshal_bytes(containers: tuple[Any, ...]) -> bytes | None:
    """``marshal``'s bytes, or None when a container now holds a value it refuses (any type but the
    exact builtin ones) or nests too deep."""
    try:
        return marshal.dumps(containers, _MARSHAL_VERSION)
    except (ValueError, TypeError, RecursionError):
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
    pickled_at: tuple[int, ...]
    marshalled_at: tuple[int, ...]
    pickled: bytes | None
    marshalled: bytes | None


@dataclass
class UnchangedLane:
    """What one save saw, for the next save to compare with (built by ``build``)."""

    names: list[str]
    skip: dict[str, str]
    immutable_at: tuple[int, ...]
    container_at: tuple[int, ...]
    other_at: tuple[int, ...]
    pickled_at: tuple[int, ...]  # the mutable containers among ``container_at`` the pickler checks
    marshalled_at: tuple[int, ...]  # and those of ``_ATOMIC`` values ``marshal`` checks
    pickled: bytes | None  # the C pickler's bytes of the ``pickled_at`` containers, in order
    marshalled: bytes | None  # ``marshal``'s bytes of the ``marshalled_at`` containers, in order
    values: list[Any]  # every value seen, in order, held: their identities must stay unique
    entries: dict[str, dict[str, Any]]
    cache: dict[str, Cached]
    seen: dict[str, tuple[Any, dict[str, Any], Cached]]
    total: int
    refs: frozenset[str] = field(default=frozenset())

    def __post_init__(self) -> None:
        self.refs = frozenset(ref_file(e["ref"]) for e in self.entries.values())
        # names and values interleaved, as ``_flattened`` lists the pairs; held, so the addresses
        # stay valid
        self._flat: list[Any] = [None] * (2 * len(self.names))
        self._flat[0::2], self._flat[1::2] = self.names, self.values
        self._flat_addresses = item_addresses(self._flat)
        self._name_addresses = item_addresses(self.names)

        def value_at(indices: tuple[int, ...]) -> Any:  # C-level picks of values from the flat list
            return _getter(tuple(2 * i + 1 for i in indices))

        self._lane_items = value_at(tuple(sorted(self.immutable_at + self.container_at)))
        self._lane_values = self._lane_items(self._flat)
        self._pickled_items = value_at(self.pickled_at)
        self._marshalled_items = value_at(self.marshalled_at)
        self._other_items = _getter(self.other_at)  # of the pairs

    def portable(self) -> PortableLane:
        return PortableLane(
            self.names,
            self.skip,
            self.immutable_at,
            self.container_at,
            self.other_at,
            self.pickled_at,
            self.marshalled_at,
            self.pickled,
            self.marshalled,
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
        total = 0
        for i in lane.immutable_at:
            row = seen.get(names[i])
            if row is None:
                return None
            lane_seen[names[i]] = row
            entries[names[i]], lane_cache[names[i]] = row[1], row[2]
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
        # the kernel's own name strings where it has them: the next save then finds them the
        # very objects (a child's names came through a pipe)
        own = dict(zip(objects, objects, strict=True))  # one C-level pass
        kernel_names = [own.get(name, name) for name in names]
        values = [objects.get(name, _ABSENT) for name in kernel_names]
        for i in lane.immutable_at:  # the very objects the child's quick lane named
            if values[i] is not lane_seen[names[i]][0]:
                return None
        return cls(
            kernel_names,
            dict(lane.skip),
            lane.immutable_at,
            lane.container_at,
            lane.other_at,
            lane.pickled_at,
            lane.marshalled_at,
            lane.pickled,
            lane.marshalled,
            values,
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
        pickled_at: list[int] = []
        marshalled_at: list[int] = []
        other_at: list[int] = []
        lane_entries: dict[str, dict[str, Any]] = {}
        lane_cache: dict[str, Cached] = {}
        lane_seen: dict[str, tuple[Any, dict[str, Any], Cached]] = {}
        names: list[str] = []
        values: list[Any] = []
        total = 0
        for i, (name, value) in enumerate(items):
            if type(name) is not str:
                return None  # names are compared by equality: exact strings only, no user __eq__
            names.append(name)
            values.append(value)
            kind = type(value)
            row = seen.get(name) if kind in QUICK_TYPES else None
            if row is not None and row[0] is value:
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
                if _atomic(value):
                    marshalled_at.append(i)
                elif kind in _MUTABLE:
                    pickled_at.append(i)
                lane_entries[name], lane_cache[name] = entry, hit
                total += hit.size
                continue
            other_at.append(i)
        if len(set(names)) != len(names):
            return None  # a name listed twice: the per-name path decides which binding wins
        pickled = marshalled = None
        if pickled_at:
            try:
                with deadline.limit():
                    pickled = _containers_bytes(tuple(values[i] for i in pickled_at))
            except SerializeTimeout:
                return None
            if pickled is None:
                return None
        if marshalled_at:
            marshalled = _marshal_bytes(tuple(values[i] for i in marshalled_at))
            if marshalled is None:
                return None
        return cls(
            names,
            dict(skip),
            tuple(immutable_at),
            tuple(container_at),
            tuple(other_at),
            tuple(pickled_at),
            tuple(marshalled_at),
            pickled,
            marshalled,
            values,
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
        flat = _flattened(items)  # name, value, name, value, ...
        if len(flat) != len(self._flat):
            return None
        if not same_objects(flat, self._flat, self._flat_addresses):
            # a value rebound, or a name only equal: the lane's own values must be the very
            # objects seen, and the names equal
            if not all(map(operator.is_, self._lane_items(flat), self._lane_values)):
                return None
            names = flat[0::2]
            if not same_objects(names, self.names, self._name_addresses) and names != self.names:
                return None
        if self.marshalled is not None and _marshal_bytes(self._marshalled_items(flat)) != self.marshalled:
            return None
        if self.pickled is not None:
            try:
                with deadline.limit():
                    now = _containers_bytes(self._pickled_items(flat))
            except SerializeTimeout:
                return None
            if now is None or now != self.pickled:
                return None
        return LaneHit(self.entries, self.cache, self.seen, self.total, list(self._other_items(items)))
