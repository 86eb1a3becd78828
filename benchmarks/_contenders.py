"""The clients and decoders measured against each other, all making the same calls.

* ``raw``: aiohttp + ``orjson.loads`` into plain dicts, URLs built with an f-string: the floor.
* ``asyncapi_client``: :class:`asyncapi_client.Client` with its defaults.
* ``minimal typed``: the least a typed client on public aiohttp APIs does: one coroutine a
  call, ``async with`` a semaphore, ``async with session.get(url)``, the body decoded by
  the decoder ``Client.pool`` uses. Against raw it is the cost of our decoding; ours against
  it is the cost of our client (merging, deadline, retries, limiter, coalescing).
* ``httpx+pydantic``: ``httpx.AsyncClient`` + pydantic v2 models that mirror ours (frozen,
  ``Decimal`` for numbers carried as text, tuples, our enums): the usual SDK stack.

And the decoders of one orders page: ours, pydantic's ``TypeAdapter.validate_json``,
msgspec (frozen ``Struct``), and ``orjson.loads`` (the floor).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from decimal import Decimal
from types import ModuleType, TracebackType
from typing import Any, Final, Protocol, Self

import aiohttp
import httpx
import msgspec
import orjson
import pydantic

import asyncapi_client
from asyncapi_client import Client, OrderStatus, Side, SyncClient
from asyncapi_client._decode import ORDERS_PAGE, camel

from ._calls import pool_decoder

__all__ = [
    "DECODERS",
    "TYPED_CLIENTS",
    "BenchClient",
    "HttpxPydantic",
    "MinimalTyped",
    "Ours",
    "RawAiohttp",
    "SyncOurs",
    "WithResponse",
]


class BenchClient(Protocol):
    """What the request-overhead driver calls; used as ``async with``."""

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def pool(self, pool_id: str) -> object: ...

    async def orders(self, address: str, limit: int, cursor: str | None) -> object: ...


# --- raw aiohttp + orjson -----------------------------------------------------------------


class RawAiohttp:
    """The floor: one ClientSession, f-string URLs, a status check, ``orjson.loads``."""

    def __init__(self, base_url: str) -> None:
        self._api = base_url + "/api"
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._session is not None
        await self._session.close()

    async def _get(self, url: str) -> Any:
        assert self._session is not None
        async with self._session.get(url) as response:
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}")
            return orjson.loads(await response.read())

    async def pool(self, pool_id: str) -> object:
        return await self._get(f"{self._api}/clob/pools/{pool_id}")

    async def orders(self, address: str, limit: int, cursor: str | None) -> object:
        url = f"{self._api}/clob/users/{address}/orders?limit={limit}"
        if cursor:
            url += f"&cursor={cursor}"
        return await self._get(url)


# --- a minimal typed client on public APIs --------------------------------------------------


class MinimalTyped(RawAiohttp):
    """The minimal typed client: public aiohttp APIs, a semaphore, our decoder.

    One coroutine a call: ``async with`` an ``asyncio.Semaphore`` (100, our default
    ``max_connections``), ``async with session.get(url)``, a status check, ``await
    response.read()``, then the decoder ``Client.pool`` uses (:func:`decoders`).
    """

    def __init__(self, base_url: str, package: ModuleType = asyncapi_client) -> None:
        super().__init__(base_url)
        self._slots = asyncio.Semaphore(100)
        self._pool = pool_decoder(package)
        self._orders = importlib.import_module(package.__name__ + "._decode").ORDERS_PAGE

    async def _typed(self, url: str, decode: Callable[[bytes], Any]) -> Any:
        assert self._session is not None
        async with self._slots, self._session.get(url) as response:
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}")
            return decode(await response.read())

    async def pool(self, pool_id: str) -> object:
        return await self._typed(f"{self._api}/clob/pools/{pool_id}", self._pool)

    async def orders(self, address: str, limit: int, cursor: str | None) -> object:
        url = f"{self._api}/clob/users/{address}/orders?limit={limit}"
        if cursor:
            url += f"&cursor={cursor}"
        return await self._typed(url, self._orders)


# --- asyncapi_client ----------------------------------------------------------------------


class Ours:
    """``asyncapi_client.Client`` with its defaults (``coalesce`` on, retries on)."""

    def __init__(self, base_url: str, **options: Any) -> None:
        self.client = Client(base_url=base_url, testnet_base_url=base_url, **options)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.client.close()

    async def pool(self, pool_id: str) -> object:
        return await self.client.pool(pool_id)

    async def orders(self, address: str, limit: int, cursor: str | None) -> object:
        return await self.client.orders(address, limit=limit, cursor=cursor)


class WithResponse(Ours):
    """``client.with_response.pool(...)``: the whole Response instead of the value."""

    async def pool(self, pool_id: str) -> object:
        return await self.client.with_response.pool(pool_id)


class SyncOurs:
    """``asyncapi_client.SyncClient`` with its defaults: each blocking call is handed to the
    client's own loop thread and waited for. Its calls are plain functions: the driver makes
    a batch of them in a thread of its own without an event loop, as a user's script does
    (a SyncClient refuses a call from a thread whose loop is running)."""

    blocking: Final = True

    def __init__(self, base_url: str, **options: Any) -> None:
        self.client = SyncClient(base_url=base_url, testnet_base_url=base_url, **options)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.client.close()

    def pool(self, pool_id: str) -> object:
        return self.client.pool(pool_id)

    def orders(self, address: str, limit: int, cursor: str | None) -> object:
        return self.client.orders(address, limit=limit, cursor=cursor)


# --- httpx + pydantic v2 ------------------------------------------------------------------

_PYDANTIC_CONFIG: Final = pydantic.ConfigDict(
    frozen=True, alias_generator=camel, populate_by_name=True
)


class PToken(pydantic.BaseModel):
    model_config = _PYDANTIC_CONFIG
    address: str
    name: str
    symbol: str
    decimals: int
    total_supply: Decimal
    logo_uri: str | None = None
    price_usd: float | None = None


class PPool(pydantic.BaseModel):
    model_config = _PYDANTIC_CONFIG
    pool_id: str
    base_token: PToken
    quote_token: PToken
    price: float
    price_change_24h: float
    volume_24h: float
    tvl: float


class POrder(pydantic.BaseModel):
    model_config = _PYDANTIC_CONFIG
    transaction_id: str
    pool_id: str
    user: str
    side: Side
    price: Decimal
    size: Decimal
    filled_size: Decimal
    status: OrderStatus
    timestamp: int | float


class POrdersPage(pydantic.BaseModel):
    model_config = _PYDANTIC_CONFIG
    orders: tuple[POrder, ...]
    cursor: str | None = None


class HttpxPydantic:
    """``httpx.AsyncClient`` (pool sized like aiohttp's: 100) + pydantic ``validate_json``."""

    def __init__(self, base_url: str) -> None:
        self._base = base_url + "/api"
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> Self:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        self._client = httpx.AsyncClient(base_url=self._base, limits=limits)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._client is not None
        await self._client.aclose()

    async def pool(self, pool_id: str) -> object:
        assert self._client is not None
        response = await self._client.get(f"/clob/pools/{pool_id}")
        response.raise_for_status()
        return PPool.model_validate_json(response.content)

    async def orders(self, address: str, limit: int, cursor: str | None) -> object:
        assert self._client is not None
        params: dict[str, str | int] = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        response = await self._client.get(f"/clob/users/{address}/orders", params=params)
        response.raise_for_status()
        return POrdersPage.model_validate_json(response.content)


class AiohttpPydantic(RawAiohttp):
    """aiohttp (the same session and URLs as raw) + pydantic v2 ``model_validate_json``: the
    typed stack without httpx, so a ratio against it is about the decoding and our client."""

    async def _validate(self, url: str, model: type[pydantic.BaseModel]) -> object:
        assert self._session is not None
        async with self._session.get(url) as response:
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}")
            return model.model_validate_json(await response.read())

    async def pool(self, pool_id: str) -> object:
        return await self._validate(f"{self._api}/clob/pools/{pool_id}", PPool)

    async def orders(self, address: str, limit: int, cursor: str | None) -> object:
        url = f"{self._api}/clob/users/{address}/orders?limit={limit}"
        if cursor:
            url += f"&cursor={cursor}"
        return await self._validate(url, POrdersPage)


#: The end-to-end cases against the typed stack: aiohttp + pydantic is the baseline.
TYPED_CLIENTS: Final[dict[str, Callable[[str], BenchClient]]] = {
    "aiohttp+pydantic": AiohttpPydantic,
    "asyncapi_client": Ours,
    "raw aiohttp+orjson": RawAiohttp,
}


# --- msgspec ------------------------------------------------------------------------------


class MOrder(msgspec.Struct, frozen=True, rename="camel"):
    transaction_id: str
    pool_id: str
    user: str
    side: Side
    price: Decimal
    size: Decimal
    filled_size: Decimal
    status: OrderStatus
    timestamp: int | float


class MOrdersPage(msgspec.Struct, frozen=True, rename="camel"):
    orders: tuple[MOrder, ...]
    cursor: str | None = None


_PYDANTIC_PAGE: Final = pydantic.TypeAdapter(POrdersPage)
_MSGSPEC_PAGE: Final = msgspec.json.Decoder(MOrdersPage)


def _count_ours(body: bytes) -> int:
    return len(ORDERS_PAGE(body).orders)


def _count_pydantic(body: bytes) -> int:
    return len(_PYDANTIC_PAGE.validate_json(body).orders)


def _count_msgspec(body: bytes) -> int:
    return len(_MSGSPEC_PAGE.decode(body).orders)


def _count_orjson(body: bytes) -> int:
    return len(orjson.loads(body)["orders"])


def _count_orjson_decimals(body: bytes) -> int:
    """The floor for exact decimals: dicts and strings, and the three Decimals of each order."""
    orders = orjson.loads(body)["orders"]
    decimals = [(Decimal(o["price"]), Decimal(o["size"]), Decimal(o["filledSize"])) for o in orders]
    return len(decimals)


#: name -> decode(bytes) -> number of orders; ratios are against "pydantic validate_json".
DECODERS: Final[dict[str, Callable[[bytes], int]]] = {
    "pydantic validate_json": _count_pydantic,
    "asyncapi_client": _count_ours,
    "msgspec": _count_msgspec,
    "orjson.loads": _count_orjson,
    "orjson.loads + 3 Decimal": _count_orjson_decimals,
}
