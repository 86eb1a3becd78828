"""A loopback HTTP server whose log is the kernel's arrival time of each request.

The fake exchange stamps a request when its handler runs; on a loaded machine the process
that serves it may wait tens of milliseconds for a CPU, and requests that arrived apart are
then stamped together. This server asks the kernel instead: with ``SO_TIMESTAMPNS`` every
packet is stamped as it is received, and ``recvmsg`` hands that stamp over with the data,
however late the server reads it. HTTP/1.1 without pipelining sends one request per
connection at a time, so each read holds one request, stamped where it landed.

It answers ``GET /api/tokens`` with no token and ``GET /api/dash/leaderboard`` with an empty
page (keep-alive), anything else with 404, each with the extra headers ``headers(n)`` gives
for the ``n``-th request (0 based), when given. One thread serves every connection
(selectors).
"""

from __future__ import annotations

import json
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Final, Self

import attrs

__all__ = ["Arrival", "ArrivalServer"]

#: ``SO_TIMESTAMPNS`` on Linux (the ``socket`` module does not name it).
SO_TIMESTAMPNS: Final = 35
_BODIES: Final = {
    "/api/tokens": b'{"tokens": []}',
    "/api/dash/leaderboard": json.dumps(
        {"leaderboard": [], "page": 1, "limit": 20, "total": 0, "totalPages": 0}
    ).encode(),
}


@attrs.frozen
class Arrival:
    """One request: when the kernel received it (``time.time()``'s clock), what it asked.

    ``kernel`` False: the kernel gave no stamp, and ``time`` is when the server read it.
    """

    time: float
    path: str
    headers: dict[str, str]
    kernel: bool


def _answer(path: str, headers: Mapping[str, str]) -> bytes:
    body = _BODIES.get(path)
    status = "200 OK" if body is not None else "404 Not Found"
    body = body if body is not None else b'{"error": "not found"}'
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


class ArrivalServer:
    """``with ArrivalServer() as server:`` serve on 127.0.0.1; ``server.arrivals`` is the log."""

    def __init__(self, headers: Callable[[int], Mapping[str, str]] | None = None) -> None:
        self._headers = headers
        self._arrivals: list[Arrival] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Set on the listening socket: accepted sockets inherit it, and every packet is
        # stamped from the first one on.
        self._listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(1024)
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._buffers: dict[socket.socket, bytes] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="arrivals", daemon=True)

    @property
    def base_url(self) -> str:
        port: int = self._listener.getsockname()[1]
        return f"http://127.0.0.1:{port}"

    @property
    def arrivals(self) -> list[Arrival]:
        with self._lock:
            return list(self._arrivals)

    def wait_for(self, count: int, timeout: float) -> bool:
        """Whether ``count`` requests have arrived, waiting up to ``timeout`` seconds (or until
        the server stops)."""
        with self._arrived:
            self._arrived.wait_for(
                lambda: len(self._arrivals) >= count or self._stop.is_set(), timeout
            )
            return len(self._arrivals) >= count

    def __enter__(self) -> Self:
        self._wait_for_stamps()
        self._thread.start()
        return self

    def _wait_for_stamps(self) -> None:
        """Return once the kernel stamps received packets: it turns stamping on in a work
        item some time after a socket asks (a loaded machine runs it late)."""
        address = self._listener.getsockname()
        self._listener.settimeout(5.0)
        try:
            for _ in range(500):
                with socket.create_connection(address, timeout=5.0) as probe:
                    conn, _ = self._listener.accept()
                    with conn:
                        probe.sendall(b"?")
                        _, ancillary, _, _ = conn.recvmsg(1, socket.CMSG_SPACE(16))
                if any(
                    level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS
                    for level, kind, _ in ancillary
                ):
                    return
                time.sleep(0.01)  # a bounded poll of the kernel's state
        finally:
            self._listener.setblocking(False)
        raise RuntimeError("the kernel does not stamp received packets (SO_TIMESTAMPNS)")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._arrived:
            self._stop.set()
            self._arrived.notify_all()
        self._wake_w.send(b"x")
        self._thread.join(timeout=10)
        for conn in list(self._buffers):
            conn.close()
        self._selector.close()
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=1.0):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    self._accept()
                elif sock is not self._wake_r:
                    self._read(sock)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except BlockingIOError:
                return
            conn.setblocking(True)  # answers are small: a blocking send never waits
            self._buffers[conn] = b""
            self._selector.register(conn, selectors.EVENT_READ, None)

    def _read(self, conn: socket.socket) -> None:
        try:
            data, ancillary, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(16))
        except OSError:
            data, ancillary = b"", []
        if not data:
            self._selector.unregister(conn)
            del self._buffers[conn]
            conn.close()
            return
        stamp, kernel = time.time(), False  # only where the kernel gave none
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, nanos = struct.unpack("qq", payload[:16])
                stamp, kernel = seconds + nanos / 1e9, True
        buffer = self._buffers[conn] + data
        while b"\r\n\r\n" in buffer:  # a GET has no body
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            line, *fields = head.decode("latin-1").split("\r\n")
            path = line.split(" ")[1].split("?")[0] if line.count(" ") >= 2 else ""
            headers = {}
            for field in fields:
                name, _, value = field.partition(":")
                headers[name.strip().lower()] = value.strip()
            with self._arrived:
                number = len(self._arrivals)
                self._arrivals.append(Arrival(stamp, path, headers, kernel))
                self._arrived.notify_all()
            extra = {} if self._headers is None else self._headers(number)
            try:
                conn.sendall(_answer(path, extra))
            except OSError:
                break
        self._buffers[conn] = buffer
