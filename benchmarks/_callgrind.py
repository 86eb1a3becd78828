"""Instructions per ``pool()`` request: ``python -m benchmarks._callgrind [KIND:CONC ...]``.

Each run is a fresh client process under ``valgrind --tool=callgrind`` making ``n``
``pool()`` calls at concurrency ``CONC`` against the benchmark server
(``benchmarks._server``, not under valgrind). Start-up, imports and warm-up cost the same
in a short and a long run, so the difference of two runs (``--n2`` and ``--n1`` requests)
divided by ``n2 - n1`` is the client's instructions per request: on a shared, busy
machine the one number that does not move between runs (wall-clock CPU time does).
Pool ids cycle the 64 ids of the headline cases, warmed up first (``--ids new``: a new id
per call, the crawler case).

Kinds: ``raw`` (one aiohttp ``ClientSession``, f-string URL, status check,
``orjson.loads``: the ``pool-c1``/``pool-c64`` floor), ``ours`` (``Client()`` with its
defaults, telemetry off), ``with_response`` (``client.with_response.pool``),
``ours_orjson`` (``Client()`` with ``orjson.loads`` as the decoder of ``pool()``: what the
client costs besides decoding, against ``raw``), ``raw_session`` (``raw`` on the aiohttp
session a ``Client()`` makes: what its configuration costs inside aiohttp), ``typed`` (the
minimal typed client on public APIs with our decoder), ``ref:PATH`` (another checkout).
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

from . import _calls
from ._server import ServerProcess

KINDS = _calls.KINDS
#: Warm-up calls: every one of the 64 cycled ids twice, the connections opened.
_WARMUP = 128


def _child(kind: str, base: str, n: int, conc: int, ids: _calls.Ids) -> None:
    """The measured process: ``n`` pool() calls at concurrency ``conc`` after a warm-up.

    The measured calls run inside ``functools.reduce`` (once): with ``--toggle``,
    callgrind counts only while it is on the stack (``--toggle-collect=functools_reduce``).
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        call, close = loop.run_until_complete(_calls.setup(kind, base))
        warm = _calls.work(_WARMUP, conc, ids, 0)
        loop.run_until_complete(_calls.drive(call, warm, conc))
        measured = _calls.work(n, conc, ids, _WARMUP)
        functools.reduce(
            lambda acc, _: loop.run_until_complete(_calls.drive(call, measured, conc)),
            range(1),
            None,
        )
        loop.run_until_complete(close())
    finally:
        loop.close()


def _instructions(
    kind: str,
    base: str,
    n: int,
    conc: int,
    keep: str | None,
    toggle: bool = False,
    ids: _calls.Ids = "cycle",
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
                ids,
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
    parser.add_argument(
        "runs", nargs="*", help="KIND:CONC, KIND one of " + ", ".join(KINDS) + ", ref:PATH"
    )
    parser.add_argument("--n1", type=int, default=100, help="requests of the short run")
    parser.add_argument("--n2", type=int, default=600, help="requests of the long run")
    parser.add_argument("--annotate", metavar="DIR", help="keep the long runs' output here")
    parser.add_argument(
        "--toggle",
        action="store_true",
        help="one run of --n2 requests, counted only around the measured calls",
    )
    parser.add_argument(
        "--ids", choices=("cycle", "new"), default="cycle", help="64 ids cycled, or new ids"
    )
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, base, n, conc, ids = args.child
        _child(kind, base, int(n), int(conc), ids)
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    runs = args.runs or ["raw:1", "ours:1", "raw:64", "ours:64"]
    if args.annotate:
        os.makedirs(args.annotate, exist_ok=True)
    per_request: dict[tuple[str, int], float] = {}
    how = f"{args.n2} counted" if args.toggle else f"runs of {args.n2} - {args.n1}"
    print(f"instructions per pool() request (callgrind, {how}, ids {args.ids})")
    with ServerProcess(None) as server:
        for run in runs:
            kind, sep, conc_text = run.rpartition(":")  # ref:PATH:CONC
            if not sep or not conc_text.isdigit():
                kind, conc_text = run, "1"
            if kind not in KINDS and not kind.startswith(("ref:", "typed-ref:")):
                parser.error(f"unknown kind {kind!r}")
            conc = int(conc_text or 1)
            keep = None
            if args.annotate:
                label = kind.replace("/", "_").replace(":", "_")
                keep = os.path.join(args.annotate, f"{label}-c{conc}.out")
            if args.toggle:
                measured = _instructions(kind, server.base_url, args.n2, conc, keep, True, args.ids)
                per_request[kind, conc] = measured / args.n2
            else:
                short = _instructions(kind, server.base_url, args.n1, conc, None, ids=args.ids)
                long = _instructions(kind, server.base_url, args.n2, conc, keep, ids=args.ids)
                per_request[kind, conc] = (long - short) / (args.n2 - args.n1)
            print(f"{kind:>14} c{conc:<3} {per_request[kind, conc]:>10,.0f}", flush=True)
    for (kind, conc), value in per_request.items():
        raw = per_request.get(("raw", conc))
        if kind != "raw" and raw:
            print(f"{kind:>14} c{conc:<3} {value / raw:.3f}x raw")


if __name__ == "__main__":
    main()
