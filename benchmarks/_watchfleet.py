"""A fleet watching the same addresses: requests at the server, and the stream's delay.

``python -m benchmarks._watchfleet [--quick]``: P = 1, 4 and 16 worker processes
(tests/_fleet_watch_worker.py), each with its own Client and ``RedisWatchState`` consumer on one
redis-server, watch the same 50 addresses of the fake exchange (served and edited by this
process) at a one-second interval. After every watch has started, a few orders are added
each interval for a fixed number of intervals. Per P: the requests the fake received per
interval (target: what P = 1 sends, within one request per lease change), the lease changes
seen in its log, and the delay between the poller's own delivery of a change and each other
process's delivery of it (target: p99 under 50 ms). Writes
``benchmarks/results/latest-watchfleet.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import orjson

from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest
from tests._redis import RedisServer
from tests._watchfleet import WatchWorker, add_order, expiries, sync_profiles

from ._stats import format_table

__all__ = ["main", "measure"]

ADDRESSES: Final = 50
INTERVAL: Final = 1.0
#: Orders added per interval (to as many addresses, in turn).
CHANGES: Final = 5
FLEETS: Final = (1, 4, 16)
#: At most this long for the fleet to start (s): a bounded wait, not a measurement.
START_TIMEOUT: Final = 120.0


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def _started(redis_url: str, processes: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        keys = expiries(redis_url)
        consumers = sum(1 for key in keys if ":consumer:" in key)
        states = sum(1 for key in keys if key.endswith(":state"))
        if consumers >= processes * ADDRESSES and states >= ADDRESSES:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{processes} workers did not start within {START_TIMEOUT:g}s")


#: A process that only sleeps 5 ms at a time and measures how late it wakes: what the
#: machine's scheduler alone adds to any delivery during the run (the noise floor).
_LAG_PROBE: Final = """
import json, sys, time
end = time.monotonic() + float(sys.argv[1])
lags = []
while time.monotonic() < end:
    before = time.monotonic()
    time.sleep(0.005)
    lags.append((time.monotonic() - before - 0.005) * 1000)
lags.sort()
print(json.dumps({"n": len(lags), "p50": lags[len(lags) // 2], "p99": lags[int(len(lags) * 0.99)],
                  "max": lags[-1]}))
"""


def _cpu(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _lease_changes(log: list[RecordedRequest]) -> int:
    """How many times the process polling an address changed, over all addresses."""
    last: dict[str, str] = {}
    changes = 0
    for record in log:
        if record.operation != "user":
            continue
        worker = record.headers["X-Worker"]
        before = last.get(record.path)
        if before is not None and before != worker:
            changes += 1
        last[record.path] = worker
    return changes


async def _run(processes: int, intervals: int, redis: RedisServer) -> dict[str, Any]:
    exchange = FakeExchange.generate(seed=40 + processes, users=ADDRESSES, orders_per_user=30)
    sync_profiles(exchange)
    addresses = list(exchange.orders)
    redis.flush()
    async with FakeServer(exchange) as server:
        config = {
            "base_url": server.base_url,
            "redis": redis.url,
            "name": f"bench-{processes}",
            "addresses": addresses,
            "interval": INTERVAL,
        }
        workers = [WatchWorker(f"w{n}", {**config, "consumer": f"w{n}"}) for n in range(processes)]
        try:
            await _started(redis.url, processes)
            await asyncio.sleep(2 * INTERVAL)  # every watch past its first polls
            cpu = [_cpu(w.proc.pid) for w in workers]
            probe = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _LAG_PROBE,
                str(intervals * INTERVAL),
                stdout=asyncio.subprocess.PIPE,
            )
            start = time.monotonic()
            made: list[tuple[str, str]] = []
            for i in range(intervals):
                for j in range(CHANGES):
                    address = addresses[(i * CHANGES + j) % ADDRESSES]
                    tx = f"0xbench{processes}x{i}x{j}"
                    add_order(exchange, address, tx)
                    made.append((address, tx))
                await asyncio.sleep(INTERVAL)  # the run's clock: one interval per step
            stop = time.monotonic()
            cpu = [_cpu(w.proc.pid) - before for w, before in zip(workers, cpu, strict=True)]
            lag = orjson.loads((await probe.communicate())[0])
            wanted = [(address, tx, "OPEN") for address, tx in made]
            await asyncio.gather(*(w.wait_for_states(wanted) for w in workers))
        finally:
            codes = [w.stop() for w in workers]
        log = [r for r in server.requests if start <= r.time < stop]
        users = [r for r in server.requests if r.operation == "user"]
    delays: list[float] = []
    for address, tx in made:
        got = {w.worker: next(e["t"] for e in w.changes(address) if e["tx"] == tx) for w in workers}
        first = min(got.values())
        polled = [r for r in users if r.path.endswith(address) and r.time <= first]
        poller = polled[-1].headers["X-Worker"]
        delays += [(t - got[poller]) * 1000 for w, t in got.items() if w != poller]
    return {
        "processes": processes,
        "intervals": intervals,
        "requests": len(log),
        "requests_per_interval": len(log) / ((stop - start) / INTERVAL),
        "lease_changes": _lease_changes(log),
        # each worker's CPU time over the run, as a share of one core
        "worker_cpu_share": sum(cpu) / len(cpu) / (stop - start),
        "delay_ms": {
            "n": len(delays),
            "p50": _percentile(delays, 0.5),
            "p99": _percentile(delays, 0.99),
            "max": max(delays, default=float("nan")),
        },
        "scheduler_lag_ms": lag,
        "exit_codes": codes,
    }


async def measure(intervals: int, fleets: tuple[int, ...]) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as directory:
        redis = RedisServer(Path(directory))
        redis.start()
        try:
            runs = []
            for processes in fleets:
                runs.append(await _run(processes, intervals, redis))
                print(f"  P={processes}: {runs[-1]}", file=sys.stderr, flush=True)
            return runs
        finally:
            redis.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="P = 1 and 4, 4 intervals")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results" / "latest-watchfleet.json",
    )
    args = parser.parse_args()
    load = os.getloadavg()
    runs = asyncio.run(measure(4 if args.quick else 10, FLEETS[:2] if args.quick else FLEETS))
    alone = runs[0]["requests_per_interval"]
    headers = [
        "processes",
        "requests / interval",
        "vs P = 1",
        "lease changes",
        "CPU per worker (share of a core)",
        "stream delay over the poller's own (ms): p50 / p99 / max (n)",
        "a sleeping process's lag (ms): p50 / p99",
    ]
    rows = [
        [
            str(run["processes"]),
            f"{run['requests_per_interval']:.1f}",
            f"{run['requests_per_interval'] / alone:.2f}",
            str(run["lease_changes"]),
            f"{run['worker_cpu_share']:.3f}",
            "-"
            if not run["delay_ms"]["n"]
            else f"{run['delay_ms']['p50']:.1f} / {run['delay_ms']['p99']:.1f} / "
            f"{run['delay_ms']['max']:.1f} ({run['delay_ms']['n']})",
            f"{run['scheduler_lag_ms']['p50']:.1f} / {run['scheduler_lag_ms']['p99']:.1f}",
        ]
        for run in runs
    ]
    print(format_table(headers, rows))
    result = {
        "addresses": ADDRESSES,
        "interval": INTERVAL,
        "changes_per_interval": CHANGES,
        # by the number of processes, and each against one process alone
        "fleets": {str(run["processes"]): run for run in runs},
        "vs_alone": {str(run["processes"]): run["requests_per_interval"] / alone for run in runs},
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "loadavg_before": load,
            "loadavg_after": os.getloadavg(),
            "cpus": os.cpu_count(),
        },
    }
    args.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print(f"written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
