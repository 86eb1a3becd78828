"""Two ``pool()`` clients against each other: ``python -m benchmarks._ab A B [options]``.

The rounds of the request cases (every client open in one event loop; a round is a turn of
calls each, then again in reverse order: A B B A, then B A A B), and the median of the
per-round CPU ratios B/A with a bootstrap 95 % interval. Turns of 1,000 calls by default,
the steady state of a sustained fan-out; shorter ones (``--chunk 128``) give tighter
intervals but a burstier regime, in which our client looked 2-5 % cheaper at concurrency
64 (see README.md, "Method").

Kinds:

- ``raw``: aiohttp + ``orjson.loads`` (the floor of ``pool-c1``/``pool-c64``);
- ``raw_session``: the same calls on the session a ``Client()`` makes (what our session
  settings cost inside aiohttp);
- ``ours``: ``Client()`` with its defaults;
- ``ours_orjson``: ``Client()`` with ``orjson.loads`` as the decoder of ``pool()`` (the
  client without its models);
- ``with_response``: ``client.with_response.pool``;
- ``ref:PATH``: ``Client()`` of the package in ``PATH/asyncapi_client``, another checkout
  (``git worktree add /tmp/ref HEAD~1``), imported under another name beside this one.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Self

import orjson

from asyncapi_client import Client

from . import _contenders
from ._cases import Factory, _interleaved
from ._server import ServerProcess, pin_cores

__all__ = ["main"]


class _RawOnClientSession(_contenders.RawAiohttp):
    """Raw calls on the aiohttp session a ``Client()`` makes."""

    async def __aenter__(self) -> Self:
        self._client = Client(base_url=self._api[: -len("/api")])
        self._session = self._client._transport._open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._client.close()


class _OursOrjson(_contenders.Ours):
    """``pool()`` through the client's transport with ``orjson.loads`` as the decoder."""

    async def pool(self, pool_id: str) -> object:
        transport = self.client._transport
        path = f"/clob/pools/{pool_id}"  # the benchmark's ids need no encoding
        request = transport.request(
            "pool", self.client.network, "", path, "", orjson.loads, transport.deadline
        )
        return await transport.get(request)


def _reference(path: str) -> ModuleType:
    """The package at ``PATH/asyncapi_client`` as module ``asyncapi_client_ref``."""
    init = Path(path) / "asyncapi_client" / "__init__.py"
    if not init.is_file():
        raise SystemExit(f"no asyncapi_client package in {path}")
    spec = importlib.util.spec_from_file_location(
        "asyncapi_client_ref", init, submodule_search_locations=[str(init.parent)]
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _factory(kind: str) -> Factory:
    if kind.startswith("ref:"):
        package = _reference(kind[4:])

        class _Ref(_contenders.Ours):
            def __init__(self, base_url: str, **options: Any) -> None:
                self.client = package.Client(
                    base_url=base_url, testnet_base_url=base_url, **options
                )

        return _Ref
    kinds: dict[str, Factory] = {
        "raw": _contenders.RawAiohttp,
        "raw_session": _RawOnClientSession,
        "ours": _contenders.Ours,
        "ours_orjson": _OursOrjson,
        "with_response": _contenders.WithResponse,
    }
    if kind not in kinds:
        raise SystemExit(f"unknown kind {kind!r}: one of {', '.join(kinds)} or ref:PATH")
    return kinds[kind]


def _median_interval(ratios: list[float], draws: int = 2000) -> tuple[float, float]:
    """A bootstrap 95 % interval of the median (seeded: the same rounds, the same answer)."""
    rnd = random.Random(0)
    medians = sorted(statistics.median(rnd.choices(ratios, k=len(ratios))) for _ in range(draws))
    return medians[int(draws * 0.025)], medians[int(draws * 0.975) - 1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._ab", description=__doc__)
    parser.add_argument("a", help="the baseline kind")
    parser.add_argument("b", help="the kind compared with it")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--chunk", type=int, default=1000, help="calls a turn")
    args = parser.parse_args(argv)
    chunk = args.chunk
    factories = {f"A {args.a}": _factory(args.a), f"B {args.b}": _factory(args.b)}
    names = list(factories)
    _, server_cpu, how = pin_cores()
    with ServerProcess(server_cpu) as server:
        runs = _interleaved(
            factories,
            server,
            "pool",
            args.concurrency,
            args.rounds,
            dict.fromkeys(names, chunk),
            warmup=500,
        )
    cpu_a, cpu_b = runs[names[0]]["cpu_us"], runs[names[1]]["cpu_us"]
    ratios = [b / a for a, b in zip(cpu_a, cpu_b, strict=True)]
    low, high = _median_interval(ratios)
    print(
        f"{args.b} / {args.a}, pool() at concurrency {args.concurrency}, {args.rounds} rounds"
        f" of {chunk} calls a turn ({how}):\n"
        f"  CPU ratio median {statistics.median(ratios):.3f} (95 % interval {low:.3f}-"
        f"{high:.3f}); {statistics.median(cpu_a):.1f} vs {statistics.median(cpu_b):.1f} us"
        f" per call"
    )


if __name__ == "__main__":
    main()
