"""Aligned tables for people: columns, cells, ids in full when they fit, numbers on the point."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

import attrs

from ._text import decimal_text, dumps, plain, visible

__all__ = [
    "MAX_FREE_FORM_CELL",
    "MAX_FREE_FORM_COLUMNS",
    "MAX_NUMBER_CELL",
    "MAX_TEXT_CELL",
    "MAX_WIDE_TEXT_CELL",
    "Cells",
    "Column",
    "Table",
    "generic_columns",
    "number",
]

_NUMERIC_TEXT: Final = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?").fullmatch
#: A number written with digits and at most one point: aligned on the point in tables.
_POINT_ALIGNED: Final = re.compile(r"[+-]?[\d,]*(\.\d*)?").fullmatch
#: A free-form value (a nested object) is cut to this many characters in a table cell.
MAX_FREE_FORM_CELL: Final = 120
#: A text cell, an id or a header is cut to this many characters (ids keep head and tail).
MAX_TEXT_CELL: Final = 80
#: The same with ``--wide``: wide, but still bounded (a table never holds a 5 MB name).
MAX_WIDE_TEXT_CELL: Final = 1000
#: A number is shown exact; past this many characters (never for a decimal the CLI prints:
#: those are bounded shorter) it is cut like text.
MAX_NUMBER_CELL: Final = 300
#: Free-form records (balances, positions) show at most this many fields as columns; the
#: rest go, as compact JSON, into one last column.
MAX_FREE_FORM_COLUMNS: Final = 16


@attrs.frozen
class Column:
    """One table column: a header, how to get the value from a record, and its kind."""

    header: str
    get: Callable[[Any], object]
    kind: str = "text"  # text | id | number | decimal | time | auto


@attrs.frozen
class Cell:
    """A cell's text; numbers are split at the point, so a column lines up on it."""

    text: str
    fraction: str | None = None  # None: not a number; else "" or ".123"

    @property
    def whole(self) -> str:
        return (
            self.text if self.fraction is None else self.text[: len(self.text) - len(self.fraction)]
        )


def _numeric_cell(text: str) -> Cell:
    if not _POINT_ALIGNED(text) or not any(ch.isdigit() for ch in text):
        return Cell(text, "")  # 1e-07, inf, "-": right-aligned as a whole
    point = text.find(".")
    return Cell(text, "" if point < 0 else text[point:])


@attrs.define
class Cells:
    """Turns values into cells: ids, exact decimals, readable floats, UTC times.

    Every text the server sent is passed through :func:`visible`: no control or escape
    character reaches the terminal, and is cut to ``max_text`` characters: a cell's size
    never depends on what the server sends. ``full_ids=False`` shortens long ids to head…tail.
    """

    ellipsis: str = "…"
    full_ids: bool = True
    keep_head: int = 6
    keep_tail: int = 4
    max_text: int = MAX_TEXT_CELL

    def text(self, text: str) -> str:
        """Server text made visible and cut to ``max_text`` characters, ending in ``…``."""
        shown = visible(text[: self.max_text + 1])  # never escapes a megabyte to cut it
        if len(shown) <= self.max_text:
            return shown
        return shown[: self.max_text - len(self.ellipsis)] + self.ellipsis

    def id(self, text: str) -> str:
        """An id in full (up to ``max_text``), or (``full_ids`` off, or longer than
        ``max_text``) as its head and tail: ``0x12ab…cd34``."""
        if self.full_ids and len(text) <= self.max_text:
            shown = visible(text)
            if len(shown) <= self.max_text:
                return shown
        head = self.keep_head if not self.full_ids else self.max_text // 2
        tail = self.keep_tail if not self.full_ids else self.max_text - head - len(self.ellipsis)
        if len(text) <= head + tail + 3:
            return visible(text)
        return visible(text[:head]) + self.ellipsis + visible(text[-tail:])

    def cell(self, value: object, kind: str) -> Cell:
        if kind == "auto":
            kind = _kind_of(value)
        if value is None:
            return _numeric_cell("-") if kind in ("number", "decimal") else Cell("-")
        if kind == "id":
            return Cell(self.id(str(value)))
        if kind == "decimal":  # exact, as the server wrote it
            if isinstance(value, Decimal):
                return self._number(decimal_text(value))
            return self._number(str(value))
        if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
            return self._number(number(value))
        if kind == "time" and isinstance(value, int | float) and not isinstance(value, bool):
            return Cell(_timestamp(value))
        if isinstance(value, Mapping | list | tuple):
            return Cell(self.free_form(value))
        return Cell(self.text(str(value)))

    def _number(self, text: str) -> Cell:
        """A number's exact text, aligned on its point; cut like text past MAX_NUMBER_CELL."""
        if len(text) > MAX_NUMBER_CELL:
            return Cell(attrs.evolve(self, max_text=MAX_NUMBER_CELL).text(text))
        return _numeric_cell(visible(text))

    def free_form(self, value: object) -> str:
        """A nested value as compact JSON, cut short for a table (any depth)."""
        text = visible(dumps(plain(value)).decode())
        if len(text) > MAX_FREE_FORM_CELL:
            return text[: MAX_FREE_FORM_CELL - 1] + self.ellipsis
        return text


def _kind_of(value: object) -> str:
    if isinstance(value, bool):
        return "text"
    if isinstance(value, int | float | Decimal):
        return "number" if not isinstance(value, Decimal) else "decimal"
    if isinstance(value, str):
        if value.startswith("0x") and len(value) > 16:
            return "id"
        if len(value) <= 300 and _NUMERIC_TEXT(value):
            return "decimal"
    return "text"


def number(value: float) -> str:
    """A float or int for people: every digit Python's repr keeps, thousands separated."""
    if isinstance(value, int):
        if abs(value) >= 10**30:  # bounded: a huge integer is shown with 7 digits
            return format(Decimal(value), ".6e")
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    text = repr(value)
    if "e" in text:
        if not 1e-30 < abs(value) < 1e15:
            return text
        text = format(Decimal(text), "f")  # 1.78583e-05 -> 0.0000178583, the same digits
    whole, _, fraction = text.partition(".")
    return f"{int(whole):,}.{fraction}" if whole not in ("-0", "0") else text


def _timestamp(value: float) -> str:
    """A UTC date and time; the unit is guessed from the size (s, ms or µs since 1970)."""
    seconds = float(value)
    if abs(seconds) >= 1e14:
        seconds /= 1e6
    elif abs(seconds) >= 1e11:
        seconds /= 1e3
    try:
        when = dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return number(value)
    return when.strftime("%Y-%m-%d %H:%M:%S")


@attrs.define
class _Width:
    """A column's width; numbers keep their whole part and fraction widths apart."""

    whole: int = 0
    fraction: int = 0

    @property
    def total(self) -> int:
        return self.whole + self.fraction

    def fit(self, cell: Cell) -> None:
        if cell.fraction is None:
            self.whole = max(self.whole, len(cell.text))
        else:
            self.whole = max(self.whole, len(cell.whole))
            self.fraction = max(self.fraction, len(cell.fraction))


class Table:
    """An aligned table, fed all at once or batch after batch (a walk that streams).

    Widths come from the header and the first batch: a page of a walk is a good sample, and
    the header stays aligned with the rows. A later value that is wider shifts its own row;
    every cell is cut to its bound (see :class:`Cells`), so no row is longer than that.
    Numbers are right-aligned on their decimal point. When ``width`` is given and full ids
    would make the first batch wider, ids are shortened for the table.
    """

    def __init__(
        self, columns: Sequence[Column], cells: Cells, rule: str, width: int | None = None
    ) -> None:
        self._columns = [attrs.evolve(col, header=cells.text(col.header)) for col in columns]
        self._cells = cells
        self._rule = rule
        self._max_width = width
        self._widths: list[_Width] | None = None
        self.rows = 0

    def _cells_of(self, records: Sequence[object]) -> list[list[Cell]]:
        return [
            [self._cells.cell(col.get(record), col.kind) for col in self._columns]
            for record in records
        ]

    def lines(self, records: Iterable[object]) -> list[str]:
        records = list(records)
        rows = self._cells_of(records)
        out: list[str] = []
        if self._widths is None:
            widths = self._measure(rows)
            too_wide = self._max_width is not None and self._line_width(widths) > self._max_width
            if too_wide and self._cells.full_ids and any(c.kind == "id" for c in self._columns):
                self._cells = attrs.evolve(self._cells, full_ids=False)
                rows = self._cells_of(records)
                widths = self._measure(rows)
            self._widths = widths
            out += self._header(rows)
        out.extend(self._row(row) for row in rows)
        self.rows += len(rows)
        return out

    def _measure(self, rows: Sequence[Sequence[Cell]]) -> list[_Width]:
        widths = [_Width() for _ in self._columns]
        for row in rows:
            for width, cell in zip(widths, row, strict=True):
                width.fit(cell)
        for width, column in zip(widths, self._columns, strict=True):
            if len(column.header) > width.total:
                width.whole += len(column.header) - width.total
        return widths

    @staticmethod
    def _line_width(widths: Sequence[_Width]) -> int:
        return sum(w.total for w in widths) + 2 * (len(widths) - 1)

    def _header(self, rows: Sequence[Sequence[Cell]]) -> list[str]:
        assert self._widths is not None
        numeric = [
            any(row[i].fraction is not None for row in rows) for i in range(len(self._widths))
        ]
        heads = [
            col.header.rjust(w.total) if is_number else col.header.ljust(w.total)
            for col, w, is_number in zip(self._columns, self._widths, numeric, strict=True)
        ]
        return ["  ".join(heads).rstrip(), "  ".join(self._rule * w.total for w in self._widths)]

    def _row(self, row: Sequence[Cell]) -> str:
        assert self._widths is not None
        parts: list[str] = []
        for cell, width in zip(row, self._widths, strict=True):
            if cell.fraction is None:
                parts.append(cell.text.ljust(width.total))
            else:
                parts.append(cell.whole.rjust(width.whole) + cell.fraction.ljust(width.fraction))
        return "  ".join(parts).rstrip()


def generic_columns(records: Sequence[Mapping[str, Any]]) -> list[Column]:
    """Columns for objects whose fields the spec does not show: each key, first seen first,
    up to :data:`MAX_FREE_FORM_COLUMNS`; any further fields share one last column, as JSON."""
    keys: dict[str, None] = {}
    for record in records:
        keys.update(dict.fromkeys(str(k) for k in record))
    shown = list(keys)[:MAX_FREE_FORM_COLUMNS]
    columns = [Column(key, _field(key), "auto") for key in shown]
    if len(keys) > len(shown):
        columns.append(Column(f"+{len(keys) - len(shown):,} more fields", _rest(set(shown))))
    return columns


def _field(key: str) -> Callable[[Mapping[str, Any]], object]:
    def get(record: Mapping[str, Any]) -> object:
        return record.get(key)

    return get


def _rest(shown: set[str]) -> Callable[[Mapping[str, Any]], object]:
    def get(record: Mapping[str, Any]) -> object:
        rest = {str(k): v for k, v in record.items() if str(k) not in shown}
        return rest or None

    return get
