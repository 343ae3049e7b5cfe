"""The namespace probe: which user-defined names exist, with cheap facts, without running user code.

Why: the probe answers the panel and the host client while a cell may be running (from a subshell
thread), and feeds the ``<ipython_state>`` notice after a compaction. It must therefore never be
slowed or broken by what the user keeps in the namespace.

What must hold:
- Names are chosen the way ``%who`` chooses them: string keys that do not start with ``_`` and
  whose value is not (by identity) the one in ``user_ns_hidden``; minus our own objects (by id).
- No user code runs: no ``repr``/``str``/``len``/``getattr`` on arbitrary objects, no
  ``isinstance`` (which may read a ``__class__`` property). Types are taken with ``type()``; type
  names through ``type``'s own descriptors (a metaclass cannot intercept them); lengths through
  the builtin slot (``list.__len__(v)``); array facts through the base class's C descriptors, and
  only for classes already imported (numpy, pandas, torch) — the probe never imports them.
- dtypes are sent as their readable names (``float64``, ``datetime64[ns]``), read from
  ``np.dtype``'s descriptors only for numpy's own dtype classes (see ``readable_dtype``).
- The namespace is copied atomically before iterating, so a cell that adds names concurrently
  cannot raise "dictionary changed size".
- A deadline bounds the work; past it the result says ``truncated``.
- Sizes: strings/bytes/arrays report their exact buffer size; builtin containers (list, tuple,
  dict, set) an estimate (``bytes_approx``) from the base types' own ``__sizeof__`` slots over a
  bounded sample of their items, so a million-item list costs the same as a small one; DataFrames
  their pandas memory without object contents (also ``bytes_approx`` when object columns exist)
  plus a dtypes summary.
- ``restart`` says why a value cannot survive a kernel restart (an open file, a generator, a
  lock, a thread, a socket, a database connection), judged from its type alone, with the same
  words the snapshot's skip reasons use.
"""

from __future__ import annotations

import bisect
import io
import sys
import time
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ipython_compact.namespace.preview import value_preview

_QUALNAME = type.__dict__["__qualname__"].__get__
_MODULE = type.__dict__["__module__"].__get__

_SIZED_BUILTINS: tuple[type, ...] = (list, tuple, dict, set, frozenset, str, bytes, bytearray)
_SCALARS: tuple[type, ...] = (int, float, complex, bool, type(None))
_FUNCTION_TYPES: tuple[type, ...] = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.BuiltinMethodType,
)


@dataclass(slots=True)
class NameInfo:
    """Cheap facts about one user-visible name. ``kind`` is module, function, class, data or object.

    Not frozen: a frozen dataclass's ``__init__`` costs ~2.5 µs, a quarter of the probe's budget
    per name at 100,000 names; nothing mutates one after ``describe`` made it."""

    name: str
    type: str
    module: str | None
    kind: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    length: int | None = None
    bytes: int | None = None
    bytes_approx: bool = False
    dtypes: str | None = None
    restart: str | None = None
    preview: str | None = None  # a short preview (namespace/preview.py: never user code)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type, "kind": self.kind}
        if self.module is not None:
            out["module"] = self.module
        if self.shape is not None:
            out["shape"] = list(self.shape)
        if self.dtype is not None:
            out["dtype"] = self.dtype
        if self.length is not None:
            out["length"] = self.length
        if self.bytes is not None:
            out["bytes"] = self.bytes
            if self.bytes_approx:
                out["bytes_approx"] = True
        if self.dtypes is not None:
            out["dtypes"] = self.dtypes
        if self.restart is not None:
            out["restart"] = self.restart
        if self.preview is not None:
            out["preview"] = self.preview
        return out


@dataclass(frozen=True)
class ProbeResult:
    """The probe's answer. ``total`` counts all user names, even those cut by ``limit``/deadline."""

    names: tuple[NameInfo, ...]
    truncated: bool
    elapsed_ms: float
    total: int
    next: str | None = None  # pass as ``after`` for the next page; None: this page reached the end

    def to_json(self) -> dict[str, Any]:
        return {
            "names": [n.to_json() for n in self.names],
            "truncated": self.truncated,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "total": self.total,
            "next": self.next,
        }

    @property
    def name_list(self) -> list[str]:
        return [n.name for n in self.names]


_MISSING = object()


def _copy_namespace(user_ns: Mapping[Any, Any]) -> dict[Any, Any]:
    if type(user_ns) is dict:
        return dict.copy(user_ns)  # one C call under the GIL: atomic w.r.t. other threads
    for _ in range(3):
        try:
            return dict(user_ns.items())
        except RuntimeError:  # changed size while copying; try again
            continue
    return {}


def user_names(
    user_ns: Mapping[Any, Any], user_ns_hidden: Mapping[Any, Any], *, exclude_ids: Iterable[int] = ()
) -> list[tuple[str, Any]]:
    """``(name, value)`` pairs ``%who`` would list, minus values whose id is in ``exclude_ids``, sorted."""
    ns = _copy_namespace(user_ns)
    hidden_get = _copy_namespace(user_ns_hidden).get
    excluded = set(exclude_ids)
    out = [
        (key, value)
        for key, value in ns.items()
        if type(key) is str and key[:1] != "_" and value is not hidden_get(key, _MISSING)
    ]
    if excluded:
        out = [kv for kv in out if id(kv[1]) not in excluded]
    out.sort(key=_first)
    return out


def _first(pair: tuple[str, Any]) -> str:
    return pair[0]


def _builtin_len(base: type, value: Any) -> int:
    """``len`` through the builtin type's own slot, so an overriding ``__len__`` never runs."""
    slot: Any = base.__dict__["__len__"]
    return int(slot(value))


def _kind(cls: type) -> str:
    if issubclass(cls, types.ModuleType):
        return "module"
    if issubclass(cls, type):
        return "class"
    if issubclass(cls, _FUNCTION_TYPES):
        return "function"
    if issubclass(cls, _SIZED_BUILTINS) or issubclass(cls, _SCALARS):
        return "data"
    return "object"


#: Longest structured-dtype description the probe sends; longer ones end in an ellipsis.
DTYPE_TEXT_MAX = 60
_STRUCT_FIELDS_SHOWN = 3


def _is_numpy_dtype(dtype: Any, np: Any) -> bool:
    """True only for dtype objects whose class numpy itself defines (``np.dtype`` or ``numpy.dtypes.*``).

    A class from anywhere else (a third-party or user DType) could run its own code from a
    descriptor, so its name is not read.
    """
    cls = type(dtype)
    if cls is np.dtype:
        return True
    if not issubclass(cls, np.dtype):
        return False
    try:
        return _MODULE(cls) == "numpy.dtypes" and vars(sys.modules["numpy.dtypes"]).get(_QUALNAME(cls)) is cls
    except Exception:
        return False


def readable_dtype(dtype: Any, np: Any, *, depth: int = 0) -> str | None:
    """A person's name for a numpy dtype: ``float64``, ``int32``, ``datetime64[ns]``, ``str[5]``,
    ``float32[2,3]`` for a sub-array, ``{x: float64, y: int32, +2}`` for a structured dtype.

    Read through ``np.dtype``'s own C descriptors and only for numpy's own dtype classes, so no
    user code runs; ``None`` for anything else (the caller falls back). Non-native byte order is
    marked with a trailing ``(>)`` or ``(<)`` because the same name then means other bytes.
    """
    if not _is_numpy_dtype(dtype, np):
        return None
    d = np.dtype.__dict__
    fields = d["fields"].__get__(dtype)
    if fields is not None:
        names = d["names"].__get__(dtype) or ()
        parts: list[str] = []
        for field in names[:_STRUCT_FIELDS_SHOWN]:
            sub = fields[field][0]
            inner = readable_dtype(sub, np, depth=depth + 1) if depth < 2 else None
            parts.append(f"{field}: {inner if inner is not None else '…'}")
        if len(names) > _STRUCT_FIELDS_SHOWN:
            parts.append(f"+{len(names) - _STRUCT_FIELDS_SHOWN}")
        text = "{" + ", ".join(parts) + "}"
        return text if len(text) <= DTYPE_TEXT_MAX else text[: DTYPE_TEXT_MAX - 2] + "…}"
    sub_dtype = d["subdtype"].__get__(dtype)
    if sub_dtype is not None:
        base, shape = sub_dtype
        inner = readable_dtype(base, np, depth=depth + 1) if depth < 2 else None
        return f"{inner if inner is not None else '?'}[{','.join(str(int(n)) for n in shape)}]"
    kind = d["kind"].__get__(dtype)
    size = int(d["itemsize"].__get__(dtype))
    if kind == "U":
        name = f"str[{size // 4}]"
    elif kind == "S":
        name = f"bytes[{size}]"
    elif kind == "V":
        name = f"void[{size}]"
    else:
        name = str(d["name"].__get__(dtype))
    order = d["byteorder"].__get__(dtype)
    native = "<" if sys.byteorder == "little" else ">"
    if order in ("<", ">") and order != native:
        name += f" ({order})"
    return name


_EXACT_ATOMS: frozenset[type] = frozenset({int, float, complex, bool, type(None), str, bytes})
_CONTAINERS: tuple[type, ...] = (list, tuple, dict, set, frozenset)
SIZE_SAMPLE = 64  # items looked at per container level
SIZE_BUDGET = 256  # items looked at per name, all levels together
SIZE_DEPTH = 3


def _own_sizeof(cls: type) -> Any:
    """``cls.__sizeof__`` as a builtin defines it (looked up along the builtin's own MRO)."""
    return next(k.__dict__["__sizeof__"] for k in cls.__mro__ if "__sizeof__" in k.__dict__)


_SIZEOF: dict[type, Any] = {cls: _own_sizeof(cls) for cls in (*_EXACT_ATOMS, *_CONTAINERS, bytearray)}
_ITER: dict[type, Any] = {cls: cls.__dict__["__iter__"] for cls in (list, tuple, set, frozenset)}


def container_bytes(
    value: Any, base: type, depth: int = 0, budget: list[int] | None = None
) -> tuple[int, bool]:
    """(estimated bytes, approximate?) of a builtin container and what it holds.

    Uses the base type's ``__sizeof__`` slot (never an override) and looks at no more than
    ``SIZE_SAMPLE`` items per level, ``SIZE_DEPTH`` levels and ``SIZE_BUDGET`` items in all; the
    rest is extrapolated, which makes the figure approximate. Items of other types count as a
    pointer only (also approximate). A dict's keys and values both count.
    """
    budget = [SIZE_BUDGET] if budget is None else budget
    total = int(_SIZEOF[base](value))
    n = _builtin_len(base, value)
    if n == 0:
        return total, False
    take = min(n, SIZE_SAMPLE, budget[0])
    budget[0] -= take
    if base is dict:
        parts: Any = (p for pair in islice(dict.items(value), take) for p in pair)
    else:
        parts = islice(_ITER[base](value), take)
    approx = take < n
    inner = 0
    for part in parts:
        cls: Any = type(part)
        size_of = _SIZEOF.get(cls)
        if size_of is None:
            approx = True  # another type: its pointer is in the container's own size already
        elif cls in _CONTAINERS:
            if depth < SIZE_DEPTH and budget[0] > 0:
                got, rough = container_bytes(part, cls, depth + 1, budget)
                inner += got
                approx = approx or rough
            else:
                inner += int(size_of(part))
                approx = True
        else:
            inner += int(size_of(part))
    if take < n:
        inner = inner * n // max(1, take)
    return total + inner, approx


def _restart_reason(cls: type) -> str | None:
    """Why a value of class ``cls`` cannot be saved for a restart, judged from its type alone."""
    if issubclass(cls, io.IOBase):
        return "open file handles are not persisted"
    if issubclass(cls, (types.GeneratorType, types.AsyncGeneratorType, types.CoroutineType)):
        return "a running generator's position cannot be saved"
    if issubclass(cls, (types.FrameType, types.TracebackType)):
        return "interpreter frames cannot be saved"
    for module, names, reason in _LIVE_RESOURCES:
        mod = sys.modules.get(module)  # never imported here: a class not loaded cannot be in the namespace
        if mod is None:
            continue
        for name in names:
            klass = getattr(mod, name, None)
            if type(klass) is type and issubclass(cls, klass):
                return reason
    return None


_LIVE_RESOURCES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("_thread", ("LockType", "RLock"), "locks cannot be saved"),
    ("threading", ("Thread",), "a running thread cannot be saved"),
    ("socket", ("socket",), "an open network connection cannot be saved"),
    ("sqlite3", ("Connection", "Cursor"), "an open database connection cannot be saved"),
    ("subprocess", ("Popen",), "a running process cannot be saved"),
)


def _dtypes_summary(frame: Any) -> tuple[str, bool]:
    """``int64 ×2, float64, object`` for a DataFrame, and whether object columns exist."""
    counts: dict[str, int] = {}
    for dtype in frame.dtypes:
        counts[str(dtype)] = counts.get(str(dtype), 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [name if n == 1 else f"{name} ×{n}" for name, n in ordered[:4]]
    if len(ordered) > 4:
        parts.append(f"+{len(ordered) - 4} more")
    return ", ".join(parts), "object" in counts


def _array_facts(value: Any, cls: type) -> tuple[tuple[int, ...] | None, str | None, int | None, int | None]:
    """Shape/dtype/length/bytes for known array types, via base-class descriptors only."""
    np = sys.modules.get("numpy")
    if np is not None and issubclass(cls, np.ndarray):
        base = np.ndarray.__dict__
        shape = tuple(int(s) for s in base["shape"].__get__(value))
        dtype = base["dtype"].__get__(value)
        name = readable_dtype(dtype, np)
        if name is None:  # not numpy's own dtype class: its C-level type string only
            name = str(np.dtype.__dict__["str"].__get__(dtype))
        return shape, name, (shape[0] if shape else None), int(base["nbytes"].__get__(value))
    pd = sys.modules.get("pandas")
    if pd is not None:
        if cls is pd.DataFrame:
            shape = (len(value.index), len(value.columns))
            return shape, None, shape[0], int(value.memory_usage(index=True, deep=False).sum())
        if cls is pd.Series:
            n = len(value.index)
            series_dtype = value.dtype
            readable = readable_dtype(series_dtype, np) if np is not None else None
            return (
                (n,),
                readable if readable is not None else str(series_dtype),
                n,
                int(value.memory_usage(index=True, deep=False)),
            )
    torch = sys.modules.get("torch")
    if torch is not None and cls is getattr(torch, "Tensor", None):
        shape = tuple(int(s) for s in value.shape)
        name = str(value.dtype)
        name = name[len("torch.") :] if name.startswith("torch.") else name
        return shape, name, (shape[0] if shape else None), int(value.element_size() * value.nelement())
    return None, None, None, None


#: Per-class facts (``id(cls) -> (cls, qual, module, kind, sized base, restart reason)``): the
#: probe describes 100,000 names in pages, and the type facts of a class never change. Keyed by
#: id with the class kept alongside (a metaclass could override ``__hash__``; ``is`` cannot lie).
_CLASS_FACTS: dict[int, tuple[type, str, str | None, str, type | None, str | None]] = {}


def _class_facts(cls: type) -> tuple[type, str, str | None, str, type | None, str | None]:
    hit = _CLASS_FACTS.get(id(cls))
    if hit is not None and hit[0] is cls:
        return hit
    try:
        qual = str(_QUALNAME(cls))
        mod_obj = _MODULE(cls)
        module = mod_obj if type(mod_obj) is str and mod_obj != "builtins" else None
    except Exception:  # pragma: no cover - type's own descriptors do not fail in practice
        qual, module = "?", None
    kind = _kind(cls)
    base = next((b for b in _SIZED_BUILTINS if issubclass(cls, b)), None) if kind == "data" else None
    restart = _restart_reason(cls) if kind == "object" else None
    facts = (cls, qual, module, kind, base, restart)
    if len(_CLASS_FACTS) > 4096:  # classes made in a loop: do not grow without bound
        _CLASS_FACTS.clear()
    _CLASS_FACTS[id(cls)] = facts
    return facts


def describe(name: str, value: Any) -> NameInfo:
    """Facts about one value. Never raises: a failure leaves the optional facts empty."""
    cls = type(value)
    if cls is int or cls is float or cls is bool or value is None:
        return NameInfo(
            name, cls.__name__, None, "data", None, None, None, None, False, None, None, value_preview(value)
        )
    _, qual, module, kind, base, restart = _class_facts(cls)
    if base is str and cls is str:
        return NameInfo(
            name,
            "str",
            None,
            "data",
            None,
            None,
            str.__len__(value),
            int(str.__sizeof__(value)),
            False,
            None,
            None,
            value_preview(value),
        )
    return _describe_slow(name, value, cls, qual, module, kind, base, restart)


def _describe_slow(
    name: str,
    value: Any,
    cls: type,
    qual: str,
    module: str | None,
    kind: str,
    sized: type | None,
    restart_reason: str | None,
) -> NameInfo:
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    length: int | None = None
    nbytes: int | None = None
    approx = False
    dtypes: str | None = None
    restart: str | None = None
    try:
        if kind == "data":
            base = sized
            if base is not None:
                length = _builtin_len(base, value)
                if base in (bytes, bytearray):
                    nbytes = length
                elif base is str:
                    nbytes = int(str.__sizeof__(value))
                else:
                    nbytes, approx = container_bytes(value, base)
        elif kind == "object":
            shape, dtype, length, nbytes = _array_facts(value, cls)
            if shape is not None:
                kind = "data"
                pd = sys.modules.get("pandas")
                if pd is not None and cls is pd.DataFrame:
                    dtypes, approx = _dtypes_summary(value)
            else:
                restart = restart_reason
    except Exception:
        shape, dtype, length, nbytes, approx, dtypes = None, None, None, None, False, None
    return NameInfo(
        name, qual, module, kind, shape, dtype, length, nbytes, approx, dtypes, restart, value_preview(value)
    )


def probe_namespace(
    user_ns: Mapping[Any, Any],
    user_ns_hidden: Mapping[Any, Any],
    *,
    exclude_ids: Iterable[int] = (),
    limit: int | None = None,
    deadline_s: float = 0.2,
    after: str | None = None,
) -> ProbeResult:
    """List user names (sorted) with facts: one page, from the first name after ``after``, of at
    most ``limit`` names, stopped after ``deadline_s`` seconds.

    A page that stops early says ``truncated`` and gives ``next``: the caller asks again with
    ``after=next`` and so walks every name, each page within the budget (at 100,000 names one
    answer used to return 127 names, because listing them took the whole budget).
    """
    if limit is not None and (type(limit) is not int or limit < 0):
        raise ValueError(f"limit must be a non-negative integer, got {limit!r}")
    if after is not None and type(after) is not str:
        raise ValueError(f"after must be a name (a string), got {type(after).__name__}")
    start = time.perf_counter()
    pairs = user_names(user_ns, user_ns_hidden, exclude_ids=exclude_ids)
    first = 0 if after is None else bisect.bisect_right(pairs, after, key=_first)
    stop = len(pairs) if limit is None else min(len(pairs), first + limit)
    infos: list[NameInfo] = []
    i = first
    while i < stop:
        if (i - first) % 256 == 255 and time.perf_counter() - start > deadline_s:
            break
        name, value = pairs[i]
        infos.append(describe(name, value))
        i += 1
    more = i < len(pairs)
    return ProbeResult(
        tuple(infos),
        more,
        (time.perf_counter() - start) * 1000.0,
        len(pairs),
        infos[-1].name if more and infos else (after if more else None),
    )
