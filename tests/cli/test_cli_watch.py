"""``watch orders|pool|leaderboard``: the CLI as a process against the living fake.

The test drives the exchange (``exchange.advance``) and reads the CLI's jsonl lines from
its piped stdout; SIGINT is sent by PID once the lines it waits for are read. A rerun on the
same ``--state`` file goes on where the first stopped: no handled change again, and every
order that closed while no watcher ran is delivered closed.
"""

from __future__ import annotations

import asyncio
import errno
import io
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from asyncapi_client.testing import FakeExchange, FakeServer
from tests._cli import cli, hosts, subprocess_env

CLI = (sys.executable, "-m", "asyncapi_client")
TIMEOUT = 60.0
FINAL = frozenset({"FILLED", "CANCELLED", "EXPIRED"})


class Watcher:
    """One ``asyncapi-client watch ...`` process, its stdout read line by line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []

    async def read_until(self, done: Callable[[list[dict[str, Any]]], bool]) -> None:
        """Read lines until ``done(lines)`` holds (the process writes them as changes come)."""
        assert self.proc.stdout is not None
        async with asyncio.timeout(TIMEOUT):
            while not done(self.lines):
                line = await self.proc.stdout.readline()
                assert line, "the watcher ended before the lines expected"
                self.lines.append(json.loads(line))

    async def interrupt(self) -> str:
        """SIGINT, then the rest of its output; its stderr. It must exit 130."""
        self.proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(TIMEOUT):
            rest, stderr = await self.proc.communicate()
        self.lines += [json.loads(line) for line in rest.splitlines()]
        assert self.proc.returncode == 130, stderr
        text = stderr.decode()
        assert text.count("\n") == 1, text
        assert "Traceback" not in text, text
        return text


@asynccontextmanager
async def watcher(server: FakeServer, *args: str) -> AsyncIterator[Watcher]:
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        "watch",
        *args,
        "--interval",
        "0.02",
        env=subprocess_env(ASYNCAPI_BASE_URL=server.base_url),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield Watcher(proc)
    finally:
        if proc.returncode is None:  # only when the test failed
            proc.kill()
            await proc.wait()


@asynccontextmanager
async def market(exchange: FakeExchange) -> AsyncIterator[None]:
    """The exchange moving on its own while the block runs."""

    async def run() -> None:
        for _ in range(100_000):
            exchange.advance(3)
            await asyncio.sleep(0.02)  # the pace of the market, not a synchronisation

    task = asyncio.ensure_future(run())
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


def check_order_line(line: dict[str, Any]) -> None:
    assert line["kind"] in {"new", "updated", "closed"}, line
    assert line["key"] == f"{line['transactionId']}|{line['status']}|{line['filledSize']}"
    assert (line["kind"] == "closed") == (line["status"] in FINAL), line
    if "previous" in line:
        assert line["previous"]["transactionId"] == line["transactionId"]
    assert line["kind"] == "closed" or "previous" in line or line["kind"] == "new"


@pytest.mark.waits
async def test_watch_orders_survives_a_sigint_and_goes_on_from_its_state(
    tmp_path: Path,
) -> None:
    exchange = FakeExchange.generate(seed=11, users=1, orders_per_user=40)
    address = next(iter(exchange.orders))
    state = tmp_path / "orders.state"
    async with FakeServer(exchange) as server:
        async with watcher(server, "orders", address, "--state", str(state)) as first:
            async with market(exchange):
                await first.read_until(lambda lines: len(lines) >= 6)
            stderr = await first.interrupt()
        assert f"state is saved in {state}" in stderr

        gap = len(exchange.journal)  # no watcher runs: these changes wait in the server
        exchange.advance(60)
        closed_meanwhile = {
            c.key: c.after["status"]
            for c in exchange.journal[gap:]
            if c.kind.startswith("order.") and c.after["status"] in FINAL
        }
        assert closed_meanwhile

        def caught_up(lines: list[dict[str, Any]]) -> bool:
            closed = {
                line["transactionId"]: line["status"] for line in lines if line["kind"] == "closed"
            }
            return all(closed.get(tx) == status for tx, status in closed_meanwhile.items())

        async with watcher(server, "orders", address, "--state", str(state)) as second:
            await second.read_until(caught_up)
            await second.interrupt()

    for line in first.lines + second.lines:
        check_order_line(line)
    first_keys = [line["key"] for line in first.lines]
    second_keys = [line["key"] for line in second.lines]
    assert len(set(first_keys)) == len(first_keys)
    assert len(set(second_keys)) == len(second_keys)
    assert not set(first_keys) & set(second_keys)  # no change written once is written again


async def test_watch_pool_lines_say_what_changed_with_a_stable_key() -> None:
    exchange = FakeExchange.generate(seed=12, users=1, orders_per_user=5, pools=2)
    pool_id = next(iter(exchange.pools))
    async with FakeServer(exchange) as server, watcher(server, "pool", pool_id) as run:
        async with market(exchange):
            await run.read_until(lambda lines: len(lines) >= 3)
        stderr = await run.interrupt()
    assert "no --state" in stderr
    for line in run.lines:
        assert line["kind"] == "updated"
        assert line["poolId"] == pool_id == line["previous"]["poolId"]
        assert re.fullmatch(re.escape(pool_id) + r"\|[0-9a-f]{16}", line["key"])
        assert line["changed"]
        assert all(line[name] != line["previous"][name] for name in line["changed"])
    for before, after in zip(run.lines, run.lines[1:], strict=False):
        assert after["previous"] == {k: v for k, v in before.items() if k in after["previous"]}
    assert len({line["key"] for line in run.lines}) == len(run.lines)


async def test_watch_leaderboard_lines_name_who_entered_left_or_moved() -> None:
    exchange = FakeExchange.generate(seed=13, users=1, orders_per_user=5, leaderboard_size=30)
    async with FakeServer(exchange) as server, watcher(server, "leaderboard", "--top", "5") as run:
        async with market(exchange):
            await run.read_until(lambda lines: len(lines) >= 2)
        await run.interrupt()
    for line in run.lines:
        assert line["kind"] == "updated"
        assert re.fullmatch(r"leaderboard\|[0-9a-f]{16}", line["key"])
        assert [e["rank"] for e in line["entries"]] == list(range(1, len(line["entries"]) + 1))
        assert len(line["entries"]) == 5
        now = {e["address"] for e in line["entries"]}
        before = {e["address"] for e in line["previous"]}
        assert set(line["entered"]) == now - before
        assert set(line["left"]) == before - now
        assert line["entered"] or line["left"] or line["moved"]
    assert len({line["key"] for line in run.lines}) == len(run.lines)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("watch", "orders", "0xabc", "--interval", "0"), "expected a positive number of seconds"),
        (("watch", "pool", "P", "--interval", "soon"), "expected a positive number of seconds"),
        (("watch", "trades"), "invalid choice: 'trades'"),
        (("watch",), "the following arguments are required: WHAT"),
        (("watch", "leaderboard", "--top", "0"), "expected a positive integer"),
        (("watch", "pool", "P", "--state", "redis://127.0.0.1:1"), "needs --name and --consumer"),
        (("watch", "pool", "P", "--name", "bots"), "--name and --consumer are for --state with"),
        (("watch", "pool", "P", "--state", ""), "--state FILE: the name is empty"),
    ],
)
def test_bad_watch_usage_is_exit_2_with_a_clear_message(
    args: tuple[str, ...], message: str
) -> None:
    run = cli(*args, env=hosts("http://127.0.0.1:9"))
    assert run.returncode == 2, run.stderr
    assert message in run.stderr.splitlines()[-1], run.stderr
    assert "Traceback" not in run.stderr


def test_a_state_file_that_is_not_a_watch_state_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "notes.txt"
    state.write_text("shopping list\n")
    run = cli("watch", "pool", "P", "--state", str(state), env=hosts("http://127.0.0.1:9"))
    line = run.one_line_error(2)
    assert f"{state} is not a watch state" in line
    assert state.read_text() == "shopping list\n"


def test_an_unknown_address_ends_the_watch_with_exit_1() -> None:
    exchange = FakeExchange.generate(seed=14, users=1, orders_per_user=3)
    with FakeServer(exchange).in_thread() as server:
        run = cli("--max-retries", "0", "watch", "orders", "0xnobody", env=hosts(server.base_url))
    assert "404" in run.one_line_error(1)
    assert run.stdout == ""


class FullDisk(io.StringIO):
    """stdout that takes ``room`` writes, then fails each with ENOSPC (keeping what it was
    asked to write last)."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room
        self.refused = ""

    def write(self, text: str) -> int:
        if self.room == 0:
            self.refused = text
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= 1
        return super().write(text)


def test_a_change_whose_line_could_not_be_written_comes_first_in_the_next_run(
    tmp_path: Path,
) -> None:
    exchange = FakeExchange.generate(seed=15, users=1, orders_per_user=30)
    address = next(iter(exchange.orders))
    args = ("watch", "orders", address, "--interval", "0.02", "--state", str(tmp_path / "s"))
    with FakeServer(exchange, activity=300.0).in_thread() as server:
        full = FullDisk(3)
        first = cli(*args, env=hosts(server.base_url), stdout=full)
        assert "No space left on device" in first.one_line_error(1)
        second = cli(*args, env=hosts(server.base_url), stdout=FullDisk(1))
        assert "No space left on device" in second.one_line_error(1)
    handled = [line["key"] for line in first.jsonl()]
    assert len(handled) == 3
    refused = json.loads(full.refused)
    assert refused["key"] not in handled
    assert second.jsonl() == [refused]  # delivered again, first, and nothing handled again


async def test_watch_orders_initial_first_writes_each_open_order_as_new() -> None:
    exchange = FakeExchange.generate(seed=16, users=1, orders_per_user=40)
    address = next(iter(exchange.orders))
    open_now = {o["transactionId"] for o in exchange.orders[address] if o["status"] not in FINAL}
    assert open_now
    async with (
        FakeServer(exchange) as server,
        watcher(server, "orders", address, "--initial") as run,
    ):
        await run.read_until(lambda lines: len(lines) >= len(open_now))
        await run.interrupt()
    assert {line["transactionId"] for line in run.lines} == open_now
    assert {line["kind"] for line in run.lines} == {"new"}
