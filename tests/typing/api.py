"""Pins the public API's types for mypy --strict. Type-checked only, never run or collected.

Every assignment names the type a user relies on; a change of a return or attribute type
makes ``mypy`` fail here.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from decimal import Decimal
from typing import Any

import aiohttp

from asyncapi_client import (
    USE_CLIENT_DEFAULT,
    ApiError,
    Checkpoint,
    Client,
    DecodeError,
    LeaderboardEntry,
    LeaderboardPage,
    LimiterError,
    LimitStatus,
    LocalLimiter,
    Market,
    MarketType,
    Network,
    NetworkName,
    Order,
    OrdersPage,
    OrderStatus,
    OrderStatusName,
    Pool,
    Rate,
    RateLimitError,
    Response,
    ResponseTooLargeError,
    RetryEvent,
    Side,
    SideName,
    StatusError,
    Token,
    UseClientDefault,
    UserProfile,
    Walk,
    __version__,
    to_json,
    to_wire,
)
from asyncapi_client.fleet import RedisLimiter


async def operations(session: aiohttp.ClientSession) -> None:
    client: Client = Client(
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
        session=session,
    )
    Client(Network.TESTNET, timeout=aiohttp.ClientTimeout(total=5))
    Client(
        limiter=LocalLimiter([Rate(20, 1.0), Rate(600, 60.0)], weights={"orders": 2}),
        on_retry=retry_event,
        retry_after_cap=30.0,
        telemetry=False,
        proxy="http://127.0.0.1:3128",
        ssl=ssl.create_default_context(),
        trust_env=True,
    )
    Client(ssl=False)
    async with client as same:
        entered: Client = same
        network: Network = entered.network
        closed: bool = entered.closed

        tokens: Sequence[Token] = await client.tokens()
        found: Sequence[Token] = await client.tokens(search="eth", network="testnet")
        markets: Sequence[Market] = await client.token_markets("0xt")
        markets = await client.token_markets("0xt", network=Network.MAINNET)
        pool: Pool = await client.pool("p")
        user: UserProfile = await client.user("0xu")
        page: OrdersPage = await client.orders(
            "0xu",
            market="m",
            status=OrderStatus.OPEN,
            side="buy",
            limit=10,
            cursor=None,
            network="mainnet",
        )
        board: LeaderboardPage = await client.leaderboard(page=1, limit=50)

        order_stream: AsyncIterator[Order] = client.iter_orders("0xu", page_size=50, max_items=10)
        page_stream: AsyncIterator[OrdersPage] = client.iter_order_pages("0xu", side=Side.SELL)
        entry_stream: AsyncIterator[LeaderboardEntry] = client.iter_leaderboard(concurrency=2)
        board_stream: AsyncIterator[LeaderboardPage] = client.iter_leaderboard_pages(page_size=5)
        async for one_order in order_stream:
            checked_order: Order = one_order
        async for one_page in page_stream:
            checked_page: OrdersPage = one_page
        async for one_entry in entry_stream:
            checked_entry: LeaderboardEntry = one_entry
        async for one_board in board_stream:
            checked_board: LeaderboardPage = one_board

        # Streams are async generators: aclosing() and aclose() type-check for users.
        async with aclosing(client.iter_orders("0xu")) as closing_orders:
            async for closing_order in closing_orders:
                checked_order = closing_order
        await client.iter_leaderboard().aclose()

        await responses(client)
        await argument_types(client)

        # Walks: a checkpoint, its JSON, and resume= with either.
        walk: Walk[Order] = client.iter_orders("0xu", page_size=50)
        point: Checkpoint = walk.checkpoint
        text: str = point.to_json()
        again: Checkpoint = Checkpoint.from_json(text)
        resumed_pages: Walk[OrdersPage] = client.iter_order_pages("0xu", resume=again)
        resumed_entries: Walk[LeaderboardEntry] = client.iter_leaderboard(resume=text)
        resumed_board: Walk[LeaderboardPage] = client.iter_leaderboard_pages(resume=None)
        consumed: int = point.consumed
        del resumed_pages, resumed_entries, resumed_board, consumed

        models(tokens[0], markets[0], pool, user, page, board)
        del network, closed, found
        del checked_order, checked_page, checked_entry, checked_board
    await client.close()
    client.set_testing(True, max_retries=0)


async def responses(client: Client) -> None:
    pool: Response[Pool] = await client.with_response.pool("p")
    value: Pool = pool.value
    status: int = pool.status
    headers: Mapping[str, str] = pool.headers
    content: bytes = pool.content
    url: str = pool.url
    network: Network = pool.network
    attempts: int = pool.attempts
    elapsed: float = pool.elapsed
    tokens: Response[Sequence[Token]] = await client.with_response.tokens(search="x")
    markets: Response[Sequence[Market]] = await client.with_response.token_markets("t")
    user: Response[UserProfile] = await client.with_response.user("0xu")
    page: Response[OrdersPage] = await client.with_response.orders("0xu", status="open")
    board: Response[LeaderboardPage] = await client.with_response.leaderboard(page=2)
    del value, status, headers, content, url, network, attempts, elapsed
    del tokens, markets, user, page, board


async def argument_types(client: Client) -> None:
    """status, side and network take an enum member or its upper/lower-case name; a typo, or
    a plain ``str``, fails the type check (each ``type: ignore`` below is needed: mypy runs
    with warn_unused_ignores, so a line that stopped failing would fail this file)."""
    Client("MAINNET")
    Client(network="testnet")
    Client(Network.MAINNET)
    await client.orders("0xu", status="OPEN", side="BUY", network="TESTNET")
    await client.orders("0xu", status="partially_filled", side="sell", network="mainnet")
    await client.orders("0xu", status="FILLED", side="SELL", network="MAINNET")
    await client.orders("0xu", status="cancelled", side="buy", network="testnet")
    await client.orders("0xu", status="expired")
    await client.orders("0xu", status=OrderStatus.PARTIALLY_FILLED, side=Side.BUY)
    await client.pool("p", network=Network.TESTNET)
    status: OrderStatusName = "open"
    side: SideName = "SELL"
    network: NetworkName = "testnet"
    Client(network)
    await client.orders("0xu", status=status, side=side, network=network)
    await client.with_response.orders("0xu", status=status, side=side, network=network)
    client.iter_orders("0xu", status=status, side=side, network=network)
    client.iter_order_pages("0xu", status=OrderStatus.OPEN, side=Side.SELL)
    client.iter_leaderboard(network=network)
    client.iter_leaderboard_pages(network=Network.MAINNET)

    # Typos: operations, with_response, streams and the constructor.
    await client.orders("0xu", status="fillled")  # type: ignore[arg-type]
    await client.orders("0xu", side="buyy")  # type: ignore[arg-type]
    await client.orders("0xu", network="mainet")  # type: ignore[arg-type]
    await client.pool("p", network="mainet")  # type: ignore[arg-type]
    await client.tokens(network="tesnet")  # type: ignore[arg-type]
    await client.token_markets("t", network="main")  # type: ignore[arg-type]
    await client.user("0xu", network="Mainnet")  # type: ignore[arg-type]
    await client.leaderboard(network="devnet")  # type: ignore[arg-type]
    await client.with_response.orders("0xu", status="fillled")  # type: ignore[arg-type]
    await client.with_response.orders("0xu", side="long")  # type: ignore[arg-type]
    await client.with_response.pool("p", network="mainet")  # type: ignore[arg-type]
    await client.with_response.tokens(network="mainet")  # type: ignore[arg-type]
    await client.with_response.token_markets("t", network="mainet")  # type: ignore[arg-type]
    await client.with_response.user("0xu", network="mainet")  # type: ignore[arg-type]
    await client.with_response.leaderboard(network="mainet")  # type: ignore[arg-type]
    client.iter_orders("0xu", status="fillled")  # type: ignore[arg-type]
    client.iter_orders("0xu", side="buyy")  # type: ignore[arg-type]
    client.iter_orders("0xu", network="mainet")  # type: ignore[arg-type]
    client.iter_order_pages("0xu", status="opened")  # type: ignore[arg-type]
    client.iter_order_pages("0xu", side="Buy_")  # type: ignore[arg-type]
    client.iter_order_pages("0xu", network="mainet")  # type: ignore[arg-type]
    client.iter_leaderboard(network="mainet")  # type: ignore[arg-type]
    client.iter_leaderboard_pages(network="mainet")  # type: ignore[arg-type]
    Client("mainet")  # type: ignore[arg-type]
    Client(network="tesnet")  # type: ignore[arg-type]
    wrong_status: OrderStatusName = "fillled"  # type: ignore[assignment]
    wrong_side: SideName = "hold"  # type: ignore[assignment]
    wrong_network: NetworkName = "mainet"  # type: ignore[assignment]
    # An enum member of the wrong kind is refused too.
    await client.orders("0xu", status=Side.BUY)  # type: ignore[arg-type]
    await client.orders("0xu", side=OrderStatus.OPEN)  # type: ignore[arg-type]
    # A str of unknown content must be parsed first (ValueError on a bad one).
    text: str = "open"
    await client.orders("0xu", status=text)  # type: ignore[arg-type]
    await client.orders("0xu", status=OrderStatus.parse_argument(text, "status"))
    del wrong_status, wrong_side, wrong_network

    # deadline: not given, the public sentinel, None or seconds; nothing else.
    await client.pool("p", deadline=USE_CLIENT_DEFAULT)
    await client.pool("p", deadline=None)
    await client.pool("p", deadline=2)
    await client.with_response.pool("p", deadline=2.5)
    client.iter_leaderboard(deadline=USE_CLIENT_DEFAULT)
    await client.pool("p", deadline="2")  # type: ignore[arg-type]
    Client(deadline=USE_CLIENT_DEFAULT)  # type: ignore[arg-type]
    await forward(client, "p")
    await forward(client, "p", None)


async def forward(
    client: Client, pool_id: str, deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT
) -> Pool:
    """A user's wrapper passes "not given" through with the public sentinel's type."""
    return await client.pool(pool_id, deadline=deadline)


def fleet_keys(limiter: RedisLimiter) -> None:
    """A fleet limiter's keys are asked for by network, and a misspelt one fails the check."""
    keys: list[str] = limiter.keys("mainnet") + limiter.keys(Network.TESTNET)
    limiter.keys("mainet")  # type: ignore[arg-type]
    del keys


async def learned_limits(url: str) -> None:
    """Limits learned from the headers: learn=, max_wait=, rates=[], status() by network."""
    local = LocalLimiter([], learn=True, max_wait=5.0)
    fleet = RedisLimiter(url, [], name="bots", learn=False, max_wait=None)
    status: LimitStatus = await local.status("mainnet")
    other: LimitStatus = await fleet.status(Network.TESTNET)
    limit: int | None = status.limit
    remaining: int | None = status.remaining
    reset: float | None = status.reset
    source: str | None = other.source
    await local.status("mainet")  # type: ignore[arg-type]
    LocalLimiter(lern=True)  # type: ignore[call-arg]
    del limit, remaining, reset, source


def retry_event(event: RetryEvent) -> None:
    operation: str = event.operation
    network: Network = event.network
    url: str = event.url
    attempt: int = event.attempt
    wait: float = event.wait
    error: ApiError = event.error
    del operation, network, url, attempt, wait, error


def models(
    token: Token,
    market: Market,
    pool: Pool,
    user: UserProfile,
    page: OrdersPage,
    board: LeaderboardPage,
) -> None:
    address: str = token.address
    decimals: int = token.decimals
    supply: Decimal = token.total_supply
    logo: str | None = token.logo_uri
    price_usd: float | None = token.price_usd

    token0: Token = market.token0
    kind: MarketType = market.type
    tvl: float = market.tvl + market.volume_24h + market.fee

    base: Token = pool.base_token
    quote: Token = pool.quote_token
    numbers: float = pool.price + pool.price_change_24h + pool.volume_24h + pool.tvl
    pool_id: str = pool.pool_id

    balances: Sequence[Mapping[str, Any]] = user.balances
    positions: Sequence[Mapping[str, Any]] = user.positions
    orders: Sequence[Order] = user.orders

    order: Order = page.orders[0]
    cursor: str | None = page.cursor
    side: Side = order.side
    status: OrderStatus = order.status
    amounts: Decimal = order.price + order.size + order.filled_size
    timestamp: int | float = order.timestamp
    ids: str = order.transaction_id + order.pool_id + order.user

    entries: Sequence[LeaderboardEntry] = board.leaderboard
    counts: int = board.page + board.limit + board.total + board.total_pages
    rank: int = entries[0].rank
    score: float = entries[0].score

    del address, decimals, supply, logo, price_usd, token0, kind, tvl, base, quote, numbers
    del pool_id, balances, positions, orders, cursor, side, status, amounts, timestamp, ids
    del counts, rank, score

    # to_wire: one model -> one dict, a sequence of models -> a list of dicts; to_json: bytes.
    one: dict[str, Any] = to_wire(pool)
    many: list[dict[str, Any]] = to_wire(page.orders)
    pages: list[dict[str, Any]] = to_wire([page, board, user, token, market])
    entries_wire: list[dict[str, Any]] = to_wire(entries)
    body: bytes = to_json(user) + to_json(entries) + to_json([order])
    hashed: int = hash(user)
    del one, many, pages, entries_wire, body, hashed


def errors(error: ApiError) -> None:
    if isinstance(error, StatusError):
        status: int = error.status
        url: str | None = error.url
        body: str = error.body
        headers: Mapping[str, str] = error.headers
        del status, url, body, headers
    if isinstance(error, RateLimitError):
        retry_after: float | None = error.retry_after
        del retry_after
    if isinstance(error, DecodeError):
        path: str | None = error.path
        del path
    if isinstance(error, ResponseTooLargeError):
        limit: int = error.limit
        del limit
    if isinstance(error, LimiterError):
        limiter: str = error.limiter
        del limiter
    attempts: int = error.attempts
    del attempts
    network: str | None = error.network
    version: str = __version__
    del network, version
