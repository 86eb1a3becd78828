"""The ``fake`` case: the fake exchange's own CPU per request, its data still or moving.

Bots' tests, and the benchmarks of later issues (watches, learned limits), run against
``asyncapi_client.testing.FakeServer``; its activity (seeded changes applied while it runs)
must not make it the bottleneck. Three fakes over equal data, each on an event loop of its own
in a thread: still (``activity=None``), moving (``activity=ACTIVITY``), and moving with a quota
advertised in IETF headers and a poll interval. One client (raw aiohttp, concurrency
``CONCURRENCY``) sends each fake, in interleaved turns (A B C C B A), the same cycle of
requests over the six operations; the fake's CPU is its own thread's CPU clock, read from
outside (``pthread_getcpuclockid``), so the client and the reading cost it nothing. The
figure of interest is the CPU per request added by the activity: (moving - still) per request,
within each round; target under ``TARGET_US``. The CPU the changes themselves take (timed
around the server's turn of the activity) is reported beside it: the rest of what is added is
the moved data costing more to serve (new orders, reordered lists).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from collections.abc import Coroutine
from typing import Any, Final, TypeVar

import aiohttp

from asyncapi_client.testing import FakeExchange, FakeServer, Quota

from ._server import ServerProcess
from ._stats import spread, summary

__all__ = ["fake"]

T = TypeVar("T")

#: Changes a second of the moving fakes: a lively exchange (the contract's example is 50).
ACTIVITY: Final = 100.0
CONCURRENCY: Final = 8
#: Issue 34: the activity adds less than this much of the fake's CPU per request.
TARGET_US: Final = 30.0
STILL: Final = "still"
MOVING: Final = f"activity={ACTIVITY:g}"
QUOTA: Final = f"activity={ACTIVITY:g} + quota + headers"


class _Served:
    """A FakeServer on its own loop and thread, and that thread's CPU clock."""

    def __init__(self, **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fake", daemon=True)
        self.thread.start()
        assert self.thread.ident is not None
        self.clock = time.pthread_getcpuclockid(self.thread.ident)
        self.server = FakeServer(FakeExchange.generate(seed=1), **options)
        self.applying = 0.0  # thread CPU seconds spent applying changes
        apply = self.server._apply_changes

        def timed(n: int) -> None:
            started = time.thread_time()
            apply(n)
            self.applying += time.thread_time() - started

        self.server._apply_changes = timed  # type: ignore[method-assign]
        self._call(self.server.start())
        self.urls = _urls(self.server)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30.0)

    def cpu(self) -> float:
        return time.clock_gettime(self.clock)

    def close(self) -> None:
        self._call(self.server.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30.0)
        self.loop.close()


def _urls(server: FakeServer) -> list[str]:
    """One cycle of requests over the six operations, as a bot's reads would mix them."""
    exchange = server.exchange
    base = server.base_url
    users = list(exchange.users)
    pools = list(exchange.pools)
    cycle = [f"{base}/api/clob/pools/{p}" for p in pools]
    cycle += [f"{base}/api/clob/users/{u}" for u in users]
    cycle += [f"{base}/api/clob/users/{u}/orders?limit=50" for u in users]
    cycle += [f"{base}/api/clob/users/{u}/orders?limit=20&status=OPEN" for u in users]
    cycle += [f"{base}/api/dash/leaderboard?limit=50", f"{base}/api/tokens"]
    token = exchange.tokens[0]["address"]
    cycle.append(f"{server.testnet_base_url}/api/aggregated/tokens/{token}/markets")
    return cycle


async def _turn(session: aiohttp.ClientSession, urls: list[str], n: int) -> None:
    """``n`` requests over ``urls`` (cycled), ``CONCURRENCY`` at a time."""
    queue = iter(range(n))

    async def worker() -> None:
        for i in queue:
            async with session.get(urls[i % len(urls)]) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"the fake answered {response.status}")

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


def _run(fakes: dict[str, _Served], rounds: int, turn: int, warmup: int) -> dict[str, Any]:
    names = list(fakes)

    async def run() -> dict[str, Any]:
        cpu: dict[str, list[float]] = {name: [] for name in names}
        rps: dict[str, list[float]] = {name: [] for name in names}
        changes: dict[str, list[float]] = {name: [] for name in names}
        connector = aiohttp.TCPConnector(limit=CONCURRENCY * len(names))
        async with aiohttp.ClientSession(connector=connector) as session:
            for fake in fakes.values():
                await _turn(session, fake.urls, warmup)
            gc.collect()
            for r in range(rounds):
                order = names[r % len(names) :] + names[: r % len(names)]
                spent = dict.fromkeys(names, 0.0)
                wall = dict.fromkeys(names, 0.0)
                applying = dict.fromkeys(names, 0.0)
                for name in [*order, *reversed(order)]:
                    fake = fakes[name]
                    c0, w0, a0 = fake.cpu(), time.perf_counter(), fake.applying
                    await _turn(session, fake.urls, turn)
                    spent[name] += fake.cpu() - c0
                    wall[name] += time.perf_counter() - w0
                    applying[name] += fake.applying - a0
                for name in names:
                    cpu[name].append(spent[name] / (2 * turn) * 1e6)
                    rps[name].append(2 * turn / wall[name])
                    changes[name].append(applying[name] / (2 * turn) * 1e6)
                print(
                    f"  fake round {r + 1}: "
                    + ", ".join(f"{n} {cpu[n][-1]:.1f} us/request" for n in names),
                    file=sys.stderr,
                    flush=True,
                )
        return {"cpu_us": cpu, "rps": rps, "changes_us": changes}

    return asyncio.run(run())


def fake(cfg: Any, server: ServerProcess) -> dict[str, Any]:
    """Run the case (``cfg``: the suite's Config; ``quick`` and ``warmup`` are read)."""
    rounds, turn = (3, 400) if cfg.quick else (15, 1_500)
    options: dict[str, dict[str, Any]] = {
        STILL: {},
        MOVING: {"activity": ACTIVITY},
        QUOTA: {
            "activity": ACTIVITY,
            "quota": Quota(10**9, 60.0),
            "rate_limit_headers": "ietf",
            "poll_interval": 5.0,
        },
    }
    fakes: dict[str, _Served] = {}
    try:
        for name, kwargs in options.items():
            fakes[name] = _Served(**kwargs)
        measured = _run(fakes, rounds, turn, cfg.warmup)
        changes = {name: len(f.server.journal) for name, f in fakes.items()}
    finally:
        for served in fakes.values():
            served.close()
    cpu = measured["cpu_us"]
    added = {
        name: [a - b for a, b in zip(cpu[name], cpu[STILL], strict=True)]
        for name in (MOVING, QUOTA)
    }
    ok = summary(added[MOVING])["median"] < TARGET_US
    title = f"the fake's own CPU per request, {2 * turn * rounds:,} requests each"
    rows = [
        {
            "case": f"{title}: {name} over still",
            "asyncapi_client": spread(summary(cpu[name]), 1, " us", True),
            "baseline": f"still {spread(summary(cpu[STILL]), 1, ' us', True)}",
            "ratio": f"+{spread(summary(added[name]), 1, ' us', True)}",
            "target": f"< +{TARGET_US:g} us" if name == MOVING else "(info)",
            "result": ("pass" if ok else "FAIL") if name == MOVING else "info",
        }
        for name in (MOVING, QUOTA)
    ]
    rows.append(
        {
            "case": f"{title}: {MOVING}, the changes' own CPU per request",
            "asyncapi_client": spread(summary(measured["changes_us"][MOVING]), 1, " us", True),
            "baseline": "-",
            "ratio": "-",
            "target": "(info)",
            "result": "info",
        }
    )
    return {
        "title": title,
        "unit": "the fake's thread CPU microseconds per request (its pthread CPU clock)",
        "cpu_us": {name: summary(values) for name, values in cpu.items()},
        "rps": {name: summary(values) for name, values in measured["rps"].items()},
        "added_us": {name: summary(values) for name, values in added.items()},
        "changes_us": {name: summary(values) for name, values in measured["changes_us"].items()},
        "changes_applied": changes,
        "target": {"added_us": TARGET_US},
        "pass": ok,
        "rows": rows,
    }
