"""A raw asyncio socket server for the wire faults aiohttp.web cannot produce.

Each connection reads one request and plays the next behaviour of a script: a normal
answer, a reset (RST) before or in the middle of the body, a body shorter than its
Content-Length, no answer at all, a chunked body that never ends, a huge body. Every
answer says ``Connection: close``, so one connection is one request and the server's
count of requests is exact.

Every other HTTP-level test uses the project's fake exchange (``asyncapi_client.testing``).
Servers run on the shared event loop in a thread (``LoopThread.shared()``): the test's loop
then holds nothing but the client's tasks, so ``asyncio.all_tasks()`` can be checked exactly
after a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

import attrs

from asyncapi_client.testing._thread import LoopThread
from tests._oracle import pool_json

__all__ = [
    "Behaviour",
    "Conn",
    "RawServer",
    "big_body",
    "close",
    "cut_short",
    "drain_accepts",
    "endless_chunks",
    "forward",
    "hang",
    "raw",
    "reserve_port",
    "reset",
    "reset_mid_body",
    "respond",
]

#: How long any server-side wait may last before the server gives up on its own.
SERVER_LIMIT = 20.0


async def drain_accepts() -> None:
    """Let connections already waiting to be accepted be accepted (run on the server loop).

    Python 3.11's asyncio leaks a connection accepted on the same turn its server is
    closed (``Server._attach`` asserts, the half-made transport and its socket are
    dropped unclosed). Clients that gave up mid-connect leave such connections in the
    backlog, so a server takes them in before it closes.
    """
    for _ in range(5):
        await asyncio.sleep(0)


@attrs.define
class Conn:
    """One accepted connection and the request read from it."""

    index: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    method: str = ""
    target: str = ""
    headers: dict[str, str] = attrs.field(factory=dict)
    at: float = 0.0  # time.monotonic() when the request was read
    wall: float = 0.0  # time.time() then (for HTTP dates)
    sent: int = 0  # body bytes the server managed to hand to the socket


Behaviour = Callable[[Conn], Awaitable[None]]


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _rst(conn: Conn) -> None:
    """Close with a TCP reset instead of an orderly FIN."""
    sock = conn.writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.writer.transport.abort()


def respond(
    status: int = 200,
    body: bytes | str | object = b"{}",
    headers: Mapping[str, str] | None = None,
    delay: float = 0.0,
    chunked: bool = False,
) -> Behaviour:
    """A complete answer (``body`` may be bytes, text, or something to dump as JSON),
    with a Content-Length or, ``chunked``, in chunks of 100 bytes without one."""
    if isinstance(body, str):
        raw = body.encode()
    elif isinstance(body, bytes):
        raw = body
    else:
        raw = json.dumps(body).encode()

    async def play(conn: Conn) -> None:
        if delay:
            await asyncio.sleep(delay)
        if chunked:
            head = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
            pieces = [raw[i : i + 100] for i in range(0, len(raw), 100)]
            payload = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in pieces)
            payload += b"0\r\n\r\n"
        else:
            head = {"Content-Type": "application/json", "Content-Length": str(len(raw))}
            payload = raw
        conn.writer.write(_head(status, {**head, **(headers or {})}) + payload)
        await conn.writer.drain()
        conn.sent += len(raw)

    return play


def reset() -> Behaviour:
    """Read the request, then reset the connection without a byte of answer."""

    async def play(conn: Conn) -> None:
        _rst(conn)

    return play


def close() -> Behaviour:
    """Read the request, then close the connection in order (FIN) without a byte of answer."""

    async def play(conn: Conn) -> None:
        conn.writer.close()

    return play


def raw(data: bytes) -> Behaviour:
    """Write ``data`` as it is (a malformed status line, huge headers...), then close."""

    async def play(conn: Conn) -> None:
        conn.writer.write(data)
        await conn.writer.drain()
        conn.sent += len(data)

    return play


def forward() -> Behaviour:
    """Act as a forward HTTP proxy: the request line names an absolute ``http://`` URL; send
    the request on to it (origin-form, ``Proxy-*`` headers dropped) and relay the answer."""

    async def play(conn: Conn) -> None:
        target = urlsplit(conn.target)
        assert target.scheme == "http", f"not a proxy request: {conn.target}"
        assert target.hostname is not None
        path = target.path + (f"?{target.query}" if target.query else "")
        headers = {k: v for k, v in conn.headers.items() if not k.startswith("proxy-")}
        headers["connection"] = "close"
        head = [f"{conn.method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
        reader, writer = await asyncio.open_connection(target.hostname, target.port or 80)
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            await writer.drain()
            async with asyncio.timeout(SERVER_LIMIT):
                answer = await reader.read()
        finally:
            writer.close()
        conn.writer.write(answer)
        await conn.writer.drain()
        conn.sent += len(answer)

    return play


def reset_mid_body(body: bytes = b'{"poolId": "p", "more": "' + b"x" * 200 + b'"}') -> Behaviour:
    """Send the headers and half the body, then reset the connection."""

    async def play(conn: Conn) -> None:
        head = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        conn.writer.write(_head(200, head) + body[: len(body) // 2])
        await conn.writer.drain()
        conn.sent += len(body) // 2
        _rst(conn)

    return play


def cut_short(announced: int = 1000, body: bytes = b'{"poolId": "cut') -> Behaviour:
    """Announce ``announced`` bytes, send fewer, close in order (FIN, no reset)."""

    async def play(conn: Conn) -> None:
        head = {"Content-Type": "application/json", "Content-Length": str(announced)}
        conn.writer.write(_head(200, head) + body)
        await conn.writer.drain()
        conn.sent += len(body)

    return play


def hang() -> Behaviour:
    """Read the request and never answer; return once the client has gone away."""

    async def play(conn: Conn) -> None:
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(SERVER_LIMIT):
                await conn.reader.read()  # b"" when the client closes its side

    return play


def endless_chunks(chunk: int = 16, every: float = 0.05) -> Behaviour:
    """A chunked 200 whose body never ends: ``chunk`` bytes every ``every`` seconds."""
    frame = f"{chunk:x}\r\n".encode() + b"x" * chunk + b"\r\n"

    async def play(conn: Conn) -> None:
        head = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
        conn.writer.write(_head(200, head))
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(SERVER_LIMIT):
                while not conn.writer.is_closing():
                    conn.writer.write(frame)
                    await conn.writer.drain()
                    conn.sent += chunk
                    await asyncio.sleep(every)

    return play


def big_body(size: int, *, announce: bool = True, chunk: int = 64 * 1024) -> Behaviour:
    """A 200 with a body of ``size`` bytes, announced by Content-Length or sent chunked.

    Stops at the first write the client no longer takes; ``Conn.sent`` says how far it got.
    """
    data = b" " * chunk

    async def play(conn: Conn) -> None:
        if announce:
            head = {"Content-Type": "application/json", "Content-Length": str(size)}
        else:
            head = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
        conn.writer.write(_head(200, head))
        frame = data if announce else f"{chunk:x}\r\n".encode() + data + b"\r\n"
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(SERVER_LIMIT):
                while conn.sent < size:
                    if conn.writer.is_closing():
                        return
                    conn.writer.write(frame)
                    await conn.writer.drain()
                    conn.sent += chunk
                if not announce:
                    conn.writer.write(b"0\r\n\r\n")
                    await conn.writer.drain()

    return play


def reserve_port(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A socket bound to a loopback port that does not listen yet: connecting is refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((host, port))
    return sock


class RawServer:
    """Plays ``script`` (one behaviour per request, in order), then ``default`` forever.

    ``async with RawServer([...]) as server:`` starts it; ``server.base_url`` is its
    address and ``server.conns`` every request it read, in order. With ``sock`` (see
    :func:`reserve_port`) and ``listen=False`` connections are refused until
    :meth:`listen` is awaited. With ``tls`` (a server-side context) it speaks HTTPS;
    ``accepted`` counts connections as they are accepted, before any TLS handshake.
    """

    def __init__(
        self,
        script: Sequence[Behaviour] = (),
        *,
        default: Behaviour | None = None,
        sock: socket.socket | None = None,
        listen: bool = True,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._script = list(script)
        self._default = default or respond(200, pool_json())
        self._sock = sock or reserve_port()
        self._listen_at_start = listen
        self.host: str
        self.host, self.port = self._sock.getsockname()[:2]
        self._tls = tls
        self.accepted = 0
        self.conns: list[Conn] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._thread: LoopThread | None = None
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        return f"{'https' if self._tls else 'http'}://{self.host}:{self.port}"

    @property
    def count(self) -> int:
        """Requests read so far."""
        return len(self.conns)

    @property
    def times(self) -> list[float]:
        """When each request was read (time.monotonic())."""
        return [conn.at for conn in self.conns]

    async def __aenter__(self) -> Self:
        self._thread = LoopThread.shared()
        if self._listen_at_start:
            await self.listen()
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

    async def listen(self) -> None:
        """Start accepting connections (a no-op when already listening)."""
        assert self._thread is not None
        if self._server is None:
            self._server = await self._thread.run(self._start())

    async def _start(self) -> asyncio.Server:
        loop = asyncio.get_running_loop()

        def accept() -> asyncio.StreamReaderProtocol:  # called before any TLS handshake
            self.accepted += 1
            return asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._handle)

        return await loop.create_server(accept, sock=self._sock, ssl=self._tls)

    async def _close(self) -> None:
        await drain_accepts()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(SERVER_LIMIT):
                head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            writer.close()
            return
        conn = Conn(index=len(self.conns), reader=reader, writer=writer)
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        conn.method, conn.target, _ = request_line.split(" ", 2)
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                conn.headers[name.strip().lower()] = value.strip()
        conn.at, conn.wall = time.monotonic(), time.time()
        behaviour = self._script[conn.index] if conn.index < len(self._script) else self._default
        self.conns.append(conn)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await behaviour(conn)
        except ConnectionError:
            pass  # the client went away first: that is the point of several behaviours
        finally:
            self.in_flight -= 1
            if not writer.is_closing():
                writer.close()
            with contextlib.suppress(ConnectionError, TimeoutError):
                async with asyncio.timeout(2):
                    await writer.wait_closed()
