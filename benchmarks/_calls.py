"""The ``pool()`` calls of the measured processes, and the pool ids they ask for.

Light on purpose: a child process of :mod:`benchmarks._outside` or
:mod:`benchmarks._callgrind` imports this module and only what its own kind needs (raw
aiohttp never imports ``asyncapi_client``, nobody imports httpx or pydantic), so each
contender runs with the footprint a user's bot would have.

Pool ids: a bot polls a bounded set of pools, so the headline cases cycle :data:`POOL_IDS`
ids, fewer than the 128 URLs yarl keeps parsed (its cache). At concurrency ``c`` each of the
``c`` tasks cycles its own share of the ids (task ``w`` takes ids ``w``, ``w + c``, ...):
no id is ever in flight twice, so nothing is coalesced and the server sees every call. The
"crawler" cases give every call a new id (``ids="new"``), as before 2026-11-26.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final, Literal

__all__ = [
    "KINDS",
    "POOL_IDS",
    "Ids",
    "drive",
    "reference",
    "setup",
    "work",
]

#: Distinct pool ids of the headline cases (under yarl's URL cache of 128).
POOL_IDS: Final = 64
Ids = Literal["cycle", "new"]

Call = Callable[[str], Awaitable[object]]
Close = Callable[[], Awaitable[object]]

KINDS: Final = ("raw", "raw_session", "ours", "ours_orjson", "with_response", "typed")


def _cycled(prefix: str) -> list[str]:
    return [f"{prefix}-{i:07d}" for i in range(POOL_IDS)]


def work(n: int, conc: int, ids: Ids, first: int = 0, prefix: str = "pool") -> list[list[str]]:
    """The ids of ``n`` calls for ``conc`` tasks: one list per task (``ids="cycle"``), or a
    single list the tasks pull from in turn (``ids="new"``: ``first`` .. ``first + n - 1``).
    """
    if ids == "new":
        return [[f"{prefix}-{i:07d}" for i in range(first, first + n)]]
    if conc > POOL_IDS:
        raise ValueError(f"at most {POOL_IDS} tasks can cycle {POOL_IDS} ids without overlap")
    pool = _cycled(prefix)
    lists = []
    for w in range(conc):
        share = pool[w::conc]
        count = n // conc + (1 if w < n % conc else 0)
        lists.append(list(itertools.islice(itertools.cycle(share), count)))
    return lists


def _blocking(call: Any, lists: Sequence[Sequence[str]]) -> None:
    for args in lists:
        for arg in args:
            call(arg)


async def drive(call: Call, lists: Sequence[Sequence[str]], conc: int) -> None:
    """Make the calls of :func:`work` with ``conc`` tasks, the same way for every contender.
    A blocking contender's calls (``blocking`` on its client) are made one after another in
    a thread without an event loop, one hand-over a batch."""
    if getattr(getattr(call, "__self__", None), "blocking", False):
        await asyncio.to_thread(_blocking, call, lists)
        return
    if conc == 1:
        for args in lists:
            for arg in args:
                await call(arg)
        return
    if len(lists) == 1:  # one shared list: each task takes the next id
        shared = iter(lists[0])

        async def puller() -> None:
            for arg in shared:
                await call(arg)

        await asyncio.gather(*[puller() for _ in range(conc)])
        return

    async def own(args: Sequence[str]) -> None:
        for arg in args:
            await call(arg)

    await asyncio.gather(*[own(args) for args in lists])


def reference(path: str) -> ModuleType:
    """The package at ``PATH/asyncapi_client`` as module ``asyncapi_client_ref``: another
    checkout (``git archive main asyncapi_client | tar -x -C /tmp/ref``) beside this one."""
    if "asyncapi_client_ref" in sys.modules:
        return sys.modules["asyncapi_client_ref"]
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


def pool_decoder(package: ModuleType) -> Callable[[bytes], Any]:
    """The decoder ``package``'s ``Client.pool`` uses, bytes -> ``Pool``.

    The package exports no decode function, so this is the private ``_decode.POOL`` (the
    object ``Client.pool`` hands its transport). A rewrite that moves it gets a clear error
    here rather than a minimal client that silently decodes another way.
    """
    module = importlib.import_module(package.__name__ + "._decode")
    decoder = getattr(module, "POOL", None)
    if decoder is None:
        raise SystemExit(
            f"{package.__name__}._decode has no POOL: point benchmarks._calls.pool_decoder at"
            " the decoder Client.pool uses"
        )
    return decoder  # type: ignore[no-any-return]


async def setup(kind: str, base: str) -> tuple[Call, Close]:
    """The ``pool()`` call of ``kind`` on a new session, and how to close it.

    Kinds: ``raw`` (aiohttp + ``orjson.loads``, f-string URL, status check: the floor);
    ``raw_session`` (the same on the session a ``Client()`` makes); ``typed`` (the minimal
    typed client: ``async with`` a semaphore and ``session.get``, our ``Pool`` decoder);
    ``ours`` (``Client()`` with its defaults); ``ours_orjson`` (``Client()`` with
    ``orjson.loads`` as the decoder of ``pool()``); ``with_response``; ``ref:PATH``
    (``Client()`` of another checkout, :func:`reference`); ``typed-ref:PATH`` (the minimal
    typed client with that checkout's decoder).
    """
    import aiohttp
    import orjson

    api = base + "/api"
    if kind in ("raw", "raw_session"):
        if kind == "raw":
            session = aiohttp.ClientSession()
        else:
            from asyncapi_client import Client

            session = Client(base_url=base)._sender.open()

        async def raw(pool_id: str) -> Any:
            async with session.get(f"{api}/clob/pools/{pool_id}") as response:
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")
                return orjson.loads(await response.read())

        return raw, session.close
    if kind == "typed" or kind.startswith("typed-ref:"):
        if kind == "typed":
            import asyncapi_client

            decode = pool_decoder(asyncapi_client)
        else:
            decode = pool_decoder(reference(kind.removeprefix("typed-ref:")))
        slots = asyncio.Semaphore(100)  # Client()'s default max_connections
        typed_session = aiohttp.ClientSession()

        async def typed(pool_id: str) -> Any:
            async with slots, typed_session.get(f"{api}/clob/pools/{pool_id}") as response:
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")
                return decode(await response.read())

        return typed, typed_session.close
    if kind.startswith("ref:"):
        client = reference(kind[4:]).Client(base_url=base, testnet_base_url=base)
        return client.pool, client.close
    if kind not in KINDS:
        raise SystemExit(f"unknown kind {kind!r}: one of {', '.join(KINDS)}, ref:PATH")
    from asyncapi_client import Client, _client

    if kind == "ours_orjson":  # the session layer alone: orjson.loads as pool's decoder
        # Client.pool reads its endpoint (and so its decoder) from the endpoint table as
        # _client imported it: that name is the one to replace.
        import attrs

        table = vars(_client)  # the module's globals, where Client.pool looks its endpoint up
        endpoint = table["POOL"]
        table["POOL"] = attrs.evolve(endpoint, decode=orjson.loads)
        plain = Client(base_url=base, testnet_base_url=base)

        async def close_plain() -> None:
            table["POOL"] = endpoint  # the process may go on (a test): Client.pool as it was
            await plain.close()

        return plain.pool, close_plain
    ours = Client(base_url=base, testnet_base_url=base)
    return (ours.with_response.pool if kind == "with_response" else ours.pool), ours.close
