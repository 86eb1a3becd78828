"""The command line's arguments: one parser, global options before or after the command.

Every message argparse would print goes to the streams ``main`` was given, and every usage
error becomes :class:`UsageError`, so that all errors share one prefix and one exit path.
"""

from __future__ import annotations

import argparse
import math
import typing
from collections.abc import Callable, Sequence
from typing import IO, Any, Final, NoReturn

from asyncapi_client._models import OrderStatus, Side
from asyncapi_client._network import ENV_VARS, Network, parse_network

from ._render import FORMATS

__all__ = ["FILE_FORMATS", "PROG", "ShowVersion", "UsageError", "build_parser", "parse_fault"]

PROG: Final = "asyncapi-client"

#: Formats written to a file (``--output FILE``) rather than to stdout: see ``_parquet``.
FILE_FORMATS: Final = ("parquet",)

#: Seconds a command may take, retries and waits included, unless --deadline says otherwise.
DEFAULT_DEADLINE: Final = 30.0


class UsageError(Exception):
    """Bad usage or configuration: exit status 2, after the usage line of the command."""

    def __init__(self, message: str, usage: str = "") -> None:
        super().__init__(message)
        self.usage = usage


class ShowVersion(Exception):
    """``--version`` was given: print the version and exit 0."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that writes to the given stream and raises instead of exiting."""

    def __init__(self, *args: Any, stdout: IO[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stdout = stdout

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.format_usage().strip())

    def print_help(self, file: object = None) -> None:
        self.stdout.write(self.format_help())


class _Version(argparse.Action):
    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise ShowVersion


def _type(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a function raising ValueError with a message worth showing."""

    def parse(text: str) -> Any:
        try:
            return convert(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"expected a positive integer, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 100:
        raise ValueError(f"expected an integer from 0 to 100, got {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise ValueError(f"expected a port number 0-65535, got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"expected an integer, got {text!r}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise ValueError(f"expected a positive number of seconds, got {text!r}")
    return value


def _status(text: str) -> OrderStatus:
    return OrderStatus.parse_argument(text, "status")


def _side(text: str) -> Side:
    return Side.parse_argument(text, "side")


def parse_fault(text: str) -> tuple[str, str, Any]:
    """``OP:FIELD=VALUE`` (``pool:error_rate=0.5``) -> (operation, field, value), checked
    against the fields of :class:`asyncapi_client.testing.Fault`."""
    import attrs

    from asyncapi_client.testing import OPERATIONS, Fault

    operation, colon, assignment = text.partition(":")
    name, equals, raw = assignment.partition("=")
    operation, name, raw = operation.strip(), name.strip(), raw.strip()
    if not colon or not equals or not operation or not name or not raw:
        raise ValueError(f"expected OP:FIELD=VALUE (e.g. pool:error_rate=0.5), got {text!r}")
    if operation != "*" and operation not in OPERATIONS:
        choices = ", ".join((*OPERATIONS, "*"))
        raise ValueError(f"unknown operation {operation!r} in {text!r}: expected one of {choices}")
    fields = {field.name: field for field in attrs.fields(Fault)}
    if name not in fields:
        raise ValueError(
            f"unknown fault field {name!r} in {text!r}: expected one of {', '.join(fields)}"
        )
    value = _fault_value(name, raw, typing.get_type_hints(Fault)[name])
    try:
        Fault(**{name: value})
    except ValueError as exc:
        raise ValueError(f"{exc} (in {text!r})") from None
    return operation, name, value


def _fault_value(name: str, raw: str, hint: Any) -> Any:
    """``raw`` read as the Fault field's own type: ``none`` where None is allowed, an integer
    where it is an int, a number where a float, and the text as is where a str (a date)."""
    kinds = set(typing.get_args(hint)) or {hint}
    if type(None) in kinds and raw.lower() == "none":
        return None
    if int in kinds:
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    try:
        return float(raw)
    except ValueError:
        if str not in kinds:
            raise ValueError(f"{name} must be a number, got {raw!r}") from None
        return raw  # an HTTP date, sent as is


def _add_global_options(parser: argparse.ArgumentParser, *, in_command: bool) -> None:
    """The options every command shares; accepted before the command and after it.

    After the command their defaults are SUPPRESS, so a value given before the command is
    kept when the command's parser runs.
    """

    def default(value: object) -> object:
        return argparse.SUPPRESS if in_command else value

    group = parser.add_argument_group("global options (before or after the command)")
    group.add_argument(
        "--network",
        type=_type(parse_network),
        default=default(None),
        metavar="mainnet|testnet",
        help="the host to ask (default: mainnet; markets: testnet)",
    )
    group.add_argument(
        "--base-url",
        default=default(None),
        metavar="URL",
        help=f"main-network host (default: ${ENV_VARS[Network.MAINNET]})",
    )
    group.add_argument(
        "--testnet-base-url",
        default=default(None),
        metavar="URL",
        help=f"test-network host (default: ${ENV_VARS[Network.TESTNET]})",
    )
    group.add_argument(
        "--format",
        choices=(*FORMATS, *FILE_FORMATS),
        default=default(None),
        help=(
            "output format (default: table on a terminal, json otherwise; parquet writes "
            "a whole walk of orders or entries to a file)"
        ),
    )
    group.add_argument(
        "--wide",
        action="store_true",
        default=default(False),
        help=(
            "tables show ids in full even when wider than the terminal, and text cells "
            "up to 1,000 characters (else 80)"
        ),
    )
    group.add_argument(
        "--timeout",
        type=_type(_seconds),
        default=default(10.0),
        metavar="S",
        help="seconds for one attempt of a request (default: 10)",
    )
    group.add_argument(
        "--deadline",
        type=_type(_seconds),
        default=default(DEFAULT_DEADLINE),
        metavar="S",
        help=(
            "seconds for a whole request, retries and waits included "
            f"(default: {DEFAULT_DEADLINE:g}; with --all, for each page)"
        ),
    )
    group.add_argument(
        "--max-retries",
        type=_type(_count),
        default=default(3),
        metavar="N",
        help="retries after a failed attempt (default: 3)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default(False),
        help="say each retry on stderr (always on when stderr is a terminal), and at the "
        "end the rate limit the server's answers advertised",
    )
    if not in_command:
        group.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")


def _page_size_option(parser: argparse.ArgumentParser) -> None:
    """``--page-size N``, the walks' ``page_size=``; ``--limit N`` is the same option."""
    parser.add_argument(
        "--page-size",
        "--limit",
        dest="page_size",
        type=_type(_positive_int),
        metavar="N",
        help="items a page (with --all, the page size of the walk); --limit is another name",
    )


def _checkpoint_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint",
        metavar="FILE",
        help=(
            "with --all: keep the walk's position in FILE after each item (with --format "
            "parquet, after each row group); run again with the same arguments and FILE to "
            "continue after a crash (FILE is removed when the walk completes)"
        ),
    )


def _scale(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 38:
        raise ValueError(f"expected an integer from 0 to 38, got {text!r}")
    return value


def _group_rows(text: str) -> int:
    value = _positive_int(text)
    if value > 64 * 1024 * 1024:  # pyarrow's largest row group
        raise ValueError(f"expected at most 67,108,864 rows, got {text!r}")
    return value


def _export_options(parser: argparse.ArgumentParser) -> None:
    """``--output`` and the Parquet settings of a walk written with ``--format parquet``."""
    group = parser.add_argument_group("with --all --format parquet")
    group.add_argument(
        "--output",
        metavar="FILE",
        help="the Parquet file to write; it appears only once the walk is complete",
    )
    group.add_argument(
        "--rows-per-group",
        type=_type(_group_rows),
        default=65_536,
        metavar="N",
        help="rows in each Parquet row group (default: 65,536)",
    )
    group.add_argument(
        "--decimal-scale",
        type=_type(_scale),
        default=18,
        metavar="N",
        help="digits after the point in the decimal128(38, N) columns (default: 18)",
    )


def _watch_options(parser: argparse.ArgumentParser, interval: float) -> None:
    """What every ``watch`` shares: the interval and where its state is kept."""
    _add_global_options(parser, in_command=True)
    parser.add_argument(
        "--interval",
        type=_type(_seconds),
        default=interval,
        metavar="SECONDS",
        help=f"seconds between polls, longer when the server asks (default: {interval:g})",
    )
    group = parser.add_argument_group("keeping the watch's place")
    group.add_argument(
        "--state",
        metavar="FILE|URL",
        help=(
            "keep the baseline, position and changes not yet written in FILE (rewritten "
            "atomically), or in Redis at a redis:// URL shared by a fleet (with --name and "
            "--consumer); run again with the same --state to go on where it stopped"
        ),
    )
    group.add_argument("--name", metavar="NAME", help="with a Redis --state: the fleet's name")
    group.add_argument(
        "--consumer", metavar="NAME", help="with a Redis --state: this process's name in the fleet"
    )


def _watch_commands(parser: argparse.ArgumentParser, stdout: IO[str]) -> None:
    """``watch orders ADDRESS``, ``watch pool POOL_ID``, ``watch leaderboard``."""
    watches = parser.add_subparsers(dest="watch", metavar="WHAT", required=True)

    def watch(name: str, help_text: str) -> argparse.ArgumentParser:
        return watches.add_parser(name, help=help_text, description=help_text, stdout=stdout)

    sub = watch("orders", "a user's orders: new, updated and closed")
    sub.add_argument("address", metavar="ADDRESS")
    sub.add_argument("--market", metavar="M", help="only orders of this market (pool id)")
    sub.add_argument("--side", type=_type(_side), metavar="S", help="BUY or SELL")
    sub.add_argument(
        "--initial", action="store_true", help="first, each open order of the baseline as new"
    )
    _watch_options(sub, 1.0)

    sub = watch("pool", "a pool: a line whenever one of its fields changed")
    sub.add_argument("pool_id", metavar="POOL_ID")
    _watch_options(sub, 1.0)

    sub = watch("leaderboard", "the first ranks of the leaderboard: who entered, left or moved")
    sub.add_argument(
        "--top", type=_type(_positive_int), default=100, metavar="N", help="ranks (default: 100)"
    )
    _watch_options(sub, 5.0)


def build_parser(
    stdout: IO[str], commands: dict[str, Callable[..., Any]]
) -> argparse.ArgumentParser:
    """The whole command line; ``commands`` maps each command name to what runs it."""
    parser = _Parser(
        prog=PROG,
        description="Read the exchange API from the command line.",
        epilog=(
            "exit status: 0 done, 1 the API answered with an error or could not be reached, "
            "2 bad usage or configuration, 130 interrupted (SIGINT), 143 stopped (SIGTERM)"
        ),
        stdout=stdout,
    )
    _add_global_options(parser, in_command=False)
    sub_parsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = sub_parsers.add_parser(name, help=help_text, description=help_text, stdout=stdout)
        _add_global_options(sub, in_command=True)
        sub.set_defaults(run=commands[name])
        return sub

    sub = command("tokens", "the token directory")
    sub.add_argument("--search", metavar="Q", help="only tokens matching Q")

    sub = command("markets", "a token's markets (on the test-network host by default)")
    sub.add_argument("token", metavar="TOKEN")

    sub = command("pool", "one order-book pool")
    sub.add_argument("pool_id", metavar="POOL_ID")

    sub = command("user", "a user's profile: balances, orders, positions")
    sub.add_argument("address", metavar="ADDRESS")

    sub = command(
        "orders",
        "one page of a user's orders, or with --all every order (of each ADDRESS in turn)",
    )
    sub.add_argument("addresses", metavar="ADDRESS", nargs="+", help="a user (several: --all)")
    sub.add_argument("--market", metavar="M", help="only orders of this market (pool id)")
    sub.add_argument("--status", type=_type(_status), metavar="S", help="OPEN, FILLED, ...")
    sub.add_argument("--side", type=_type(_side), metavar="S", help="BUY or SELL")
    _page_size_option(sub)
    sub.add_argument("--cursor", metavar="C", help="the page at cursor C (from a page's cursor)")
    sub.add_argument("--all", action="store_true", help="follow the cursor to the last page")
    _checkpoint_option(sub)
    _export_options(sub)

    sub = command("leaderboard", "one page of the leaderboard, or with --all every entry")
    sub.add_argument("--page", type=_type(_positive_int), metavar="N", help="page number (from 1)")
    _page_size_option(sub)
    sub.add_argument("--all", action="store_true", help="every page, fetched concurrently")
    _checkpoint_option(sub)
    _export_options(sub)

    sub = command(
        "watch",
        "every change from now on, one line each (jsonl by default), until interrupted",
    )
    _watch_commands(sub, stdout)

    command("demo", "run the client against the embedded fake exchange, offline")

    sub = command("serve-fake", "serve the fake exchange on loopback until interrupted")
    sub.add_argument("--port", type=_type(_port), default=0, metavar="P", help="main port (0: any)")
    sub.add_argument(
        "--testnet-port",
        type=_type(_port),
        default=0,
        metavar="P",
        help="test-network port (0: any)",
    )
    sub.add_argument(
        "--seed", type=_type(_seed), default=7, metavar="N", help="data set (default: 7)"
    )
    sub.add_argument(
        "--fault",
        type=_type(parse_fault),
        action="append",
        default=[],
        metavar="OP:FIELD=VALUE",
        help=(
            "inject a fault, repeatable: OP is an operation (pool, orders, ...) or *, FIELD a "
            "field of asyncapi_client.testing.Fault (e.g. pool:error_rate=0.5, "
            "orders:latency=0.05, *:rate_limit_burst=2)"
        ),
    )
    sub.add_argument(
        "--latency",
        type=_type(_seconds),
        metavar="S",
        help="seconds added before every answer (the same as --fault '*:latency=S')",
    )
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv``; a usage error is a :class:`UsageError`, ``--help`` a SystemExit(0)."""
    return parser.parse_args(argv)
