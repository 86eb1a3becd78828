"""Columnar export: peak RSS of a 1,000,000-order walk to Parquet, and throughput against
``Table.from_pylist`` of ``to_wire`` dicts, in one run.

``python -m benchmarks._export [--orders 1000000] [--throughput-orders 200000] [--rounds 5]``

Needs the ``arrow`` and ``bench`` extras. The orders come from the benchmark server
(``benchmarks/_server.py``, its own process: a synthetic cursor walk of any length that
costs it nothing), in pages of 1,000.

- **Memory**: a fresh process (``--child memory``) warms up, takes its RSS, then writes the
  whole walk with ``walk.to_parquet()``; the peak is the larger of a 1 ms RSS sampler and
  the kernel's high-water mark (as in ``_memory``). Target: growth under 100 MB.
- **Throughput, end to end** (``--child throughput``): in one process and one event loop,
  rounds of A B B A over the same walk of ``--throughput-orders`` orders: ``to_arrow()``
  against ``[to_wire(o) async for o in walk]`` then ``pyarrow.Table.from_pylist`` (what users
  do today: decimals become strings). The ratio of each round, then the median.
- **Throughput, conversion only**: the same two, from 100,000 Order models already in memory
  (no walk): our batch builder against ``to_wire`` + ``from_pylist``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import psutil  # type: ignore[import-untyped]
import pyarrow as pa

from asyncapi_client import Client, Order, to_wire
from asyncapi_client._export import CHUNK, _plan

from ._memory import _high_water_mark, _reset_high_water_mark, _Sampler
from ._server import _ROOT, ServerProcess, pin_cores

PAGE = 1_000


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --- in the child processes -----------------------------------------------------------------


async def _parquet(base_url: str, orders: int, path: str) -> int:
    async with Client(base_url=base_url) as client:
        return await client.iter_orders(f"bench-{orders}", page_size=PAGE).to_parquet(path)


def child_memory(base_url: str, orders: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        warm = asyncio.run(_parquet(base_url, 2 * PAGE, os.path.join(directory, "warm.parquet")))
        assert warm == 2 * PAGE, warm
        gc.collect()
        process = psutil.Process()
        before = process.memory_info().rss
        reset = _reset_high_water_mark()
        sampler = _Sampler()
        sampler.start()
        wall = time.perf_counter()
        path = os.path.join(directory, "orders.parquet")
        rows = asyncio.run(_parquet(base_url, orders, path))
        wall = time.perf_counter() - wall
        sampler.stop()
        hwm = _high_water_mark() if reset else 0
        size = os.path.getsize(path)
    peak = max(sampler.peak, hwm)
    return {
        "rows": rows,
        "rss_before_mb": before / 2**20,
        "peak_rss_mb": peak / 2**20,
        "growth_mb": (peak - before) / 2**20,
        "sampled_peak_mb": sampler.peak / 2**20,
        "vm_hwm_mb": hwm / 2**20 if reset else None,
        "wall_s": wall,
        "orders_per_s": rows / wall,
        "file_mb": size / 2**20,
    }


async def _ours(client: Client, address: str) -> pa.Table:
    return await client.iter_orders(address, page_size=PAGE).to_arrow()


async def _baseline(client: Client, address: str) -> pa.Table:
    rows = [to_wire(order) async for order in client.iter_orders(address, page_size=PAGE)]
    return pa.Table.from_pylist(rows)


async def _throughput(base_url: str, orders: int, rounds: int) -> dict[str, Any]:
    address = f"bench-{orders}"
    times: dict[str, list[float]] = {"ours": [], "baseline": []}
    ratios = []
    async with Client(base_url=base_url) as client:
        for contender in (_ours, _baseline):  # warm-up
            await contender(client, f"bench-{2 * PAGE}")
        for r in range(rounds):
            order = [_ours, _baseline, _baseline, _ours] if r % 2 == 0 else [
                _baseline, _ours, _ours, _baseline
            ]  # fmt: skip
            took: dict[str, float] = {"ours": 0.0, "baseline": 0.0}
            for contender in order:
                gc.collect()
                start = time.perf_counter()
                table = await contender(client, address)
                took["ours" if contender is _ours else "baseline"] += time.perf_counter() - start
                assert table.num_rows == orders, table.num_rows
                del table
            for name, seconds in took.items():
                times[name].append(2 * orders / seconds)
            ratios.append(took["baseline"] / took["ours"])
            _log(f"  round {r + 1}: ours/baseline throughput {ratios[-1]:.2f}x")
    return {"orders_per_s": times, "ratio": ratios}


def _conversion(rounds: int, count: int = 100_000) -> dict[str, Any]:
    """Our batch builder against to_wire + from_pylist, from models in memory."""
    from decimal import Decimal

    from asyncapi_client import OrderStatus, Side

    models = [
        Order(
            f"0x{i:064x}",
            f"0x{i % 97:064x}",
            "0x" + "ab" * 20,
            Side.BUY if i % 2 else Side.SELL,
            Decimal(f"{1 + i % 1000}.{i % 9973:04d}"),
            Decimal(f"{i % 777}.{i % 1_000_003:06d}"),
            Decimal(f"{i % 333}.{i % 10_007:05d}"),
            OrderStatus.FILLED,
            1_735_600_000_000 + i,
        )
        for i in range(count)
    ]
    plan = _plan(Order, 18)

    def ours() -> pa.Table:
        return pa.Table.from_batches(
            [plan.chunk(pa, models[i : i + CHUNK], i) for i in range(0, count, CHUNK)]
        )

    def baseline() -> pa.Table:
        return pa.Table.from_pylist([to_wire(m) for m in models])

    ours(), baseline()  # warm-up
    times: dict[str, list[float]] = {"ours": [], "baseline": []}
    ratios = []
    for _ in range(rounds):
        took = {}
        for name, build in (("ours", ours), ("baseline", baseline)):
            gc.collect()
            start = time.perf_counter()
            build()
            took[name] = time.perf_counter() - start
            times[name].append(count / took[name])
        ratios.append(took["baseline"] / took["ours"])
    return {"orders_per_s": times, "ratio": ratios}


# --- the parent -----------------------------------------------------------------------------


def _child(args: list[str], cpu: int | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks._export", *args]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    done = subprocess.run(cmd, cwd=_ROOT, capture_output=True, check=False, timeout=1800)
    sys.stderr.write(done.stderr.decode(errors="replace"))
    if done.returncode != 0:
        raise RuntimeError(f"{args[:2]} failed (exit {done.returncode})")
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.2f} ({min(values):,.2f}-{max(values):,.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._export")
    parser.add_argument("--child", choices=("memory", "throughput"))
    parser.add_argument("--base-url")
    parser.add_argument("--cpu", type=int, default=None)
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--throughput-orders", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=None, help="write the results as JSON here too")
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    if args.child == "memory":
        print(json.dumps(child_memory(args.base_url, args.orders)), flush=True)
        return
    if args.child == "throughput":
        result = asyncio.run(_throughput(args.base_url, args.throughput_orders, args.rounds))
        result["conversion"] = _conversion(args.rounds)
        print(json.dumps(result), flush=True)
        return

    client_cpu, server_cpu, pinning = pin_cores()
    _log(f"pinning: {pinning}")
    with ServerProcess(server_cpu) as server:
        _log(f"memory: {args.orders:,} orders to Parquet in a fresh process ...")
        memory = _child(
            ["--child", "memory", "--base-url", server.base_url, "--orders", str(args.orders)],
            client_cpu,
        )
        _log(f"throughput: {args.rounds} rounds of {args.throughput_orders:,} orders ...")
        throughput = _child(
            [
                "--child", "throughput", "--base-url", server.base_url,
                "--throughput-orders", str(args.throughput_orders), "--rounds", str(args.rounds),
            ],
            client_cpu,
        )  # fmt: skip
    conversion = throughput.pop("conversion")
    report = {"memory": memory, "throughput": throughput, "conversion": conversion}
    ok = memory["growth_mb"] < 100 and statistics.median(throughput["ratio"]) > 1
    print(
        f"to_parquet, {memory['rows']:,} orders: peak RSS growth {memory['growth_mb']:.1f} MB "
        f"(target < 100), {memory['orders_per_s']:,.0f} orders/s, file {memory['file_mb']:.1f} MB"
    )
    for name, part in (("walk to a Table", throughput), ("models to a Table", conversion)):
        ours, base = part["orders_per_s"]["ours"], part["orders_per_s"]["baseline"]
        print(
            f"{name}: ours {_spread(ours)} orders/s, to_wire+from_pylist {_spread(base)}; "
            f"ratio median (min-max) {_spread(part['ratio'])}x"
        )
    print("PASS" if ok else "FAIL")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=1)


if __name__ == "__main__":
    main()
