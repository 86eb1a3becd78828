"""The command line in this process, ``main(argv, stdout=, stderr=, environ=)``, against the
fake exchange served from a thread. Only what needs a real process (the console script, a
terminal, a broken pipe, a signal) starts one: see test_cli_process.py.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import re
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from asyncapi_client import Network, NotFoundError
from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest
from tests._cli import Run, cli, hosts, project

FORMATS = ("json", "jsonl", "table")

TOKEN_KEYS = ("address", "name", "symbol", "decimals", "totalSupply", "logoUri", "priceUsd")
ORDER_KEYS = (
    "transactionId",
    "poolId",
    "user",
    "side",
    "price",
    "size",
    "filledSize",
    "status",
    "timestamp",
)
DECIMAL_KEYS = ("price", "size", "filledSize")


class Fake:
    """The fake exchange served from a thread, and the CLI pointed at it."""

    def __init__(self, exchange: FakeExchange, server: FakeServer) -> None:
        self.exchange = exchange
        self.server = server
        self.env = hosts(server.base_url, server.testnet_base_url)

    def cli(self, *args: str) -> Run:
        return cli(*args, env=self.env)

    def cli_all(self, *invocations: Sequence[str]) -> list[Run]:
        return [self.cli(*argv) for argv in invocations]

    def requests(self, operation: str) -> list[RecordedRequest]:
        return [r for r in list(self.server.requests) if r.operation == operation]


@pytest.fixture(scope="module")
def fake() -> Iterator[Fake]:
    exchange = FakeExchange.generate(seed=7)
    with FakeServer(exchange).in_thread() as server:
        yield Fake(exchange, server)


def a_user(fake: Fake) -> str:
    """The user with the most FILLED orders: several pages with any small page size."""
    orders = fake.exchange.orders
    return max(orders, key=lambda a: sum(o["status"] == "FILLED" for o in orders[a]))


def table_rows(run: Run) -> list[str]:
    """The rows of a table printed alone: the lines after the header and its rule."""
    lines = run.lines()
    assert set(lines[1].replace(" ", "")) == {"─"}, lines[:2]
    return lines[2:]


# --- one command, every format ---------------------------------------------------------------


def test_tokens_in_every_format(fake: Fake) -> None:
    tokens = fake.exchange.tokens
    as_json, as_jsonl, as_table = (
        r.ok() for r in fake.cli_all(*(["--format", f, "tokens"] for f in FORMATS))
    )

    expected = [project(t, TOKEN_KEYS) for t in tokens]
    assert as_json.json() == expected
    # decimals byte for byte: the text of every totalSupply is the text the server sent
    assert [t["totalSupply"] for t in as_json.json()] == [t["totalSupply"] for t in tokens]
    assert as_json.stdout.startswith("[\n  {\n")  # indented JSON
    assert as_jsonl.jsonl() == expected
    assert len(as_jsonl.lines()) == len(tokens)

    header, *_ = as_table.lines()
    assert header.split() == [
        "symbol",
        "name",
        "decimals",
        "price",
        "usd",
        "total",
        "supply",
        "address",
    ]
    rows = table_rows(as_table)
    assert len(rows) == len(tokens)
    for row, token in zip(rows, tokens, strict=True):
        assert row.startswith(token["symbol"])
        assert token["totalSupply"] in row.split()  # exact decimals in the table too
        address = token["address"]
        assert address in row  # no terminal to fit: ids in full


def test_markets_go_to_the_testnet_host_unless_network_is_given(fake: Fake) -> None:
    token = next(t for t in fake.exchange.markets if len(fake.exchange.markets[t]) >= 2)
    markets = fake.exchange.markets[token]
    only_testnet = {"ASYNCAPI_TESTNET_BASE_URL": fake.server.testnet_base_url}
    # with no main host configured at all, markets still works: it needs only testnet
    as_json = cli("--format", "json", "markets", token, env=only_testnet).ok()
    as_jsonl = fake.cli("--format", "jsonl", "markets", token).ok()
    as_table = fake.cli("--format", "table", "markets", token).ok()
    # the fake serves markets on the main host too, so --network mainnet can be seen
    on_mainnet = fake.cli("--network", "MAINNET", "--format", "jsonl", "markets", token).ok()
    assert [m["address"] for m in as_json.json()] == [m["address"] for m in markets]
    assert as_json.json()[0]["token0"] == project(markets[0]["token0"], TOKEN_KEYS)
    assert set(as_json.json()[0]) == {
        "address",
        "token0",
        "token1",
        "type",
        "tvl",
        "volume24h",
        "fee",
    }
    assert as_jsonl.jsonl() == as_json.json()
    assert on_mainnet.jsonl() == as_json.json()
    assert as_table.lines()[0].split() == ["market", "pair", "type", "tvl", "volume", "24h", "fee"]
    rows = table_rows(as_table)
    assert len(rows) == len(markets)
    assert f"{markets[0]['token0']['symbol']}/{markets[0]['token1']['symbol']}" in rows[0]

    networks = [r.network for r in fake.requests("token_markets") if token in r.path]
    assert networks.count(Network.TESTNET) == 3
    assert networks.count(Network.MAINNET) == 1


def test_pool_in_every_format(fake: Fake) -> None:
    pool_id, pool = next(iter(fake.exchange.pools.items()))
    as_json, as_jsonl, as_table = (
        r.ok() for r in fake.cli_all(*(["--format", f, "pool", pool_id] for f in FORMATS))
    )
    got = as_json.json()
    assert set(got) == {
        "poolId",
        "baseToken",
        "quoteToken",
        "price",
        "priceChange24h",
        "volume24h",
        "tvl",
    }
    for key in ("poolId", "price", "priceChange24h", "volume24h", "tvl"):
        assert got[key] == pool[key]
    assert got["baseToken"] == project(pool["baseToken"], TOKEN_KEYS)
    assert as_jsonl.jsonl() == [got]
    table = dict(line.split(None, 1) for line in as_table.lines() if line.strip())
    assert table["pool"] == pool_id  # a single pool shows its id in full
    assert table["pair"] == f"{pool['baseToken']['symbol']}/{pool['quoteToken']['symbol']}"


def test_user_in_every_format(fake: Fake) -> None:
    address, profile = next(iter(fake.exchange.users.items()))
    as_json, as_jsonl, as_table = (
        r.ok() for r in fake.cli_all(*(["--format", f, "user", address] for f in FORMATS))
    )
    got = as_json.json()
    assert got["address"] == address
    assert got["balances"] == profile["balances"]  # free-form objects pass through as sent
    assert got["positions"] == profile["positions"]
    assert got["orders"] == [project(o, ORDER_KEYS) for o in profile["orders"]]
    assert as_jsonl.jsonl() == [got]
    text = as_table.stdout
    assert address in text
    assert "balances:" in text
    assert "orders:" in text
    for order in profile["orders"]:
        assert order["price"] in text  # exact decimals


def test_orders_one_page_in_every_format(fake: Fake) -> None:
    address = a_user(fake)
    args = ("orders", address, "--status", "filled", "--side", "BUY", "--limit", "5")
    as_json, as_jsonl, as_table = (
        r.ok() for r in fake.cli_all(*(["--format", f, *args] for f in FORMATS))
    )
    expected = [
        project(o, ORDER_KEYS)
        for o in fake.exchange.orders[address]
        if o["status"] == "FILLED" and o["side"] == "BUY"
    ][:5]
    page = as_json.json()
    assert set(page) == {"orders", "cursor"}
    assert page["orders"] == expected
    assert isinstance(page["cursor"], str)
    assert page["cursor"]
    assert as_jsonl.jsonl() == [page]  # one page, one line: the cursor is kept

    header = as_table.lines()[0].split()
    assert header[:8] == ["time", "(utc)", "pool", "side", "price", "size", "filled", "status"]
    lines = as_table.lines()
    assert lines[-1] == (
        "(more orders on further pages: add --all to get them all, or "
        f"--cursor {page['cursor']} for the next page)"
    )
    rows = lines[2:-1]
    assert len(rows) == 5
    for row, order in zip(rows, expected, strict=True):
        cells = row.split()
        assert cells[3] == "BUY"
        assert cells[-2] == "FILLED"
        assert [order[k] for k in DECIMAL_KEYS] == cells[4:7]
        assert order["poolId"] in row


def test_orders_all_walks_every_page_in_every_format(fake: Fake) -> None:
    address = a_user(fake)
    expected = [
        project(o, ORDER_KEYS) for o in fake.exchange.orders[address] if o["status"] == "FILLED"
    ]
    page_size = 7
    assert len(expected) > 3 * page_size
    before = len(fake.requests("orders"))
    args = ("orders", address, "--status", "FILLED", "--all", "--limit", str(page_size))
    as_json, as_jsonl, as_table = (
        r.ok() for r in fake.cli_all(*(["--format", f, *args] for f in FORMATS))
    )

    # one JSON array, complete, in order, each order once, decimals byte for byte
    assert as_json.json() == expected
    assert as_json.stdout.startswith("[\n  {")
    assert as_json.stdout.endswith("}\n]\n")
    assert as_jsonl.jsonl() == expected
    rows = table_rows(as_table)
    assert len(rows) == len(expected)
    assert [row.split()[4:7] for row in rows] == [[o[k] for k in DECIMAL_KEYS] for o in expected]

    # --limit is the page size of the walk: every request asked for 7 orders
    walk = fake.requests("orders")[before:]
    pages = math.ceil(len(expected) / page_size)
    assert len(walk) == 3 * pages
    assert {r.query.get("limit") for r in walk} == {str(page_size)}
    assert sum("cursor" in r.query for r in walk) == 3 * (pages - 1)


def test_orders_cursor_fetches_the_page_at_that_cursor(fake: Fake) -> None:
    address = a_user(fake)
    expected = [project(o, ORDER_KEYS) for o in fake.exchange.orders[address]]
    first = fake.cli("orders", address, "--limit", "5").ok().json()
    assert first["orders"] == expected[:5]
    second = fake.cli("orders", address, "--limit", "5", "--cursor", first["cursor"]).ok().json()
    assert second["orders"] == expected[5:10]
    (third,) = (
        fake.cli(
            "--format", "jsonl", "orders", address, "--limit", "5", "--cursor", second["cursor"]
        )
        .ok()
        .jsonl()
    )
    assert third["orders"] == expected[10:15]
    assert third["cursor"] not in (None, first["cursor"], second["cursor"])
    both = fake.cli("orders", address, "--all", "--cursor", first["cursor"])
    assert both.returncode == 2
    assert "--cursor cannot be combined with --all" in both.stderr


def test_leaderboard_page_in_every_format(fake: Fake) -> None:
    board = fake.exchange.leaderboard
    args = ("leaderboard", "--page", "3", "--limit", "20")
    as_json, as_jsonl, as_table = (
        r.ok() for r in fake.cli_all(*(["--format", f, *args] for f in FORMATS))
    )
    page = as_json.json()
    assert page == {
        "leaderboard": board[40:60],
        "page": 3,
        "limit": 20,
        "total": len(board),
        "totalPages": math.ceil(len(board) / 20),
    }
    assert as_jsonl.jsonl() == [page]
    lines = as_table.lines()
    assert lines[0].split() == ["rank", "address", "score"]
    assert [int(line.split()[0]) for line in lines[2:-1]] == list(range(41, 61))
    assert lines[-1] == f"page 3 of {math.ceil(len(board) / 20)} ({len(board)} entries, 20 a page)"


def test_leaderboard_all_walks_every_page_in_every_format(fake: Fake) -> None:
    board = fake.exchange.leaderboard
    before = len(fake.requests("leaderboard"))
    args = ("leaderboard", "--all", "--limit", "40")
    as_json, as_jsonl, as_table = (
        r.ok() for r in fake.cli_all(*(["--format", f, *args] for f in FORMATS))
    )
    assert as_json.json() == board
    assert as_jsonl.jsonl() == board
    rows = table_rows(as_table)
    assert [int(row.split()[0]) for row in rows] == [e["rank"] for e in board]
    walk = fake.requests("leaderboard")[before:]
    assert len(walk) == 3 * math.ceil(len(board) / 40)
    assert {r.query.get("limit") for r in walk} == {"40"}


# --- exit status and errors: one prefix, one line ---------------------------------------------


def closed_port() -> int:
    """A loopback port that was just bound and closed: nothing listens on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_exit_status_1_for_api_errors_and_2_for_usage(fake: Fake) -> None:
    unreachable = f"http://127.0.0.1:{closed_port()}"
    missing = fake.cli("pool", "no-such-pool").one_line_error(1)
    assert "HTTP 404" in missing
    assert f"{fake.server.base_url}/api/clob/pools/no-such-pool" in missing
    assert "[mainnet]" in missing
    assert "HTTP 404" in fake.cli("orders", "0xnobody", "--all").one_line_error(1)
    down = cli("--base-url", unreachable, "--max-retries", "0", "tokens")
    assert unreachable in down.one_line_error(1)
    assert down.stdout == ""

    usage_errors = {
        "unknown command": (fake.env, ["frobnicate"], "invalid choice"),
        "--limit 0": (fake.env, ["orders", "0xabc", "--limit", "0"], "--limit"),
        "--status BOGUS": (fake.env, ["orders", "0xabc", "--status", "BOGUS"], "'BOGUS'"),
        "no host": ({}, ["tokens"], "ASYNCAPI_BASE_URL"),
    }
    for _name, (env, args, mentions) in usage_errors.items():
        run = cli(*args, env=env)
        assert run.returncode == 2, (args, run.returncode, run.stderr)
        assert "Traceback" not in run.stderr, run.stderr
        assert mentions in run.stderr, run.stderr
        assert run.stderr.splitlines()[-1].startswith("asyncapi-client: error: "), run.stderr
        assert run.stdout == ""


@pytest.mark.parametrize(
    ("args", "env", "mentions"),
    [
        (["orders", "0xabc", "--side", "up"], {}, "unknown side"),
        (["orders", "0xabc", "--limit", "ten"], {}, "--limit"),
        (["leaderboard", "--all", "--page", "2"], {}, "--page"),
        (["leaderboard", "--page", "0"], {}, "--page"),
        (["--network", "moon", "tokens"], {}, "unknown network"),
        (["--timeout", "-1", "tokens"], {}, "--timeout"),
        (["--deadline", "0", "tokens"], {}, "--deadline"),
        (["--max-retries", "-1", "tokens"], {}, "--max-retries"),
        (["--format", "xml", "tokens"], {}, "--format"),
        (["serve-fake", "--port", "70000"], {}, "--port"),
        (["markets", "0xabc"], {"ASYNCAPI_BASE_URL": "http://127.0.0.1:9"}, "--testnet-base-url"),
        (["--base-url", "ftp://example.invalid", "tokens"], {}, "--base-url 'ftp://"),
        (["tokens"], {"ASYNCAPI_BASE_URL": "not a url"}, "ASYNCAPI_BASE_URL 'not a url'"),
        (["tokens", "--base-url", "http://u:p@h"], {}, "--base-url must not carry credentials"),
        (["pool", ""], {"ASYNCAPI_BASE_URL": "http://127.0.0.1:9"}, "pool_id"),
        ([], {}, "required: COMMAND"),
    ],
)
def test_usage_and_configuration_errors_exit_2_with_the_one_prefix(
    args: list[str], env: dict[str, str], mentions: str
) -> None:
    run = cli(*args, env=env)
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert mentions in run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr.splitlines()[-1].startswith("asyncapi-client: error: ")
    assert run.stdout == ""


def test_usage_errors_show_the_command_usage_then_one_error_line() -> None:
    run = cli("orders", "0xabc", "--limit", "0")
    usage, error = run.stderr.split("\nasyncapi-client: error: ")
    assert usage.startswith("usage: asyncapi-client orders ")
    assert error.startswith("argument --page-size/--limit: expected a positive integer")


def test_global_options_work_before_or_after_the_command(fake: Fake) -> None:
    before = fake.cli("--format", "csv", "--max-retries", "0", "leaderboard", "--limit", "2")
    after = fake.cli("leaderboard", "--limit", "2", "--format", "csv", "--max-retries", "0")
    assert before.ok().stdout == after.ok().stdout
    assert len(after.lines()) == 3  # a header and two rows


def test_help_lists_every_command_and_each_command_shows_the_global_options() -> None:
    run = cli("--help")
    assert run.returncode == 0
    for command in ("tokens", "markets", "pool", "user", "orders", "leaderboard", "demo"):
        assert command in run.stdout
    assert "serve-fake" in run.stdout
    orders = cli("orders", "--help")
    assert orders.returncode == 0
    assert orders.stderr == ""
    for option in ("--status", "--format", "--network", "--deadline", "--max-retries", "--wide"):
        assert option in orders.stdout, option


def test_version_prints_the_package_version() -> None:
    from asyncapi_client import __version__

    run = cli("--version").ok()
    assert run.stdout == f"asyncapi-client {__version__}\n"


# --- retries, deadline, verbose ---------------------------------------------------------------


@pytest.fixture
def failing() -> Iterator[Fake]:
    """A fake whose pool answers 503 every time."""
    from asyncapi_client.testing import Fault

    exchange = FakeExchange.generate(seed=3, users=2, orders_per_user=5, leaderboard_size=5)

    with FakeServer(exchange).in_thread() as server:
        server.set_fault("pool", Fault(error_rate=1.0, error_status=503))
        yield Fake(exchange, server)


def test_max_retries_bounds_the_attempts(failing: Fake) -> None:
    pool_id = next(iter(failing.exchange.pools))
    failing.cli("--max-retries", "0", "pool", pool_id).one_line_error(1)
    assert len(failing.requests("pool")) == 1
    line = failing.cli("pool", pool_id, "--max-retries", "1").one_line_error(1)
    assert len(failing.requests("pool")) == 3
    assert "HTTP 503" in line


def test_verbose_says_each_retry_on_stderr(failing: Fake) -> None:
    pool_id = next(iter(failing.exchange.pools))
    run = failing.cli("-v", "--max-retries", "2", "pool", pool_id)
    assert run.returncode == 1
    *retries, error = run.stderr.splitlines()
    assert len(retries) == 2, run.stderr
    url = f"{failing.server.base_url}/api/clob/pools/{pool_id}"
    for number, line in enumerate(retries, 1):
        assert line.startswith(f"asyncapi-client: retry {number} of 2: pool [mainnet] {url} "), line
        assert "failed (HTTP 503" in line
        assert re.search(r"; next attempt in \d+\.\d\d s$", line), line
    assert error.startswith("asyncapi-client: error: HTTP 503")
    # without -v and off a terminal: only the error line
    failing.cli("--max-retries", "1", "pool", pool_id).one_line_error(1)


def test_the_error_line_says_how_many_attempts_were_made(failing: Fake) -> None:
    pool_id = next(iter(failing.exchange.pools))
    three = failing.cli("--max-retries", "2", "pool", pool_id).one_line_error(1)
    assert "after 3 attempts" in three
    one = failing.cli("--max-retries", "0", "pool", pool_id).one_line_error(1)
    assert "attempts" not in one  # one attempt: nothing to count


def test_a_host_that_never_answers_ends_at_the_deadline() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        run = cli("--base-url", url, "--timeout", "60", "--deadline", "0.5", "pool", "x")
    line = run.one_line_error(1)
    assert "deadline" in line
    assert url in line


def test_the_cli_has_a_default_deadline() -> None:
    from asyncapi_client._cli._args import DEFAULT_DEADLINE
    from asyncapi_client._cli._commands import Context, client_for

    parser_args = _parsed("pool", "x")
    client = client_for(Context(parser_args, None, {"ASYNCAPI_BASE_URL": "http://h"}))  # type: ignore[arg-type]
    assert client._pipeline.deadline == DEFAULT_DEADLINE == 30.0
    client = client_for(
        Context(_parsed("pool", "x", "--deadline", "2.5"), None, {"ASYNCAPI_BASE_URL": "http://h"})  # type: ignore[arg-type]
    )
    assert client._pipeline.deadline == 2.5


def _parsed(*argv: str) -> Any:
    from asyncapi_client._cli._args import build_parser
    from asyncapi_client._cli._main import _COMMANDS

    return build_parser(io.StringIO(), dict(_COMMANDS)).parse_args(argv)


# --- finer points ---------------------------------------------------------------------------


def test_tokens_search_sends_the_query(fake: Fake) -> None:
    found = fake.cli("tokens", "--search", "eth").ok().json()
    assert found
    assert all("eth" in (t["symbol"] + t["name"]).lower() for t in found)
    assert len(found) < len(fake.exchange.tokens)
    assert any(r.query.get("search") == "eth" for r in fake.requests("tokens"))


def test_a_walk_with_nothing_to_walk(fake: Fake) -> None:
    args = ("orders", a_user(fake), "--all", "--market", "no-such-pool")
    assert fake.cli("--format", "json", *args).ok().stdout == "[]\n"
    assert fake.cli("--format", "jsonl", *args).ok().stdout == ""
    assert fake.cli("--format", "table", *args).ok().stdout == "(no orders)\n"
    assert fake.cli("--format", "csv", *args).ok().stdout.startswith("transactionId,poolId,")
    assert fake.cli("--format", "table", "tokens", "--search", "no such token").ok().stdout == (
        "(no tokens)\n"
    )


def test_table_numbers_line_up_on_the_decimal_point(fake: Fake) -> None:
    run = fake.cli("--format", "table", "orders", a_user(fake), "--limit", "30").ok()
    header, rule, *rows = run.lines()[:-1]  # the last line says there are more pages
    assert len(rows) == 30
    start = header.index("time")
    spans = [(m.start(), m.end()) for m in re.finditer("─+", rule)]
    assert len(spans) == 8
    assert spans[0][0] == start
    for column in (3, 4, 5):  # price, size, filled: exact decimals, aligned on the point
        lo, hi = spans[column]
        cells = [row[lo:hi] for row in rows]
        points = {cell.index(".") for cell in cells if "." in cell}
        assert len(points) == 1, cells
        assert all(cell.strip() for cell in cells)


def test_user_table_shows_free_form_balances(fake: Fake) -> None:
    address, profile = next((a, p) for a, p in fake.exchange.users.items() if p["balances"])
    text = fake.cli("--format", "table", "user", address).ok().stdout
    balances = text.split("balances:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert balances[0].split() == list(profile["balances"][0])
    assert len(balances) == 2 + len(profile["balances"])
    for line, balance in zip(balances[2:], profile["balances"], strict=True):
        for value in balance.values():
            if isinstance(value, str):
                assert value in line.split()


# --- tables: full ids when they fit ------------------------------------------------------------


def test_tables_show_full_ids_when_the_terminal_is_wide_enough(fake: Fake) -> None:
    board = fake.exchange.leaderboard
    address = board[0]["address"]
    narrow = cli(
        "--format", "table", "leaderboard", "--limit", "3", env={**fake.env, "COLUMNS": "50"}
    )
    wide = cli(
        "--format", "table", "leaderboard", "--limit", "3", env={**fake.env, "COLUMNS": "200"}
    )
    forced = cli(
        "--format",
        "table",
        "--wide",
        "leaderboard",
        "--limit",
        "3",
        env={**fake.env, "COLUMNS": "50"},
    )
    short = f"{address[:6]}…{address[-4:]}"
    assert short in narrow.ok().stdout
    assert address not in narrow.stdout
    assert all(len(line) <= 50 for line in narrow.lines()[:-1])
    assert address in wide.ok().stdout
    assert address in forced.ok().stdout


def test_a_terminal_that_is_too_narrow_gets_short_ids(fake: Fake) -> None:
    from tests._cli import Terminal

    class Narrow(Terminal):
        def fileno(self) -> int:
            raise io.UnsupportedOperation("no descriptor")

    run = cli("leaderboard", "--limit", "2", env={**fake.env, "COLUMNS": "50"}, stdout=Narrow())
    assert run.lines()[0].split() == ["rank", "address", "score"]  # a terminal: table by default
    assert "…" in run.stdout


# --- csv ----------------------------------------------------------------------------------------


def csv_rows(run: Run) -> list[dict[str, str]]:
    import csv

    return list(csv.DictReader(io.StringIO(run.ok().stdout)))


def test_csv_for_every_command_with_wire_names_and_exact_decimals(fake: Fake) -> None:
    tokens = csv_rows(fake.cli("--format", "csv", "tokens"))
    assert list(tokens[0]) == list(TOKEN_KEYS)
    assert [t["totalSupply"] for t in tokens] == [t["totalSupply"] for t in fake.exchange.tokens]
    assert [t["priceUsd"] for t in tokens] == [
        "" if t["priceUsd"] is None else repr(t["priceUsd"]) for t in fake.exchange.tokens
    ]

    token = next(iter(fake.exchange.markets))
    markets = csv_rows(fake.cli("--format", "csv", "markets", token))
    assert "token0.address" in markets[0]
    assert "token1.totalSupply" in markets[0]
    assert [m["address"] for m in markets] == [m["address"] for m in fake.exchange.markets[token]]

    pool_id, pool = next(iter(fake.exchange.pools.items()))
    (row,) = csv_rows(fake.cli("--format", "csv", "pool", pool_id))
    assert row["poolId"] == pool_id
    assert row["baseToken.symbol"] == pool["baseToken"]["symbol"]
    assert float(row["tvl"]) == pool["tvl"]

    address, profile = next(iter(fake.exchange.users.items()))
    (user,) = csv_rows(fake.cli("--format", "csv", "user", address))
    assert list(user) == ["address", "balances", "orders", "positions"]
    assert json.loads(user["balances"]) == profile["balances"]

    owner = a_user(fake)
    expected = [o for o in fake.exchange.orders[owner] if o["status"] == "FILLED"]
    page = csv_rows(
        fake.cli("--format", "csv", "orders", owner, "--status", "filled", "--limit", "4")
    )
    assert [[o[k] for k in ORDER_KEYS] for o in page] == [
        [str(o[k]) for k in ORDER_KEYS] for o in expected[:4]
    ]
    walk = csv_rows(
        fake.cli("--format", "csv", "orders", owner, "--status", "filled", "--all", "--limit", "9")
    )
    assert [o["transactionId"] for o in walk] == [o["transactionId"] for o in expected]
    assert [[o[k] for k in DECIMAL_KEYS] for o in walk] == [
        [o[k] for k in DECIMAL_KEYS] for o in expected
    ]

    board = csv_rows(fake.cli("--format", "csv", "leaderboard", "--all", "--limit", "100"))
    assert [int(e["rank"]) for e in board] == [e["rank"] for e in fake.exchange.leaderboard]
    one = csv_rows(fake.cli("--format", "csv", "leaderboard", "--page", "2", "--limit", "5"))
    assert [e["address"] for e in one] == [e["address"] for e in fake.exchange.leaderboard[5:10]]


def test_the_docs_list_every_global_option() -> None:
    """The CLI guide's option table does not fall behind the parser."""
    from pathlib import Path

    guide = Path(__file__).resolve().parents[2] / "docs" / "guides" / "cli.md"
    section = (
        guide.read_text(encoding="utf-8").split("## Global options\n", 1)[1].split("\n## ", 1)[0]
    )
    options = re.findall(r"(--[a-z-]+)", cli("--help").stdout)
    assert options
    for option in set(options) - {"--help"}:
        assert f"`{option}" in section, option


# --- safety nets ---------------------------------------------------------------------------------


class ClosedPipe(io.StringIO):
    """A stdout whose reader went away."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_reader_that_goes_away_ends_the_command_quietly(fake: Fake) -> None:
    err = io.StringIO()
    status = main_in_process(["--format", "jsonl", "tokens"], fake.env, ClosedPipe(), err)
    assert status == 0
    assert err.getvalue() == ""


class FullDisk(io.StringIO):
    """A stdout on a full disk: every write (or, ``on_flush``, only the flush) fails."""

    def __init__(self, *, on_flush: bool = False) -> None:
        super().__init__()
        self.on_flush = on_flush

    def write(self, text: str) -> int:
        if not self.on_flush:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(text)

    def flush(self) -> None:
        if self.on_flush and self.getvalue():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("on_flush", [False, True], ids=["write", "flush"])
@pytest.mark.parametrize(
    "argv",
    [
        ["--format", "jsonl", "tokens"],
        ["--format", "table", "tokens"],
        ["--format", "json", "orders", "ADDRESS", "--all", "--limit", "5"],
        ["--format", "csv", "leaderboard", "--all", "--limit", "5"],
        ["--version"],
        ["--help"],
    ],
    ids=["tokens-jsonl", "tokens-table", "orders-all", "board-all", "version", "help"],
)
def test_an_output_that_cannot_be_written_fails_in_one_line(
    fake: Fake, argv: list[str], on_flush: bool
) -> None:
    argv = [a_user(fake) if arg == "ADDRESS" else arg for arg in argv]
    err = io.StringIO()
    status = main_in_process(argv, fake.env, FullDisk(on_flush=on_flush), err)
    run = Run(tuple(argv), status, "", err.getvalue())
    line = run.one_line_error(1)
    assert line == "asyncapi-client: error: cannot write the output: No space left on device"


def main_in_process(
    argv: list[str], env: dict[str, str], out: io.StringIO, err: io.StringIO
) -> int:
    from asyncapi_client._cli import main

    return main(argv, stdout=out, stderr=err, environ=env)


@pytest.mark.parametrize(
    ("raised", "status", "says"),
    [
        (RecursionError("deep"), 1, "cannot print the answer: it nests too deeply"),
        (
            ExceptionGroup(
                "g", [ExceptionGroup("h", [NotFoundError("HTTP 404", status=404, url="u")])]
            ),
            1,
            "HTTP 404",
        ),
        (ValueError("pool_id must not be '.'"), 2, "pool_id must not be '.'"),
    ],
)
def test_whatever_a_command_raises_ends_in_one_line(
    monkeypatch: pytest.MonkeyPatch, raised: BaseException, status: int, says: str
) -> None:
    from asyncapi_client._cli import _main

    async def command(ctx: object) -> int:
        raise raised

    monkeypatch.setitem(_main._COMMANDS, "pool", command)
    line = cli("pool", "x", env={"ASYNCAPI_BASE_URL": "http://127.0.0.1:9"}).one_line_error(status)
    assert line.startswith(f"asyncapi-client: error: {says}")
