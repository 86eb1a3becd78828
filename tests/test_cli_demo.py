"""``asyncapi-client demo`` and ``serve-fake``, each run as a real process, offline."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from asyncapi_client import Client, TransportError
from asyncapi_client.testing import FakeExchange

CLI = (sys.executable, "-m", "asyncapi_client")
TIMEOUT = 60.0


def clean_env() -> dict[str, str]:
    """No ASYNCAPI_* host, and stdout buffered as a user's is (so the CLI must flush)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ASYNCAPI_") and k != "PYTHONUNBUFFERED"
    }


def test_demo_runs_offline_and_prints_its_summary() -> None:
    done = subprocess.run(
        [*CLI, "demo"],
        env=clean_env(),  # no host configured: the demo needs none
        capture_output=True,
        text=True,
        encoding="utf-8",
        stdin=subprocess.DEVNULL,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout
    assert "PROBLEM" not in out

    exchange = FakeExchange.generate(seed=7)
    filled = max(
        sum(o["status"] == "FILLED" for o in orders) for orders in exchange.orders.values()
    )
    lines = {line.split(":", 1)[0]: line for line in out.splitlines() if ":" in line}
    assert re.search(
        rf"1 token list \({len(exchange.tokens)} tokens\), 6 pools, 4 users, 3 market lists "
        r"in [\d,]+ ms",
        lines["fan-out"],
    ), lines["fan-out"]
    assert re.search(
        rf"{filled} FILLED orders of 0x\w+…\w+ in \d+ pages of up to 25, [\d,]+ ms",
        lines["cursor walk"],
    ), lines["cursor walk"]
    assert re.search(
        rf"{len(exchange.leaderboard)} entries in \d+ pages \(concurrency 4\), [\d,]+ ms",
        lines["leaderboard"],
    ), lines["leaderboard"]

    # the examples print decimals exactly as the fake serves them
    supplies = {t["totalSupply"] for t in exchange.tokens}
    supply = re.search(r"^  token \w+: totalSupply (\S+) ", out, re.MULTILINE)
    assert supply is not None, out
    assert supply[1] in supplies
    served = {
        (o["price"], o["size"], o["filledSize"])
        for orders in exchange.orders.values()
        for o in orders
        if o["status"] == "FILLED"
    }
    rows = [line.split() for line in out.splitlines() if line.endswith(tuple("0123456789abcdef"))]
    order_rows = [cells for cells in rows if "FILLED" in cells]
    assert len(order_rows) == 3, out
    for cells in order_rows:
        assert tuple(cells[4:7]) in served
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


@pytest.fixture
async def serve_fake_processes() -> AsyncIterator[list[asyncio.subprocess.Process]]:
    """Processes a test starts; killed at the end if the test left one running."""
    started: list[asyncio.subprocess.Process] = []
    yield started
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
    serve_fake_processes: list[asyncio.subprocess.Process], signum: int, seed: int | None
) -> None:
    args = ["serve-fake"]
    ports: tuple[int, int] | None = None
    if seed is not None:
        ports = (free_port(), free_port())
        args += ["--seed", str(seed), "--port", str(ports[0]), "--testnet-port", str(ports[1])]
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        *args,
        env=clean_env(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    serve_fake_processes.append(proc)
    assert proc.stdout is not None

    printed: dict[str, str] = {}
    while "ASYNCAPI_TESTNET_BASE_URL" not in printed:
        line = await read_line(proc.stdout)
        if line.startswith("export "):
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
