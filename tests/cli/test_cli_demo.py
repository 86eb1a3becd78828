"""``asyncapi-client demo`` in-process, and ``serve-fake``: flags in-process, serving in a
real process (it runs until a signal)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from asyncapi_client import Client, ServerError, TransportError
from asyncapi_client.testing import FakeExchange, Fault
from tests._cli import cli

CLI = (sys.executable, "-m", "asyncapi_client")
TIMEOUT = 60.0


def clean_env() -> dict[str, str]:
    """No ASYNCAPI_* host, and stdout buffered as a user's is (so the CLI must flush)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ASYNCAPI_") and k != "PYTHONUNBUFFERED"
    }


def test_demo_runs_offline_and_its_walks_match_the_fake() -> None:
    """The demo's own output, checked against the fake's data (the demo checks nothing)."""
    run = cli("demo").ok()  # no host configured: the demo needs none
    out = run.stdout

    exchange = FakeExchange.generate(seed=7)
    filled = {
        address: [o for o in orders if o["status"] == "FILLED"]
        for address, orders in exchange.orders.items()
    }
    owner = max(filled, key=lambda a: len(filled[a]))
    lines = {line.split(":", 1)[0]: line for line in out.splitlines() if ":" in line}
    assert re.search(
        rf"1 token list \({len(exchange.tokens)} tokens\), 6 pools, 4 users, 3 market lists "
        r"in [\d,]+ ms",
        lines["fan-out"],
    ), lines["fan-out"]
    pages = -(-len(filled[owner]) // 25)
    assert re.search(
        rf"{len(filled[owner])} FILLED orders of {owner} in {pages} pages of up to 25, [\d,]+ ms",
        lines["cursor walk"],
    ), lines["cursor walk"]
    assert re.search(
        rf"{len(exchange.leaderboard)} entries in 5 pages \(concurrency 4\), [\d,]+ ms",
        lines["leaderboard"],
    ), lines["leaderboard"]

    # the examples print decimals exactly as the fake serves them
    supplies = [t["totalSupply"] for t in exchange.tokens]
    supply = re.search(r"^  token \w+: totalSupply (\S+) ", out, re.MULTILINE)
    assert supply is not None, out
    assert supply[1] == max(supplies, key=len)
    rows = [line.split() for line in out.splitlines() if line.split()[-2:-1] == ["FILLED"]]
    assert [tuple(cells[4:7]) for cells in rows] == [
        (o["price"], o["size"], o["filledSize"]) for o in filled[owner][:3]
    ]
    assert [cells[-1] for cells in rows] == [o["transactionId"] for o in filled[owner][:3]]
    board_rows = [
        c for c in (line.split() for line in out.splitlines()) if c[:1] in (["1"], ["2"], ["3"])
    ]
    assert [cells[1] for cells in board_rows] == [e["address"] for e in exchange.leaderboard[:3]]
    assert re.search(r"^done in \d+\.\d\d s$", out.splitlines()[-1])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def read_line(stream: asyncio.StreamReader) -> str:
    async with asyncio.timeout(20):
        line = await stream.readline()
    assert line, "serve-fake closed its output before printing the base URLs"
    return line.decode()


ServeFake = Callable[..., Awaitable[asyncio.subprocess.Process]]


@pytest.fixture
async def serve_fake() -> AsyncIterator[ServeFake]:
    """Starts ``asyncapi-client serve-fake ARGS...``; kills what a test left running."""
    started: list[asyncio.subprocess.Process] = []

    async def start(*args: str) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            *CLI,
            "serve-fake",
            *args,
            env=clean_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        started.append(proc)
        assert proc.stdout is not None
        return proc

    yield start
    for proc in started:
        if proc.returncode is None:  # pragma: no cover - only when the test failed
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize(
    ("signum", "seed"),
    [(signal.SIGINT, None), (signal.SIGTERM, 3)],
    ids=["SIGINT-default-seed-any-ports", "SIGTERM-seed-3-given-ports"],
)
async def test_serve_fake_answers_a_client_then_stops_on_a_signal(
    serve_fake: ServeFake, signum: int, seed: int | None
) -> None:
    args: list[str] = []
    ports: tuple[int, int] | None = None
    if seed is not None:
        ports = (free_port(), free_port())
        args += ["--seed", str(seed), "--port", str(ports[0]), "--testnet-port", str(ports[1])]
    proc = await serve_fake(*args)
    assert proc.stdout is not None

    printed: dict[str, str] = {}
    while "try" not in printed:
        line = await read_line(proc.stdout)
        if line.startswith("try: "):
            printed["try"] = line
        elif line.startswith("export "):
            name, _, value = line.removeprefix("export ").strip().partition("=")
            printed[name] = value
        elif line.startswith(("mainnet: ", "testnet: ")):
            name, _, value = line.strip().partition(": ")
            printed[name] = value
    base_url, testnet_url = printed["ASYNCAPI_BASE_URL"], printed["ASYNCAPI_TESTNET_BASE_URL"]
    assert printed["mainnet"] == base_url
    assert printed["testnet"] == testnet_url
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base_url)
    if ports is not None:
        assert (base_url, testnet_url) == tuple(f"http://127.0.0.1:{p}" for p in ports)

    exchange = FakeExchange.generate(seed=7 if seed is None else seed)
    token = next(iter(exchange.markets))
    # the start-up line names a pool, a user and a token that exist
    words = printed["try"].split()
    assert words[words.index("pool") + 1] in exchange.pools
    assert exchange.orders[words[words.index("orders") + 1]]
    assert words[words.index("markets") + 1] == token
    async with Client(base_url=base_url, testnet_base_url=testnet_url, timeout=10) as client:
        tokens = await client.tokens()
        markets = await client.token_markets(token)
    assert [t.symbol for t in tokens] == [t["symbol"] for t in exchange.tokens]
    assert [m.address for m in markets] == [m["address"] for m in exchange.markets[token]]

    proc.send_signal(signum)
    async with asyncio.timeout(TIMEOUT):
        rest, stderr = await proc.communicate()
    assert proc.returncode == 0, stderr
    assert stderr == b""
    assert b"Traceback" not in rest

    # stopped cleanly: the port is released, nothing answers any more
    async with Client(base_url=base_url, max_retries=0, timeout=5) as client:
        with pytest.raises(TransportError):
            await client.tokens()


async def test_serve_fake_injects_the_faults_it_is_given(serve_fake: ServeFake) -> None:
    args = ["--fault", "pool:error_rate=1", "--fault", "pool:error_status=503"]
    args += ["--fault", "orders:latency=0.2", "--latency", "0.01"]
    proc = await serve_fake("--seed", "5", *args)
    assert proc.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].startswith("try: "):
        lines.append(await read_line(proc.stdout))
    base_url = next(line for line in lines if line.startswith("mainnet: ")).split()[1]
    faults = {line.strip() for line in [await read_line(proc.stdout) for _ in range(3)]}
    assert faults == {
        "fault on pool: latency=0.01, error_rate=1.0, error_status=503",
        "fault on orders: latency=0.2",
        "fault on *: latency=0.01",
    }

    exchange = FakeExchange.generate(seed=5)
    address = next(a for a, orders in exchange.orders.items() if orders)
    loop = asyncio.get_running_loop()
    async with Client(base_url=base_url, max_retries=0, timeout=10) as client:
        with pytest.raises(ServerError) as info:
            await client.pool(next(iter(exchange.pools)))
        assert info.value.status == 503
        start = loop.time()
        page = await client.orders(address, limit=1)
        assert loop.time() - start >= 0.2  # the injected latency is a lower bound
        assert page.orders
    proc.send_signal(signal.SIGINT)
    async with asyncio.timeout(TIMEOUT):
        _, stderr = await proc.communicate()
    assert proc.returncode == 0, stderr


@pytest.mark.parametrize(
    ("spec", "mentions"),
    [
        ("pool", "expected OP:FIELD=VALUE"),
        ("pool:error_rate", "expected OP:FIELD=VALUE"),
        ("moon:latency=1", "unknown operation 'moon'"),
        ("pool:colour=red", "unknown fault field 'colour'"),
        ("pool:error_rate=2", "error_rate must be a number in [0, 1]"),
        ("pool:error_rate=lots", "error_rate must be a number"),
        ("pool:error_status=200", "error_status must be an HTTP status"),
        ("pool:rate_limit_burst=1.5", "rate_limit_burst must be an integer"),
        ("pool:max_in_a_row=1.5", "max_in_a_row must be an integer"),
        ("pool:max_in_a_row=-1", "max_in_a_row"),
        ("pool:latency=none", "latency must be a number"),
    ],
)
def test_a_bad_fault_spec_is_one_line_and_exit_2(spec: str, mentions: str) -> None:
    run = cli("serve-fake", "--fault", spec)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    error = run.stderr.splitlines()[-1]
    assert error.startswith("asyncapi-client: error: argument --fault: "), error
    assert mentions in error
    assert run.stdout == ""


def test_the_fault_fields_build_the_faults() -> None:
    from asyncapi_client._cli._args import parse_fault
    from asyncapi_client._cli._fake import faults_from

    specs = [parse_fault("orders:latency=0.05"), parse_fault("*:rate_limit_burst=2")]
    specs.append(parse_fault("*:retry_after=none"))
    specs += [parse_fault("orders:max_in_a_row=3"), parse_fault("*:max_in_a_row=none")]
    specs.append(parse_fault("pool:retry_after=Wed, 21 Oct 2026 07:28:00 GMT"))
    assert faults_from(specs, None) == {
        "orders": Fault(latency=0.05, max_in_a_row=3),
        "*": Fault(rate_limit_burst=2, retry_after=None, max_in_a_row=None),
        "pool": Fault(retry_after="Wed, 21 Oct 2026 07:28:00 GMT"),
    }
    assert faults_from([], 0.5) == {"*": Fault(latency=0.5)}


def test_a_busy_port_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        run = cli("serve-fake", "--port", str(port))
        testnet = cli("serve-fake", "--testnet-port", str(port))
    for attempt in (run, testnet):
        line = attempt.one_line_error(2)
        assert f"port {port}" in line
        assert "already in use" in line
        assert attempt.stdout == ""
