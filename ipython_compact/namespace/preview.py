"""What a value looks like, without running user code: a one-line preview and a bounded table of its head.

Why: the namespace table showed a type and a size, and a person still had to print a dict or a
frame to see what it held (jupyterlab-variableInspector shows both). The panel's Value column and
its table view come from here, and so may ``%compact names``: one function, one wording.

What must hold:
- No user code runs. Only *exact* builtin atoms (int, float, complex, bool, None, str, bytes) are
  passed to ``repr``; builtin containers are walked through their own slots; numpy arrays and
  pandas frames/series only when their class is numpy's or pandas' own (a subclass could override
  what is called), and only modules already imported are looked at (nothing is imported here).
  Any other object is shown by its type name in angle quotes (``‹Point›``), read through
  ``type``'s own descriptor.
- Bounded: at most ``PREVIEW_ITEMS`` items per level, ``PREVIEW_DEPTH`` levels and
  ``PREVIEW_CHARS`` characters in a preview; a table holds at most ``TABLE_ROWS`` × ``TABLE_COLS``
  cells of at most ``CELL_CHARS`` characters each, and stops at its deadline (``truncated``).
- Never raises: a value that cannot be previewed gives ``None`` (preview) or a ``NoTable`` error
  that says which kinds have a table view.
"""

from __future__ import annotations

import datetime as _dt
import sys
import time
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

_QUALNAME = type.__dict__["__qualname__"].__get__
_MODULE = type.__dict__["__module__"].__get__

#: Longest one-line preview (characters); longer ones end in ``…``.
PREVIEW_CHARS = 80
#: Items of one container level shown before ``…``.
PREVIEW_ITEMS = 6
#: Container levels shown; deeper ones are ``[…]``/``{…}``.
PREVIEW_DEPTH = 2
#: Characters of a text shown inside a container preview.
INNER_TEXT_CHARS = 24

#: A table view's bounds: rows, columns, characters per cell, and its time budget (seconds).
TABLE_ROWS = 50
TABLE_COLS = 20
CELL_CHARS = 60
TABLE_DEADLINE_S = 0.5

_ATOMS: frozenset[type] = frozenset({int, float, complex, bool, type(None), str, bytes})
_SEQUENCES: frozenset[type] = frozenset({list, tuple, set, frozenset})
_BRACKETS: dict[type, tuple[str, str]] = {
    list: ("[", "]"),
    tuple: ("(", ")"),
    set: ("{", "}"),
    frozenset: ("frozenset({", "})"),
    dict: ("{", "}"),
}
_EMPTY_CONTAINER: dict[type, str] = {
    list: "[]",
    tuple: "()",
    set: "set()",
    frozenset: "frozenset()",
    dict: "{}",
}
_ITER: dict[type, Any] = {cls: cls.__dict__["__iter__"] for cls in (list, tuple, set, frozenset)}
_LEN: dict[type, Any] = {cls: cls.__dict__["__len__"] for cls in (list, tuple, set, frozenset, dict)}


def type_label(value: Any) -> str:
    """``‹Point›``: how an object whose repr is not called is shown."""
    try:
        return f"‹{_QUALNAME(type(value))}›"
    except Exception:  # pragma: no cover - type's own descriptor does not fail in practice
        return "‹object›"


def _atom(value: Any, cls: type, text_chars: int) -> str | None:
    if cls is int and int.bit_length(value) > 256:  # repr of a huge int is slow and unreadable
        return f"‹int of {int.bit_length(value)} bits›"
    if cls in (str, bytes) and len(value) > text_chars:
        return repr(value[:text_chars]) + "…"
    return repr(value)


def _numpy_scalar(value: Any, cls: type) -> Any:
    """A numpy scalar (``np.float64(2.5)``) as the Python scalar it holds; ``_MISSING`` otherwise."""
    np = sys.modules.get("numpy")
    if np is None or not issubclass(cls, np.generic):
        return _MISSING
    try:
        if _MODULE(cls) != "numpy":  # a subclass defined elsewhere could override item()
            return _MISSING
        return np.generic.item(value)
    except Exception:
        return _MISSING


_MISSING = object()


def _short(value: Any, depth: int, text_chars: int, out: list[str], budget: list[int]) -> None:
    """Append the preview of ``value`` to ``out``; ``budget[0]`` is the characters still allowed."""
    if budget[0] <= 0:
        return
    cls = type(value)
    if cls in _ATOMS:
        text = _atom(value, cls, text_chars) or ""
    elif cls in _BRACKETS:
        _container(value, cls, depth, text_chars, out, budget)
        return
    else:
        text = _special(value, cls, depth, text_chars)
    out.append(text)
    budget[0] -= len(text)


def _special(value: Any, cls: type, depth: int, text_chars: int) -> str:
    """Numpy scalars and arrays, pandas frames and series, dates; else the type label."""
    scalar = _numpy_scalar(value, cls)
    if scalar is not _MISSING and type(scalar) in _ATOMS:
        return _atom(scalar, type(scalar), text_chars) or type_label(value)
    if cls in (_dt.datetime, _dt.date, _dt.time, _dt.timedelta):
        return str(value)
    np = sys.modules.get("numpy")
    if np is not None and cls is np.ndarray:
        return _array_preview(value, np, depth, text_chars)
    pd = sys.modules.get("pandas")
    if pd is not None:
        if cls is pd.DataFrame:
            return _frame_preview(value, text_chars)
        if cls is pd.Series:
            return _series_preview(value, depth, text_chars)
        if cls in (pd.Timestamp, pd.Timedelta):
            return str(value)
    return type_label(value)


def _container(value: Any, cls: type, depth: int, text_chars: int, out: list[str], budget: list[int]) -> None:
    opening, closing = _BRACKETS[cls]
    n = int(_LEN[cls](value))
    if n == 0:
        text = _EMPTY_CONTAINER[cls]
        out.append(text)
        budget[0] -= len(text)
        return
    if depth >= PREVIEW_DEPTH:
        text = f"{opening}…{closing}"
        out.append(text)
        budget[0] -= len(text)
        return
    out.append(opening)
    budget[0] -= len(opening)
    every = dict.items(value) if cls is dict else _ITER[cls](value)
    items = islice(every, PREVIEW_ITEMS)
    shown = 0
    for item in items:
        if budget[0] <= 0:
            break
        if shown:
            out.append(", ")
            budget[0] -= 2
        if cls is dict:
            key, val = item
            _short(key, depth + 1, text_chars, out, budget)
            out.append(": ")
            budget[0] -= 2
            _short(val, depth + 1, text_chars, out, budget)
        else:
            _short(item, depth + 1, text_chars, out, budget)
        shown += 1
    if shown < n:
        out.append(", …" if shown else "…")
        budget[0] -= 3
    if cls is tuple and n == 1 and shown == 1:
        out.append(",")
    out.append(closing)
    budget[0] -= len(closing)


def _nested_text(items: list[Any], depth: int, text_chars: int) -> str:
    """A head taken one item longer than shown, so each level that goes on ends in ``…``."""
    out: list[str] = []
    _short(items, depth, text_chars, out, [PREVIEW_CHARS * 2])
    return "".join(out)


def _array_preview(value: Any, np: Any, depth: int, text_chars: int) -> str:
    """``[0.5, 1.5, 2.5, …]`` from the array's first items (numpy's own ``ndarray`` only)."""
    base = np.ndarray.__dict__
    shape = tuple(int(s) for s in base["shape"].__get__(value))
    if len(shape) == 0:
        item = np.ndarray.item(value)
        return (_atom(item, type(item), text_chars) or "") if type(item) in _ATOMS else type_label(item)
    if len(shape) > 2:  # the Size column shows its shape; nested brackets would say nothing more
        return type_label(value)
    head = np.ndarray.__getitem__(value, tuple(slice(0, PREVIEW_ITEMS + 1) for _ in shape))
    return _nested_text(np.ndarray.tolist(head), max(depth, PREVIEW_DEPTH - len(shape)), text_chars)


def _frame_preview(frame: Any, text_chars: int) -> str:
    """``3 rows × 4 columns: city, km, days, +1``."""
    rows, cols = len(frame.index), len(frame.columns)
    labels = [cell_text(c, text_chars) for c in islice(frame.columns, PREVIEW_ITEMS)]
    more = f", +{cols - len(labels)}" if cols > len(labels) else ""
    return f"{rows:,} × {cols:,}: {', '.join(labels)}{more}" if labels else f"{rows:,} rows, no columns"


def _series_preview(series: Any, depth: int, text_chars: int) -> str:
    return _nested_text(list(series.iloc[: PREVIEW_ITEMS + 1]), max(depth, PREVIEW_DEPTH - 1), text_chars)


def value_preview(value: Any, *, chars: int = PREVIEW_CHARS) -> str | None:
    """A one-line preview of ``value`` (at most ``chars`` characters), or None for an object whose
    only safe description is its type (the table shows that already).

    Exact builtin scalars and texts are their ``repr`` (a text is cut before ``repr``, so a long
    one costs no more than its preview); builtin containers show their first items; numpy arrays
    their first items; pandas frames their size and first columns; series their first values."""
    try:
        cls = type(value)
        if cls in _ATOMS:
            if cls is int and int.bit_length(value) > 256:  # huge ints: repr is quadratic and unreadable
                return None
            if cls in (str, bytes) and len(value) > chars:
                return repr(value[:chars]) + "…"  # the text's first ``chars`` characters, quoted
            text = repr(value)
        else:
            out: list[str] = []
            _short(value, 0, INNER_TEXT_CHARS, out, [chars * 2])
            text = "".join(out)
            if text == type_label(value):
                return None
        return text if len(text) <= chars else text[: chars - 1] + "…"
    except Exception:  # a frame mutated by a running cell, a broken array: no preview, never a failure
        return None


def cell_text(value: Any, chars: int = CELL_CHARS) -> str:
    """One table cell: the preview of ``value`` cut to ``chars`` (a type label when nothing safer)."""
    if type(value) is str:
        return value if len(value) <= chars else value[: chars - 1] + "…"
    text = value_preview(value, chars=chars)
    return text if text is not None else type_label(value)


class NoTable(ValueError):
    """The value has no table view; the message says which kinds have one."""


@dataclass
class TablePreview:
    """The head of a value as a grid: ``columns`` and ``index`` labels and ``rows`` of cell texts.

    ``shape`` is the whole value's (rows, columns); ``rows``/``columns`` hold at most the table's
    bounds; ``truncated`` says the deadline stopped it early."""

    kind: str  # frame, series, array, records, rows, list, dict, set
    columns: list[str]
    index: list[str]
    rows: list[list[str]]
    shape: tuple[int, int]
    truncated: bool = False
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "columns": list(self.columns),
            "index": list(self.index),
            "rows": [list(r) for r in self.rows],
            "shape": list(self.shape),
            "truncated": self.truncated,
        }


TABLE_KINDS = "DataFrames, Series, numpy arrays, lists, tuples, dicts and sets"


def table_preview(
    value: Any, *, rows: int = TABLE_ROWS, cols: int = TABLE_COLS, deadline_s: float = TABLE_DEADLINE_S
) -> TablePreview:
    """The first ``rows`` × ``cols`` of a frame, series, array or builtin container, as cell texts.

    Raises ``NoTable`` for any other value (its repr is never called)."""
    rows = max(1, min(rows, TABLE_ROWS * 4))
    cols = max(1, min(cols, TABLE_COLS * 2))
    stop = time.perf_counter() + deadline_s
    cls = type(value)
    pd = sys.modules.get("pandas")
    np = sys.modules.get("numpy")
    if pd is not None and cls is pd.DataFrame:
        return _frame_table(value, rows, cols, stop)
    if pd is not None and cls is pd.Series:
        n = len(value.index)
        index = [cell_text(i) for i in islice(value.index, rows)]
        cells, late = _cells(([v] for v in value.iloc[:rows]), stop)
        label = "value" if value.name is None else cell_text(value.name)
        return TablePreview("series", [label], index, cells, (n, 1), late)
    if np is not None and cls is np.ndarray:
        return _array_table(value, np, rows, cols, stop)
    if cls is dict:
        n = dict.__len__(value)
        pairs = list(islice(dict.items(value), rows))
        cells, late = _cells(([v] for _, v in pairs), stop)
        return TablePreview("dict", ["value"], [cell_text(k) for k, _ in pairs], cells, (n, 1), late)
    if cls in _SEQUENCES:
        return _sequence_table(value, cls, rows, cols, stop)
    raise NoTable(f"a {_QUALNAME(cls)} has no table view ({TABLE_KINDS} have one)")


def _cells(rows: Any, stop: float) -> tuple[list[list[str]], bool]:
    out: list[list[str]] = []
    for row in rows:
        if time.perf_counter() > stop:
            return out, True
        out.append(["" if v is _EMPTY else cell_text(v) for v in row])
    return out, False


def _frame_table(frame: Any, rows: int, cols: int, stop: float) -> TablePreview:
    n, m = len(frame.index), len(frame.columns)
    head = frame.iloc[:rows, :cols]
    columns = [cell_text(c) for c in head.columns]
    index = [cell_text(i) for i in head.index]
    # Column by column: each keeps its own dtype (a row of a mixed frame would be upcast to object).
    by_column = [list(head.iloc[:, j]) for j in range(len(columns))]
    cells, late = _cells((list(r) for r in zip(*by_column, strict=True)), stop)
    if not columns:
        cells = [[] for _ in index]
    return TablePreview("frame", columns, index[: len(cells)], cells, (n, m), late)


def _array_table(value: Any, np: Any, rows: int, cols: int, stop: float) -> TablePreview:
    shape = tuple(int(s) for s in np.ndarray.__dict__["shape"].__get__(value))
    if len(shape) == 0:
        raise NoTable("a 0-d array has no table view; its value is in the Value column")
    if len(shape) == 1:
        head = np.ndarray.tolist(np.ndarray.__getitem__(value, slice(0, rows)))
        cells, late = _cells(([v] for v in head), stop)
        return TablePreview(
            "array", ["value"], [str(i) for i in range(len(cells))], cells, (shape[0], 1), late
        )
    index_2d = (slice(0, rows), slice(0, cols), *(slice(0, 1) for _ in shape[2:]))
    head = np.ndarray.tolist(np.ndarray.__getitem__(value, index_2d))
    cells, late = _cells(head, stop)
    width = min(cols, shape[1])
    return TablePreview(
        "array",
        [str(j) for j in range(width)],
        [str(i) for i in range(len(cells))],
        cells,
        (shape[0], shape[1]),
        late,
    )


def _sequence_table(value: Any, cls: type, rows: int, cols: int, stop: float) -> TablePreview:
    n = int(_LEN[cls](value))
    items = list(islice(_ITER[cls](value), rows))
    if items and all(type(i) is dict for i in items):  # records: one column per key, first seen first
        keys: list[Any] = []
        seen: set[Any] = set()
        for record in items:
            for key in islice(dict.__iter__(record), cols * 2):
                if type(key) in _ATOMS and key not in seen and len(keys) < cols:
                    seen.add(key)
                    keys.append(key)
        cells, late = _cells(([dict.get(record, k, _EMPTY) for k in keys] for record in items), stop)
        return TablePreview(
            "records", [cell_text(k) for k in keys], _positions(cells), cells, (n, len(keys)), late
        )
    if items and all(type(i) in (list, tuple) for i in items):  # rows of a grid
        width = min(cols, max(int(_LEN[type(i)](i)) for i in items))
        grid = ([*islice(_ITER[type(i)](i), width)] for i in items)
        cells, late = _cells(([*r, *([_EMPTY] * (width - len(r)))] for r in grid), stop)
        return TablePreview(
            "rows", [str(j) for j in range(width)], _positions(cells), cells, (n, width), late
        )
    cells, late = _cells(([v] for v in items), stop)
    return TablePreview(
        "set" if cls in (set, frozenset) else "list", ["value"], _positions(cells), cells, (n, 1), late
    )


#: A ragged row's missing cell (shown empty).
_EMPTY = object()


def _positions(cells: list[list[str]]) -> list[str]:
    return [str(i) for i in range(len(cells))]
