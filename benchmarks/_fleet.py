"""The ``limiter`` case, and what a limiter's ``margin`` buys and costs where requests land.

``limiter`` (a case of ``python -m benchmarks``): ``pool()`` calls at concurrency 1 through a
Client whose limiter is a ``LocalLimiter`` or a ``RedisLimiter`` on a redis-server on
loopback, each at margin 0 (the rule before margins: the old figures) and at the default
margin, with the same rate (one that never binds, so every request takes the limiter's full
path and nothing waits). Rounds are interleaved (local 0, local 0.05, redis 0, redis 0.05,
...); per round, one contender's CPU and wall time per request are divided by another's.

``python -m benchmarks._fleet [--quick]``: the margin's effect at the server. Bursts of
callers at margin 0, 0.05 and 0.1, a loopback server logging the kernel's arrival time of
each request (``tests/_arrivals.py``, immune to the server process waiting for a CPU):
one process (a ``LocalLimiter``, 30 callers at ``Rate(10, 0.5)``) and four processes (a
``RedisLimiter`` each on one redis-server, 40 callers at ``Rate(20, 1.0)``). Per run: the
most arrivals in any closed window of ``seconds`` at the server (every request counted),
and the steady throughput as a share of ``count / seconds``: the ``tokens`` arrivals in
whole periods of ``seconds + margin`` (the limiter's period when it binds) while every
caller was running, over those periods' length. Writes
``benchmarks/results/latest-margins.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import orjson

from asyncapi_client import ApiError, Client, LocalLimiter, Network, Rate
from asyncapi_client.fleet import RedisLimiter
from tests._arrivals import ArrivalServer
from tests._redis import RedisServer
from tests._windows import most_in_any_window

from ._server import ServerProcess
from ._stats import format_table, per_round_ratios, spread, summary

__all__ = ["limiter", "margins"]

#: A quota the benchmark never reaches: the limiter is asked, and always answers "go".
RATE: Final = Rate(100_000, 1.0)
ROUNDS: Final = 7
QUICK_ROUNDS: Final = 3
#: The contenders of the cost case: (name, Redis or not, margin).
CONTENDERS: Final = (
    ("local-m0", False, 0.0),
    ("local", False, 0.05),
    ("redis-m0", True, 0.0),
    ("redis", True, 0.05),
)
#: The margins whose effect at the server is measured.
MARGINS: Final = (0.0, 0.05, 0.1)


def _once(
    server: ServerProcess, redis_url: str | None, margin: float, n: int, warmup: int
) -> dict[str, float]:
    async def run() -> tuple[float, float, float, float]:
        limiter: LocalLimiter | RedisLimiter = (
            LocalLimiter([RATE], margin=margin)
            if redis_url is None
            else RedisLimiter(redis_url, [RATE], name=f"bench-{time.monotonic_ns()}", margin=margin)
        )
        try:
            async with Client(base_url=server.base_url, limiter=limiter) as client:
                for i in range(warmup):
                    await client.pool(f"warm-{i}")
                gc.collect()
                cpu, wall = time.process_time(), time.perf_counter()
                for i in range(n):
                    await client.pool(f"pool-{i:05d}")
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            # the question alone, without HTTP: what the limiter adds to every attempt
            gc.collect()
            ask_cpu, ask_wall = time.process_time(), time.perf_counter()
            for _ in range(n):
                await limiter.acquire("pool", Network.MAINNET)
            ask_cpu, ask_wall = time.process_time() - ask_cpu, time.perf_counter() - ask_wall
            return cpu, wall, ask_cpu, ask_wall
        finally:
            if isinstance(limiter, RedisLimiter):
                await limiter.aclose()

    server.stats(reset=True)
    cpu, wall, ask_cpu, ask_wall = asyncio.run(run())
    seen = server.stats()
    if seen != n + warmup:
        raise RuntimeError(f"the server saw {seen} requests, expected {n + warmup}")
    return {
        "cpu_us": cpu / n * 1e6,
        "wall_us": wall / n * 1e6,
        "ask_cpu_us": ask_cpu / n * 1e6,
        "ask_wall_us": ask_wall / n * 1e6,
    }


def limiter(cfg: Any, server: ServerProcess) -> dict[str, Any]:
    """Run the case (``cfg``: the suite's Config; only ``quick`` and ``warmup`` are read)."""
    n = 200 if cfg.quick else 1_000
    rounds = QUICK_ROUNDS if cfg.quick else ROUNDS
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in CONTENDERS}
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as directory:
        redis_server = RedisServer(Path(directory))
        redis_server.start()
        try:
            for r in range(rounds):
                for name, redis, margin in CONTENDERS:
                    url = redis_server.url if redis else None
                    runs[name].append(_once(server, url, margin, n, cfg.warmup))
                shown = ", ".join(
                    f"{name} {runs[name][-1]['cpu_us']:.1f}/{runs[name][-1]['wall_us']:.1f}"
                    f" (acquire {runs[name][-1]['ask_cpu_us']:.1f}/"
                    f"{runs[name][-1]['ask_wall_us']:.1f})"
                    for name, _, _ in CONTENDERS
                )
                print(
                    f"  limiter round {r + 1} (us per request, CPU/wall): {shown}",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            redis_server.stop()

    def series(name: str, key: str) -> list[float]:
        return [x[key] for x in runs[name]]

    def ratio(name: str, base: str, key: str) -> dict[str, Any]:
        return summary(per_round_ratios(series(name, key), series(base, key)))

    def added(name: str, base: str, key: str) -> dict[str, Any]:
        return summary([b[key] - a[key] for a, b in zip(runs[base], runs[name], strict=True)])

    title = f"limiter, x{n:,} at concurrency 1"
    labels = {
        "local-m0": "LocalLimiter margin 0",
        "local": "LocalLimiter margin 0.05",
        "redis-m0": "RedisLimiter margin 0",
        "redis": "RedisLimiter margin 0.05",
    }
    what = {
        "cpu_us": "client CPU per request",
        "wall_us": "latency per request",
        "ask_cpu_us": "acquire() alone, client CPU",
        "ask_wall_us": "acquire() alone, latency",
    }

    def row(key: str, name: str, base: str) -> dict[str, str]:
        return {
            "case": f"{title}: {what[key]}",
            "asyncapi_client": f"{labels[name]} {spread(summary(series(name, key)), 1, ' us')}",
            "baseline": f"{labels[base]} {spread(summary(series(base, key)), 1, ' us')}",
            "ratio": f"{spread(ratio(name, base, key))}; added "
            f"{spread(added(name, base, key), 1, ' us')}",
            "target": "(info)",
            "result": "info",
        }

    pairs = (("redis", "local"), ("local", "local-m0"), ("redis", "redis-m0"))
    keys = tuple(what)
    return {
        "title": title,
        "rounds": runs,
        # Redis over local at the default margin (the figures of earlier runs), then each
        # limiter with the margin over the same limiter without it
        "ratios": {
            f"{name}/{base}": {key: ratio(name, base, key) for key in keys} for name, base in pairs
        },
        "added_us": {
            f"{name}-{base}": {key: added(name, base, key) for key in keys} for name, base in pairs
        },
        "pass": None,
        "rows": [row(key, name, base) for name, base in pairs for key in keys],
    }


# --- where the requests land ------------------------------------------------------------------

#: One process: 30 callers at Rate(10, 0.5), 2.6 s a run.
SINGLE: Final = (Rate(10, 0.5), 30, 2.6)
#: Four processes: 10 callers each at Rate(20, 1.0), 6.3 s a run (the issue's scenario).
FLEET: Final = (Rate(20, 1.0), 10, 6.3)


def _landed(
    every: list[float], busy: list[list[float]], rate: Rate, margin: float
) -> dict[str, float]:
    """What the server saw in one run: the most in a window (``every`` request), and the
    steady throughput of ``busy`` (each caller group's ``tokens`` arrivals)."""
    start = max(min(times) for times in busy)  # every group is calling from here ...
    stop = min(max(times) for times in busy)  # ... to here
    period = rate.seconds + margin
    periods = int((stop - start) // period)
    calls = sorted(t for times in busy for t in times)
    counted = sum(1 for t in calls if start <= t < start + periods * period)
    steady = counted / (periods * period) if periods else 0.0
    elapsed = calls[-1] - calls[0]
    return {
        "margin": margin,
        "requests": len(every),
        "most_in_window": most_in_any_window(every, rate.seconds),
        "periods": periods,
        "throughput_share": steady / (rate.count / rate.seconds),
        "floor_met": float(len(calls) >= rate.count * elapsed / period - rate.count),
    }


async def _single(server: ArrivalServer, margin: float) -> list[float]:
    rate, callers, seconds = SINGLE
    limiter = LocalLimiter([rate], margin=margin)
    before = len(server.arrivals)
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    async with Client(base_url=server.base_url, limiter=limiter, coalesce=False) as client:

        async def caller() -> None:
            while loop.time() < end:
                try:
                    await client.tokens()
                except ApiError:
                    pass

        tasks = [asyncio.create_task(caller()) for _ in range(callers)]
        await asyncio.wait(tasks, timeout=seconds)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return [arrival.time for arrival in server.arrivals[before:]]


async def _measure(rounds: int) -> dict[str, Any]:
    from tests._fleet import Fleet, prioritized

    single: dict[float, list[dict[str, float]]] = {m: [] for m in MARGINS}
    fleet_runs: dict[float, list[dict[str, float]]] = {m: [] for m in MARGINS}
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as directory:
        redis_server = RedisServer(Path(directory))
        redis_server.start()
        workers = Fleet()
        try:
            workers.wait_ready()
            assert redis_server.process is not None
            with (
                ArrivalServer() as server,
                prioritized(os.getpid(), redis_server.process.pid),
            ):
                for r in range(rounds):
                    for margin in MARGINS:
                        rate = SINGLE[0]
                        times = await _single(server, margin)
                        seen = _landed(times, [times], rate, margin)
                        single[margin].append(seen)
                        print(f"  single round {r + 1}: {seen}", file=sys.stderr, flush=True)
                    for margin in MARGINS:
                        rate, concurrency, seconds = FLEET
                        before = len(server.arrivals)
                        await workers.run(
                            server.base_url,
                            redis_server.url,
                            rates=[(rate.count, rate.seconds)],
                            seconds=seconds,
                            concurrency=concurrency,
                            name=f"margins-{r}-{margin}",
                            margin=margin,
                        )
                        log = server.arrivals[before:]
                        busy = [
                            [
                                x.time
                                for x in log
                                if x.path == "/api/tokens" and x.headers.get("x-worker") == str(w)
                            ]
                            for w in range(len(workers.procs))
                        ]
                        seen = _landed([x.time for x in log], busy, rate, margin)
                        fleet_runs[margin].append(seen)
                        print(f"  fleet round {r + 1}: {seen}", file=sys.stderr, flush=True)
        finally:
            workers.stop()
            redis_server.stop()
    return {"single": single, "fleet": fleet_runs}


def margins(rounds: int) -> dict[str, Any]:
    """Measure the margins' effect at the server (see the module docs); print a table."""
    measured = asyncio.run(_measure(rounds))
    rows = []
    for kind, (rate, callers, seconds) in (("single", SINGLE), ("fleet", FLEET)):
        for margin in MARGINS:
            runs = measured[kind][margin]
            most = summary([run["most_in_window"] for run in runs])
            share = summary([run["throughput_share"] for run in runs])
            who = "1 process, LocalLimiter" if kind == "single" else "4 processes, RedisLimiter"
            rows.append(
                [
                    f"{who}, {callers} callers{' each' if kind == 'fleet' else ''}, "
                    f"Rate({rate.count}, {rate.seconds:g}), {seconds:g} s",
                    f"{margin:g}",
                    f"{spread(most, 0)} (limit {rate.count})",
                    f"{spread(share, 2)} (bound {rate.seconds / (rate.seconds + margin):.2f})",
                    f"{sum(run['floor_met'] for run in runs):.0f}/{len(runs)}",
                ]
            )
    headers = [
        "run",
        "margin (s)",
        "most in any window at the server",
        "steady throughput / quota",
        "floor met",
    ]
    print(format_table(headers, rows))
    return {"rounds": rounds, "measured": measured, "headers": headers, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 rounds instead of 4")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results" / "latest-margins.json",
    )
    args = parser.parse_args()
    load = os.getloadavg()
    result = margins(2 if args.quick else 4)
    result["meta"] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "loadavg_before": load,
        "loadavg_after": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    args.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    print(f"written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
