"""The watch case: what a quiet watch costs, and how soon a change is delivered.

- requests per interval of a quiet ``watch_orders`` of one address (target: at most 2,
  each answered 304 by the fake exchange, which sends ETags);
- client CPU per quiet poll (the client's own thread, ``time.thread_time``), ours against
  the bare conditional GETs a hand-written poller makes with raw aiohttp (the same two URLs,
  ``If-None-Match``, a 304 each), in interleaved rounds (target: at most 1.3x);
- detection latency: from the fake's journal (``Change.at``, when a change was applied) to
  the watch handing the change out, with ``interval`` 0.1 s (target: p99 at most the
  interval plus one round trip plus 50 ms).

The fake exchange runs on a thread of its own (``FakeServer.in_thread()``), so the client's
thread time is the client's alone.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from typing import Any

import aiohttp

from asyncapi_client import Client
from asyncapi_client.testing import FakeExchange, FakeServer

from ._stats import per_round_ratios, spread, summary

__all__ = ["watch"]

OURS = "asyncapi_client watch_orders"
RAW = "raw aiohttp conditional GETs"
POLLS = 300
ROUNDS = 9
LATENCY_INTERVAL = 0.1
LATENCY_CHANGES = 150


async def _ours_polls(base_url: str, address: str, polls: int) -> float:
    async with Client(base_url=base_url) as client:
        watch = client.watch_orders(address, interval=0.001)
        engine: Any = watch._engine  # the poller, stepped poll by poll
        await engine._start()
        engine.interval = 0.0
        started = time.thread_time()
        for _ in range(polls):
            await engine.poll_once()
        spent = time.thread_time() - started
        await watch.aclose()
    return spent / polls


async def _raw_polls(base_url: str, address: str, polls: int) -> float:
    urls = [f"{base_url}/api/clob/users/{address}", f"{base_url}/api/clob/users/{address}/orders"]
    etags: dict[str, str] = {}
    async with aiohttp.ClientSession() as session:
        for url in urls:  # the baseline
            async with session.get(url) as response:
                await response.read()
                etags[url] = response.headers["ETag"]
        started = time.thread_time()
        for _ in range(polls):
            await asyncio.sleep(0)
            for url in urls:
                async with session.get(url, headers={"If-None-Match": etags[url]}) as response:
                    if response.status != 304:
                        raise RuntimeError(f"expected 304, got {response.status}")
        spent = time.thread_time() - started
    return spent / polls


async def _requests_per_interval(server: FakeServer, address: str) -> dict[str, Any]:
    async with Client(base_url=server.base_url) as client:
        watch = client.watch_orders(address, interval=0.05)
        waiting = asyncio.ensure_future(anext(watch))
        before = len(server.requests)
        async with asyncio.timeout(30):
            while len(server.requests) < before + 42:  # noqa: ASYNC110 - on another thread
                await asyncio.sleep(0.05)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        await watch.aclose()
    polls = server.requests[before + 2 : before + 42]  # after the baseline
    per_poll = len(polls) / sum(1 for r in polls if r.operation == "user")
    not_modified = sum(1 for r in polls if r.status == 304) / len(polls)
    return {"requests_per_interval": per_poll, "share_304": not_modified}


async def _latency() -> list[float]:
    """Seconds from each order change applied to its delivery."""
    exchange = FakeExchange.generate(seed=9, users=1, orders_per_user=100)
    address = next(iter(exchange.orders))
    delays: list[float] = []
    rng = random.Random(3)
    async with FakeServer(exchange) as server, Client(base_url=server.base_url) as client:
        watch = client.watch_orders(address, interval=LATENCY_INTERVAL)
        applied: dict[tuple[str, str, str], float] = {}

        async def consume() -> None:
            async for change in watch:
                order = change.order
                key = (order.transaction_id, order.status.value, str(order.filled_size))
                at = applied.get(key)
                if at is not None:
                    delays.append(time.time() - at)

        task = asyncio.ensure_future(consume())
        await server.wait_until(lambda: len(server.requests) >= 2)
        while len(delays) < LATENCY_CHANGES:
            for change in exchange.advance(1):
                if change.kind.startswith("order."):
                    after = change.after
                    applied[(change.key, after["status"], after["filledSize"])] = change.at
            await asyncio.sleep(rng.uniform(0.0, 2 * LATENCY_INTERVAL))  # the market's pace
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await watch.aclose()
    return delays


def watch(cfg: Any, server: Any, row: Any) -> dict[str, Any]:
    """The watch case (its own fake exchange; the benchmark server is not used); ``row``
    makes a row of the summary table."""
    exchange = FakeExchange.generate(seed=9, users=1, orders_per_user=200)
    address = next(iter(exchange.orders))
    rounds = 3 if getattr(cfg, "quick", False) else ROUNDS
    runs: dict[str, list[float]] = {OURS: [], RAW: []}
    with FakeServer(exchange).in_thread() as fake:
        quiet = asyncio.run(_requests_per_interval(fake, address))
        for _ in range(rounds):
            runs[OURS].append(asyncio.run(_ours_polls(fake.base_url, address, POLLS)))
            runs[RAW].append(asyncio.run(_raw_polls(fake.base_url, address, POLLS)))
    ratios = per_round_ratios(runs[OURS], runs[RAW])
    ratio = summary(ratios)
    delays = asyncio.run(_latency())
    ordered = sorted(delays)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    latency_target = LATENCY_INTERVAL + 0.05 + 0.01  # a loopback round trip is under 10 ms
    cpu_ok = ratio["median"] <= 1.3
    requests_ok = quiet["requests_per_interval"] <= 2.0
    latency_ok = p99 <= latency_target
    return {
        "title": "watch_orders: a quiet watch, and detection latency",
        "requests_per_interval": quiet,
        "cpu_per_poll_us": {c: summary([x * 1e6 for x in xs]) for c, xs in runs.items()},
        "cpu_ratio": ratio,
        "latency_s": {
            "p50": statistics.median(delays),
            "p99": p99,
            "max": ordered[-1],
            "n": len(delays),
        },
        "target": {"requests_per_interval": 2.0, "cpu_ratio": 1.3, "latency_p99_s": latency_target},
        "pass": cpu_ok and requests_ok and latency_ok,
        "rows": [
            row(
                "quiet watch: requests per interval",
                f"{quiet['requests_per_interval']:.2f} ({quiet['share_304']:.0%} answered 304)",
                "-",
                "-",
                "<= 2",
                requests_ok,
            ),
            row(
                "quiet poll: client CPU per poll",
                f"{statistics.median(runs[OURS]) * 1e6:.0f} us",
                f"raw conditional GETs {statistics.median(runs[RAW]) * 1e6:.0f} us",
                spread(ratio, 2, "x"),
                "<= 1.3x",
                cpu_ok,
            ),
            row(
                "change to delivery (interval 0.1 s): p99",
                f"{p99 * 1000:.0f} ms",
                f"p50 {statistics.median(delays) * 1000:.0f} ms",
                "-",
                f"<= {latency_target * 1000:.0f} ms",
                latency_ok,
            ),
        ],
    }
