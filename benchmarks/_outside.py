"""``pool()`` measured from outside: each contender in its own process, event loop and session.

The way a user's bot runs: a fresh process imports only what its client needs (raw aiohttp
never imports ``asyncapi_client``), opens one session, warms up, then makes ``calls``
``pool()`` calls; its CPU time (``time.process_time`` around those calls) and wall-clock
rate are what it reports. A round runs one such process per contender, one after the other,
in an order rotated every round (A B C D, then B C D A, ...); the ratio of two contenders is
taken within a round, and the median of those per-round ratios is the result. Raw runs twice
a round: its ratio to itself is the noise floor of the method.

Unlike the one-loop method of ``_cases._interleaved`` (every contender open in one process,
turns of 1,000 calls), nothing is shared between contenders: not yarl's URL cache, not the
CPU's caches between turns, not the heap a larger client leaves behind. Its floor is wider;
it is the method issue 23 set its targets in.

``python -m benchmarks._ab --outside A B`` compares two kinds this way; ``--child`` is the
measured process itself (internal).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import _calls

__all__ = ["measure"]


def _child(
    kind: str, base: str, conc: int, calls: int, warmup: int, ids: _calls.Ids, cpu: int | None
) -> dict[str, Any]:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})

    async def run() -> dict[str, Any]:
        call, close = await _calls.setup(kind, base)
        try:
            await _calls.drive(call, _calls.work(warmup, conc, ids, 0, "pool"), conc)
            measured = _calls.work(calls, conc, ids, warmup, "pool")
            gc.collect()
            c0, w0 = time.process_time(), time.perf_counter()
            await _calls.drive(call, measured, conc)
            cpu_s, wall_s = time.process_time() - c0, time.perf_counter() - w0
        finally:
            await close()
        return {"cpu_us": cpu_s / calls * 1e6, "rps": calls / wall_s}

    return asyncio.run(run())


def _once(
    kind: str,
    base: str,
    conc: int,
    calls: int,
    warmup: int,
    ids: _calls.Ids,
    cpu: int | None,
) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks._outside", "--child", kind, base]
    cmd += [str(conc), str(calls), str(warmup), ids, "" if cpu is None else str(cpu)]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} c{conc} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(
    kinds: Mapping[str, str],
    base: str,
    stats: Callable[[bool], int],
    conc: int,
    rounds: int,
    calls: int = 3000,
    warmup: int = 500,
    ids: _calls.Ids = "cycle",
    cpu: int | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, dict[str, list[float]]]:
    """CPU µs per call and requests/s per contender (name -> kind) and round.

    ``stats(reset)`` returns (and optionally resets) the server's request count: every
    request sent must have reached it (nothing coalesced, cached or lost).
    """
    names = list(kinds)
    cpu_us: dict[str, list[float]] = {name: [] for name in names}
    rps: dict[str, list[float]] = {name: [] for name in names}
    stats(True)
    sent = 0
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            result = _once(kinds[name], base, conc, calls, warmup, ids, cpu)
            sent += calls + warmup
            cpu_us[name].append(result["cpu_us"])
            rps[name].append(result["rps"])
        if log is not None:
            base_name = names[0]
            parts = [
                f"{n} {cpu_us[n][-1] / cpu_us[base_name][-1]:.3f}" for n in names if n != base_name
            ]
            log(f"round {r + 1}/{rounds} c{conc}: vs {base_name}: " + ", ".join(parts))
    seen = stats(False)
    if seen != sent:
        raise RuntimeError(f"the server saw {seen} requests, expected {sent}")
    return {name: {"cpu_us": cpu_us[name], "rps": rps[name]} for name in names}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 8 or args[0] != "--child":
        sys.exit("internal: python -m benchmarks._outside --child KIND BASE CONC N WARMUP IDS CPU")
    kind, base, conc, calls, warmup, ids, cpu = args[1:]
    if ids not in ("cycle", "new"):
        sys.exit(f"ids: cycle or new, not {ids!r}")
    result = _child(kind, base, int(conc), int(calls), int(warmup), ids, int(cpu) if cpu else None)  # type: ignore[arg-type]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
