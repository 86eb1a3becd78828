"""Instructions per ``pool()`` request: ``python -m benchmarks._callgrind [KIND:CONC ...]``.

Each run is a fresh client process under ``valgrind --tool=callgrind`` making ``n``
``pool()`` calls (distinct pool ids) at concurrency ``CONC`` against the benchmark server
(``benchmarks._server``, not under valgrind). Start-up, imports and warm-up cost the same
in a short and a long run, so the difference of two runs (``--n2`` and ``--n1`` requests)
divided by ``n2 - n1`` is the client's instructions per request: on a shared, busy
machine the one number that does not move between runs (wall-clock CPU time does).

Kinds: ``raw`` (one aiohttp ``ClientSession``, f-string URL, status check,
``orjson.loads``: the ``pool-c1``/``pool-c64`` floor), ``ours`` (``Client()`` with its
defaults, telemetry off), ``with_response`` (``client.with_response.pool``),
``ours_orjson`` (``Client()`` with ``orjson.loads`` as the decoder of ``pool()``: what the
client costs besides decoding, against ``raw``), ``raw_session`` (``raw`` on the aiohttp
session a ``Client()`` makes: what its configuration costs inside aiohttp).
Default: ``raw:1 ours:1 raw:64 ours:64``, then the ratios ours/raw.

``--annotate DIR`` keeps the long run's callgrind output there (``callgrind_annotate
DIR/<kind>-c<conc>.out`` says where the instructions go, function by function).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

from ._server import ServerProcess

KINDS = ("raw", "ours", "with_response", "ours_orjson", "raw_session")
_WARMUP = 50


def _child(kind: str, base: str, n: int, conc: int) -> None:
    """The measured process: ``n`` pool() calls at concurrency ``conc`` after a warm-up.

    The measured calls run inside ``functools.reduce`` (once): with ``--toggle``,
    callgrind counts only while it is on the stack (``--toggle-collect=functools_reduce``).
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        call, close = loop.run_until_complete(_setup(kind, base))
        if conc > 1:  # its connections opened before the measured calls, not during them
            warm = [f"warm-c{conc}-{i}" for i in range(_WARMUP + conc)]
            loop.run_until_complete(_drive(call, warm, conc))
        args = [f"pool-{i:05d}" for i in range(n)]
        functools.reduce(
            lambda acc, _: loop.run_until_complete(_drive(call, args, conc)), range(1), None
        )
        loop.run_until_complete(close())
    finally:
        loop.close()


async def _drive(call: Callable[[str], Awaitable[object]], items: list[str], conc: int) -> None:
    args = iter(items)

    async def worker() -> None:
        for arg in args:
            await call(arg)

    await asyncio.gather(*[worker() for _ in range(conc)])


async def _setup(
    kind: str, base: str
) -> tuple[Callable[[str], Awaitable[object]], Callable[[], Awaitable[object]]]:
    """The call of ``kind`` and how to close it, warmed up."""
    import aiohttp
    import orjson

    close: Callable[[], Awaitable[object]]
    call: Callable[[str], Awaitable[object]]
    if kind in ("raw", "raw_session"):
        if kind == "raw":
            session = aiohttp.ClientSession()
        else:  # the same calls on the session a Client() makes (its headers, timeout, jar)
            from asyncapi_client import Client

            session = Client(base_url=base)._transport._open()
        api = base + "/api"

        async def raw(pool_id: str) -> Any:
            async with session.get(f"{api}/clob/pools/{pool_id}") as response:
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")
                return orjson.loads(await response.read())

        call, close = raw, session.close
    else:
        from asyncapi_client import Client, _decode

        if kind == "ours_orjson":  # the session layer alone: orjson.loads as pool's decoder
            _decode.POOL = orjson.loads  # type: ignore[assignment]
        client = Client(base_url=base, testnet_base_url=base)
        call = client.with_response.pool if kind == "with_response" else client.pool
        close = client.close
    for i in range(_WARMUP):
        await call(f"warm-{i}")
    return call, close


def _instructions(
    kind: str, base: str, n: int, conc: int, keep: str | None, toggle: bool = False
) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = keep or os.path.join(tmp, "callgrind.out")
        only = ["--collect-atstart=no", "--toggle-collect=functools_reduce"] if toggle else []
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                *only,
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
    parser.add_argument(
        "--toggle",
        action="store_true",
        help="one run of --n2 requests, counted only around the measured calls",
    )
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, base, n, conc = args.child
        _child(kind, base, int(n), int(conc))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    runs = args.runs or ["raw:1", "ours:1", "raw:64", "ours:64"]
    if args.annotate:
        os.makedirs(args.annotate, exist_ok=True)
    per_request: dict[tuple[str, int], float] = {}
    how = f"{args.n2} counted" if args.toggle else f"runs of {args.n2} - {args.n1}"
    print(f"instructions per pool() request (callgrind, {how})")
    with ServerProcess(None) as server:
        for run in runs:
            kind, _, conc_text = run.partition(":")
            if kind not in KINDS:
                parser.error(f"unknown kind {kind!r}")
            conc = int(conc_text or 1)
            keep = None
            if args.annotate:
                keep = os.path.join(args.annotate, f"{kind}-c{conc}.out")
            if args.toggle:
                measured = _instructions(kind, server.base_url, args.n2, conc, keep, True)
                per_request[kind, conc] = measured / args.n2
            else:
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
