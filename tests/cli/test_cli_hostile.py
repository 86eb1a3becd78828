"""The command line on hostile data served on loopback: deep nesting, huge decimals, escapes.

Whatever the library decodes, the CLI prints it (bounded, with no control character reaching
a terminal raw) or fails with one line on stderr and exit status 1: never a traceback.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from asyncapi_client._cli._main import MAX_ERROR_LINE
from asyncapi_client._cli._table import MAX_TEXT_CELL, MAX_WIDE_TEXT_CELL
from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest, Reply
from tests._cli import Run, Terminal, cli

FORMATS = ("json", "jsonl", "table", "csv")
#: Characters a terminal acts on: ESC, BEL, CR, DEL, a C1 CSI, a bidi override.
RAW_CONTROLS = ("\x1b", "\x07", "\r", "\x7f", "\x9b", "\u202e")
EVIL = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\u009b1m\u202eevil\x7f\r"


def nested(depth: int) -> bytes:
    return b'{"x":' * depth + b"1" + b"}" * depth


def token(**fields: Any) -> dict[str, Any]:
    body = {
        "address": "0x" + "ab" * 20,
        "name": "Token",
        "symbol": "TKN",
        "decimals": 18,
        "totalSupply": "1000.5",
        "logoUri": None,
        "priceUsd": 1.5,
    }
    body.update(fields)
    return body


def profile(depth: int) -> bytes:
    return (
        b'{"address":"0xdeep","balances":[{"token":"ETH","nested":'
        + nested(depth)
        + b'}],"orders":[],"positions":[]}'
    )


#: Bodies by the last path segment, whatever the operation.
ANSWERS: dict[str, Reply] = {
    "deep30": Reply(body=profile(30)),
    "deep300": Reply(body=profile(300)),
    "deep1000": Reply(body=profile(1000)),
    "evil": Reply(500, json={"error": EVIL}),
    "evil404": Reply(404, body=EVIL),
}


def canned(request: RecordedRequest) -> Reply:
    return ANSWERS.get(request.path.rsplit("/", 1)[-1], Reply(404, json={"error": "none"}))


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    """The fake, scripted to answer users and pools with the hostile bodies above."""
    with FakeServer(FakeExchange.generate(seed=1, users=1)).in_thread() as server:
        server.script("user", canned, repeat=True)
        server.script("pool", canned, repeat=True)
        yield server.base_url


@contextmanager
def tokens_server(tokens: list[dict[str, Any]]) -> Iterator[str]:
    """The fake, answering the token directory with ``tokens``."""
    with FakeServer(FakeExchange.generate(seed=1, users=1)).in_thread() as server:
        server.script("tokens", Reply(json={"tokens": tokens}), repeat=True)
        yield server.base_url


def printed_or_one_line(run: Run) -> bool:
    """True when the run printed; else it failed with exit 1 and one line, no traceback."""
    if run.returncode == 0:
        assert run.stderr == "", run.stderr
        return True
    run.one_line_error(1)
    assert run.stdout == ""
    return False


# --- nesting ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("depth", [300, 1000])
def test_a_deeply_nested_profile_prints_or_fails_in_one_line(
    hostile: str, fmt: str, depth: int
) -> None:
    run = cli("--format", fmt, "user", f"deep{depth}", env={"ASYNCAPI_BASE_URL": hostile})
    assert "RecursionError" not in run.stderr
    if not printed_or_one_line(run):
        return
    assert "0xdeep" in run.stdout
    if fmt == "json" and depth == 300:
        got = json.loads(run.stdout)
        inner = got["balances"][0]["nested"]
        for _ in range(depth):
            inner = inner["x"]
        assert inner == 1
    if fmt == "table":
        assert max(len(line) for line in run.lines()) < 400  # a nested value is cut short


@pytest.mark.parametrize("fmt", FORMATS)
def test_nesting_the_library_accepts_prints_whole(hostile: str, fmt: str) -> None:
    """As deep as the decoder allows, every format prints the profile (a table cuts it)."""
    run = cli("--format", fmt, "user", "deep30", env={"ASYNCAPI_BASE_URL": hostile}).ok()
    if fmt == "table":
        assert '{"x":{"x":' in run.stdout
        return
    if fmt == "csv":
        (row,) = list(csv.DictReader(io.StringIO(run.stdout)))
        balances = json.loads(row["balances"])
    else:
        balances = (run.json() if fmt == "json" else run.jsonl()[0])["balances"]
    inner = balances[0]["nested"]
    for _ in range(30):
        inner = inner["x"]
    assert inner == 1


# --- decimals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "supply",
    ["1e-999999999", "1E+999999999", "-7e-130", "9" * 1000, "0." + "0" * 5000 + "1"],
    ids=["tiny", "huge", "past-128", "1000-digits", "5000-zeros"],
)
@pytest.mark.parametrize("fmt", FORMATS)
def test_no_accepted_decimal_prints_long(fmt: str, supply: str) -> None:
    with tokens_server([token(totalSupply=supply)]) as url:
        run = cli("--format", fmt, "tokens", env={"ASYNCAPI_BASE_URL": url})
    if not printed_or_one_line(run):
        return
    assert len(run.stdout) < 1200, len(run.stdout)
    assert "TKN" in run.stdout


def test_a_tiny_decimal_is_printed_exactly_in_exponent_form() -> None:
    with tokens_server([token(totalSupply="1e-999999999")]) as url:
        runs = {f: cli("--format", f, "tokens", env={"ASYNCAPI_BASE_URL": url}) for f in FORMATS}
    if runs["json"].returncode != 0:  # the decoder refused it: one line each, exit 1
        for run in runs.values():
            run.one_line_error(1)
        return
    assert runs["json"].json()[0]["totalSupply"] == "1E-999999999"
    assert runs["jsonl"].jsonl()[0]["totalSupply"] == "1E-999999999"
    assert "1E-999999999" in runs["table"].stdout
    assert "1E-999999999" in runs["csv"].stdout


def test_decimals_within_bounds_keep_their_positional_text() -> None:
    supplies = [
        "0.000000000000000001",
        "115792089237316195423570985008687907853269984665640564039457.584007913129639935",
        "1E+2",
    ]
    with tokens_server([token(totalSupply=s) for s in supplies]) as url:
        run = cli("--format", "jsonl", "tokens", env={"ASYNCAPI_BASE_URL": url}).ok()
    assert [t["totalSupply"] for t in run.jsonl()] == supplies


# --- huge texts in tables ------------------------------------------------------------------------

HUGE = "W" * 1_000_000  # one server text of 1 MB


def table_of(base_url: str, *args: str, wide: bool = False) -> Run:
    """``args`` as a table on a 120-column terminal (``--wide`` if asked)."""
    env = {"ASYNCAPI_BASE_URL": base_url, "COLUMNS": "120"}
    options = ["--format", "table", *(["--wide"] if wide else [])]
    return cli(*options, *args, env=env, stdout=Terminal(120)).ok()


def assert_bounded(run: Run, *, line: int, total: int) -> None:
    assert max(len(text) for text in run.lines()) <= line, max(map(len, run.lines()))
    assert len(run.stdout) <= total, len(run.stdout)


@pytest.mark.parametrize("wide", [False, True], ids=["fit", "wide"])
def test_a_huge_token_text_is_cut_in_a_table(wide: bool) -> None:
    """A 1 MB name, symbol and address: each cell is cut, so the table stays small."""
    huge = token(name=HUGE, symbol=HUGE, address="0x" + "ab" * 500_000)
    with tokens_server([huge, token()]) as url:
        run = table_of(url, "tokens", wide=wide)
    cell = MAX_WIDE_TEXT_CELL if wide else MAX_TEXT_CELL
    assert_bounded(run, line=6 * cell, total=4 * 6 * cell)
    head, _, first, second = run.lines()
    assert head.split()[:2] == ["symbol", "name"]
    assert first.startswith("W" * (cell - 1) + "…  " + "W" * (cell - 1) + "…  ")
    assert "0xabab" in first  # an id keeps its head and its tail
    assert first.endswith("abab")
    assert second.split()[:2] == ["TKN", "Token"]


def test_a_huge_free_form_key_and_many_keys_are_bounded_in_a_table() -> None:
    """Balances the spec does not shape: a 1 MB key and value, and a thousand keys."""
    many = {f"key{i}": i for i in range(1000)}
    body = {
        "address": HUGE,
        "balances": [{HUGE: HUGE, "token": "ETH"}, many],
        "orders": [],
        "positions": [],
    }
    with FakeServer(FakeExchange.generate(seed=1, users=1)).in_thread() as server:
        server.script("user", Reply(json=body))
        run = table_of(server.base_url, "user", "0xuser")
    assert_bounded(run, line=40 * MAX_TEXT_CELL, total=200 * MAX_TEXT_CELL)
    assert "ETH" in run.stdout
    assert "key0" in run.stdout


def test_a_huge_pool_id_and_symbol_are_cut_in_the_pool_block() -> None:
    exchange = FakeExchange.generate(seed=1, users=1)
    pool = dict(next(iter(exchange.pools.values())))
    pool["poolId"] = "0x" + "cd" * 500_000
    pool["baseToken"] = {**pool["baseToken"], "symbol": HUGE, "name": HUGE}
    with FakeServer(exchange).in_thread() as server:
        server.script("pool", Reply(json=pool))
        run = table_of(server.base_url, "pool", "0xpool")
    assert_bounded(run, line=4 * MAX_TEXT_CELL, total=30 * MAX_TEXT_CELL)
    assert run.lines()[0].startswith("pool ")


def test_a_huge_cursor_is_not_spelt_in_a_table() -> None:
    exchange = FakeExchange.generate(seed=1, users=1)
    (address,) = exchange.users
    page = {"orders": exchange.orders[address][:2], "cursor": "c" * 1_000_000}
    with FakeServer(exchange).in_thread() as server:
        server.script("orders", Reply(json=page))
        run = table_of(server.base_url, "orders", address, "--limit", "2")
    assert_bounded(run, line=1000, total=4000)
    assert "--format json" in run.lines()[-1]


# --- escapes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_server_text_reaches_a_terminal_only_as_visible_escapes(fmt: str) -> None:
    with tokens_server([token(name=EVIL, symbol=EVIL, address=EVIL)]) as url:
        run = cli("--format", fmt, "tokens", env={"ASYNCAPI_BASE_URL": url}, stdout=Terminal())
    run.ok()
    for char in RAW_CONTROLS:
        assert char not in run.stdout, (fmt, char)
    if fmt in ("json", "jsonl"):  # still JSON, still the same text once decoded
        data = run.json() if fmt == "json" else run.jsonl()
        assert data[0]["name"] == EVIL
    else:
        assert "\\x1b]0;pwned\\x07" in run.stdout
        assert "\\u202e" in run.stdout


def test_off_a_terminal_jsonl_keeps_the_data_and_csv_escapes_it_as_on_one() -> None:
    """What is written to a pipe or a file may reach a terminal too (``| cat``): jsonl
    escapes what a terminal acts on (the same data once parsed), csv as in a table."""
    with tokens_server([token(name=EVIL)]) as url:
        csv_run = cli("--format", "csv", "tokens", env={"ASYNCAPI_BASE_URL": url}).ok()
        jsonl_run = cli("--format", "jsonl", "tokens", env={"ASYNCAPI_BASE_URL": url}).ok()
    for char in RAW_CONTROLS:
        assert char not in csv_run.stdout + jsonl_run.stdout, char
    assert "\\x1b]0;pwned\\x07" in csv_run.stdout
    assert jsonl_run.jsonl()[0]["name"] == EVIL


@pytest.mark.parametrize("pool", ["evil", "evil404"])
@pytest.mark.parametrize("terminal", [True, False], ids=["tty", "pipe"])
def test_an_error_body_reaches_stderr_as_one_visible_line(
    hostile: str, pool: str, terminal: bool
) -> None:
    stderr = Terminal() if terminal else io.StringIO()
    run = cli("--max-retries", "0", "pool", pool, env={"ASYNCAPI_BASE_URL": hostile}, stderr=stderr)
    line = run.one_line_error(1)
    for char in RAW_CONTROLS:
        assert char not in line, char
    assert "pwned" in line


def test_a_decode_error_through_hostile_keys_is_one_short_line() -> None:
    """40 nested 100 KB keys in a balance: the error's path, and so the line, is bounded."""
    record: dict[str, Any] = {}
    for level in reversed(range(40)):
        record = {"k" * 100_000 + str(level): record}
    body = {"address": "0xa", "balances": [record], "orders": [], "positions": []}
    with FakeServer(FakeExchange.generate(seed=1, users=1)).in_thread() as server:
        server.script("user", Reply(json=body))
        run = cli("--max-retries", "0", "user", "0xa", env={"ASYNCAPI_BASE_URL": server.base_url})
    line = run.one_line_error(1)
    assert len(line) <= MAX_ERROR_LINE
    assert "balances[0].kkkk" in line
    assert "chars)" in line


def test_any_error_line_is_cut_to_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from asyncapi_client import ServerError
    from asyncapi_client._cli import _main

    async def command(ctx: object) -> int:
        raise ServerError("HTTP 500: " + "E" * 1_000_000 + " the end", status=500, url="u")

    monkeypatch.setitem(_main._COMMANDS, "pool", command)
    line = cli("pool", "x", env={"ASYNCAPI_BASE_URL": "http://127.0.0.1:9"}).one_line_error(1)
    assert len(line) <= MAX_ERROR_LINE
    assert line.startswith("asyncapi-client: error: HTTP 500: EEEE")
    assert "EEEE the end" in line[-100:]  # head and tail kept, the middle cut
    assert "…" in line


def test_retry_lines_are_visible_too(hostile: str) -> None:
    stderr = Terminal()  # a terminal: retries are shown without -v
    run = cli(
        "--max-retries", "1", "pool", "evil", env={"ASYNCAPI_BASE_URL": hostile}, stderr=stderr
    )
    assert run.returncode == 1
    retry, _ = run.stderr.splitlines()
    assert retry.startswith("asyncapi-client: retry 1 of 1: pool [mainnet] ")
    for char in RAW_CONTROLS:
        assert char not in run.stderr, char
