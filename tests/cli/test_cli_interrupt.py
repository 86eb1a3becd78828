"""A walk printed as one JSON array, stopped mid-walk by SIGINT, by SIGTERM or by a
failure, still ends its array, so what was written parses; the exit status says it
did not complete (130, 143, 1) with one line on stderr.

The CLI runs as a process with its stdout piped; the fake exchange holds the pages after the
first at a gate, and the signal is sent once the first page is read from the pipe.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import pytest

from asyncapi_client._cli._signals import Interrupted, exit_status, signals_saved, stoppable
from asyncapi_client.testing import FakeExchange, FakeServer, Gate, Reply
from tests._cli import subprocess_env

CLI = (sys.executable, "-m", "asyncapi_client")
TIMEOUT = 60.0
EXCHANGE = FakeExchange.generate(seed=2, users=2, orders_per_user=8, leaderboard_size=8)
OWNER = max(EXCHANGE.orders, key=lambda address: len(EXCHANGE.orders[address]))


@asynccontextmanager
async def held(operation: str) -> AsyncIterator[tuple[FakeServer, Gate]]:
    """The fake exchange with ``operation``'s first request answered, the rest held."""
    async with FakeServer(EXCHANGE) as server, server.gate(operation) as gate:
        gate.release(1)
        yield server, gate


async def run_cli(url: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *CLI,
        "--format",
        "json",
        "--max-retries",
        "0",
        *args,
        env=subprocess_env(ASYNCAPI_BASE_URL=url),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finish(proc: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
    try:
        async with asyncio.timeout(TIMEOUT):
            return await proc.communicate()
    finally:
        if proc.returncode is None:  # pragma: no cover - only when the test failed
            proc.kill()
            await proc.wait()


def one_line(stderr: bytes) -> str:
    text = stderr.decode()
    assert text.count("\n") == 1, text
    assert "Traceback" not in text
    assert text.startswith("asyncapi-client: error: "), text
    return text


WALKS = {
    "leaderboard": (("leaderboard", "--all", "--limit", "2"), b'"rank": 2,', "rank"),
    "orders": (("orders", OWNER, "--all", "--limit", "2"), b'"transactionId"', "transactionId"),
}


@pytest.mark.parametrize("walk", WALKS)
@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
async def test_a_signal_mid_walk_ends_the_array_and_says_so(
    walk: str, signum: signal.Signals, status: int
) -> None:
    args, marker, key = WALKS[walk]
    async with held(walk) as (server, gate):
        proc = await run_cli(server.base_url, *args)
        assert proc.stdout is not None
        async with asyncio.timeout(20):
            seen = await proc.stdout.readuntil(marker)  # page 1 is out; page 2 is held
            seen += await proc.stdout.readuntil(b"}")  # its first item, at least
        await gate.arrived(2)
        proc.send_signal(signum)
        rest, stderr = await finish(proc)
    assert proc.returncode == status
    assert f"interrupted by {signum.name}" in one_line(stderr)
    items: list[dict[str, Any]] = json.loads(seen + rest)  # the array was ended: it parses
    assert len(items) == 2  # page 1, whole, and nothing more
    assert all(key in item for item in items)


async def test_a_failure_mid_walk_ends_the_array_and_exits_1() -> None:
    async with FakeServer(EXCHANGE) as server:
        server.script("orders", Reply(), Reply(500, json={"error": "page two broke"}))
        proc = await run_cli(server.base_url, "orders", OWNER, "--all", "--limit", "2")
        stdout, stderr = await finish(proc)
    assert proc.returncode == 1
    assert "HTTP 500" in one_line(stderr)
    ids = [order["transactionId"] for order in json.loads(stdout)]
    assert ids == [order["transactionId"] for order in EXCHANGE.orders[OWNER][:2]]


# --- the mechanism, in this process -------------------------------------------------------------


def stopped(command: Callable[[], Coroutine[Any, Any, str]]) -> Interrupted | str:
    """``command`` run as the CLI runs one: its outcome, or the Interrupted it raised."""
    with signals_saved():
        try:
            return asyncio.run(stoppable(command()))
        except Interrupted as exc:
            return exc


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_cancels_the_command_and_its_cleanup_runs_first(signum: signal.Signals) -> None:
    cleaned: list[str] = []

    async def command() -> str:
        try:
            signal.raise_signal(signum)
            await asyncio.Event().wait()  # until the signal cancels it
        finally:
            cleaned.append("cleaned")
        return "done"

    before = signal.getsignal(signal.SIGTERM)
    outcome = stopped(command)
    assert isinstance(outcome, Interrupted)
    assert (outcome.signum, exit_status(outcome.signum)) == (signum, 128 + signum)
    assert cleaned == ["cleaned"]
    assert signal.getsignal(signal.SIGTERM) is before  # the process's own handler is back


def test_a_command_that_ends_despite_the_signal_still_reports_it() -> None:
    async def command() -> str:
        signal.raise_signal(signal.SIGTERM)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # swallowed: it returns as if complete
        return "done"

    outcome = stopped(command)
    assert isinstance(outcome, Interrupted)
    assert outcome.signum == signal.SIGTERM


def test_what_the_unwinding_runs_into_is_the_cause_not_the_outcome() -> None:
    async def command() -> str:
        signal.raise_signal(signal.SIGINT)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise BrokenPipeError("the reader went away meanwhile") from None
        return "done"  # pragma: no cover - never reached

    outcome = stopped(command)
    assert isinstance(outcome, Interrupted)
    assert isinstance(outcome.__cause__, BrokenPipeError)


def test_without_a_signal_the_command_is_untouched() -> None:
    async def command() -> str:
        await asyncio.sleep(0)
        return "done"

    assert stopped(command) == "done"
