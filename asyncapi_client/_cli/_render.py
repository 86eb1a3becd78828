"""One renderer per output format, behind one interface: json, jsonl, csv and table.

A command hands a renderer what it got (a list, one resource, one page, or a walk batch by
batch) together with the :class:`Kind` of record it holds; the renderer decides the rest.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import IO, Any, ClassVar, Final

import attrs

from asyncapi_client._models import (
    LeaderboardEntry,
    LeaderboardPage,
    Market,
    Order,
    OrdersPage,
    Pool,
    Token,
    UserProfile,
)

from ._table import (
    MAX_TEXT_CELL,
    MAX_WIDE_TEXT_CELL,
    Cells,
    Column,
    Table,
    generic_columns,
    number,
)
from ._text import dumps, plain, tty_safe_json, visible

__all__ = ["FORMATS", "Kind", "Output", "OutputWriteError", "Renderer", "WalkWriter", "renderer"]

FORMATS: Final = ("json", "jsonl", "table", "csv")
#: A table spells the next page's cursor only up to this length (JSON always has it whole).
MAX_CURSOR_SHOWN: Final = 1000


# --- what is being shown ------------------------------------------------------------------


@attrs.frozen
class Kind:
    """A kind of record: its model (csv headers come from its wire names), table columns,
    and the noun a person reads (``orders``).

    A record that is not a model itself (a watch's change) has a ``line``: the JSON object
    json, jsonl and csv write for it; its csv columns are ``lead``, the model's, ``trail``.
    """

    noun: str
    model: type
    columns: Sequence[Column] = ()
    line: Callable[[Any], dict[str, Any]] | None = None
    lead: tuple[str, ...] = ()
    trail: tuple[str, ...] = ()

    def wire(self, value: object) -> object:
        """What json, jsonl and csv write for ``value``."""
        return value if self.line is None else self.line(value)

    def csv_columns(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(header, wire path) per csv column."""
        lead = tuple((name, (name,)) for name in self.lead)
        trail = tuple((name, (name,)) for name in self.trail)
        return lead + csv_headers(self.model) + trail


TOKENS: Final = Kind(
    "tokens",
    Token,
    (
        Column("symbol", lambda t: t.symbol),
        Column("name", lambda t: t.name),
        Column("decimals", lambda t: t.decimals, "number"),
        Column("price usd", lambda t: t.price_usd, "number"),
        Column("total supply", lambda t: t.total_supply, "decimal"),
        Column("address", lambda t: t.address, "id"),
    ),
)
MARKETS: Final = Kind(
    "markets",
    Market,
    (
        Column("market", lambda m: m.address, "id"),
        Column("pair", lambda m: f"{m.token0.symbol}/{m.token1.symbol}"),
        Column("type", lambda m: m.type.value),
        Column("tvl", lambda m: m.tvl, "number"),
        Column("volume 24h", lambda m: m.volume_24h, "number"),
        Column("fee", lambda m: m.fee, "number"),
    ),
)
ORDERS: Final = Kind(
    "orders",
    Order,
    (
        Column("time (utc)", lambda o: o.timestamp, "time"),
        Column("pool", lambda o: o.pool_id, "id"),
        Column("side", lambda o: o.side.value),
        Column("price", lambda o: o.price, "decimal"),
        Column("size", lambda o: o.size, "decimal"),
        Column("filled", lambda o: o.filled_size, "decimal"),
        Column("status", lambda o: o.status.value),
        Column("transaction", lambda o: o.transaction_id, "id"),
    ),
)
ENTRIES: Final = Kind(
    "entries",
    LeaderboardEntry,
    (
        Column("rank", lambda e: e.rank, "number"),
        Column("address", lambda e: e.address, "id"),
        Column("score", lambda e: e.score, "number"),
    ),
)
POOL: Final = Kind("pool", Pool)
USER: Final = Kind("user", UserProfile)


# --- the output stream --------------------------------------------------------------------


def isatty(stream: object) -> bool:
    """Whether ``stream`` is a terminal (False for anything without a working isatty)."""
    method = getattr(stream, "isatty", None)
    try:
        return bool(method()) if callable(method) else False
    except (ValueError, OSError):  # a closed stream
        return False


def _encodable(text: str, encoding: str, fallback: str) -> str:
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return fallback
    return text


class OutputWriteError(Exception):
    """stdout could not be written (a full disk, an I/O error): one line on stderr, exit 1.

    A reader that went away (:class:`BrokenPipeError`) is not one: that ends quietly.
    """


@contextmanager
def writing() -> Iterator[None]:
    """Turns an :class:`OSError` writing stdout into :class:`OutputWriteError`."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputWriteError(exc.strerror or str(exc) or type(exc).__name__) from exc


class Output:
    """stdout as the renderers use it: bytes or lines, flushed after each batch."""

    def __init__(self, stdout: IO[str], stderr: IO[str], *, width: int | None, wide: bool) -> None:
        self.text = stdout
        self.stderr = stderr
        self._binary: IO[bytes] | None = getattr(stdout, "buffer", None)
        self.encoding = getattr(stdout, "encoding", None) or "utf-8"
        self.tty = isatty(stdout)
        self.width = None if wide else width
        self.cells = Cells(
            ellipsis=_encodable("…", self.encoding, "..."),
            max_text=MAX_WIDE_TEXT_CELL if wide else MAX_TEXT_CELL,
        )
        self.rule = _encodable("─", self.encoding, "-")

    def write_bytes(self, data: bytes) -> None:
        with writing():
            if self._binary is not None:
                self._binary.write(data)
            else:
                self.text.write(data.decode())

    def write_lines(self, lines: Iterable[str]) -> None:
        text = "".join(line + "\n" for line in lines)
        with writing():
            if self._binary is not None:
                self._binary.write(text.encode(self.encoding, errors="replace"))
            else:
                self.text.write(text)

    def flush(self) -> None:
        with writing():
            if self._binary is not None:
                self._binary.flush()
            self.text.flush()

    def table(self, columns: Sequence[Column]) -> Table:
        return Table(columns, self.cells, self.rule, self.width)


class Progress:
    """A walk's progress line on stderr, redrawn in place (only when stderr is a terminal)."""

    #: Seconds between two redraws: a fast walk does not flood the terminal.
    INTERVAL: Final = 0.1

    def __init__(self, out: Output, noun: str) -> None:
        on_terminal = isatty(out.stderr)
        self._stream = out.stderr if on_terminal else None
        self._noun = noun
        self._shares_terminal = on_terminal and out.tty
        self._start = time.perf_counter()
        self._drawn_at: float | None = None
        self._shown = False
        self._text = ""

    def update(self, items: int, pages: int | None = None) -> None:
        if self._stream is None:
            return
        now = time.perf_counter()
        plural = "" if pages == 1 else "s"
        counted = "" if pages is None else f", {pages:,} page{plural}"
        self._text = f"  {items:,} {self._noun}{counted}, {now - self._start:.1f} s"
        if self._drawn_at is None or now - self._drawn_at >= self.INTERVAL or not self._shown:
            self._stream.write(f"\r{self._text}\x1b[K")
            self._stream.flush()
            self._drawn_at = now
            self._shown = True

    def before_output(self) -> None:
        """Clear the line if stdout writes to the same terminal, so rows do not mix with it."""
        if self._stream is not None and self._shown and self._shares_terminal:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False

    def finish(self) -> None:
        """Leave the last count on its own line (once)."""
        if self._stream is not None and self._text:
            self._stream.write(f"\r{self._text}\x1b[K\n")
            self._stream.flush()
            self._text = ""


# --- the interface ------------------------------------------------------------------------


class WalkWriter:
    """Writes a walk as it arrives, batch after batch; :meth:`end` closes the output of a
    walk that completed, :meth:`stop` that of a walk that did not (a signal, a failure)."""

    def __init__(
        self,
        write: Callable[[Sequence[object]], None],
        end: Callable[[int], None],
        stop: Callable[[], None] | None = None,
    ):
        self._write = write
        self._end = end
        self._stop = stop
        self.count = 0

    def add(self, batch: Sequence[object]) -> None:
        self._write(batch)
        self.count += len(batch)

    def end(self) -> None:
        self._end(self.count)

    def stop(self) -> None:
        """The walk ends early: leave what was written well formed (a JSON array ended),
        as far as the output can still be written; the walk's own error is what counts."""
        if self._stop is not None:
            with contextlib.suppress(OSError, OutputWriteError):
                self._stop()


class Renderer:
    """Shows results in one format. Subclasses implement the four ways a command has them."""

    #: the --format value
    name: ClassVar[str]

    def __init__(self, out: Output) -> None:
        self.out = out

    def records(self, kind: Kind, values: Sequence[object]) -> None:
        """A list result (tokens, markets)."""
        raise NotImplementedError

    def record(self, kind: Kind, value: object) -> None:
        """One resource (a pool, a user profile)."""
        raise NotImplementedError

    def page(self, kind: Kind, page: OrdersPage | LeaderboardPage, items: Sequence[object]) -> None:
        """One page of a paged operation, ``items`` being its records."""
        raise NotImplementedError

    def walk(self, kind: Kind, *, continued: bool = False) -> WalkWriter:
        """A writer for a walk's records, batch after batch; ``continued``: the output goes on
        from an earlier run of the same walk (a CSV header is not written again)."""
        raise NotImplementedError


class JsonRenderer(Renderer):
    """Indented JSON with the wire's names; a walk is one JSON array, streamed.

    Control and bidirectional characters are written as ``\\u`` escapes wherever the output
    goes (a pipe's reader may be a terminal too): the same data once parsed."""

    name = "json"

    def _json(self, data: bytes) -> bytes:
        return tty_safe_json(data)

    def _value(self, value: object) -> None:
        self.out.write_bytes(self._json(dumps(plain(value), indent=True)) + b"\n")

    def records(self, kind: Kind, values: Sequence[object]) -> None:
        self._value(list(values))

    def record(self, kind: Kind, value: object) -> None:
        self._value(value)

    def page(self, kind: Kind, page: OrdersPage | LeaderboardPage, items: Sequence[object]) -> None:
        self._value(page)

    def walk(self, kind: Kind, *, continued: bool = False) -> WalkWriter:
        started = False
        written = 0

        def write(batch: Sequence[object]) -> None:
            # "[" comes with the first batch: a walk failing before it leaves stdout empty.
            # A batch is written whole or not at all (a value that cannot be printed).
            nonlocal started, written
            chunks: list[bytes] = [] if started else [b"["]
            count = written
            for value in batch:
                dumped = self._json(dumps(plain(kind.wire(value)), indent=True))
                chunks.append(b"\n  " if count == 0 else b",\n  ")
                chunks.append(dumped.replace(b"\n", b"\n  "))
                count += 1
            self.out.write_bytes(b"".join(chunks))
            started, written = True, count

        def end(count: int) -> None:
            if not started:
                self.out.write_bytes(b"[]\n")
            else:
                self.out.write_bytes(b"\n]\n" if written else b"]\n")

        def stop() -> None:
            # An array begun is ended, so what was written parses; none begun: nothing.
            if started:
                end(written)
                self.out.flush()

        return WalkWriter(write, end, stop)


class JsonlRenderer(Renderer):
    """One compact JSON object a line; control and bidirectional characters as ``\\u``
    escapes, as in ``json``."""

    name = "jsonl"

    def _lines(self, values: Iterable[object]) -> None:
        data = b"".join(dumps(plain(v)) + b"\n" for v in values)
        self.out.write_bytes(tty_safe_json(data))

    def records(self, kind: Kind, values: Sequence[object]) -> None:
        self._lines(values)

    def record(self, kind: Kind, value: object) -> None:
        self._lines([value])

    def page(self, kind: Kind, page: OrdersPage | LeaderboardPage, items: Sequence[object]) -> None:
        self._lines([page])  # one result, one line: an orders page keeps its cursor

    def walk(self, kind: Kind, *, continued: bool = False) -> WalkWriter:
        def write(batch: Sequence[object]) -> None:
            self._lines([kind.wire(value) for value in batch])

        return WalkWriter(write, lambda count: None)


@functools.cache
def csv_headers(model: type, prefix: str = "") -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(header, wire path) per column: a model's wire names, nested models flattened with a
    dot (``baseToken.symbol``); lists and free-form objects are one JSON cell."""
    from asyncapi_client._decode import camel

    hints = typing.get_type_hints(model)
    columns: list[tuple[str, tuple[str, ...]]] = []
    for field in attrs.fields(model):
        wire = camel(field.name)
        kind = hints[field.name]
        if isinstance(kind, type) and attrs.has(kind):
            for header, path in csv_headers(kind, f"{prefix}{wire}."):
                columns.append((header, (wire, *path)))
        else:
            columns.append((prefix + wire, (wire,)))
    return tuple((header, path) for header, path in columns)


#: What a spreadsheet reads as the start of a formula (or of a cell that runs one).
_FORMULA_STARTS: Final = ("=", "+", "-", "@", "\t", "\r")


@functools.cache
def _numeric_paths(model: type) -> frozenset[tuple[str, ...]]:
    """The wire paths of a model's number fields (int, float, Decimal, or one of them or
    None), nested models included: their cells are written as they are."""
    from asyncapi_client._decode import camel

    hints = typing.get_type_hints(model)
    paths: set[tuple[str, ...]] = set()
    for field in attrs.fields(model):
        wire, kind = camel(field.name), hints[field.name]
        if isinstance(kind, type) and attrs.has(kind):
            paths.update((wire, *path) for path in _numeric_paths(kind))
        elif set(typing.get_args(kind) or (kind,)) - {type(None)} <= {int, float, Decimal}:
            paths.add((wire,))
    return frozenset(paths)


def csv_text(text: str) -> str:
    """A text cell made safe for a spreadsheet and a terminal: control and bidirectional
    characters as visible escapes, and a leading ``'`` on a cell a spreadsheet would read
    as a formula (starting with ``= + - @``, a tab or a carriage return)."""
    shown = visible(text)
    return "'" + shown if text.startswith(_FORMULA_STARTS) else shown


class CsvRenderer(Renderer):
    """Comma-separated values for spreadsheets: wire names as headers, decimals exact.

    Every text cell is safe wherever it is written (see :func:`csv_text`); numbers are
    written as they are (a negative one keeps its ``-``); lists and objects are one JSON
    cell, its control and bidirectional characters as ``\\u`` escapes."""

    name = "csv"

    def _cell(self, value: Any, numeric: bool) -> str:
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return repr(value)
        if isinstance(value, dict | list):
            return tty_safe_json(dumps(value)).decode()  # starts with { or [
        if numeric or isinstance(value, int):
            return str(value)  # an int, or a Decimal's exact text
        return csv_text(str(value))

    def _rows(self, kind: Kind, values: Iterable[object], *, header: bool) -> None:
        columns = kind.csv_columns()
        numeric = _numeric_paths(kind.model)
        kinds = [path in numeric for _, path in columns]
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        if header:
            writer.writerow([name for name, _ in columns])
        for value in values:
            wire = plain(kind.wire(value))
            row: list[str] = []
            for (_, path), is_number in zip(columns, kinds, strict=True):
                item: Any = wire
                for key in path:
                    item = item.get(key) if isinstance(item, dict) else None
                row.append(self._cell(item, is_number))
            writer.writerow(row)
        self.out.write_bytes(buffer.getvalue().encode())

    def records(self, kind: Kind, values: Sequence[object]) -> None:
        self._rows(kind, values, header=True)

    def record(self, kind: Kind, value: object) -> None:
        self._rows(kind, [value], header=True)

    def page(self, kind: Kind, page: OrdersPage | LeaderboardPage, items: Sequence[object]) -> None:
        self._rows(kind, items, header=True)

    def walk(self, kind: Kind, *, continued: bool = False) -> WalkWriter:
        started = continued

        def write(batch: Sequence[object]) -> None:
            nonlocal started
            self._rows(kind, batch, header=not started)
            started = True

        def end(count: int) -> None:
            if not started:
                self._rows(kind, [], header=True)

        return WalkWriter(write, end)


class TableRenderer(Renderer):
    """Aligned tables and key/value blocks for a person; every server text made visible."""

    name = "table"

    def records(self, kind: Kind, values: Sequence[object]) -> None:
        if values:
            self.out.write_lines(self.out.table(kind.columns).lines(values))
        else:
            self.out.write_lines([f"(no {kind.noun})"])

    def record(self, kind: Kind, value: object) -> None:
        if isinstance(value, Pool):
            self.out.write_lines(self._pool(value))
        elif isinstance(value, UserProfile):
            self.out.write_lines(self._user(value))
        else:  # pragma: no cover - every single resource has its block
            raise TypeError(f"no table for {type(value).__name__}")

    def page(self, kind: Kind, page: OrdersPage | LeaderboardPage, items: Sequence[object]) -> None:
        self.records(kind, items)
        if isinstance(page, OrdersPage):
            if page.cursor and len(page.cursor) > MAX_CURSOR_SHOWN:  # a hostile server's
                self.out.write_lines(
                    [
                        "(more orders on further pages: add --all to get them all; the next "
                        f"page's cursor is {len(page.cursor):,} characters long: see it with "
                        "--format json)"
                    ]
                )
            elif page.cursor:
                self.out.write_lines(
                    [
                        "(more orders on further pages: add --all to get them all, or "
                        f"--cursor {visible(page.cursor)} for the next page)"
                    ]
                )
        else:
            where = f"page {page.page:,} of {page.total_pages:,}"
            self.out.write_lines([f"{where} ({page.total:,} entries, {page.limit:,} a page)"])

    def walk(self, kind: Kind, *, continued: bool = False) -> WalkWriter:
        table = self.out.table(kind.columns)

        def write(batch: Sequence[object]) -> None:
            if batch:
                self.out.write_lines(table.lines(batch))

        def end(count: int) -> None:
            if table.rows == 0:
                self.out.write_lines([f"(no {kind.noun})"])

        return WalkWriter(write, end)

    # blocks: one resource shown whole

    @staticmethod
    def _block(pairs: Sequence[tuple[str, str]]) -> list[str]:
        width = max(len(key) for key, _ in pairs)
        return [f"{key.ljust(width)}  {value}" for key, value in pairs]

    def _token(self, token: Token) -> str:
        text = self.out.cells.text
        name = f"{text(token.symbol)} ({text(token.name)}, {token.decimals} decimals)"
        return f"{name} {self.out.cells.id(token.address)}"

    def _pool(self, pool: Pool) -> list[str]:
        text = self.out.cells.text
        pair = f"{text(pool.base_token.symbol)}/{text(pool.quote_token.symbol)}"
        return self._block(
            [
                ("pool", self.out.cells.id(pool.pool_id)),
                ("pair", pair),
                ("base token", self._token(pool.base_token)),
                ("quote token", self._token(pool.quote_token)),
                ("price", number(pool.price)),
                ("change 24h", number(pool.price_change_24h)),
                ("volume 24h", number(pool.volume_24h)),
                ("tvl", number(pool.tvl)),
            ]
        )

    def _user(self, profile: UserProfile) -> list[str]:
        lines = self._block(
            [
                ("address", self.out.cells.id(profile.address)),
                ("balances", f"{len(profile.balances):,}"),
                ("orders", f"{len(profile.orders):,}"),
                ("positions", f"{len(profile.positions):,}"),
            ]
        )
        sections: list[tuple[str, Sequence[Any], Sequence[Column]]] = [
            ("balances", profile.balances, generic_columns(profile.balances)),
            ("orders", profile.orders, ORDERS.columns),
            ("positions", profile.positions, generic_columns(profile.positions)),
        ]
        for title, records, columns in sections:
            if records:
                lines += ["", f"{title}:"]
                lines += self.out.table(columns).lines(records)
        return lines


_RENDERERS: Final[dict[str, type[Renderer]]] = {
    cls.name: cls for cls in (JsonRenderer, JsonlRenderer, TableRenderer, CsvRenderer)
}


def renderer(fmt: str, out: Output) -> Renderer:
    """The renderer for ``--format fmt``."""
    return _RENDERERS[fmt](out)
