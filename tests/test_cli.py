"""The command line, run as a subprocess against the fake exchange served on loopback.

The fake runs in a thread of the test process for the whole module; every CLI run is a
real ``python -m asyncapi_client`` process with an environment that names only the hosts
the test chooses. Independent runs of one test go in parallel to keep the module fast.
"""

from __future__ import annotations

import asyncio
import errno
import json
import math
import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import pytest
from aiohttp import web

from asyncapi_client import Network
from asyncapi_client._cli import main
from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest

CLI = (sys.executable, "-m", "asyncapi_client")
RUN_TIMEOUT = 60.0
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


def base_env(**hosts: str) -> dict[str, str]:
    """This process's environment without ASYNCAPI_* variables, plus ``hosts``.

    PYTHONUNBUFFERED is dropped too: a user's stdout is buffered, so streaming must flush.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ASYNCAPI_") and k != "PYTHONUNBUFFERED"
    }
    env.update(hosts)
    return env


@attrs.frozen
class Run:
    """One finished CLI process."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def jsonl(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines()]

    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    def ok(self) -> Run:
        """Itself, after checking it exited 0 and kept stderr empty (no terminal: no progress)."""
        assert self.returncode == 0, (self.args, self.returncode, self.stderr)
        assert self.stderr == "", (self.args, self.stderr)
        return self


def run_cli(*args: str, env: Mapping[str, str] | None = None, command: Sequence[str] = CLI) -> Run:
    done = subprocess.run(
        [*command, *args],
        env=base_env() if env is None else dict(env),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=RUN_TIMEOUT,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return Run(tuple(args), done.returncode, done.stdout, done.stderr)


class Fake:
    """The fake exchange served from a thread with its own event loop, for sync tests."""

    def __init__(self, exchange: FakeExchange) -> None:
        self.exchange = exchange
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._server: FakeServer | None = None
        self._thread = threading.Thread(target=self._run, name="fake-exchange", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to the test thread by start()
            self._failure = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with FakeServer(self.exchange) as server:
            self._server = server
            self._ready.set()
            await self._stop.wait()

    def start(self) -> Fake:
        self._thread.start()
        assert self._ready.wait(15), "the fake exchange did not start within 15 s"
        if self._failure is not None:
            raise self._failure
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(15)
        assert not self._thread.is_alive(), "the fake exchange did not stop within 15 s"

    @property
    def server(self) -> FakeServer:
        assert self._server is not None
        return self._server

    @property
    def env(self) -> dict[str, str]:
        return base_env(
            ASYNCAPI_BASE_URL=self.server.base_url,
            ASYNCAPI_TESTNET_BASE_URL=self.server.testnet_base_url,
        )

    def cli(self, *args: str) -> Run:
        return run_cli(*args, env=self.env)

    def cli_all(self, *invocations: Sequence[str]) -> list[Run]:
        """Several CLI runs at once (each in its own process), results in order."""
        with ThreadPoolExecutor(max_workers=4) as pool:
            return list(pool.map(lambda argv: self.cli(*argv), invocations))

    def requests(self, operation: str) -> list[RecordedRequest]:
        return [r for r in list(self.server.requests) if r.operation == operation]


@pytest.fixture(scope="module")
def fake() -> Iterator[Fake]:
    served = Fake(FakeExchange.generate(seed=7)).start()
    try:
        yield served
    finally:
        served.stop()


def project(wire: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {key: wire.get(key) for key in keys}


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
        assert f"{address[:6]}…{address[-4:]}" in row
        assert address not in row


def test_markets_go_to_the_testnet_host_unless_network_is_given(fake: Fake) -> None:
    token = next(t for t in fake.exchange.markets if len(fake.exchange.markets[t]) >= 2)
    markets = fake.exchange.markets[token]
    only_testnet = base_env(ASYNCAPI_TESTNET_BASE_URL=fake.server.testnet_base_url)
    with ThreadPoolExecutor(max_workers=4) as pool:
        # with no main host configured at all, markets still works: it needs only testnet
        json_run = pool.submit(run_cli, "--format", "json", "markets", token, env=only_testnet)
        jsonl_run = pool.submit(fake.cli, "--format", "jsonl", "markets", token)
        table_run = pool.submit(fake.cli, "--format", "table", "markets", token)
        # the fake serves markets on the main host too, so --network mainnet can be seen
        mainnet_run = pool.submit(
            fake.cli, "--network", "MAINNET", "--format", "jsonl", "markets", token
        )
    as_json, as_jsonl, as_table, on_mainnet = (
        r.result().ok() for r in (json_run, jsonl_run, table_run, mainnet_run)
    )
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
    assert as_jsonl.jsonl() == expected

    header = as_table.lines()[0].split()
    assert header[:8] == ["time", "(utc)", "pool", "side", "price", "size", "filled", "status"]
    lines = as_table.lines()
    assert lines[-1].startswith("(more orders")
    rows = lines[2:-1]
    assert len(rows) == 5
    for row, order in zip(rows, expected, strict=True):
        cells = row.split()
        assert cells[3] == "BUY"
        assert cells[-2] == "FILLED"
        assert [order[k] for k in DECIMAL_KEYS] == cells[4:7]
        assert order["poolId"][:6] + "…" in row


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
    assert as_jsonl.jsonl() == board[40:60]
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


# --- exit status ---------------------------------------------------------------------------------


def closed_port() -> int:
    """A loopback port that was just bound and closed: nothing listens on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def assert_one_line(run: Run, status: int, starts: str) -> None:
    assert run.returncode == status, (run.args, run.returncode, run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.endswith("\n"), run.stderr
    assert run.stderr.startswith(starts), run.stderr
    assert run.stdout == ""


def test_exit_status_1_for_api_errors_and_2_for_usage(fake: Fake) -> None:
    """Every case in its own process, all at once: each ends with one line on stderr."""
    unreachable = f"http://127.0.0.1:{closed_port()}"
    api_errors = {
        "missing pool": (fake.env, ["pool", "no-such-pool"], "error: HTTP 404"),
        "missing user, walk": (fake.env, ["orders", "0xnobody", "--all"], "error: HTTP 404"),
        "unreachable": (base_env(), ["--base-url", unreachable, "tokens"], "error: "),
    }
    usage_errors = {
        "unknown command": (fake.env, ["frobnicate"], "invalid choice"),
        "--limit 0": (fake.env, ["orders", "0xabc", "--limit", "0"], "--limit"),
        "--status BOGUS": (fake.env, ["orders", "0xabc", "--status", "BOGUS"], "'BOGUS'"),
        # the environment is cleared: no host configured anywhere
        "no host": (base_env(), ["tokens"], "ASYNCAPI_BASE_URL"),
    }
    cases = {**api_errors, **usage_errors}
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            name: pool.submit(run_cli, *args, env=env) for name, (env, args, _) in cases.items()
        }
    runs = {name: future.result() for name, future in futures.items()}

    for name, (_, _, starts) in api_errors.items():
        assert_one_line(runs[name], 1, starts)
    stderr = runs["missing pool"].stderr
    assert f"{fake.server.base_url}/api/clob/pools/no-such-pool" in stderr
    assert "[mainnet]" in stderr
    assert unreachable in runs["unreachable"].stderr

    for name, (_, args, mentions) in usage_errors.items():
        run = runs[name]
        assert run.returncode == 2, (args, run.returncode, run.stderr)
        assert "Traceback" not in run.stderr, run.stderr
        assert mentions in run.stderr, run.stderr
        assert run.stderr.splitlines()[-1].startswith("asyncapi-client"), run.stderr
        assert run.stdout == ""


# --- entry points, terminals, pipes ---------------------------------------------------------


def test_the_console_script_works_like_the_module(fake: Fake) -> None:
    """``asyncapi-client`` (the installed script); every other test runs ``python -m``."""
    script = Path(sys.executable).with_name("asyncapi-client")
    if not script.exists():  # pragma: no cover - the venv always has it once installed
        found = shutil.which("asyncapi-client")
        assert found is not None, "the asyncapi-client console script is not installed"
        script = Path(found)
    args = ("--format", "jsonl", "leaderboard", "--limit", "3")
    run = run_cli(*args, env=fake.env, command=[str(script)]).ok()
    assert run.jsonl() == fake.exchange.leaderboard[:3]


def read_ptys(
    proc: subprocess.Popen[bytes], masters: Mapping[str, int], limit: float
) -> dict[str, bytes]:
    """Everything written to each pseudo-terminal until the process exits (bounded)."""
    out = dict.fromkeys(masters, b"")
    open_fds = dict(masters)
    deadline = time.monotonic() + limit
    while open_fds and time.monotonic() < deadline:
        ready, _, _ = select.select(list(open_fds.values()), [], [], 0.2)
        for name, fd in list(open_fds.items()):
            if fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError as exc:  # EIO: the other end is closed and drained
                    if exc.errno != errno.EIO:
                        raise
                    chunk = b""
                if chunk:
                    out[name] += chunk
                else:
                    del open_fds[name]
        if proc.poll() is not None and not ready:
            break
    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    return out


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs pseudo-terminals")
def test_on_a_terminal_a_table_and_progress_on_stderr(fake: Fake) -> None:
    out_master, out_slave = pty.openpty()
    err_master, err_slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*CLI, "leaderboard", "--all", "--limit", "50"],
            env=fake.env,
            stdin=subprocess.DEVNULL,
            stdout=out_slave,
            stderr=err_slave,
        )
        os.close(out_slave)
        os.close(err_slave)
        got = read_ptys(proc, {"out": out_master, "err": err_master}, RUN_TIMEOUT)
    finally:
        os.close(out_master)
        os.close(err_master)
    assert proc.returncode == 0, got
    stdout = got["out"].decode().replace("\r\n", "\n")
    stderr = got["err"].decode()
    # no --format on a terminal: the table
    lines = stdout.splitlines()
    assert lines[0].split() == ["rank", "address", "score"]
    assert len(lines) == 2 + len(fake.exchange.leaderboard)
    # the walk's progress, redrawn in place, ending on its own line
    assert "\r  50 entries, 1 page, " in stderr
    assert stderr.rstrip("\r\n").endswith(" s\x1b[K")
    assert "250 entries, 5 pages, " in stderr
    assert "Traceback" not in stderr


def test_broken_pipe_ends_quietly(fake: Fake) -> None:
    """Reading only the start of a walk (like `| head -1`) ends the command quietly."""
    address = a_user(fake)
    proc = subprocess.Popen(
        [*CLI, "--format", "json", "orders", address, "--all", "--limit", "10"],
        env=fake.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # the reader goes away while the walk is writing
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    assert first == b"[\n"
    assert proc.returncode == 0
    assert stderr == b""


# --- streaming and interruption, against a server that holds page 2 back -------------------


class HeldBoard:
    """A leaderboard server that answers page 1 at once and holds later pages until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.pages = 4
        app = web.Application()
        app.router.add_get("/api/dash/leaderboard", self.handle)
        self.runner = web.AppRunner(app, shutdown_timeout=1.0)
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        page = int(request.query.get("page", "1"))
        if page > 1:
            await self.release.wait()
        entries = [
            {"rank": rank, "address": f"0x{rank:040x}", "score": 1000.5 - rank}
            for rank in range((page - 1) * 2 + 1, page * 2 + 1)
        ]
        return web.json_response(
            {"leaderboard": entries, "page": page, "limit": 2, "total": 8, "totalPages": self.pages}
        )

    async def __aenter__(self) -> HeldBoard:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        await self.runner.cleanup()


async def start_walk(board: HeldBoard) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *CLI,
        "--format",
        "json",
        "leaderboard",
        "--all",
        env=base_env(ASYNCAPI_BASE_URL=board.url),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


def running(proc: asyncio.subprocess.Process) -> bool:
    return proc.returncode is None


async def read_until(stream: asyncio.StreamReader, marker: bytes) -> bytes:
    async with asyncio.timeout(20):
        return await stream.readuntil(marker)


async def test_an_all_walk_prints_each_page_as_it_arrives() -> None:
    async with HeldBoard() as board:
        proc = await start_walk(board)
        try:
            assert proc.stdout is not None
            head = await read_until(proc.stdout, b'"rank": 2,')
            # page 1 is out while pages 2.. are still held by the server
            assert head.startswith(b'[\n  {\n    "rank": 1,')
            assert running(proc)
            board.release.set()
            async with asyncio.timeout(RUN_TIMEOUT):
                rest, stderr = await proc.communicate()
        finally:
            if proc.returncode is None:  # pragma: no cover - only when an assertion failed
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0, stderr
    entries = json.loads(head + rest)
    assert [e["rank"] for e in entries] == list(range(1, 9))
    assert stderr == b""


async def test_interrupting_a_walk_exits_130_quietly() -> None:
    async with HeldBoard() as board:
        proc = await start_walk(board)
        try:
            assert proc.stdout is not None
            await read_until(proc.stdout, b'"rank": 2,')  # mid-walk: page 2 is held
            proc.send_signal(signal.SIGINT)
            async with asyncio.timeout(RUN_TIMEOUT):
                _, stderr = await proc.communicate()
        finally:
            if proc.returncode is None:  # pragma: no cover - only when an assertion failed
                proc.kill()
                await proc.wait()
    assert proc.returncode == 130
    assert stderr == b""


# --- in process: main(argv) for the finer points (no process start-up to pay) -------------------


@pytest.fixture
def call(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Run]:
    """``call(*args, hosts=True)``: main(args) in this process, stdout and stderr captured."""
    for name in list(os.environ):
        if name.startswith("ASYNCAPI_"):
            monkeypatch.delenv(name)

    def call_main(*args: str, hosts: bool = True) -> Run:
        with monkeypatch.context() as env:
            if hosts:
                env.setenv("ASYNCAPI_BASE_URL", fake.server.base_url)
                env.setenv("ASYNCAPI_TESTNET_BASE_URL", fake.server.testnet_base_url)
            status = main(list(args))
        out, err = capsys.readouterr()
        return Run(args, status, out, err)

    return call_main


@pytest.mark.parametrize(
    ("args", "env", "mentions"),
    [
        (["orders", "0xabc", "--side", "up"], {}, "unknown side"),
        (["orders", "0xabc", "--limit", "ten"], {}, "--limit"),
        (["leaderboard", "--all", "--page", "2"], {}, "--page"),
        (["leaderboard", "--page", "0"], {}, "--page"),
        (["--network", "moon", "tokens"], {}, "unknown network"),
        (["--timeout", "-1", "tokens"], {}, "--timeout"),
        (["--format", "xml", "tokens"], {}, "--format"),
        (["serve-fake", "--port", "70000"], {}, "--port"),
        (["markets", "0xabc"], {"ASYNCAPI_BASE_URL": "http://127.0.0.1:9"}, "--testnet-base-url"),
        (["--base-url", "ftp://example.invalid", "tokens"], {}, "--base-url 'ftp://"),
        (["tokens"], {"ASYNCAPI_BASE_URL": "not a url"}, "ASYNCAPI_BASE_URL 'not a url'"),
        (["pool", ""], {"ASYNCAPI_BASE_URL": "http://127.0.0.1:9"}, "pool_id"),
        ([], {}, "required: COMMAND"),
    ],
)
def test_more_usage_and_configuration_errors_exit_2(
    call: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    mentions: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    run = call(*args, hosts=False)
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert mentions in run.stderr
    assert run.stderr.splitlines()[-1].startswith("asyncapi-client")
    assert run.stdout == ""


def test_global_options_also_work_after_the_command(call: Callable[..., Run]) -> None:
    before = call("--format", "jsonl", "leaderboard", "--limit", "2")
    after = call("leaderboard", "--limit", "2", "--format", "jsonl")
    assert before.ok().stdout == after.ok().stdout
    assert len(after.jsonl()) == 2


def test_help_lists_every_command(call: Callable[..., Run]) -> None:
    run = call("--help")
    assert run.returncode == 0
    for command in ("tokens", "markets", "pool", "user", "orders", "leaderboard", "demo"):
        assert command in run.stdout
    assert "serve-fake" in run.stdout


def test_tokens_search_sends_the_query(call: Callable[..., Run], fake: Fake) -> None:
    found = call("tokens", "--search", "eth").ok().json()
    assert found
    assert all("eth" in (t["symbol"] + t["name"]).lower() for t in found)
    assert len(found) < len(fake.exchange.tokens)
    assert any(r.query.get("search") == "eth" for r in fake.requests("tokens"))


def test_a_walk_with_nothing_to_walk(call: Callable[..., Run], fake: Fake) -> None:
    args = ("orders", a_user(fake), "--all", "--market", "no-such-pool")
    assert call("--format", "json", *args).ok().stdout == "[]\n"
    assert call("--format", "jsonl", *args).ok().stdout == ""
    assert call("--format", "table", *args).ok().stdout == "(no orders)\n"
    assert call("--format", "table", "tokens", "--search", "no such token").ok().stdout == (
        "(no tokens)\n"
    )


def test_table_numbers_line_up_on_the_decimal_point(call: Callable[..., Run], fake: Fake) -> None:
    run = call("--format", "table", "orders", a_user(fake), "--limit", "30").ok()
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


def test_user_table_shows_free_form_balances(call: Callable[..., Run], fake: Fake) -> None:
    address, profile = next((a, p) for a, p in fake.exchange.users.items() if p["balances"])
    text = call("--format", "table", "user", address).ok().stdout
    balances = text.split("balances:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert balances[0].split() == list(profile["balances"][0])
    assert len(balances) == 2 + len(profile["balances"])
    for line, balance in zip(balances[2:], profile["balances"], strict=True):
        for value in balance.values():
            if isinstance(value, str) and not value.startswith("0x"):
                assert value in line.split()
