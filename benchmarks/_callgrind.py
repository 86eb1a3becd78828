"""Instructions per ``pool()`` request: ``python -m benchmarks._callgrind [KIND:CONC ...]``.

Each run is a fresh client process under ``valgrind --tool=callgrind`` making ``n``
``pool()`` calls (distinct pool ids) at concurrency ``CONC`` against the benchmark server
(``benchmarks._server``, not under valgrind). Start-up, imports and warm-up cost the same
in a short and a long run, so the difference of two runs (``--n2`` and ``--n1`` requests)
divided by ``n2 - n1`` is the client's instructions per request: on a shared, busy
machine the one number that does not move between runs (wall-clock CPU time does).

Kinds: ``raw`` (one aiohttp ``ClientSession``, f-string URL, status check,
``orjson.loads``: the ``pool-c1``/``pool-c64`` floor), ``ours`` (``Client()`` with its
defaults, telemetry off), ``with_response`` (``client.with_response.pool``).
Default: ``raw:1 ours:1 raw:64 ours:64``, then the ratios ours/raw.

``--annotate DIR`` keeps the long run's callgrind output there (``callgrind_annotate
DIR/<kind>-c<conc>.out`` says where the instructions go, function by function).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

from ._server import ServerProcess

KINDS = ("raw", "ours", "with_response")
_WARMUP = 50


async def _client(kind: str, base: str, n: int, conc: int) -> None:
    """The measured process: ``n`` pool() calls at concurrency ``conc`` after a warm-up."""
    import aiohttp
    import orjson

    close: Callable[[], Awaitable[object]]
    call: Callable[[str], Awaitable[object]]
    if kind == "raw":
        session = aiohttp.ClientSession()
        api = base + "/api"

        async def raw(pool_id: str) -> Any:
            async with session.get(f"{api}/clob/pools/{pool_id}") as response:
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")
                return orjson.loads(await response.read())

        call, close = raw, session.close
    else:
        from asyncapi_client import Client

        client = Client(base_url=base, testnet_base_url=base)
        call = client.with_response.pool if kind == "with_response" else client.pool
        close = client.close
    for i in range(_WARMUP):
        await call(f"warm-{i}")
    args = iter([f"pool-{i:05d}" for i in range(n)])

    async def worker() -> None:
        for arg in args:
            await call(arg)

    await asyncio.gather(*[worker() for _ in range(conc)])
    await close()


def _instructions(kind: str, base: str, n: int, conc: int, keep: str | None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = keep or os.path.join(tmp, "callgrind.out")
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-m",
                "benchmarks._callgrind",
                "--child",
                kind,
                base,
                str(n),
                str(conc),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise RuntimeError(f"{kind} c{conc} failed:\n{done.stderr[-2000:]}")
        return int(found.group(1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._callgrind")
    parser.add_argument("runs", nargs="*", help="KIND:CONC, KIND one of " + ", ".join(KINDS))
    parser.add_argument("--n1", type=int, default=100, help="requests of the short run")
    parser.add_argument("--n2", type=int, default=600, help="requests of the long run")
    parser.add_argument("--annotate", metavar="DIR", help="keep the long runs' output here")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, base, n, conc = args.child
        asyncio.run(_client(kind, base, int(n), int(conc)))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    runs = args.runs or ["raw:1", "ours:1", "raw:64", "ours:64"]
    if args.annotate:
        os.makedirs(args.annotate, exist_ok=True)
    per_request: dict[tuple[str, int], float] = {}
    print(f"instructions per pool() request (callgrind, runs of {args.n2} - {args.n1})")
    with ServerProcess(None) as server:
        for run in runs:
            kind, _, conc_text = run.partition(":")
            if kind not in KINDS:
                parser.error(f"unknown kind {kind!r}")
            conc = int(conc_text or 1)
            keep = None
            if args.annotate:
                keep = os.path.join(args.annotate, f"{kind}-c{conc}.out")
            short = _instructions(kind, server.base_url, args.n1, conc, None)
            long = _instructions(kind, server.base_url, args.n2, conc, keep)
            per_request[kind, conc] = (long - short) / (args.n2 - args.n1)
            print(f"{kind:>14} c{conc:<3} {per_request[kind, conc]:>10,.0f}", flush=True)
    for (kind, conc), value in per_request.items():
        raw = per_request.get(("raw", conc))
        if kind != "raw" and raw:
            print(f"{kind:>14} c{conc:<3} {value / raw:.3f}x raw")


if __name__ == "__main__":
    main()
