"""The benchmark server: a loopback HTTP server in its own process, pinned to another core.

It serves the read API's wire format from pre-rendered bytes (see ``_data``) with aiohttp's
low-level server, so its own cost is small and the same for every client measured:

* ``/api/clob/pools/{poolId}``: a pool (any id);
* ``/api/clob/users/{address}/orders?limit=&cursor=``: ``bench-<N>`` has N orders, walked
  by cursor ``o<offset>``; default page size 100;
* ``/api/dash/leaderboard?page=&limit=``: 2,000 entries, 20 pages of 100 by default;
* an optional ``/lat<ms>`` prefix before ``/api`` delays the answer by that many ms
  (a ``base_url`` with a path prefix, which the client supports, selects it);
* ``/_bench/stats`` answers ``{"requests": n}`` (API requests since the last ``?reset=1``).

Why not the fake exchange of ``asyncapi_client.testing``: the cases need a synthetic
1,000,000-order cursor walk, thousands of distinct pools, per-request latency and a request
counter, all at a fixed, negligible server cost. Run as ``python -m benchmarks._server``; it
prints ``PORT <n>`` and serves until its stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Final, Self

import orjson
from aiohttp import web

from . import _data

__all__ = ["ServerProcess", "pin_cores"]

_ROOT: Final = Path(__file__).resolve().parent.parent
_JSON: Final = "application/json"


class _Handler:
    """Routes one request by hand: no router, no middleware, pre-rendered bodies."""

    def __init__(self) -> None:
        self.requests = 0
        self.ring = _data.order_fragments()

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        path, _, query = request.raw_path.partition("?")
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        if path.startswith("/_bench/"):
            return self._control(path, params)
        self.requests += 1
        if path.startswith("/lat"):
            delay, _, rest = path[4:].partition("/")
            path = "/" + rest
            await asyncio.sleep(int(delay) / 1000)
        parts = path.split("/")
        # ['', 'api', 'clob', 'pools', id] / ['', 'api', 'clob', 'users', addr, 'orders']
        if len(parts) == 5 and parts[2] == "clob" and parts[3] == "pools":
            return web.Response(body=_data.pool_body(parts[4]), content_type=_JSON)
        if len(parts) == 6 and parts[3] == "users" and parts[5] == "orders":
            limit = int(params.get("limit") or 100)
            cursor = params.get("cursor") or "o0"
            offset = int(cursor[1:])
            total = _data.user_total(parts[4])
            body = _data.orders_page(self.ring, offset, limit, total)
            return web.Response(body=body, content_type=_JSON)
        if path == "/api/dash/leaderboard":
            page = int(params.get("page") or 1)
            limit = int(params.get("limit") or 100)
            return web.Response(body=_data.leaderboard_page(page, limit), content_type=_JSON)
        return web.Response(status=404, body=b'{"error":"not found"}', content_type=_JSON)

    def _control(self, path: str, params: dict[str, str]) -> web.Response:
        if path == "/_bench/stats":
            body = orjson.dumps({"requests": self.requests})
            if params.get("reset"):
                self.requests = 0
            return web.Response(body=body, content_type=_JSON)
        return web.Response(status=404)


async def _serve(port: int, max_seconds: float) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def watch_stdin() -> None:  # the parent closes our stdin (or dies): we stop
        sys.stdin.buffer.read()
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, daemon=True).start()
    server = web.Server(_Handler(), access_log=None)
    listener = await loop.create_server(server, "127.0.0.1", port, backlog=1024)
    bound = listener.sockets[0].getsockname()[1]
    print(f"PORT {bound}", flush=True)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), max_seconds)
    listener.close()
    await server.shutdown(1.0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cpu", type=int, default=None, help="pin this process to one core")
    parser.add_argument("--max-seconds", type=float, default=3600.0)
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    asyncio.run(_serve(args.port, args.max_seconds))


def pin_cores() -> tuple[int | None, int | None, str]:
    """Pin this (client) process to one core; pick another for the server. Says what it did."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None, None, "not pinned (no sched_setaffinity on this platform)"
    if len(allowed) < 2:
        return None, None, f"not pinned (only core {allowed} allowed)"
    client, server = allowed[0], allowed[1]
    os.sched_setaffinity(0, {client})
    return client, server, f"client on core {client}, server on core {server}"


class ServerProcess:
    """Starts the benchmark server in a subprocess (pinned to ``cpu``) and stops it on exit."""

    def __init__(self, cpu: int | None) -> None:
        self.cpu = cpu
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        cmd = [sys.executable, "-m", "benchmarks._server"]
        if self.cpu is not None:
            cmd += ["--cpu", str(self.cpu)]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=_ROOT)
        assert self._proc.stdout is not None
        found: list[int] = []
        reader = threading.Thread(
            target=lambda: found.append(_read_port(self._proc.stdout)),  # type: ignore[union-attr]
            daemon=True,
        )
        reader.start()
        reader.join(30.0)
        if not found or not found[0]:
            self.__exit__(None, None, None)
            raise RuntimeError("the benchmark server did not start within 30 s")
        self.port = found[0]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10.0)
        if proc.stdout is not None:
            proc.stdout.close()

    def stats(self, *, reset: bool = False) -> int:
        """API requests the server received (since the last reset); optionally reset."""
        url = f"{self.base_url}/_bench/stats" + ("?reset=1" if reset else "")
        with urllib.request.urlopen(url, timeout=10.0) as response:
            count: int = orjson.loads(response.read())["requests"]
        return count


def _read_port(stream: object) -> int:
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        line = stream.readline()  # type: ignore[attr-defined]
        if not line:
            return 0
        if line.startswith(b"PORT "):
            return int(line.split()[1])
    return 0


if __name__ == "__main__":
    main()
