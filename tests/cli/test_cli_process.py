"""What only a real process shows: the console script, a terminal, a broken pipe, a signal.

Everything else about the command line runs in-process (test_cli.py). Here the fake runs
in a thread of the test process and each case starts ``python -m asyncapi_client``.
"""

from __future__ import annotations

import asyncio
import errno
import io
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from asyncapi_client.testing import FakeExchange, FakeServer, Gate
from tests._cli import cli, subprocess_env

CLI = (sys.executable, "-m", "asyncapi_client")
RUN_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeExchange, FakeServer]]:
    exchange = FakeExchange.generate(seed=7)
    with FakeServer(exchange).in_thread() as server:
        yield exchange, server


def env_of(server: FakeServer) -> dict[str, str]:
    return subprocess_env(
        ASYNCAPI_BASE_URL=server.base_url, ASYNCAPI_TESTNET_BASE_URL=server.testnet_base_url
    )


def test_the_console_script_works(fake: tuple[FakeExchange, FakeServer]) -> None:
    exchange, server = fake
    script = Path(sys.executable).with_name("asyncapi-client")
    if not script.exists():  # pragma: no cover - the venv always has it once installed
        found = shutil.which("asyncapi-client")
        assert found is not None, "the asyncapi-client console script is not installed"
        script = Path(found)
    done = subprocess.run(
        [str(script), "--format", "jsonl", "leaderboard", "--all", "--limit", "100"],
        env=env_of(server),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert [json.loads(line) for line in done.stdout.splitlines()] == exchange.leaderboard


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
def test_on_a_terminal_a_table_and_progress_on_stderr(
    fake: tuple[FakeExchange, FakeServer],
) -> None:
    exchange, server = fake
    out_master, out_slave = pty.openpty()
    err_master, err_slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*CLI, "leaderboard", "--all", "--limit", "50"],
            env=env_of(server),
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
    assert len(lines) == 2 + len(exchange.leaderboard)
    # the walk's progress, redrawn in place, ending on its own line
    assert "\r  50 entries, 1 page, " in stderr
    assert stderr.rstrip("\r\n").endswith(" s\x1b[K")
    assert "250 entries, 5 pages, " in stderr
    assert "Traceback" not in stderr


def test_broken_pipe_ends_quietly(fake: tuple[FakeExchange, FakeServer]) -> None:
    """Reading only the start of a walk (like `| head -1`) ends the command quietly."""
    exchange, server = fake
    address = max(exchange.orders, key=lambda a: len(exchange.orders[a]))
    proc = subprocess.Popen(
        [*CLI, "--format", "json", "orders", address, "--all", "--limit", "10"],
        env=env_of(server),
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


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize(
    "argv",
    [["demo"], ["--format", "jsonl", "orders", "ADDRESS", "--all"], ["tokens"], ["--version"]],
    ids=["demo", "orders-all", "tokens", "version"],
)
def test_stdout_on_a_full_disk_fails_in_one_line(
    fake: tuple[FakeExchange, FakeServer], argv: list[str]
) -> None:
    """`> /dev/full`: one line on stderr and exit status 1, no traceback."""
    exchange, server = fake
    address = max(exchange.orders, key=lambda a: len(exchange.orders[a]))
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [*CLI, *[address if arg == "ADDRESS" else arg for arg in argv]],
            env=env_of(server),
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr == b"asyncapi-client: error: cannot write the output: " + (
        os.strerror(errno.ENOSPC).encode() + b"\n"
    )


# --- a walk whose later pages the server holds back ----------------------------------------


BOARD = FakeExchange.generate(seed=2, users=8, orders_per_user=0, leaderboard_size=8)


@asynccontextmanager
async def held_board() -> AsyncIterator[tuple[Gate, str]]:
    """A leaderboard of 8 in pages of 2: page 1 answers, the pages after it are held."""
    async with FakeServer(BOARD) as server, server.gate("leaderboard") as gate:
        gate.release(1)
        yield gate, server.base_url


class Flushed(io.StringIO):
    """A stdout that remembers what was flushed, and signals when ``marker`` was."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker
        self.seen = threading.Event()
        self.flushed = ""

    def flush(self) -> None:
        super().flush()
        self.flushed = self.getvalue()
        if self.marker in self.flushed:
            self.seen.set()


async def test_an_all_walk_prints_each_page_as_it_arrives() -> None:
    async with held_board() as (gate, url):
        stdout = Flushed('"rank": 2,')
        args = ("--format", "json", "leaderboard", "--all", "--limit", "2")
        run = asyncio.create_task(
            asyncio.to_thread(cli, *args, env={"ASYNCAPI_BASE_URL": url}, stdout=stdout)
        )
        assert await asyncio.to_thread(stdout.seen.wait, 20)
        # page 1 is out (flushed) while pages 2.. are still held by the server
        assert stdout.flushed.startswith('[\n  {\n    "rank": 1,')
        assert '"rank": 3' not in stdout.flushed
        await gate.arrived(2)  # page 2 asked for, and held
        assert not run.done()
        assert '"rank": 3' not in stdout.flushed
        gate.release()
        async with asyncio.timeout(RUN_TIMEOUT):
            result = await run
    result.ok()
    assert [e["rank"] for e in result.json()] == list(range(1, 9))


async def start_walk(url: str, preexec: Sequence[object] = ()) -> asyncio.subprocess.Process:
    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell does for a background job

    return await asyncio.create_subprocess_exec(
        *CLI,
        "--format",
        "json",
        "leaderboard",
        "--all",
        "--limit",
        "2",
        env=subprocess_env(ASYNCAPI_BASE_URL=url),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=ignore_sigint if preexec else None,
    )


@pytest.mark.parametrize("ignored", [False, True], ids=["sigint-default", "sigint-ignored"])
async def test_interrupting_a_walk_exits_130_with_one_line_and_an_ended_array(
    ignored: bool,
) -> None:
    """Ctrl-C ends a walk, even when the process started with SIGINT ignored; the JSON array
    it began is ended, so what was written parses, and stderr gets one line."""
    async with held_board() as (_, url):
        proc = await start_walk(url, ("ignore",) if ignored else ())
        try:
            assert proc.stdout is not None
            async with asyncio.timeout(20):
                seen = await proc.stdout.readuntil(b'"rank": 2,')  # mid-walk: page 2 is held
            proc.send_signal(signal.SIGINT)
            async with asyncio.timeout(RUN_TIMEOUT):
                stdout, stderr = await proc.communicate()
        finally:
            if proc.returncode is None:  # pragma: no cover - only when an assertion failed
                proc.kill()
                await proc.wait()
    assert proc.returncode == 130
    assert stderr.decode().count("\n") == 1
    assert stderr.startswith(b"asyncapi-client: error: interrupted by SIGINT")
    assert [entry["rank"] for entry in json.loads(seen + stdout)] == [1, 2]
