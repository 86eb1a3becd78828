"""What learning costs a fleet's limiter: ``python -m benchmarks._learned [--quick]``.

A ``RedisLimiter`` (one real ``redis-server`` on loopback) reserves ``N`` requests one after
another in three ways, interleaved round by round: ``learn=False``; learning on with nothing
to learn (answers without limit headers); learning on with an answer's limits handed over
before every reservation (what a process does under an advertised quota: ``observe`` keeps
the answer, the next ``acquire`` takes it to Redis). Reported per reservation: the script
calls Redis ran (counted by Redis, ``INFO commandstats``: the round trips), the client's CPU
and the latency, as medians over rounds with their spread, and the ratio to ``learn=False``.
The claim: learning adds no round trip (one script call a reservation either way).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import redis.asyncio as aredis

from asyncapi_client import Network, Rate
from asyncapi_client._learning import Advertised
from asyncapi_client.fleet import RedisLimiter
from tests._redis import RedisServer
from tests._rediscache import script_calls

from ._stats import format_table, per_round_ratios, spread, summary

__all__ = ["main", "run"]

MAIN: Final = Network.MAINNET
ROUNDS: Final = 7
QUICK_ROUNDS: Final = 3
#: A rate no reservation here waits for: what is measured is the question, not a wait.
RATES: Final = [Rate(1_000_000, 1.0)]
KINDS: Final = ("off", "on-nothing", "on-answers")
LABELS: Final = {
    "off": "learn=False",
    "on-nothing": "learning, no limit headers",
    "on-answers": "learning, an answer handed over each time",
}


HEADERS: Final = (
    "limiter",
    "script calls / reservation",
    "client CPU",
    "latency",
    "CPU vs learn=False",
    "latency vs learn=False",
)


async def _once(url: str, kind: str, n: int, round_: int) -> dict[str, float]:
    """``n`` reservations of one kind on a limiter of its own name; per reservation."""
    name = f"learned-{kind}-{round_}"
    async with (
        RedisLimiter(url, RATES, name=name, learn=kind != "off", margin=0) as limiter,
        aredis.Redis.from_url(url) as counter,
    ):
        await limiter.acquire("pool", MAIN)  # the scripts loaded, the connection made
        before = await script_calls(counter)
        cpu, wall = time.process_time(), time.perf_counter()
        for number in range(n):
            admission = await limiter.acquire("pool", MAIN)
            if kind == "on-answers" and admission.ticket is not None:
                said = Advertised(1_000_000 - number, 60.0, 1_000_000)
                limiter.observe(MAIN, said, admission.ticket)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        calls = await script_calls(counter) - before
    return {"calls": calls / n, "cpu_us": cpu / n * 1e6, "wall_us": wall / n * 1e6}


def run(quick: bool = False) -> dict[str, Any]:
    """Every round runs the three kinds in turn (the order rotates); the summary table."""
    n = 300 if quick else 2_000
    rounds = QUICK_ROUNDS if quick else ROUNDS
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="bench-learned-") as directory:
        server = RedisServer(Path(directory))
        server.start()
        try:
            for r in range(rounds):
                order = KINDS[r % 3 :] + KINDS[: r % 3]
                for kind in order:
                    runs[kind].append(asyncio.run(_once(server.url, kind, n, r)))
                shown = ", ".join(
                    f"{kind} {runs[kind][-1]['calls']:.2f} calls, "
                    f"{runs[kind][-1]['cpu_us']:.0f}/{runs[kind][-1]['wall_us']:.0f} us"
                    for kind in KINDS
                )
                print(f"  round {r + 1}: {shown}", file=sys.stderr, flush=True)
        finally:
            server.stop()
    rows: list[list[str]] = []
    for kind in KINDS:
        calls = summary([x["calls"] for x in runs[kind]])
        cpu = [x["cpu_us"] for x in runs[kind]]
        wall = [x["wall_us"] for x in runs[kind]]
        base_cpu = [x["cpu_us"] for x in runs["off"]]
        base_wall = [x["wall_us"] for x in runs["off"]]
        rows.append(
            [
                f"RedisLimiter, {LABELS[kind]}",
                spread(calls, 2),
                spread(summary(cpu), 0, " us"),
                spread(summary(wall), 0, " us"),
                spread(summary(per_round_ratios(cpu, base_cpu))),
                spread(summary(per_round_ratios(wall, base_wall))),
            ]
        )
    return {"rounds": rounds, "reservations": n, "runs": runs, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._learned", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 300 (smoke run)")
    args = parser.parse_args(argv)
    result = run(args.quick)
    print(
        f"RedisLimiter per reservation, {result['rounds']} rounds of "
        f"{result['reservations']:,} (median [quartiles] or (min-max)):\n"
    )
    print(format_table(HEADERS, result["rows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
