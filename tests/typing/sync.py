"""Pins SyncClient's types for mypy --strict, beside Client's in api.py. Type-checked only,
never run or collected.

The same calls as api.py, without ``await``: every result has the type the async call
awaits to, the streams are ``SyncWalk`` iterators, and typos fail the same way (each
``type: ignore`` is needed: mypy runs with warn_unused_ignores).
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import closing
from typing import Any, ParamSpec, TypeVar

import aiohttp

from asyncapi_client import (
    USE_CLIENT_DEFAULT,
    Checkpoint,
    Client,
    LeaderboardEntry,
    LeaderboardPage,
    LocalLimiter,
    Market,
    Network,
    Order,
    OrdersPage,
    OrderStatus,
    Pool,
    Rate,
    Response,
    RetryEvent,
    Side,
    SyncClient,
    SyncWalk,
    Token,
    UseClientDefault,
    UserProfile,
    Walk,
)

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def twin_of(async_method: Callable[P, Awaitable[R]]) -> Callable[[Callable[P, R]], None]:
    """``twin_of(aio.pool)(client.pool)`` type-checks only when the blocking method accepts
    every call the async one accepts (``P`` is fixed by the async one) and returns what the
    async one awaits to."""
    return lambda sync_method: None


def async_twin_of(sync_method: Callable[P, R]) -> Callable[[Callable[P, Awaitable[R]]], None]:
    """The other way round: the async method accepts every call the blocking one accepts."""
    return lambda async_method: None


def stream_twin_of(
    async_stream: Callable[P, Walk[T]],
) -> Callable[[Callable[P, SyncWalk[T]]], None]:
    """A stream: same parameters, and a SyncWalk of what the async one's Walk yields."""
    return lambda sync_stream: None


def constructor_twin_of(client: Callable[P, Client]) -> Callable[[Callable[P, SyncClient]], None]:
    """SyncClient takes the arguments Client takes."""
    return lambda sync_client: None


def async_constructor_twin_of(
    client: Callable[P, SyncClient],
) -> Callable[[Callable[P, Client]], None]:
    """Client takes the arguments SyncClient takes."""
    return lambda async_client: None


def same_signatures(aio: Client, client: SyncClient) -> None:
    constructor_twin_of(Client)(SyncClient)
    async_constructor_twin_of(SyncClient)(Client)
    stream_twin_of(aio.iter_orders)(client.iter_orders)
    stream_twin_of(aio.iter_order_pages)(client.iter_order_pages)
    stream_twin_of(aio.iter_leaderboard)(client.iter_leaderboard)
    stream_twin_of(aio.iter_leaderboard_pages)(client.iter_leaderboard_pages)
    stream_twin_of(aio.iter_orders)(client.iter_order_pages)  # type: ignore[arg-type]
    stream_twin_of(aio.iter_leaderboard)(client.iter_orders)  # type: ignore[arg-type]
    twin_of(aio.tokens)(client.tokens)
    twin_of(aio.token_markets)(client.token_markets)
    twin_of(aio.pool)(client.pool)
    twin_of(aio.user)(client.user)
    twin_of(aio.orders)(client.orders)
    twin_of(aio.leaderboard)(client.leaderboard)
    async_twin_of(client.tokens)(aio.tokens)
    async_twin_of(client.token_markets)(aio.token_markets)
    async_twin_of(client.pool)(aio.pool)
    async_twin_of(client.user)(aio.user)
    async_twin_of(client.orders)(aio.orders)
    async_twin_of(client.leaderboard)(aio.leaderboard)
    twin_of(aio.with_response.tokens)(client.with_response.tokens)
    twin_of(aio.with_response.token_markets)(client.with_response.token_markets)
    twin_of(aio.with_response.pool)(client.with_response.pool)
    twin_of(aio.with_response.user)(client.with_response.user)
    twin_of(aio.with_response.orders)(client.with_response.orders)
    twin_of(aio.with_response.leaderboard)(client.with_response.leaderboard)
    async_twin_of(client.with_response.orders)(aio.with_response.orders)
    async_twin_of(client.with_response.pool)(aio.with_response.pool)
    # A twin with another parameter name or type, a parameter less, or another result is
    # refused: the check above means something.
    twin_of(aio.pool)(client.user)  # type: ignore[arg-type]
    twin_of(aio.orders)(client.pool)  # type: ignore[arg-type]
    twin_of(aio.tokens)(client.leaderboard)  # type: ignore[arg-type]
    async_twin_of(client.orders)(aio.user)  # type: ignore[arg-type]
    twin_of(aio.pool)(client.with_response.pool)  # type: ignore[arg-type]


def operations() -> None:
    with SyncClient(
        "mainnet",
        base_url="https://api.example",
        testnet_base_url=None,
        timeout=10.0,
        max_retries=3,
        max_connections=100,
        rate_limit=None,
        deadline=None,
        max_response_bytes=32 * 1024 * 1024,
        coalesce=True,
        headers={"X-Bot": "1"},
        limiter=LocalLimiter([Rate(20, 1.0)]),
        on_retry=retry_event,
        retry_after_cap=30.0,
        telemetry=False,
        proxy="http://127.0.0.1:3128",
        ssl=ssl.create_default_context(),
        trust_env=True,
    ) as client:
        entered: SyncClient = client
        network: Network = entered.network
        closed: bool = entered.closed
        tokens: Sequence[Token] = client.tokens(search="eth", network="testnet")
        markets: Sequence[Market] = client.token_markets("0xt")
        pool: Pool = client.pool("p", deadline=2.5)
        user: UserProfile = client.user("0xu")
        page: OrdersPage = client.orders("0xu", status=OrderStatus.OPEN, side="buy", limit=10)
        board: LeaderboardPage = client.leaderboard(page=1, limit=50)
        del network, closed, tokens, markets, pool, user, page, board

        # Responses, as with_response of the async client.
        response: Response[Pool] = client.with_response.pool("p")
        value: Pool = response.value
        headers: Mapping[str, str] = response.headers
        attempts: int = response.attempts
        listed: Response[Sequence[Token]] = client.with_response.tokens()
        del value, headers, attempts, listed

        # Streams: SyncWalk iterators with a checkpoint, resume= and close().
        walk: SyncWalk[Order] = client.iter_orders("0xu", page_size=50, max_items=10)
        iterator: Iterator[Order] = walk
        for order in walk:
            checked_order: Order = order
            del checked_order
        point: Checkpoint = walk.checkpoint
        walk.close()
        with client.iter_order_pages("0xu", resume=point) as pages:
            first: OrdersPage = next(pages)
            del first
        with closing(client.iter_leaderboard(resume=point.to_json())) as entries:
            top: list[LeaderboardEntry] = list(entries)
            del top
        board_pages: SyncWalk[LeaderboardPage] = client.iter_leaderboard_pages(concurrency=2)
        del iterator, board_pages

        # Typos fail as they do on Client.
        client.orders("0xu", status="fillled")  # type: ignore[arg-type]
        client.pool("p", network="mainet")  # type: ignore[arg-type]
        client.with_response.user("0xu", network="Mainnet")  # type: ignore[arg-type]
        client.iter_orders("0xu", side="buyy")  # type: ignore[arg-type]
        client.pool("p", deadline="2")  # type: ignore[arg-type]
        SyncClient("mainet")  # type: ignore[arg-type]
        # Nothing to await: a sync result is not awaitable.
        not_a_pool: Pool = client.pool  # type: ignore[assignment]
        del not_a_pool

        client.set_testing(True, max_retries=0)
        client.pool("p", deadline=USE_CLIENT_DEFAULT)
    client.close()
    SyncClient(Network.TESTNET, timeout=aiohttp.ClientTimeout(total=5))


def forward(
    client: SyncClient, pool_id: str, deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT
) -> Pool:
    return client.pool(pool_id, deadline=deadline)


def retry_event(event: RetryEvent) -> None:
    del event


def consume(walk: SyncWalk[Any]) -> Side | None:
    for item in walk:
        if isinstance(item, Order):
            return item.side
    return None
