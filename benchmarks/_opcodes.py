"""Python bytecodes per ``pool()`` request: ``python -m benchmarks._opcodes A B [--concurrency N]``.

Counts the bytecode instructions the interpreter runs per request (``sys.settrace`` with
``f_trace_opcodes``), function by function, for two kinds in one process, after a warm-up;
then the totals and the functions whose counts differ most (B - A). Slow (tracing), but it
does not move between runs as CPU time does, and on this request path it tracks CPU time
closely: the minimal typed client runs 1.07x raw aiohttp's bytecodes at c=64 and costs
1.08-1.15x its CPU, and each cut of our own bytecodes showed in the CPU A/B (see
ab-request-path.md, "Bytecodes per request"). Callgrind's instruction counts
(``benchmarks._callgrind``) understate our share; this names the Python functions.

Kinds as in ``benchmarks._ab`` (``raw``, ``typed``, ``ours``, ``ref:PATH`` ...).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import re
import sys
from types import FrameType
from typing import Any

from . import _calls
from ._callgrind import _WARMUP
from ._server import ServerProcess

__all__ = ["count", "main"]

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: What is cut from a file's path: the site-packages or standard library folder, or ours.
_PREFIX = re.compile(r"^.*?(site-packages|/lib/python3\.\d+)/|^" + re.escape(_ROOT + "/"))


def _where(frame: FrameType) -> tuple[str, str]:
    return _PREFIX.sub("", frame.f_code.co_filename), frame.f_code.co_qualname


def count(kind: str, base: str, conc: int, n: int) -> dict[tuple[str, str], float]:
    """Bytecodes per request of ``kind``, by (file, function), over ``n`` measured calls."""
    loop = asyncio.new_event_loop()
    try:
        call, close = loop.run_until_complete(_calls.setup(kind, base))
        loop.run_until_complete(_calls.drive(call, _calls.work(_WARMUP, conc, "cycle", 0), conc))
        measured = _calls.work(n, conc, "cycle", _WARMUP)
        counts: collections.Counter[tuple[str, str]] = collections.Counter()

        def trace(frame: FrameType, event: str, arg: Any) -> Any:
            frame.f_trace_opcodes = True
            if event == "opcode":
                counts[_where(frame)] += 1
            return trace

        sys.settrace(trace)
        try:
            loop.run_until_complete(_calls.drive(call, measured, conc))
        finally:
            sys.settrace(None)
        loop.run_until_complete(close())
    finally:
        loop.close()
    return {where: value / n for where, value in counts.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._opcodes", description=__doc__)
    parser.add_argument("a", help="the baseline kind")
    parser.add_argument("b", help="the kind compared with it")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--calls", type=int, default=256, help="measured calls a kind")
    parser.add_argument("--rows", type=int, default=25, help="functions listed")
    args = parser.parse_args(argv)
    with ServerProcess(None) as server:
        a = count(args.a, server.base_url, args.concurrency, args.calls)
        b = count(args.b, server.base_url, args.concurrency, args.calls)
    total_a, total_b = sum(a.values()), sum(b.values())
    print(
        f"bytecodes per pool() request at concurrency {args.concurrency}: {args.a} "
        f"{total_a:,.0f}, {args.b} {total_b:,.0f} ({total_b / total_a:.3f}x)"
    )
    diff = {k: b.get(k, 0.0) - a.get(k, 0.0) for k in a.keys() | b.keys()}
    print(f"{'B - A':>8} {'B':>7}  function")
    for (path, name), value in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[: args.rows]:
        print(f"{value:+8.1f} {b.get((path, name), 0.0):7.1f}  {path}:{name}")


if __name__ == "__main__":
    main()
