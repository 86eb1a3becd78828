"""The ``asyncapi-client`` command line: every operation, streaming walks, json/jsonl/table.

Exit status: 0 done; 1 the API answered with an error or could not be reached; 2 bad usage
or configuration; 130 interrupted. Failures are one line on stderr, never a traceback.
Output closed early by the reader (``| head``) ends the command quietly with status 0.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import math
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import IO, TYPE_CHECKING, Any, Final, TypeVar

import attrs
import orjson

from ._client import Client
from ._decode import camel, to_wire
from ._errors import ApiError
from ._models import (
    LeaderboardEntry,
    LeaderboardPage,
    Market,
    Order,
    OrdersPage,
    OrderStatus,
    Pool,
    Side,
    Token,
    UserProfile,
)
from ._network import ENV_VARS, Hosts, Network, parse_network

if TYPE_CHECKING:
    from .testing import FakeExchange

__all__ = ["main"]

PROG: Final = "asyncapi-client"
EXIT_OK: Final = 0
EXIT_API_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130

FORMATS: Final = ("json", "jsonl", "table")

P = TypeVar("P")
T = TypeVar("T")


# --- argument parsing ---------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _network(text: str) -> Network:
    try:
        return parse_network(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _status(text: str) -> OrderStatus:
    try:
        return OrderStatus.parse_argument(text, "status")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _side(text: str) -> Side:
    try:
        return Side.parse_argument(text, "side")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_global_options(parser: argparse.ArgumentParser, *, in_command: bool) -> None:
    """The options every command shares; accepted before the command and after it."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if in_command else value

    def text(help_text: str) -> str:
        return argparse.SUPPRESS if in_command else help_text

    parser.add_argument(
        "--network",
        type=_network,
        default=default(None),
        metavar="mainnet|testnet",
        help=text("the host to ask (default: mainnet; markets: testnet)"),
    )
    parser.add_argument(
        "--base-url",
        default=default(None),
        metavar="URL",
        help=text(f"main-network host (default: ${ENV_VARS[Network.MAINNET]})"),
    )
    parser.add_argument(
        "--testnet-base-url",
        default=default(None),
        metavar="URL",
        help=text(f"test-network host (default: ${ENV_VARS[Network.TESTNET]})"),
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=default(10.0),
        metavar="S",
        help=text("seconds for one attempt of a request (default: 10)"),
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=default(None),
        help=text("output format (default: table on a terminal, json otherwise)"),
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command line, as the public contract lists it."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Read the exchange API from the command line.",
        epilog=(
            "exit status: 0 done, 1 the API answered with an error or could not be reached, "
            "2 bad usage or configuration"
        ),
    )
    _add_global_options(parser, in_command=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        _add_global_options(sub, in_command=True)
        return sub

    sub = command("tokens", "the token directory")
    sub.add_argument("--search", metavar="Q", help="only tokens matching Q")
    sub.set_defaults(run=_cmd_tokens)

    sub = command("markets", "a token's markets (on the test-network host by default)")
    sub.add_argument("token", metavar="TOKEN")
    sub.set_defaults(run=_cmd_markets)

    sub = command("pool", "one order-book pool")
    sub.add_argument("pool_id", metavar="POOL_ID")
    sub.set_defaults(run=_cmd_pool)

    sub = command("user", "a user's profile: balances, orders, positions")
    sub.add_argument("address", metavar="ADDRESS")
    sub.set_defaults(run=_cmd_user)

    sub = command("orders", "one page of a user's orders, or with --all every order")
    sub.add_argument("address", metavar="ADDRESS")
    sub.add_argument("--market", metavar="M", help="only orders of this market (pool id)")
    sub.add_argument("--status", type=_status, metavar="S", help="OPEN, FILLED, ...")
    sub.add_argument("--side", type=_side, metavar="S", help="BUY or SELL")
    sub.add_argument(
        "--limit", type=_positive_int, metavar="N", help="page size (with --all, of the walk)"
    )
    sub.add_argument("--all", action="store_true", help="follow the cursor to the last page")
    sub.set_defaults(run=_cmd_orders)

    sub = command("leaderboard", "one page of the leaderboard, or with --all every entry")
    sub.add_argument("--page", type=_positive_int, metavar="N", help="page number (from 1)")
    sub.add_argument(
        "--limit", type=_positive_int, metavar="N", help="page size (with --all, of the walk)"
    )
    sub.add_argument("--all", action="store_true", help="every page, fetched concurrently")
    sub.set_defaults(run=_cmd_leaderboard)

    sub = command("demo", "run the client against the embedded fake exchange, offline")
    sub.set_defaults(run=_cmd_demo)

    sub = command("serve-fake", "serve the fake exchange on loopback until interrupted")
    sub.add_argument("--port", type=_port, default=0, metavar="P", help="main port (0: any)")
    sub.add_argument(
        "--testnet-port", type=_port, default=0, metavar="P", help="test-network port (0: any)"
    )
    sub.add_argument("--seed", type=_seed, default=7, metavar="N", help="data set (default: 7)")
    sub.set_defaults(run=_cmd_serve_fake)
    return parser


# --- table cells ----------------------------------------------------------------------------

_NUMERIC_TEXT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?").fullmatch
#: A number written with digits and at most one point: aligned on the point in tables.
_POINT_ALIGNED = re.compile(r"[+-]?[\d,]*(\.\d*)?").fullmatch


@attrs.frozen
class _Column:
    """One table column: a header, how to get the value from a record, and its kind."""

    header: str
    get: Callable[[Any], object]
    kind: str = "text"  # text | id | number | decimal | time | auto


@attrs.frozen
class _Cell:
    """A cell's text; numbers are split at the point, so a column lines up on it."""

    text: str
    fraction: str | None = None  # None: not a number; else "" or ".123"

    @property
    def whole(self) -> str:
        return (
            self.text if self.fraction is None else self.text[: len(self.text) - len(self.fraction)]
        )


def _numeric_cell(text: str) -> _Cell:
    if not _POINT_ALIGNED(text) or not any(ch.isdigit() for ch in text):
        return _Cell(text, "")  # 1e-07, inf, "-": right-aligned as a whole
    point = text.find(".")
    return _Cell(text, "" if point < 0 else text[point:])


@attrs.define
class _Cells:
    """Turns values into cells: shortened ids, exact decimals, readable floats, UTC times."""

    ellipsis: str = "…"
    keep_head: int = 6
    keep_tail: int = 4

    def short(self, text: str) -> str:
        """A long id as its head and tail around an ellipsis: 0x12ab…cd34."""
        if len(text) <= self.keep_head + self.keep_tail + 3:
            return text
        return text[: self.keep_head] + self.ellipsis + text[-self.keep_tail :]

    def cell(self, value: object, kind: str) -> _Cell:
        if kind == "auto":
            kind = _kind_of(value)
        if value is None:
            return _numeric_cell("-") if kind in ("number", "decimal") else _Cell("-")
        if kind == "id":
            return _Cell(self.short(str(value)))
        if kind == "decimal":  # exact, as the server wrote it
            return _numeric_cell(format(value, "f") if isinstance(value, Decimal) else str(value))
        if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
            return _numeric_cell(_number(value))
        if kind == "time" and isinstance(value, int | float) and not isinstance(value, bool):
            return _Cell(_timestamp(value))
        if isinstance(value, Mapping | list):
            return _Cell(orjson.dumps(value).decode())
        return _Cell(str(value))


def _kind_of(value: object) -> str:
    if isinstance(value, bool):
        return "text"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        if value.startswith("0x") and len(value) > 16:
            return "id"
        if _NUMERIC_TEXT(value):
            return "decimal"
    return "text"


def _number(value: float) -> str:
    """A float or int for people: every digit Python's repr keeps, thousands separated."""
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    text = repr(value)
    if "e" in text:
        if abs(value) >= 1e15:
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
        return str(value)
    return when.strftime("%Y-%m-%d %H:%M:%S")


@attrs.define
class _Width:
    """A column's width; numbers keep their whole part and fraction widths apart."""

    whole: int = 0
    fraction: int = 0

    @property
    def total(self) -> int:
        return self.whole + self.fraction

    def fit(self, cell: _Cell) -> None:
        if cell.fraction is None:
            self.whole = max(self.whole, len(cell.text))
        else:
            self.whole = max(self.whole, len(cell.whole))
            self.fraction = max(self.fraction, len(cell.fraction))


class _Table:
    """An aligned table, fed all at once or batch after batch (a walk that streams).

    Widths come from the header and the first batch: a page of a walk is a good sample, and
    the header stays aligned with the rows. A later value that is wider is never cut; only
    its own row shifts. Numbers are right-aligned on their decimal point.
    """

    def __init__(self, columns: Sequence[_Column], cells: _Cells, rule: str) -> None:
        self._columns = columns
        self._cells = cells
        self._rule = rule
        self._widths: list[_Width] | None = None
        self.rows = 0

    def lines(self, records: Iterable[object]) -> list[str]:
        rows = [
            [self._cells.cell(col.get(record), col.kind) for col in self._columns]
            for record in records
        ]
        out: list[str] = []
        if self._widths is None:
            self._widths = [_Width() for _ in self._columns]
            for row in rows:
                for width, cell in zip(self._widths, row, strict=True):
                    width.fit(cell)
            numeric = [
                any(row[i].fraction is not None for row in rows) for i in range(len(self._widths))
            ]
            for width, column in zip(self._widths, self._columns, strict=True):
                if len(column.header) > width.total:
                    width.whole += len(column.header) - width.total
            heads = [
                col.header.rjust(w.total) if is_number else col.header.ljust(w.total)
                for col, w, is_number in zip(self._columns, self._widths, numeric, strict=True)
            ]
            out.append("  ".join(heads).rstrip())
            out.append("  ".join(self._rule * w.total for w in self._widths))
        out.extend(self._row(row) for row in rows)
        self.rows += len(rows)
        return out

    def _row(self, row: Sequence[_Cell]) -> str:
        assert self._widths is not None
        parts: list[str] = []
        for cell, width in zip(row, self._widths, strict=True):
            if cell.fraction is None:
                parts.append(cell.text.ljust(width.total))
            else:
                parts.append(cell.whole.rjust(width.whole) + cell.fraction.ljust(width.fraction))
        return "  ".join(parts).rstrip()


TOKEN_COLUMNS: Final = (
    _Column("symbol", lambda t: t.symbol),
    _Column("name", lambda t: t.name),
    _Column("decimals", lambda t: t.decimals, "number"),
    _Column("price usd", lambda t: t.price_usd, "number"),
    _Column("total supply", lambda t: t.total_supply, "decimal"),
    _Column("address", lambda t: t.address, "id"),
)
MARKET_COLUMNS: Final = (
    _Column("market", lambda m: m.address, "id"),
    _Column("pair", lambda m: f"{m.token0.symbol}/{m.token1.symbol}"),
    _Column("type", lambda m: m.type.value),
    _Column("tvl", lambda m: m.tvl, "number"),
    _Column("volume 24h", lambda m: m.volume_24h, "number"),
    _Column("fee", lambda m: m.fee, "number"),
)
ORDER_COLUMNS: Final = (
    _Column("time (utc)", lambda o: o.timestamp, "time"),
    _Column("pool", lambda o: o.pool_id, "id"),
    _Column("side", lambda o: o.side.value),
    _Column("price", lambda o: o.price, "decimal"),
    _Column("size", lambda o: o.size, "decimal"),
    _Column("filled", lambda o: o.filled_size, "decimal"),
    _Column("status", lambda o: o.status.value),
    _Column("transaction", lambda o: o.transaction_id, "id"),
)
LEADERBOARD_COLUMNS: Final = (
    _Column("rank", lambda e: e.rank, "number"),
    _Column("address", lambda e: e.address, "id"),
    _Column("score", lambda e: e.score, "number"),
)


def _generic_columns(records: Sequence[Mapping[str, Any]]) -> list[_Column]:
    """Columns for objects whose fields the spec does not show: every key, first seen first."""
    keys: dict[str, None] = {}
    for record in records:
        keys.update(dict.fromkeys(record))
    return [_Column(key, _field(key), "auto") for key in keys]


def _field(key: str) -> Callable[[Mapping[str, Any]], object]:
    def get(record: Mapping[str, Any]) -> object:
        return record.get(key)

    return get


# --- output ---------------------------------------------------------------------------------


class _Progress:
    """A walk's progress line on stderr, redrawn in place (only when stderr is a terminal)."""

    #: Seconds between two redraws: a fast walk does not flood the terminal.
    INTERVAL: Final = 0.1

    def __init__(self, stream: IO[str] | None, noun: str, *, shares_terminal: bool) -> None:
        self._stream = stream
        self._noun = noun
        self._shares_terminal = shares_terminal
        self._start = time.perf_counter()
        self._drawn_at: float | None = None
        self._shown = False
        self._text = ""

    def update(self, items: int, pages: int) -> None:
        if self._stream is None:
            return
        now = time.perf_counter()
        plural = "" if pages == 1 else "s"
        self._text = f"  {items:,} {self._noun}, {pages:,} page{plural}, {now - self._start:.1f} s"
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


class _Output:
    """Writes results to stdout in one format, flushing after each batch so walks stream."""

    def __init__(self, fmt: str, stdout: IO[str], stderr: IO[str]) -> None:
        self.format = fmt
        self._text = stdout
        self._binary: IO[bytes] | None = getattr(stdout, "buffer", None)
        self._stderr = stderr
        encoding = getattr(stdout, "encoding", None) or "utf-8"
        self._encoding = encoding
        self.cells = _Cells(ellipsis=_encodable("…", encoding, "..."))
        self.rule = _encodable("─", encoding, "-")
        self._array_started = False
        self._array_items = 0

    # raw writing

    def write_bytes(self, data: bytes) -> None:
        if self._binary is not None:
            self._binary.write(data)
        else:
            self._text.write(data.decode())

    def write_lines(self, lines: Iterable[str]) -> None:
        text = "".join(line + "\n" for line in lines)
        if self._binary is not None:
            self._binary.write(text.encode(self._encoding, errors="replace"))
        else:
            self._text.write(text)

    def flush(self) -> None:
        if self._binary is not None:
            self._binary.flush()
        self._text.flush()

    # JSON

    def json_value(self, value: object) -> None:
        """One value as indented JSON."""
        self.write_bytes(orjson.dumps(to_wire(value), option=orjson.OPT_INDENT_2) + b"\n")

    def jsonl(self, values: Iterable[object]) -> None:
        """Each value as compact JSON on a line of its own."""
        self.write_bytes(b"".join(orjson.dumps(to_wire(v)) + b"\n" for v in values))

    def array_items(self, values: Iterable[object]) -> None:
        """The next items of one JSON array written piece by piece (``[`` comes with the first
        batch, so a walk that fails before its first page leaves stdout empty)."""
        chunks: list[bytes] = [] if self._array_started else [b"["]
        self._array_started = True
        for value in values:
            dumped = orjson.dumps(to_wire(value), option=orjson.OPT_INDENT_2)
            chunks.append(b"\n  " if self._array_items == 0 else b",\n  ")
            chunks.append(dumped.replace(b"\n", b"\n  "))
            self._array_items += 1
        self.write_bytes(b"".join(chunks))

    def array_end(self) -> None:
        if not self._array_started:
            self.write_bytes(b"[]\n")
        else:
            self.write_bytes(b"\n]\n" if self._array_items else b"]\n")

    # progress

    def progress(self, noun: str) -> _Progress:
        on_terminal = _isatty(self._stderr)
        return _Progress(
            self._stderr if on_terminal else None,
            noun,
            shares_terminal=on_terminal and _isatty(self._text),
        )


def _encodable(text: str, encoding: str, fallback: str) -> str:
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return fallback
    return text


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # a closed stream
        return False


# --- rendering one result -------------------------------------------------------------------


def _show_list(
    out: _Output, values: Sequence[object], columns: Sequence[_Column], noun: str
) -> None:
    if out.format == "json":
        out.json_value(list(values))
    elif out.format == "jsonl":
        out.jsonl(values)
    elif values:
        out.write_lines(_Table(columns, out.cells, out.rule).lines(values))
    else:
        out.write_lines([f"(no {noun})"])


def _block(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Aligned ``key  value`` lines: one resource shown whole."""
    width = max(len(key) for key, _ in pairs)
    return [f"{key.ljust(width)}  {value}" for key, value in pairs]


def _token_text(out: _Output, token: Token) -> str:
    return (
        f"{token.symbol} ({token.name}, {token.decimals} decimals) {out.cells.short(token.address)}"
    )


def _show_pool(out: _Output, pool: Pool) -> None:
    if out.format != "table":
        _show_one(out, pool)
        return
    out.write_lines(
        _block(
            [
                ("pool", pool.pool_id),
                ("pair", f"{pool.base_token.symbol}/{pool.quote_token.symbol}"),
                ("base token", _token_text(out, pool.base_token)),
                ("quote token", _token_text(out, pool.quote_token)),
                ("price", _number(pool.price)),
                ("change 24h", _number(pool.price_change_24h)),
                ("volume 24h", _number(pool.volume_24h)),
                ("tvl", _number(pool.tvl)),
            ],
        )
    )


def _show_user(out: _Output, profile: UserProfile) -> None:
    if out.format != "table":
        _show_one(out, profile)
        return
    lines = _block(
        [
            ("address", profile.address),
            ("balances", f"{len(profile.balances):,}"),
            ("orders", f"{len(profile.orders):,}"),
            ("positions", f"{len(profile.positions):,}"),
        ],
    )
    sections: list[tuple[str, Sequence[Any], Sequence[_Column]]] = [
        ("balances", profile.balances, _generic_columns(profile.balances)),
        ("orders", profile.orders, ORDER_COLUMNS),
        ("positions", profile.positions, _generic_columns(profile.positions)),
    ]
    for title, records, columns in sections:
        if records:
            lines += ["", f"{title}:"]
            lines += _Table(columns, out.cells, out.rule).lines(records)
    out.write_lines(lines)


def _show_one(out: _Output, value: object) -> None:
    if out.format == "json":
        out.json_value(value)
    else:
        out.jsonl([value])


def _show_orders_page(out: _Output, page: OrdersPage) -> None:
    if out.format == "json":
        out.json_value(page)
    elif out.format == "jsonl":
        out.jsonl(page.orders)
    else:
        _show_list(out, page.orders, ORDER_COLUMNS, "orders")
        if page.cursor:
            out.write_lines(["(more orders on further pages: add --all to get them all)"])


def _show_leaderboard_page(out: _Output, page: LeaderboardPage) -> None:
    if out.format == "json":
        out.json_value(page)
    elif out.format == "jsonl":
        out.jsonl(page.leaderboard)
    else:
        _show_list(out, page.leaderboard, LEADERBOARD_COLUMNS, "entries")
        where = f"page {page.page:,} of {page.total_pages:,}"
        out.write_lines([f"{where} ({page.total:,} entries, {page.limit:,} a page)"])


async def _stream(
    out: _Output,
    pages: AsyncIterator[P],
    items_of: Callable[[P], Sequence[T]],
    columns: Sequence[_Column],
    noun: str,
) -> None:
    """Write a walk as it arrives: one JSON array, JSON lines, or one growing table."""
    progress = out.progress(noun)
    table = _Table(columns, out.cells, out.rule)
    count = pages_seen = 0
    try:
        async for page in pages:
            batch = items_of(page)
            count += len(batch)
            pages_seen += 1
            progress.before_output()
            if out.format == "json":
                out.array_items(batch)
            elif out.format == "jsonl":
                out.jsonl(batch)
            elif batch:
                out.write_lines(table.lines(batch))
            out.flush()
            progress.update(count, pages_seen)
    except BaseException:
        progress.finish()  # end the line, so an error message starts on a fresh one
        raise
    finally:
        aclose = getattr(pages, "aclose", None)
        if aclose is not None:
            await aclose()
    progress.before_output()
    if out.format == "json":
        out.array_end()
    elif out.format == "table" and table.rows == 0:
        out.write_lines([f"(no {noun})"])
    out.flush()
    progress.finish()


def _orders_of(page: OrdersPage) -> Sequence[Order]:
    return page.orders


def _entries_of(page: LeaderboardPage) -> Sequence[LeaderboardEntry]:
    return page.leaderboard


# --- commands ---------------------------------------------------------------------------------


_ARGUMENT_NAMES = re.compile(r"(?<![\w-])(testnet_)?base_url\b=?")


def _client(args: argparse.Namespace, needs: Network | None = None) -> Client:
    """A Client from the options, after checking the host the command needs is configured.

    The errors name the command line's options (``--base-url``), not the Python arguments.
    """
    network: Network = args.network or Network.MAINNET
    needs = needs or network
    try:
        hosts = Hosts.resolve(args.base_url, args.testnet_base_url)
    except ValueError as exc:
        raise _UsageError(
            _ARGUMENT_NAMES.sub(lambda m: "--testnet-base-url" if m[1] else "--base-url", str(exc))
        ) from None
    if (hosts.mainnet if needs is Network.MAINNET else hosts.testnet) is None:
        option = "--base-url" if needs is Network.MAINNET else "--testnet-base-url"
        raise _UsageError(
            f"no {needs.value} host configured: pass {option} URL "
            f"or set the environment variable {ENV_VARS[needs]}"
        )
    return Client(
        network,
        base_url=args.base_url,
        testnet_base_url=args.testnet_base_url,
        timeout=args.timeout,
    )


async def _cmd_tokens(args: argparse.Namespace, out: _Output) -> int:
    async with _client(args) as client:
        tokens = await client.tokens(search=args.search)
    _show_list(out, tokens, TOKEN_COLUMNS, "tokens")
    return EXIT_OK


async def _cmd_markets(args: argparse.Namespace, out: _Output) -> int:
    # Only an explicit --network overrides the test-network default of this operation.
    async with _client(args, args.network or Network.TESTNET) as client:
        markets: Sequence[Market] = await client.token_markets(args.token, network=args.network)
    _show_list(out, markets, MARKET_COLUMNS, "markets")
    return EXIT_OK


async def _cmd_pool(args: argparse.Namespace, out: _Output) -> int:
    async with _client(args) as client:
        pool = await client.pool(args.pool_id)
    _show_pool(out, pool)
    return EXIT_OK


async def _cmd_user(args: argparse.Namespace, out: _Output) -> int:
    async with _client(args) as client:
        profile = await client.user(args.address)
    _show_user(out, profile)
    return EXIT_OK


async def _cmd_orders(args: argparse.Namespace, out: _Output) -> int:
    filters: dict[str, Any] = {"market": args.market, "status": args.status, "side": args.side}
    async with _client(args) as client:
        if args.all:
            pages = client.iter_order_pages(args.address, page_size=args.limit, **filters)
            await _stream(out, pages, _orders_of, ORDER_COLUMNS, "orders")
            return EXIT_OK
        page = await client.orders(args.address, limit=args.limit, **filters)
    _show_orders_page(out, page)
    return EXIT_OK


async def _cmd_leaderboard(args: argparse.Namespace, out: _Output) -> int:
    if args.all and args.page is not None:
        raise _UsageError("leaderboard: --page cannot be combined with --all")
    async with _client(args) as client:
        if args.all:
            pages = client.iter_leaderboard_pages(page_size=args.limit)
            await _stream(out, pages, _entries_of, LEADERBOARD_COLUMNS, "entries")
            return EXIT_OK
        page = await client.leaderboard(page=args.page, limit=args.limit)
    _show_leaderboard_page(out, page)
    return EXIT_OK


async def _cmd_demo(args: argparse.Namespace, out: _Output) -> int:
    from .testing import FakeExchange, FakeServer

    started = time.perf_counter()
    exchange = FakeExchange.generate(seed=7)
    async with FakeServer(exchange, host="127.0.0.1", port=0, testnet_port=0) as server:
        lines = [
            "asyncapi-client demo: the real Client against the fake exchange (seed 7), "
            "over loopback sockets, offline",
            f"  mainnet {server.base_url}   testnet {server.testnet_base_url}",
            "",
        ]
        out.write_lines(lines)
        out.flush()
        async with Client(
            base_url=server.base_url, testnet_base_url=server.testnet_base_url
        ) as client:
            ok = await _demo(client, exchange, out)
    out.write_lines(["", f"done in {time.perf_counter() - started:.2f} s"])
    out.flush()
    return EXIT_OK if ok else EXIT_API_ERROR


def _ms(start: float) -> str:
    return f"{(time.perf_counter() - start) * 1000:,.0f} ms"


@attrs.define
class _FanOut:
    tokens: Sequence[Token]
    pools: list[Pool]
    users: list[UserProfile]
    market_lists: list[Sequence[Market]]
    elapsed: str


async def _fan_out(client: Client, exchange: FakeExchange) -> _FanOut:
    """A bot's start-up: everything it needs at once, in one asyncio.TaskGroup."""
    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        tokens = group.create_task(client.tokens())
        pools = [group.create_task(client.pool(p)) for p in list(exchange.pools)[:6]]
        users = [group.create_task(client.user(a)) for a in list(exchange.users)[:4]]
        markets = [group.create_task(client.token_markets(t)) for t in list(exchange.markets)[:3]]
    return _FanOut(
        tokens.result(),
        [task.result() for task in pools],
        [task.result() for task in users],
        [task.result() for task in markets],
        _ms(start),
    )


async def _demo(client: Client, exchange: FakeExchange, out: _Output) -> bool:
    """What a bot does: a fan-out, a filtered cursor walk, a leaderboard walk; checks each."""
    problems: list[str] = []

    # 1. A concurrent fan-out.
    fan = await _fan_out(client, exchange)
    if len(fan.tokens) != len(exchange.tokens):
        problems.append(f"{len(fan.tokens)} tokens, the fake has {len(exchange.tokens)}")

    # 2. A full cursor walk of one user's orders, with a filter and a page size.
    status, page_size = OrderStatus.FILLED, 25
    owner = max(exchange.orders, key=lambda a: _count(exchange.orders[a], status))
    start = time.perf_counter()
    walked: list[Order] = []
    order_pages = 0
    async for page in client.iter_order_pages(owner, status=status, page_size=page_size):
        order_pages += 1
        walked.extend(page.orders)
    walk_time = _ms(start)
    served = [o for o in exchange.orders[owner] if o["status"] == status.value]
    if [to_wire(o) for o in walked] != [{k: o[k] for k in _ORDER_WIRE} for o in served]:
        problems.append(
            f"the walked orders differ from the fake's ({len(walked)} walked, {len(served)} served)"
        )

    # 3. A full leaderboard walk: page 1, then the rest concurrently, in page order.
    concurrency, board_size = 4, 50
    start = time.perf_counter()
    entries: list[LeaderboardEntry] = []
    board_pages = 0
    async for board_page in client.iter_leaderboard_pages(
        page_size=board_size, concurrency=concurrency
    ):
        board_pages += 1
        entries.extend(board_page.leaderboard)
    board_time = _ms(start)
    if [e.rank for e in entries] != [e["rank"] for e in exchange.leaderboard]:
        problems.append(f"{len(entries)} leaderboard entries unlike the fake's board")

    requests = 1 + len(fan.pools) + len(fan.users) + len(fan.market_lists)
    markets = sum(len(m) for m in fan.market_lists)
    indent = " " * len("cursor walk:  ")
    lines = [
        f"fan-out:      1 token list ({len(fan.tokens)} tokens), {len(fan.pools)} pools, "
        f"{len(fan.users)} users, {len(fan.market_lists)} market lists in {fan.elapsed}",
        f"{indent}{requests} requests at once in an asyncio.TaskGroup ({markets} markets)",
        f"cursor walk:  {len(walked):,} {status.value} orders of {out.cells.short(owner)} in "
        f"{order_pages} pages of up to {page_size}, {walk_time}",
        f"{indent}each order once, decimals exact: checked against the fake's own data",
        f"leaderboard:  {len(entries):,} entries in {board_pages} pages "
        f"(concurrency {concurrency}), {board_time}",
        "",
        "examples, decimals exactly as the server sent them:",
        *_demo_examples(out, fan.tokens, walked, fan.pools, entries),
        *(f"PROBLEM: {problem}" for problem in problems),
    ]
    out.write_lines(lines)
    out.flush()
    return not problems


_ORDER_WIRE: Final = tuple(camel(a.name) for a in attrs.fields(Order))


def _count(orders: Sequence[Mapping[str, Any]], status: OrderStatus) -> int:
    return sum(order["status"] == status.value for order in orders)


def _demo_examples(
    out: _Output,
    tokens: Sequence[Token],
    orders: Sequence[Order],
    pools: Sequence[Pool],
    entries: Sequence[LeaderboardEntry],
) -> list[str]:
    """A few of the decoded resources: a token, a pool, orders and the top of the board."""
    lines: list[str] = []
    if tokens:
        token = max(tokens, key=lambda t: len(format(t.total_supply, "f")))
        lines.append(
            f"  token {token.symbol}: totalSupply {format(token.total_supply, 'f')} "
            f"({token.decimals} decimals)"
        )
    if pools:
        pool = pools[0]
        lines.append(
            f"  pool {pool.base_token.symbol}/{pool.quote_token.symbol}: price "
            f"{_number(pool.price)}, tvl {_number(pool.tvl)}, volume 24h {_number(pool.volume_24h)}"
        )
    for records, columns in ((orders[:3], ORDER_COLUMNS), (entries[:3], LEADERBOARD_COLUMNS)):
        if records:
            table = _Table(columns, out.cells, out.rule)
            lines += ["", *(f"  {line}" for line in table.lines(records))]
    return lines


async def _cmd_serve_fake(args: argparse.Namespace, out: _Output) -> int:
    from .testing import FakeExchange, FakeServer

    exchange = FakeExchange.generate(seed=args.seed)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - not on this platform
            continue
        installed.append(signum)
    try:
        async with FakeServer(
            exchange, host="127.0.0.1", port=args.port, testnet_port=args.testnet_port
        ) as server:
            out.write_lines(
                [
                    f"fake exchange (seed {args.seed}) serving until interrupted (Ctrl-C)",
                    f"mainnet: {server.base_url}",
                    f"testnet: {server.testnet_base_url}",
                    f"export {ENV_VARS[Network.MAINNET]}={server.base_url}",
                    f"export {ENV_VARS[Network.TESTNET]}={server.testnet_base_url}",
                ]
            )
            out.flush()
            await stop.wait()
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
    return EXIT_OK


# --- entry point --------------------------------------------------------------------------------


class _UsageError(Exception):
    """A combination of arguments argparse cannot express; exit status 2."""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _first_leaf(exc: BaseException) -> BaseException:
    """The first error inside (possibly nested) exception groups, e.g. from a TaskGroup."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the final flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # pragma: no cover - stdout without a file descriptor
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 done, 1 API error, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    fmt: str = args.format or ("table" if _isatty(sys.stdout) else "json")
    out = _Output(fmt, sys.stdout, sys.stderr)
    run: Callable[[argparse.Namespace, _Output], Any] = args.run
    try:
        try:
            status: int = asyncio.run(run(args, out))
        except BaseExceptionGroup as group:
            raise _first_leaf(group) from None
    except ApiError as exc:
        return _fail(f"error: {_one_line(exc)}", EXIT_API_ERROR)
    except (ValueError, _UsageError) as exc:
        return _fail(f"{PROG}: error: {_one_line(exc)}", EXIT_USAGE)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    return status


def _fail(message: str, status: int) -> int:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    except (OSError, ValueError):
        pass
    print(message, file=sys.stderr)
    return status
