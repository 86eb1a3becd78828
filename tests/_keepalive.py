"""A raw HTTP/1.1 server that keeps connections alive and closes idle ones, as nginx does
with ``keepalive_timeout``: what makes a pooled connection stale.

It runs on the shared server loop in a thread (``LoopThread.shared()``), like
:class:`tests._rawserver.RawServer`, so a test may block its own loop (a client busy with
something else) while the server closes its idle connections: the client then finds them
in its pool, still looking alive, and sends on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
from types import TracebackType
from typing import Self

from asyncapi_client.testing._thread import LoopThread
from tests._oracle import pool_json
from tests._rawserver import SERVER_LIMIT, drain_accepts, reserve_port

__all__ = ["KeepAliveServer"]

_BODY = json.dumps(pool_json()).encode()
_ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n" % len(_BODY) + _BODY
)


class KeepAliveServer:
    """Answers every request with a pool, on connections it keeps alive; a connection idle
    ``idle`` seconds after an answer is closed (FIN). With ``answers=n``, the requests
    after the n-th are not answered: their connection is closed once the request is read
    (a server that drops every connection from then on).

    With ``reset``, an idle connection is closed with a TCP reset (RST) instead.
    ``requests`` counts the requests read (a request sent on a connection the server had
    closed is never read); ``connections`` the connections accepted.
    """

    def __init__(self, *, idle: float, answers: int | None = None, reset: bool = False) -> None:
        self.idle = idle
        self.answers = answers
        self.reset = reset
        self.requests = 0
        self.connections = 0
        self._idle_closed = 0
        self._changed = threading.Condition()
        self._sock = reserve_port()
        self.host, self.port = self._sock.getsockname()[:2]
        self._thread: LoopThread | None = None
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def wait_idle_closed(self, count: int, timeout: float = SERVER_LIMIT) -> None:
        """Block the calling thread until ``count`` connections were closed for idleness
        (their FIN sent). Called from a test's loop, it blocks that loop too, on purpose."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._idle_closed >= count, timeout):
                raise AssertionError(f"only {self._idle_closed} idle connections were closed")

    async def __aenter__(self) -> Self:
        self._thread = LoopThread.shared()
        self._server = await self._thread.run(self._start())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._thread is not None
        await self._thread.run(self._close())
        self._sock.close()

    async def _start(self) -> asyncio.Server:
        loop = asyncio.get_running_loop()

        def accept() -> asyncio.StreamReaderProtocol:
            self.connections += 1
            return asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._handle)

        return await loop.create_server(accept, sock=self._sock)

    async def _close(self) -> None:
        await drain_accepts()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        idle = False
        try:
            wait = SERVER_LIMIT
            while True:
                try:
                    async with asyncio.timeout(wait):
                        await reader.readuntil(b"\r\n\r\n")
                except TimeoutError:
                    idle = wait == self.idle
                    if idle and self.reset:
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                        writer.transport.abort()
                    return
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self.requests += 1
                if self.answers is not None and self.requests > self.answers:
                    return  # read, then dropped without a byte of answer
                writer.write(_ANSWER)
                await writer.drain()
                wait = self.idle
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, TimeoutError):
                async with asyncio.timeout(2):
                    await writer.wait_closed()
            if idle:
                with self._changed:
                    self._idle_closed += 1
                    self._changed.notify_all()
