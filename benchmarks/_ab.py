"""Two ``pool()`` clients against each other: ``python -m benchmarks._ab A B [options]``.

By default the rounds of the one-loop request cases (every client open in one event loop; a
round is a turn of calls each, then again in reverse order: A B B A, then B A A B). Turns
of 1,000 calls by default, the steady state of a sustained fan-out; shorter ones
(``--chunk 128``) give tighter intervals but a burstier regime, in which our client looked
2-5 % cheaper at concurrency 64 (see README.md, "Method").

``--outside``: the method of ``pool-outside`` instead: each client in its own process,
event loop and session, ``--calls`` calls after a warm-up, one process per client and
round (order alternating), raw-vs-raw style. The way a user's bot runs.

Either way: the median of the per-round CPU ratios B/A with a bootstrap 95 % interval and
the quartiles. Pool ids cycle 64 ids (``--ids cycle``, the bot's case, under yarl's URL
cache) unless ``--ids new`` (a new id per call: the crawler).

Before and after a rewrite of the request path, in one run::

    mkdir -p /tmp/ref-main && git archive main asyncapi_client | tar -x -C /tmp/ref-main
    python -m benchmarks._ab ref:/tmp/ref-main ours --outside --concurrency 64
    python -m benchmarks._ab ref:/tmp/ref-main ours --outside --concurrency 1

Kinds:

- ``raw``: aiohttp + ``orjson.loads`` (the floor of ``pool-c1``/``pool-c64``);
- ``raw_session``: the same calls on the session a ``Client()`` makes (what our session
  settings cost inside aiohttp);
- ``ours``: ``Client()`` with its defaults;
- ``ours_orjson``: ``Client()`` with ``orjson.loads`` as the decoder of ``pool()`` (the
  client without its models);
- ``with_response``: ``client.with_response.pool``;
- ``typed``: the minimal typed client on public APIs (``async with`` a semaphore and
  ``session.get``, our ``Pool`` decoder);
- ``ref:PATH``: ``Client()`` of the package in ``PATH/asyncapi_client``, another checkout
  (``git archive main asyncapi_client | tar -x -C /tmp/ref``), imported under another name
  beside this one; ``typed-ref:PATH``, the minimal typed client with that checkout's decoder.
"""

from __future__ import annotations

import argparse
import random
import statistics
from typing import Any, Self

import attrs
import orjson

from asyncapi_client import Client, _operations

from . import _calls, _contenders, _outside
from ._cases import Factory, _interleaved
from ._server import ServerProcess, pin_cores
from ._stats import summary

__all__ = ["main"]


class _RawOnClientSession(_contenders.RawAiohttp):
    """Raw calls on the aiohttp session a ``Client()`` makes."""

    async def __aenter__(self) -> Self:
        self._client = Client(base_url=self._api[: -len("/api")])
        self._session = self._client._sender.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._client.close()


class _OursOrjson(_contenders.Ours):
    """``pool()`` through the client's transport with ``orjson.loads`` as the decoder."""

    #: The pool endpoint with ``orjson.loads`` as its decoder.
    _ENDPOINT = attrs.evolve(_operations.POOL, decode=orjson.loads)

    async def pool(self, pool_id: str) -> object:
        client = self.client
        # the benchmark's ids need no encoding
        network = client.network
        request = self._ENDPOINT.request(
            client._base(network), network, pool_id, "", client._pipeline.deadline
        )
        return await client._calls.value(request)


def _factory(kind: str) -> Factory:
    if kind.startswith("typed-ref:"):
        typed_package = _calls.reference(kind.removeprefix("typed-ref:"))

        class _TypedRef(_contenders.MinimalTyped):
            def __init__(self, base_url: str) -> None:
                super().__init__(base_url, typed_package)

        return _TypedRef
    if kind.startswith("ref:"):
        package = _calls.reference(kind[4:])

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
        "typed": _contenders.MinimalTyped,
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
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks._ab",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("a", help="the baseline kind")
    parser.add_argument("b", help="the kind compared with it")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=None, help="40; 15 with --outside")
    parser.add_argument("--chunk", type=int, default=1000, help="calls a turn (one loop)")
    parser.add_argument("--ids", choices=("cycle", "new"), default="cycle")
    parser.add_argument(
        "--outside", action="store_true", help="each client in its own process and loop"
    )
    parser.add_argument("--calls", type=int, default=3000, help="calls a process (--outside)")
    args = parser.parse_args(argv)
    for kind in (args.a, args.b):  # a bad kind fails here, not in the first child
        _factory(kind)
    rounds = args.rounds or (15 if args.outside else 40)
    names = [f"A {args.a}", f"B {args.b}"]
    client_cpu, server_cpu, how = pin_cores()
    with ServerProcess(server_cpu) as server:
        if args.outside:
            runs = _outside.measure(
                dict(zip(names, (args.a, args.b), strict=True)),
                server.base_url,
                lambda reset: server.stats(reset=reset),
                args.concurrency,
                rounds,
                args.calls,
                ids=args.ids,
                cpu=client_cpu,
            )
            method = f"own processes, {args.calls} calls a process"
        else:
            factories = {names[0]: _factory(args.a), names[1]: _factory(args.b)}
            runs = _interleaved(
                factories,
                server,
                "pool",
                args.concurrency,
                rounds,
                dict.fromkeys(names, args.chunk),
                warmup=500,
                ids=args.ids,
            )
            method = f"one loop, {args.chunk} calls a turn"
    cpu_a, cpu_b = runs[names[0]]["cpu_us"], runs[names[1]]["cpu_us"]
    ratios = [b / a for a, b in zip(cpu_a, cpu_b, strict=True)]
    low, high = _median_interval(ratios)
    quart = summary(ratios)
    print(
        f"{args.b} / {args.a}, pool() at concurrency {args.concurrency}, ids {args.ids},"
        f" {rounds} rounds ({method}; {how}):\n"
        f"  CPU ratio median {statistics.median(ratios):.3f} (95 % interval {low:.3f}-"
        f"{high:.3f}; quartiles {quart['q1']:.3f}-{quart['q3']:.3f});"
        f" {statistics.median(cpu_a):.1f} vs {statistics.median(cpu_b):.1f} us per call"
    )


if __name__ == "__main__":
    main()
