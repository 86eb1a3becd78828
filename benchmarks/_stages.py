"""Decode stage by stage: ``python -m benchmarks._stages [--rounds N] [--callgrind]``.

One 10,000-order page (the ``decode`` case's body), each stage of the decoder and its
references timed in interleaved rounds (CPU time, best of ``--reps`` per round, gc on), as
microseconds per order and as a ratio to ``orjson.loads + 3 Decimal`` in the same round
(the floor for exact decimals). With ``--callgrind``, each stage also runs under
``valgrind --tool=callgrind`` and reports instructions per order, and then the small bodies
the per-request cases decode (one pool, one 100-order page) as instructions per body: on a
shared, busy machine the one number that does not move between runs.

The stages of ``ORDERS_PAGE`` (the accelerated path):

* ``mirror``: msgspec parses the body into the mirror Structs (types and enums checked,
  decimals kept as text);
* ``accelerated``: the mirror, the check of the decimal texts, then the fast build (attrs-made
  builder subclasses and ``__class__`` assignment, on the CPython versions it was verified
  on) that makes the attrs models; the difference of the two is the building;
* ``accelerated, public build``: the same with ``msgspec.convert`` building the models (the
  public path beside the fast build; what ASYNCAPI_CLIENT_PUBLIC_ONLY=1 selects).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Final

import orjson

from asyncapi_client import OrdersPage, Pool, _decode

from ._cases import decode_body
from ._contenders import DECODERS, POrdersPage, PPool
from ._data import pool_body
from ._stats import per_round_ratios, spread, summary

FLOOR: Final = "orjson.loads + 3 Decimal"


def _stages(body: bytes) -> dict[str, Callable[[], object]]:
    def floor() -> object:
        data = orjson.loads(body)
        return [
            (Decimal(o["price"]), Decimal(o["size"]), Decimal(o["filledSize"]))
            for o in data["orders"]
        ]

    stages: dict[str, Callable[[], object]] = {
        "orjson.loads": lambda: orjson.loads(body),
        FLOOR: floor,
        "msgspec Struct, Decimal fields": lambda: DECODERS["msgspec"](body),
        "pydantic validate_json": lambda: DECODERS["pydantic validate_json"](body),
        "ORDERS_PAGE(body)": lambda: _decode.ORDERS_PAGE(body),
    }
    mirrors = getattr(_decode, "_MIRRORS", {})
    accelerated = _decode.ORDERS_PAGE._accelerated
    if OrdersPage not in mirrors or accelerated is None:  # an older checkout
        return stages
    mirror = mirrors[OrdersPage]
    stages["  mirror: msgspec -> Structs"] = lambda: mirror.decode(body)
    stages["  accelerated: mirror + build"] = lambda: accelerated(body)
    public = _decode._accelerated(OrdersPage, fast=False)
    if public is not None:
        stages["  accelerated, public build"] = lambda: public(body)
    stages["ORDERS_PAGE.general(body)"] = lambda: _decode.ORDERS_PAGE.general(body)
    return stages


def _small() -> dict[str, Callable[[], object]]:
    """The bodies of one request: a pool, a 100-order page (instructions per body)."""
    pool = pool_body("pool-00001")
    page = decode_body(100)
    stages: dict[str, Callable[[], object]] = {
        "POOL(pool body)": lambda: _decode.POOL(pool),
        "pydantic Pool model_validate_json": lambda: PPool.model_validate_json(pool),
        "orjson.loads(pool body)": lambda: orjson.loads(pool),
        "ORDERS_PAGE(100 orders)": lambda: _decode.ORDERS_PAGE(page),
        "pydantic page model_validate_json": lambda: POrdersPage.model_validate_json(page),
        "orjson.loads(100 orders)": lambda: orjson.loads(page),
    }
    mirrors = getattr(_decode, "_MIRRORS", {})
    if Pool in mirrors:
        mirror = mirrors[Pool]
        stages["  mirror(pool body)"] = lambda: mirror.decode(pool)
    return stages


def _time(stages: dict[str, Callable[[], object]], rounds: int, reps: int, n: int) -> None:
    per_order: dict[str, list[float]] = {name: [] for name in stages}
    for _ in range(rounds):
        for name, stage in stages.items():
            best = float("inf")
            for _ in range(reps):
                gc.collect()
                start = time.process_time()
                stage()
                best = min(best, time.process_time() - start)
            per_order[name].append(best / n * 1e6)
    print(f"\n{n:,} orders, {rounds} interleaved rounds, best of {reps} per round (CPU time)")
    print(f"{'stage':<34} {'us/order median (min-max)':<28} ratio to the floor, per round")
    for name, values in per_order.items():
        ratios = summary(per_round_ratios(values, per_order[FLOOR]))
        print(f"{name:<34} {spread(summary(values), 3):<28} {spread(ratios)}")


_CHILD = """
import functools, sys
from benchmarks._stages import _small, _stages
from benchmarks._cases import decode_body
stage = ({{**_stages(decode_body({n})), **_small()}})[{name!r}]
for _ in range(20): stage()  # warm: caches, specialisation
functools.reduce(lambda acc, _: stage(), range({runs}), None)  # measured: callgrind toggles here
"""


def _count(name: str, n: int, runs: int) -> int | None:
    """Instructions of ``runs`` calls of a stage, counted by callgrind in functools.reduce."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        code = _CHILD.format(n=n, name=name, runs=runs)
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                "--collect-atstart=no",
                "--toggle-collect=functools_reduce",
                sys.executable,
                "-c",
                code,
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=900,
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            print(f"{name:<34} failed: {done.stderr.strip().splitlines()[-1:]}")
            return None
        return int(found.group(1))


def _callgrind(names: list[str], n: int, runs: int, small: list[str], small_runs: int) -> None:
    """Instructions per order of each page stage, then per body of each small stage."""
    if shutil.which("valgrind") is None:
        print("\n(callgrind: valgrind is not installed; apt-get install valgrind)")
        return
    print(f"\ninstructions per order (callgrind, {runs} runs of {n:,} orders)")
    for name in names:
        count = _count(name, n, runs)
        if count is not None:
            print(f"{name:<34} {count / (n * runs):>10,.0f}", flush=True)
    print(f"\ninstructions per body (callgrind, {small_runs:,} runs)")
    for name in small:
        count = _count(name, n, small_runs)
        if count is not None:
            print(f"{name:<34} {count / small_runs:>10,.0f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._stages")
    parser.add_argument("--orders", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true", help="also count instructions")
    parser.add_argument("--only", action="append", help="callgrind only these stages")
    parser.add_argument("--runs", type=int, default=300, help="callgrind runs of a small body")
    args = parser.parse_args(argv)
    body = decode_body(args.orders)
    stages = _stages(body)
    for stage in stages.values():
        stage()
    small = _small()
    if not args.only:
        _time(stages, args.rounds, args.reps, args.orders)
    if args.callgrind:
        names = [n for n in stages if not args.only or n in args.only]
        small_names = [n for n in small if not args.only or n in args.only]
        _callgrind(names, args.orders, 2, small_names, args.runs)


if __name__ == "__main__":
    main()
