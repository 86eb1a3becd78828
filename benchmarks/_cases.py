"""The benchmark cases. Each returns a JSON-able result with ``rows`` for the summary table.

Every case runs its contenders in interleaved rounds (A B C, A B C, ...): slow drifts of a
shared, noisy machine hit every contender alike, and each ratio is computed within a round.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import attrs

from asyncapi_client import Client

from . import _contenders, _data, _fleet
from ._server import _ROOT, ServerProcess
from ._stats import per_round_ratios, spread, summary

__all__ = ["CASES", "Config"]

RAW: Final = "raw aiohttp+orjson"
OURS: Final = "asyncapi_client"
HTTPX: Final = "httpx+pydantic"
PYDANTIC: Final = "pydantic validate_json"
DECIMAL_FLOOR: Final = "orjson.loads + 3 Decimal"
TYPED: Final = "aiohttp+pydantic"
#: Issue 12's decode targets: microseconds per order, and the ratio to the exact-decimal floor.
DECODE_MAX_US: Final = 3.5
DECODE_MAX_VS_DECIMALS: Final = 1.5
#: The user whose orders the overhead case pages through (never runs out of orders).
_ORDERS_USER: Final = "0xbenchuser"


@attrs.define
class Config:
    """Sizes and round counts; :meth:`quick` is a smoke run of well under a minute."""

    pool_requests: int = 5_000
    orders_requests: int = 2_000
    overhead_rounds: int = 9
    #: httpx's connection pool costs O(waiting x connections) per request at concurrency 64
    #: (about 10 ms of CPU a request here), so it runs fewer requests there; per request,
    #: the count does not matter.
    httpx_concurrent_requests: int = 1_000
    warmup: int = 200
    decode_orders: int = 10_000
    decode_rounds: int = 15
    decode_reps: int = 3
    typed_rounds: int = 7
    stream_pages: int = 20
    stream_latency_ms: int = 50
    consumer_s: float = 0.05
    stream_rounds: int = 5
    memory_orders: int = 1_000_000
    memory_page_size: int = 1_000
    memory_rounds: int = 2
    coalesce_calls: int = 100
    coalesce_rounds: int = 3
    client_cpu: int | None = None
    quick: bool = False

    @classmethod
    def quick_run(cls) -> Config:
        return cls(
            pool_requests=500,
            orders_requests=200,
            overhead_rounds=3,
            httpx_concurrent_requests=200,
            warmup=100,
            decode_rounds=5,
            decode_reps=2,
            typed_rounds=3,
            stream_rounds=2,
            memory_orders=200_000,
            memory_rounds=1,
            coalesce_rounds=1,
            quick=True,
        )


def _row(
    case: str, ours: str, baseline: str, ratio: str, target: str, ok: bool | None
) -> dict[str, str]:
    status = "info" if ok is None else ("pass" if ok else "FAIL")
    return {
        "case": case,
        "asyncapi_client": ours,
        "baseline": baseline,
        "ratio": ratio,
        "target": target,
        "result": status,
    }


def _detail(case: str, contender: str, measured: str, ratio: str) -> dict[str, str]:
    return {"case": case, "contender": contender, "measured": measured, "ratio": ratio}


def _log(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


# --- request overhead ---------------------------------------------------------------------


async def _drive(call: Callable[[str], Awaitable[object]], args: Sequence[str], conc: int) -> None:
    """Call ``call(arg)`` for every arg, ``conc`` at a time, in the same way for everyone."""
    if conc == 1:
        for arg in args:
            await call(arg)
        return
    it = iter(args)

    async def worker() -> None:
        for arg in it:
            await call(arg)

    await asyncio.gather(*[worker() for _ in range(conc)])


def _overhead_once(
    factory: Callable[[str], _contenders.BenchClient],
    server: ServerProcess,
    operation: str,
    n: int,
    concurrency: int,
    warmup: int,
    limit: int = 100,
) -> dict[str, float]:
    if operation == "pool":
        warm = [f"warm-{i}" for i in range(warmup)]
        args = [f"pool-{i:05d}" for i in range(n)]
    else:
        warm = [f"o{i * limit}" for i in range(n, n + warmup)]
        args = [f"o{i * limit}" for i in range(n)]

    async def run() -> tuple[float, float]:
        async with factory(server.base_url) as client:
            if operation == "pool":
                call: Callable[[str], Awaitable[object]] = client.pool
            else:

                def call(cursor: str) -> Awaitable[object]:
                    return client.orders(_ORDERS_USER, limit, cursor)

            await _drive(call, warm, concurrency)
            gc.collect()
            cpu, wall = time.process_time(), time.perf_counter()
            await _drive(call, args, concurrency)
            return time.process_time() - cpu, time.perf_counter() - wall

    server.stats(reset=True)
    cpu, wall = asyncio.run(run())
    seen = server.stats()
    if seen != n + warmup:
        raise RuntimeError(f"the server saw {seen} requests, expected {n + warmup}")
    return {"cpu_us": cpu / n * 1e6, "rps": n / wall, "requests_seen": seen}


def _overhead(
    name: str, title_template: str, operation: str, concurrency: int, target: float
) -> Callable[[Config, ServerProcess], dict[str, Any]]:
    def case(cfg: Config, server: ServerProcess) -> dict[str, Any]:
        n = cfg.pool_requests if operation == "pool" else cfg.orders_requests
        title = title_template.format(n=n)
        count = dict.fromkeys(_contenders.CLIENTS, n)
        if concurrency > 1:
            count[HTTPX] = min(n, cfg.httpx_concurrent_requests)
        runs: dict[str, list[dict[str, float]]] = {c: [] for c in _contenders.CLIENTS}
        for r in range(cfg.overhead_rounds):
            for contender, factory in _contenders.CLIENTS.items():
                result = _overhead_once(
                    factory, server, operation, count[contender], concurrency, cfg.warmup
                )
                runs[contender].append(result)
                _log(
                    f"{name} round {r + 1}: {contender:<20} {result['cpu_us']:8.1f} us CPU/req"
                    f" {result['rps']:8.0f} req/s"
                )
        cpu = {c: [x["cpu_us"] for x in rs] for c, rs in runs.items()}
        contenders: dict[str, dict[str, Any]] = {
            c: {
                "cpu_us": summary(cpu[c]),
                "rps": summary([x["rps"] for x in rs]),
                "cpu_ratio_vs_raw": summary(per_round_ratios(cpu[c], cpu[RAW])),
                "requests_seen": [x["requests_seen"] for x in rs],
            }
            for c, rs in runs.items()
        }
        ours, raw, httpx = contenders[OURS], contenders[RAW], contenders[HTTPX]
        ratio = ours["cpu_ratio_vs_raw"]
        vs_httpx = summary(per_round_ratios(cpu[OURS], cpu[HTTPX]))
        details = [
            _detail(
                f"{title} (vs raw)",
                c,
                f"{spread(v['cpu_us'], 1, ' us')} CPU/req, {spread(v['rps'], 0)} req/s",
                spread(v["cpu_ratio_vs_raw"]),
            )
            for c, v in contenders.items()
        ]
        return {
            "title": title,
            "details": details,
            "requests": count,
            "concurrency": concurrency,
            "unit": "client CPU microseconds per request (time.process_time)",
            "contenders": contenders,
            "ours_vs_httpx": vs_httpx,
            "target": {"max_ratio_vs_raw": target},
            "pass": ratio["median"] <= target,
            "rows": [
                _row(
                    f"{title}: CPU/request vs raw",
                    spread(ours["cpu_us"], 1, " us"),
                    f"raw {spread(raw['cpu_us'], 1, ' us')}",
                    spread(ratio),
                    f"<= {target}x",
                    ratio["median"] <= target,
                ),
                _row(
                    f"{title}: requests/s",
                    spread(ours["rps"], 0),
                    f"raw {spread(raw['rps'], 0)}",
                    spread(
                        summary(
                            per_round_ratios(
                                [x["rps"] for x in runs[OURS]], [x["rps"] for x in runs[RAW]]
                            )
                        )
                    ),
                    "-",
                    None,
                ),
                _row(
                    f"{title}: CPU/request vs httpx+pydantic",
                    spread(ours["cpu_us"], 1, " us"),
                    f"httpx {spread(httpx['cpu_us'], 1, ' us')}",
                    spread(vs_httpx, 3),
                    "-",
                    None,
                ),
            ],
        }

    return case


def _typed(
    name: str, title: str, limit: int, concurrency: int, requests: int, target: float
) -> Callable[[Config, ServerProcess], dict[str, Any]]:
    """orders() pages end to end against aiohttp + pydantic v2 (issue 12's typed baseline)."""

    def case(cfg: Config, server: ServerProcess) -> dict[str, Any]:
        n = max(1, requests // 10) if cfg.quick else requests
        warmup = max(2, min(cfg.warmup, n // 5))
        runs: dict[str, list[dict[str, float]]] = {c: [] for c in _contenders.TYPED_CLIENTS}
        for r in range(cfg.typed_rounds):
            for contender, factory in _contenders.TYPED_CLIENTS.items():
                result = _overhead_once(
                    factory, server, "orders", n, concurrency, warmup, limit=limit
                )
                runs[contender].append(result)
                _log(f"{name} round {r + 1}: {contender:<20} {result['cpu_us']:10.1f} us CPU/req")
        cpu = {c: [x["cpu_us"] for x in rs] for c, rs in runs.items()}
        contenders = {
            c: {
                "cpu_us": summary(cpu[c]),
                "cpu_ratio_vs_aiohttp_pydantic": summary(per_round_ratios(cpu[c], cpu[TYPED])),
            }
            for c in runs
        }
        ratio = contenders[OURS]["cpu_ratio_vs_aiohttp_pydantic"]
        details = [
            _detail(
                f"{title} (vs aiohttp+pydantic)",
                c,
                f"{spread(v['cpu_us'], 1, ' us')} CPU/req",
                spread(v["cpu_ratio_vs_aiohttp_pydantic"]),
            )
            for c, v in contenders.items()
        ]
        return {
            "title": title,
            "details": details,
            "requests": n,
            "concurrency": concurrency,
            "unit": "client CPU microseconds per request (time.process_time)",
            "contenders": contenders,
            "target": {"max_ratio_vs_aiohttp_pydantic": target},
            "pass": ratio["median"] <= target,
            "rows": [
                _row(
                    f"{title}: CPU/request vs aiohttp+pydantic",
                    spread(contenders[OURS]["cpu_us"], 1, " us"),
                    f"aiohttp+pydantic {spread(contenders[TYPED]['cpu_us'], 1, ' us')}",
                    spread(ratio),
                    f"<= {target}x",
                    ratio["median"] <= target,
                )
            ],
        }

    return case


# --- decode -------------------------------------------------------------------------------


def decode_body(orders: int) -> bytes:
    """One page of ``orders`` orders, as the server sends it."""
    return _data.orders_page(_data.order_fragments(), 0, orders, 10**9)


def _decode(cfg: Config, server: ServerProcess) -> dict[str, Any]:
    body = decode_body(cfg.decode_orders)
    n = cfg.decode_orders
    for contender, decode in _contenders.DECODERS.items():
        if decode(body) != n:  # warm-up, and a check that everyone decodes every order
            raise RuntimeError(f"{contender} did not decode {n} orders")
    per_order: dict[str, list[float]] = {c: [] for c in _contenders.DECODERS}
    for _ in range(cfg.decode_rounds):
        for contender, decode in _contenders.DECODERS.items():
            best = float("inf")
            for _ in range(cfg.decode_reps):
                gc.collect()
                start = time.process_time()
                decode(body)
                best = min(best, time.process_time() - start)
            per_order[contender].append(best / n * 1e6)
    contenders = {
        c: {
            "us_per_order": summary(v),
            "ratio_vs_pydantic": summary(per_round_ratios(v, per_order[PYDANTIC])),
        }
        for c, v in per_order.items()
    }
    for c, v in contenders.items():
        _log(f"decode: {c:<24} {spread(v['us_per_order'], 3, ' us/order')}")
    ours = contenders[OURS]
    ratio = ours["ratio_vs_pydantic"]
    vs_floor = summary(per_round_ratios(per_order[OURS], per_order["orjson.loads"]))
    vs_decimals = summary(per_round_ratios(per_order[OURS], per_order[DECIMAL_FLOOR]))
    us_ok = ours["us_per_order"]["median"] <= DECODE_MAX_US
    floor_ok = vs_decimals["median"] <= DECODE_MAX_VS_DECIMALS
    vs_msgspec = summary(per_round_ratios(per_order[OURS], per_order["msgspec"]))
    us = " us/order"
    floor = {c: per_round_ratios(v, per_order["orjson.loads"]) for c, v in per_order.items()}
    details = [
        _detail(
            f"decode {n:,} orders (vs pydantic; vs orjson.loads)",
            c,
            spread(v["us_per_order"], 3, us),
            f"{spread(v['ratio_vs_pydantic'])}; {spread(summary(floor[c]))}",
        )
        for c, v in contenders.items()
    ]
    return {
        "title": f"decode {n:,} orders",
        "details": details,
        "body_bytes": len(body),
        "unit": "CPU microseconds per order (best of reps per round, gc on)",
        "contenders": contenders,
        "target": {
            "max_ratio_vs_pydantic": 1.0,
            "max_us_per_order": DECODE_MAX_US,
            "max_ratio_vs_orjson_decimals": DECODE_MAX_VS_DECIMALS,
        },
        "pass": ratio["median"] <= 1.0 and us_ok and floor_ok,
        "rows": [
            _row(
                f"decode {n:,} orders: us/order",
                spread(ours["us_per_order"], 3, us),
                "-",
                "-",
                f"<= {DECODE_MAX_US} us",
                us_ok,
            ),
            _row(
                f"decode {n:,} orders vs orjson.loads + 3 Decimal (exact-decimal floor)",
                spread(ours["us_per_order"], 3, us),
                f"floor {spread(contenders[DECIMAL_FLOOR]['us_per_order'], 3, us)}",
                spread(vs_decimals),
                f"<= {DECODE_MAX_VS_DECIMALS}x",
                floor_ok,
            ),
            _row(
                f"decode {n:,} orders vs pydantic validate_json",
                spread(ours["us_per_order"], 3, us),
                f"pydantic {spread(contenders[PYDANTIC]['us_per_order'], 3, us)}",
                spread(ratio),
                "<= 1.0x",
                ratio["median"] <= 1.0,
            ),
            _row(
                f"decode {n:,} orders vs msgspec",
                spread(ours["us_per_order"], 3, us),
                f"msgspec {spread(contenders['msgspec']['us_per_order'], 3, us)}",
                spread(vs_msgspec),
                "-",
                None,
            ),
            _row(
                f"decode {n:,} orders vs orjson.loads (floor)",
                spread(ours["us_per_order"], 3, us),
                f"orjson {spread(contenders['orjson.loads']['us_per_order'], 3, us)}",
                spread(vs_floor),
                "-",
                None,
            ),
        ],
    }


# --- streams ------------------------------------------------------------------------------


async def _consume(cfg: Config, consume: bool) -> None:
    if consume:
        await asyncio.sleep(cfg.consumer_s)


async def _leaderboard_stream(client: Client, cfg: Config, consume: bool) -> int:
    count = 0
    async for _entry in client.iter_leaderboard(page_size=100, concurrency=4):
        count += 1
        if count % 100 == 0:
            await _consume(cfg, consume)
    return count


async def _leaderboard_sequential(client: Client, cfg: Config, consume: bool) -> int:
    first = await client.leaderboard(page=1, limit=100)
    count = len(first.leaderboard)
    await _consume(cfg, consume)
    for number in range(2, first.total_pages + 1):
        page = await client.leaderboard(page=number, limit=100)
        count += len(page.leaderboard)
        await _consume(cfg, consume)
    return count


def _walk_user(cfg: Config) -> str:
    return f"bench-{cfg.stream_pages * 100}"


async def _cursor_stream(client: Client, cfg: Config, consume: bool) -> int:
    count = 0
    async for _order in client.iter_orders(_walk_user(cfg), page_size=100):
        count += 1
        if count % 100 == 0:
            await _consume(cfg, consume)
    return count


async def _cursor_sequential(client: Client, cfg: Config, consume: bool) -> int:
    page = await client.orders(_walk_user(cfg), limit=100)
    count = len(page.orders)
    await _consume(cfg, consume)
    while page.cursor:
        page = await client.orders(_walk_user(cfg), limit=100, cursor=page.cursor)
        count += len(page.orders)
        await _consume(cfg, consume)
    return count


_Walk = Callable[[Client, Config, bool], Awaitable[int]]


def _stream_once(server: ServerProcess, cfg: Config, walk: _Walk, consume: bool) -> float:
    base = f"{server.base_url}/lat{cfg.stream_latency_ms}"

    async def run() -> float:
        async with Client(base_url=base, testnet_base_url=base) as client:
            await client.pool("warm-up")  # the first connection, outside the timing
            start = time.perf_counter()
            count = await walk(client, cfg, consume)
            elapsed = time.perf_counter() - start
        if count != cfg.stream_pages * 100:
            raise RuntimeError(f"the walk yielded {count} items")
        return elapsed

    return asyncio.run(run())


_STREAMS: Final = {
    # name: (title, stream walk, sequential walk, consumer works, target or None)
    "leaderboard": (
        "leaderboard walk, 20 pages, concurrency 4, 50 ms latency",
        _leaderboard_stream,
        _leaderboard_sequential,
        False,
        0.35,
    ),
    "cursor": (
        "cursor walk, 20 pages, 50 ms latency, consumer 50 ms/page",
        _cursor_stream,
        _cursor_sequential,
        True,
        0.6,
    ),
    "leaderboard+consumer": (
        "leaderboard walk, 20 pages, concurrency 4, 50 ms latency, consumer 50 ms/page",
        _leaderboard_stream,
        _leaderboard_sequential,
        True,
        None,
    ),
}


def _streams(cfg: Config, server: ServerProcess) -> dict[str, Any]:
    results: dict[str, Any] = {}
    rows = []
    for name, (title, stream, sequential, consume, target) in _STREAMS.items():
        times: dict[str, list[float]] = {"stream": [], "sequential": []}
        for r in range(cfg.stream_rounds):
            times["stream"].append(_stream_once(server, cfg, stream, consume))
            times["sequential"].append(_stream_once(server, cfg, sequential, consume))
            _log(
                f"streams {name} round {r + 1}: stream {times['stream'][-1]:.3f} s, "
                f"sequential {times['sequential'][-1]:.3f} s"
            )
        ratio = summary(per_round_ratios(times["stream"], times["sequential"]))
        ok = None if target is None else ratio["median"] <= target
        results[name] = {
            "title": title,
            "stream_s": summary(times["stream"]),
            "sequential_s": summary(times["sequential"]),
            "ratio": ratio,
            "target": target,
            "pass": ok,
        }
        rows.append(
            _row(
                title,
                spread(summary(times["stream"]), 3, " s"),
                f"sequential {spread(summary(times['sequential']), 3, ' s')}",
                spread(ratio),
                "-" if target is None else f"<= {target}x",
                ok,
            )
        )
    return {
        "title": "streams",
        "walks": results,
        "pass": all(w["pass"] is not False for w in results.values()),
        "rows": rows,
    }


# --- memory -------------------------------------------------------------------------------


def _memory_once(server: ServerProcess, cfg: Config, contender: str) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks._memory",
        "--base-url",
        server.base_url,
        "--contender",
        contender,
        "--orders",
        str(cfg.memory_orders),
        "--page-size",
        str(cfg.memory_page_size),
    ]
    if cfg.client_cpu is not None:
        cmd += ["--cpu", str(cfg.client_cpu)]
    done = subprocess.run(cmd, cwd=_ROOT, capture_output=True, check=False, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the memory walk failed:\n{done.stderr.decode(errors='replace')}")
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    if result["orders"] != cfg.memory_orders:
        raise RuntimeError(f"the memory walk saw {result['orders']} orders")
    return result


def _memory(cfg: Config, server: ServerProcess) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {OURS: [], RAW: []}
    for r in range(cfg.memory_rounds):
        for contender, results in runs.items():
            result = _memory_once(server, cfg, contender)
            results.append(result)
            _log(
                f"memory round {r + 1}: {contender:<20} growth {result['growth_mb']:.1f} MB, "
                f"{result['wall_s']:.1f} s, {result['orders'] / result['wall_s']:,.0f} orders/s"
            )
    growth = {c: summary([x["growth_mb"] for x in rs]) for c, rs in runs.items()}
    ok = growth[OURS]["median"] <= 30.0
    title = f"cursor walk of {cfg.memory_orders:,} orders ({cfg.memory_page_size}/page)"
    return {
        "title": title,
        "unit": "peak RSS growth of the client process, MB (2**20 bytes)",
        "growth_mb": growth,
        "orders_per_s": {
            c: summary([x["orders"] / x["wall_s"] for x in rs]) for c, rs in runs.items()
        },
        "runs": runs,
        "target": {"max_growth_mb": 30.0},
        "pass": ok,
        "rows": [
            _row(
                f"{title}: peak RSS growth",
                spread(growth[OURS], 1, " MB"),
                f"raw dicts {spread(growth[RAW], 1, ' MB')}",
                "-",
                "<= 30 MB",
                ok,
            )
        ],
    }


# --- coalescing ---------------------------------------------------------------------------


def _coalesce_once(server: ServerProcess, calls: int, coalesce: bool) -> tuple[int, bool]:
    base = f"{server.base_url}/lat20"  # all calls surely in flight together

    async def run() -> bool:
        async with Client(base_url=base, testnet_base_url=base, coalesce=coalesce) as client:
            pools = await asyncio.gather(*[client.pool("pool-coalesce") for _ in range(calls)])
        return all(p is pools[0] for p in pools)

    server.stats(reset=True)
    shared = asyncio.run(run())
    return server.stats(), shared


def _coalescing(cfg: Config, server: ServerProcess) -> dict[str, Any]:
    on: list[int] = []
    off: list[int] = []
    shared: list[bool] = []
    for _ in range(cfg.coalesce_rounds):
        seen, same = _coalesce_once(server, cfg.coalesce_calls, True)
        on.append(seen)
        shared.append(same)
        off.append(_coalesce_once(server, cfg.coalesce_calls, False)[0])
    _log(f"coalescing: coalesce=True {on}, coalesce=False {off}, one shared result {shared}")
    ok = all(x == 1 for x in on) and all(shared)
    calls = cfg.coalesce_calls
    return {
        "title": f"{calls} concurrent identical pool() calls",
        "requests_seen": {"coalesce=True": on, "coalesce=False": off},
        "one_shared_result": shared,
        "target": {"requests": 1},
        "pass": ok,
        "rows": [
            _row(
                f"{calls} concurrent identical pool() calls: requests at the server",
                spread(summary(on), 0),
                f"coalesce=False {spread(summary(off), 0)}",
                spread(summary([a / b for a, b in zip(on, off, strict=True)]), 3),
                "1 request",
                ok,
            )
        ],
    }


# --- the cost of what a call can show (with_response, telemetry) -----------------------------


class _WithResponse(_contenders.Ours):
    """``client.with_response.pool(...)``: the whole Response instead of the value."""

    async def pool(self, pool_id: str) -> object:
        return await self.client.with_response.pool(pool_id)


def _telemetry_sdk() -> None:
    """The OpenTelemetry SDK as an application sets it up: spans recorded (not exported:
    the exporter's cost is the application's), metrics aggregated in memory."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def _hooks(cfg: Config, server: ServerProcess) -> dict[str, Any]:
    """CPU per pool() request of plain calls, ``with_response`` and ``telemetry=True``, in
    interleaved rounds, as ratios to plain calls (and to raw aiohttp) within each round."""
    _telemetry_sdk()
    contenders: dict[str, Callable[[str], _contenders.BenchClient]] = {
        RAW: _contenders.RawAiohttp,
        OURS: _contenders.Ours,
        "with_response": _WithResponse,
        "telemetry=True": lambda url: _contenders.Ours(url, telemetry=True),
    }
    rows: list[dict[str, str]] = []
    results: dict[str, Any] = {}
    for concurrency in (1, 64):
        cpu: dict[str, list[float]] = {c: [] for c in contenders}
        for r in range(cfg.overhead_rounds if cfg.quick else max(cfg.overhead_rounds, 7)):
            for contender, factory in contenders.items():
                result = _overhead_once(
                    factory, server, "pool", cfg.pool_requests, concurrency, cfg.warmup
                )
                cpu[contender].append(result["cpu_us"])
                us = result["cpu_us"]
                _log(f"hooks c{concurrency} round {r + 1}: {contender:<16} {us:8.1f} us")
        results[f"c{concurrency}"] = {c: summary(v) for c, v in cpu.items()}
        for contender in ("with_response", "telemetry=True"):
            vs_plain = summary(per_round_ratios(cpu[contender], cpu[OURS]))
            vs_raw = summary(per_round_ratios(cpu[contender], cpu[RAW]))
            rows.append(
                _row(
                    f"pool() x{cfg.pool_requests:,}, concurrency {concurrency}: {contender} "
                    f"CPU/request vs plain calls (vs raw: {spread(vs_raw)})",
                    spread(summary(cpu[contender]), 1, " us"),
                    f"plain {spread(summary(cpu[OURS]), 1, ' us')}",
                    spread(vs_plain),
                    "-",
                    None,
                )
            )
    return {
        "title": "what with_response and telemetry=True cost per pool() request",
        "unit": "client CPU microseconds per request (time.process_time)",
        "results": results,
        "rows": rows,
    }


CASES: Final[dict[str, Callable[[Config, ServerProcess], dict[str, Any]]]] = {
    "pool-c1": _overhead("pool-c1", "pool() x{n:,}, concurrency 1", "pool", 1, 1.10),
    "pool-c64": _overhead("pool-c64", "pool() x{n:,}, concurrency 64", "pool", 64, 1.10),
    "orders": _overhead("orders", "orders() 100-order page x{n:,}", "orders", 1, 2.5),
    "orders-c8": _typed(
        "orders-c8", "orders() 100-order pages x2,000, concurrency 8", 100, 8, 2_000, 0.85
    ),
    "orders-10k": _typed("orders-10k", "orders() 10,000-order page x40", 10_000, 1, 40, 0.8),
    "decode": _decode,
    "streams": _streams,
    "memory": _memory,
    "coalescing": _coalescing,
    "hooks": _hooks,
    "limiter": _fleet.limiter,
}
