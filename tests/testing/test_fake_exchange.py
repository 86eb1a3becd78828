"""The fake exchange: its generated data, and the server the real Client talks to over loopback."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from decimal import Decimal
from typing import Any, TypedDict

import aiohttp
import pytest

from asyncapi_client import (
    BadRequestError,
    Client,
    Network,
    NotFoundError,
    OrderStatusName,
    SideName,
    TransportError,
)
from asyncapi_client._decode import to_wire
from asyncapi_client.testing import FakeExchange, FakeServer, WireDict

STATUSES: tuple[OrderStatusName, ...] = (
    "OPEN",
    "FILLED",
    "PARTIALLY_FILLED",
    "CANCELLED",
    "EXPIRED",
)
HEX_ADDRESS = re.compile(r"0x[0-9a-f]{40}").fullmatch
DECIMAL_TEXT = re.compile(r"[0-9]+(\.[0-9]+)?").fullmatch


class OrderFilters(TypedDict, total=False):
    market: str
    status: OrderStatusName
    side: SideName


def client_for(server: FakeServer, **options: Any) -> Client:
    return Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url, **options)


def fraction_digits(text: str) -> int:
    return len(text.partition(".")[2])


@pytest.fixture(scope="module")
def exchange() -> FakeExchange:
    return FakeExchange.generate(seed=7)


@pytest.fixture(scope="module")
def small() -> FakeExchange:
    return FakeExchange.generate(seed=3, users=2, orders_per_user=200, pools=4, tokens=12)


@pytest.fixture
async def server(exchange: FakeExchange) -> AsyncIterator[FakeServer]:
    async with FakeServer(exchange, seed=7) as running:
        yield running


@pytest.fixture
async def client(server: FakeServer) -> AsyncIterator[Client]:
    async with client_for(server, max_retries=0) as running:
        yield running


@pytest.fixture
async def raw(server: FakeServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=server.base_url) as session:
        yield session


async def get_json(session: aiohttp.ClientSession, path: str) -> tuple[int, Any]:
    async with session.get(path) as response:
        return response.status, await response.json()


# --- the generated data ---------------------------------------------------------------


def test_the_same_seed_gives_the_same_data() -> None:
    sizes = {"tokens": 9, "users": 3, "orders_per_user": 40, "leaderboard_size": 33, "pools": 3}
    assert FakeExchange.generate(seed=7) == FakeExchange.generate(seed=7)
    assert FakeExchange.generate(seed=5, **sizes) == FakeExchange.generate(seed=5, **sizes)


def test_each_exchange_of_a_seed_is_its_own_to_edit() -> None:
    """Generating a seed again (the data set is kept, pickled) gives containers of its own:
    an edit of one exchange, deep or shallow, shows in no other, made before or after it."""
    before = FakeExchange.generate(seed=11)
    edited = FakeExchange.generate(seed=11)
    user = next(iter(edited.orders))
    edited.orders[user][0]["status"] = "EDITED"
    edited.orders[user].append({"transactionId": "0xadded"})
    edited.tokens[0]["symbol"] = "EDITED"
    edited.pools[next(iter(edited.pools))]["price"] = -1.0
    edited.leaderboard.clear()
    after = FakeExchange.generate(seed=11)
    assert before == after != edited
    assert after.orders[user][0]["status"] != "EDITED"
    assert after.tokens[0]["symbol"] != "EDITED"
    assert after.leaderboard


def test_what_the_data_set_shares_stays_shared_in_each_exchange() -> None:
    """A profile lists the very order dicts of its user's orders, and a market the very
    token dicts of the directory: an edit through one shows through the other."""
    for _ in range(2):  # generated, then from the kept data set
        exchange = FakeExchange.generate(seed=12)
        user, profile = next(iter(exchange.users.items()))
        working = profile["orders"][0]
        assert any(order is working for order in exchange.orders[user])
        market = next(iter(exchange.markets.values()))[0]
        assert any(token is market["token0"] for token in exchange.tokens)


def test_a_different_seed_gives_different_data() -> None:
    one, two = FakeExchange.generate(seed=1), FakeExchange.generate(seed=2)
    assert one != two
    assert {t["address"] for t in one.tokens}.isdisjoint(t["address"] for t in two.tokens)
    assert set(one.users).isdisjoint(two.users)
    assert set(one.pools).isdisjoint(two.pools)
    assert [e["score"] for e in one.leaderboard] != [e["score"] for e in two.leaderboard]


def test_sizes_are_parameters() -> None:
    exchange = FakeExchange.generate(
        seed=4, tokens=6, users=3, orders_per_user=25, leaderboard_size=17, pools=2
    )
    assert len(exchange.tokens) == 6
    assert len(exchange.pools) == 2
    assert len(exchange.users) == len(exchange.orders) == 3
    assert all(len(orders) == 25 for orders in exchange.orders.values())
    assert [e["rank"] for e in exchange.leaderboard] == list(range(1, 18))
    big = FakeExchange.generate(seed=4, tokens=70)  # more than the catalogue of real symbols
    assert len({t["symbol"] for t in big.tokens}) == 70


@pytest.mark.parametrize(
    "sizes",
    [
        {"tokens": 1},
        {"pools": 0},
        {"users": -1},
        {"orders_per_user": 2.5},
        {"leaderboard_size": True},
        {"seed": "7"},
    ],
)
def test_bad_sizes_are_refused(sizes: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(sizes))):
        FakeExchange.generate(**sizes)


def test_defaults_generate_quickly() -> None:
    started = time.perf_counter()
    FakeExchange.generate(seed=99)
    # The target is < 0.2 s; the bound is loose because the machine is shared and noisy.
    assert time.perf_counter() - started < 2.0


def test_tokens_look_real(exchange: FakeExchange) -> None:
    tokens = exchange.tokens
    assert len(tokens) == 40
    symbols = [t["symbol"] for t in tokens]
    assert len(set(symbols)) == len(symbols)
    assert {"USDC", "WETH"} <= set(symbols)
    assert all(HEX_ADDRESS(t["address"]) for t in tokens)
    assert len({t["address"] for t in tokens}) == len(tokens)
    assert len({t["decimals"] for t in tokens}) >= 3
    for token in tokens:
        supply = token["totalSupply"]
        assert DECIMAL_TEXT(supply), supply
        assert fraction_digits(supply) == token["decimals"]
        assert Decimal(supply) > 0
    assert max(len(t["totalSupply"]) for t in tokens) >= 25  # 18 decimals and more
    assert any(t["logoUri"] is None for t in tokens)
    assert any(isinstance(t["logoUri"], str) for t in tokens)
    assert any(t["priceUsd"] is None for t in tokens)
    assert any(isinstance(t["priceUsd"], float) for t in tokens)


def test_markets_cover_every_token_with_several_types(exchange: FakeExchange) -> None:
    addresses = {t["address"] for t in exchange.tokens}
    assert set(exchange.markets) == addresses
    types: Counter[str] = Counter()
    for address, markets in exchange.markets.items():
        assert markets, f"token {address} has no market"
        for market in markets:
            assert address in (market["token0"]["address"], market["token1"]["address"])
            assert market["token0"]["address"] != market["token1"]["address"]
            assert all(isinstance(market[k], float) for k in ("tvl", "volume24h", "fee"))
            types[market["type"]] += 1
    assert types["amm"] > 0
    assert set(types) - {"amm"}, "at least one market type other than amm"
    clob = {m["address"] for ms in exchange.markets.values() for m in ms if m["type"] == "clob"}
    assert clob == set(exchange.pools)


def test_pools_are_consistent(exchange: FakeExchange) -> None:
    addresses = {t["address"] for t in exchange.tokens}
    for pool_id, pool in exchange.pools.items():
        assert pool["poolId"] == pool_id
        assert pool["baseToken"]["address"] in addresses
        assert pool["quoteToken"]["address"] in addresses
        assert pool["baseToken"] != pool["quoteToken"]
        assert pool["price"] > 0


def test_orders_are_varied_and_consistent(exchange: FakeExchange) -> None:
    assert len(exchange.orders) == 8
    price_precisions: set[int] = set()
    size_precisions: set[int] = set()
    transaction_ids: set[str] = set()
    for address, orders in exchange.orders.items():
        assert len(orders) == 300
        assert {o["status"] for o in orders} == set(STATUSES)
        for status in STATUSES:
            assert {o["side"] for o in orders if o["status"] == status} == {"BUY", "SELL"}
        timestamps = [o["timestamp"] for o in orders]
        assert timestamps == sorted(timestamps, reverse=True)
        for order in orders:
            assert order["user"] == address
            assert order["poolId"] in exchange.pools
            for key in ("price", "size", "filledSize"):
                assert DECIMAL_TEXT(order[key]), order
            price, size, filled = (Decimal(order[k]) for k in ("price", "size", "filledSize"))
            assert price > 0
            assert size > 0
            status = order["status"]
            if status == "OPEN":
                assert filled == 0
            elif status == "FILLED":
                assert filled == size
            elif status == "PARTIALLY_FILLED":
                assert 0 < filled < size
            else:
                assert 0 <= filled < size
            price_precisions.add(fraction_digits(order["price"]))
            size_precisions.add(fraction_digits(order["size"]))
            transaction_ids.add(order["transactionId"])
    assert len(price_precisions) >= 5, price_precisions
    assert len(size_precisions) >= 4, size_precisions
    assert 0 in price_precisions | size_precisions  # some amounts are whole numbers
    assert len(transaction_ids) == 8 * 300


def test_profiles_hold_every_working_order(exchange: FakeExchange) -> None:
    assert set(exchange.users) == set(exchange.orders)
    for address, profile in exchange.users.items():
        assert profile["address"] == address
        assert set(profile) == {"address", "balances", "orders", "positions"}
        working = [
            o for o in exchange.orders[address] if o["status"] in ("OPEN", "PARTIALLY_FILLED")
        ]
        assert profile["orders"] == working
        assert len(working) > 5
        assert profile["balances"]
        assert all(isinstance(b, dict) for b in profile["balances"] + profile["positions"])


def test_leaderboard_is_ranked(exchange: FakeExchange) -> None:
    board = exchange.leaderboard
    assert [e["rank"] for e in board] == list(range(1, 251))
    scores = [e["score"] for e in board]
    assert scores == sorted(scores, reverse=True)
    assert scores[-1] > 0
    assert set(exchange.users) <= {e["address"] for e in board}


# --- serving: every operation, both networks -------------------------------------------


async def test_every_operation_serves_the_exchange_data(
    exchange: FakeExchange, client: Client
) -> None:
    address = next(iter(exchange.users))
    tokens, pools, profile, page, board, markets = await asyncio.gather(
        client.tokens(),
        asyncio.gather(*(client.pool(pool_id) for pool_id in exchange.pools)),
        client.user(address),
        client.orders(address),
        client.leaderboard(),
        asyncio.gather(*(client.token_markets(t["address"]) for t in exchange.tokens)),
    )
    assert to_wire(list(tokens)) == exchange.tokens
    assert [to_wire(p) for p in pools] == list(exchange.pools.values())
    assert to_wire(profile) == exchange.users[address]
    assert [to_wire(o) for o in page.orders] == exchange.orders[address][:50]
    assert page.cursor is not None
    assert [to_wire(e) for e in board.leaderboard] == exchange.leaderboard[:50]
    assert (board.page, board.limit, board.total, board.total_pages) == (1, 50, 250, 5)
    for token, listed in zip(exchange.tokens, markets, strict=True):
        assert to_wire(list(listed)) == exchange.markets[token["address"]]


async def test_both_networks_serve_every_operation(
    exchange: FakeExchange, server: FakeServer, client: Client
) -> None:
    assert server.base_url != server.testnet_base_url
    address = next(iter(exchange.users))
    pool_id = next(iter(exchange.pools))
    token = exchange.tokens[3]["address"]
    for network in Network:
        before = len(server.requests)
        assert len(await client.tokens(network=network)) == 40
        assert await client.token_markets(token, network=network)
        assert (await client.pool(pool_id, network=network)).pool_id == pool_id
        assert (await client.user(address, network=network)).address == address
        assert (await client.orders(address, network=network)).orders
        assert (await client.leaderboard(network=network)).total == 250
        seen = server.requests[before:]
        assert [r.network for r in seen] == [network] * 6
        assert [r.operation for r in seen] == [
            "tokens",
            "token_markets",
            "pool",
            "user",
            "orders",
            "leaderboard",
        ]
    await client.token_markets(token)
    assert server.requests[-1].network is Network.TESTNET  # where the spec addresses it


async def test_search_is_a_case_insensitive_substring_match(
    exchange: FakeExchange, client: Client
) -> None:
    def expected(q: str) -> list[WireDict]:
        q = q.lower()
        return [
            t
            for t in exchange.tokens
            if q in t["symbol"].lower() or q in t["name"].lower() or q in t["address"].lower()
        ]

    for query in ("eth", "ETH", "Usd", "coin", "x"):
        found = to_wire(list(await client.tokens(search=query)))
        assert found == expected(query), query
        assert found, query
    assert len(await client.tokens(search="eth")) < len(exchange.tokens)
    address = exchange.tokens[5]["address"]
    found = await client.tokens(search=address[10:24].upper())
    assert address in [t.address for t in found]
    assert await client.tokens(search="no such token anywhere") == ()
    assert len(await client.tokens(search="")) == len(exchange.tokens)


async def test_token_markets_by_address_in_any_case_or_by_symbol(
    exchange: FakeExchange, client: Client
) -> None:
    token = exchange.tokens[1]
    by_address = await client.token_markets(token["address"])
    assert to_wire(list(by_address)) == exchange.markets[token["address"]]
    assert await client.token_markets(token["address"].upper().replace("0X", "0x")) == by_address
    assert await client.token_markets(token["symbol"].lower()) == by_address


async def test_unknown_ids_are_404(exchange: FakeExchange, client: Client) -> None:
    unknown = "0x" + "ab" * 20
    calls: list[Callable[[str], Awaitable[object]]] = [
        client.token_markets,
        client.pool,
        client.user,
        client.orders,
    ]
    for call in calls:
        with pytest.raises(NotFoundError) as caught:
            await call(unknown)
        assert caught.value.status == 404
        assert '"error"' in caught.value.body
        assert unknown in caught.value.body


async def test_path_parameters_are_one_decoded_segment(exchange: FakeExchange) -> None:
    tweaked = FakeExchange.generate(seed=7, users=1, orders_per_user=10, tokens=4, pools=1)
    odd_id = "a/b?c=d#e %25 .."
    pool = dict(next(iter(tweaked.pools.values())), poolId=odd_id)
    tweaked.pools[odd_id] = pool
    async with FakeServer(tweaked) as server, client_for(server, max_retries=0) as client:
        assert to_wire(await client.pool(odd_id)) == pool
        record = server.requests[-1]
        assert record.operation == "pool"
        assert record.status == 200
        assert "%2F" in record.raw_path
        assert "?" not in record.raw_path
        with pytest.raises(NotFoundError):
            await client.pool("a")  # the first segment alone is not the pool
        with pytest.raises(NotFoundError):
            await client.user("../clob/pools/" + odd_id)


async def test_the_server_reads_the_exchange_live(client: Client, exchange: FakeExchange) -> None:
    pool_id = next(iter(exchange.pools))
    original = exchange.pools[pool_id]["price"]
    exchange.pools[pool_id]["price"] = 123.5
    try:
        assert (await client.pool(pool_id)).price == 123.5
    finally:
        exchange.pools[pool_id]["price"] = original


# --- argument checks on the server side -----------------------------------------------


async def test_limit_above_the_maximum_is_a_bad_request(
    exchange: FakeExchange, client: Client
) -> None:
    address = next(iter(exchange.users))
    assert len((await client.orders(address, limit=500)).orders) == 300
    with pytest.raises(BadRequestError, match="500"):
        await client.orders(address, limit=501)
    assert len((await client.leaderboard(limit=500)).leaderboard) == 250
    with pytest.raises(BadRequestError, match="500"):
        await client.leaderboard(limit=501)


async def test_raw_requests_get_clear_answers(
    exchange: FakeExchange, raw: aiohttp.ClientSession
) -> None:
    address = next(iter(exchange.users))
    orders = f"/api/clob/users/{address}/orders"
    status, body = await get_json(raw, f"{orders}?status=open&side=buy&limit=500")
    assert status == 200
    assert body["orders"]
    assert {(o["status"], o["side"]) for o in body["orders"]} == {("OPEN", "BUY")}
    assert body["cursor"] is None
    for query in (
        "status=REJECTED",
        "side=HOLD",
        "limit=abc",
        "limit=0",
        "limit=-1",
        "limit=1_0",
        "limit=99999999999999999999",
        "cursor=not-a-cursor",
        "cursor=%00%01",
    ):
        status, body = await get_json(raw, f"{orders}?{query}")
        assert status == 400, query
        assert isinstance(body["error"], str), query
    for query in ("page=0", "page=x", "limit=0"):
        status, body = await get_json(raw, f"/api/dash/leaderboard?{query}")
        assert status == 400, query
    for path in ("/api/nope", "/api/tokens/", "/tokens", "/api/clob/pools/", "/"):
        status, body = await get_json(raw, path)
        assert status == 404, path
        assert set(body) == {"error"}
    async with raw.post("/api/tokens") as response:
        assert response.status == 405
        assert response.headers["Allow"] == "GET"


async def test_a_page_past_the_end_of_the_leaderboard_is_empty(client: Client) -> None:
    page = await client.leaderboard(page=6, limit=50)
    assert page.leaderboard == ()
    assert (page.page, page.total, page.total_pages) == (6, 250, 5)
    last = await client.leaderboard(page=3, limit=100)
    assert [e.rank for e in last.leaderboard] == list(range(201, 251))


# --- cursors ---------------------------------------------------------------------------


async def test_cursors_are_opaque_and_bound_to_their_filters(
    exchange: FakeExchange, client: Client
) -> None:
    first, second = list(exchange.users)[:2]
    page = await client.orders(first, limit=10)
    cursor = page.cursor
    assert cursor is not None
    assert not cursor.isdigit()
    assert "10" not in cursor
    next_page = await client.orders(first, limit=10, cursor=cursor)
    assert [to_wire(o) for o in next_page.orders] == exchange.orders[first][10:20]
    # the same position, another page size: the cursor is a position, not a page number
    wider = await client.orders(first, limit=30, cursor=cursor)
    assert [to_wire(o) for o in wider.orders] == exchange.orders[first][10:40]
    # the address in another case is the same user, so the same walk
    same = await client.orders(first.upper().replace("0X", "0x"), limit=10, cursor=cursor)
    assert same == next_page
    others: list[tuple[str, OrderFilters]] = [
        (first, {"status": "OPEN"}),
        (first, {"side": "BUY"}),
        (first, {"market": next(iter(exchange.pools))}),
        (second, {}),
    ]
    for address, filters in others:
        with pytest.raises(BadRequestError, match="cursor"):
            await client.orders(address, **filters, cursor=cursor)
    tampered = cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")
    for bad in (tampered, cursor[:-1], cursor + "A", "garbage", "=="):
        with pytest.raises(BadRequestError, match="cursor"):
            await client.orders(first, limit=10, cursor=bad)


async def test_cursors_are_signed_with_the_server_seed(exchange: FakeExchange) -> None:
    address = next(iter(exchange.users))
    async with (
        FakeServer(exchange, seed=1) as one,
        FakeServer(exchange, seed=2) as two,
        client_for(one, max_retries=0) as c1,
        client_for(two, max_retries=0) as c2,
    ):
        cursor = (await c1.orders(address, limit=5)).cursor
        assert cursor is not None
        assert (await c1.orders(address, limit=5, cursor=cursor)).orders
        with pytest.raises(BadRequestError):
            await c2.orders(address, limit=5, cursor=cursor)


# --- pagination completeness -------------------------------------------------------------


def order_filters(exchange: FakeExchange, address: str) -> Iterator[OrderFilters]:
    orders = exchange.orders[address]
    favourite, _ = Counter(o["poolId"] for o in orders).most_common(1)[0]
    rare = min({o["poolId"] for o in orders}, key=[o["poolId"] for o in orders].count)
    yield {}
    yield {"market": favourite}
    yield {"market": rare}
    for status in STATUSES:
        yield {"status": status}
    yield {"side": "BUY"}
    yield {"side": "SELL"}
    yield {"market": favourite, "status": "FILLED"}
    yield {"status": "CANCELLED", "side": "SELL"}
    yield {"market": favourite, "side": "BUY", "status": "OPEN"}
    yield {"market": rare, "side": "SELL"}
    yield {"market": "0x" + "00" * 32}
    yield {"status": "expired", "side": "buy"}  # the client sends them upper-case


async def test_every_order_exactly_once_with_every_filter_and_page_size(
    small: FakeExchange,
) -> None:
    async with FakeServer(small) as server, client_for(server, max_retries=0) as client:
        walks = 0
        for address in small.users:
            for filters in order_filters(small, address):
                want = [
                    o
                    for o in small.orders[address]
                    if ("market" not in filters or o["poolId"] == filters["market"])
                    and ("status" not in filters or o["status"] == filters["status"].upper())
                    and ("side" not in filters or o["side"] == filters["side"].upper())
                ]
                sizes: list[int | None] = [None, 7, 500]
                if len(want) <= 40:
                    sizes.append(1)
                for size in sizes:
                    got = [
                        to_wire(o)
                        async for o in client.iter_orders(address, page_size=size, **filters)
                    ]
                    assert got == want, (address, filters, size)
                    walks += 1
        assert walks >= 2 * 16 * 3
        ids = [r.query.get("cursor") for r in server.requests if r.query.get("cursor")]
        assert len(ids) > 100


async def test_pages_are_full_until_the_last(small: FakeExchange) -> None:
    address = next(iter(small.users))
    async with FakeServer(small) as server, client_for(server, max_retries=0) as client:
        pages = [p async for p in client.iter_order_pages(address, page_size=30, side="SELL")]
        total = sum(1 for o in small.orders[address] if o["side"] == "SELL")
        assert [len(p.orders) for p in pages[:-1]] == [30] * (len(pages) - 1)
        assert 0 < len(pages[-1].orders) <= 30
        assert sum(len(p.orders) for p in pages) == total
        assert [p.cursor is None for p in pages] == [False] * (len(pages) - 1) + [True]


async def test_default_sized_walk_is_complete(exchange: FakeExchange, client: Client) -> None:
    for address in list(exchange.orders)[:3]:
        got = [o.transaction_id async for o in client.iter_orders(address)]
        assert got == [o["transactionId"] for o in exchange.orders[address]]


@pytest.mark.parametrize("page_size", [None, 1, 7, 250, 500])
async def test_leaderboard_walk_is_complete(
    exchange: FakeExchange, client: Client, page_size: int | None
) -> None:
    got = [to_wire(e) async for e in client.iter_leaderboard(page_size=page_size)]
    assert got == exchange.leaderboard


# --- lifecycle ---------------------------------------------------------------------------


async def test_start_and_close_without_a_block(exchange: FakeExchange) -> None:
    server = FakeServer(exchange)
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    assert await server.start() is server
    assert await server.start() is server  # already running: nothing happens
    base_url = server.base_url
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base_url)
    assert server.port != server.testnet_port
    async with client_for(server, max_retries=0) as client:
        assert await client.tokens(search="USDC")
        await server.close()
        await server.close()
        with pytest.raises(TransportError):
            await client.tokens()
    with pytest.raises(RuntimeError, match="closed"):
        await server.start()


async def test_serve_forever_serves_until_cancelled(exchange: FakeExchange) -> None:
    server = FakeServer(exchange)
    await server.start()
    task = asyncio.ensure_future(server.serve_forever())
    async with client_for(server, max_retries=0) as client:
        assert (await client.leaderboard()).total == 250
        task.cancel()
        await asyncio.wait([task])
        assert task.cancelled()
        with pytest.raises(TransportError):
            await client.leaderboard()


async def test_a_port_in_use_fails_start_and_leaves_nothing_bound(exchange: FakeExchange) -> None:
    async with FakeServer(exchange) as first:
        clash = FakeServer(exchange, testnet_port=first.port)
        with pytest.raises(OSError):
            await clash.start()
        with pytest.raises(RuntimeError):
            _ = clash.base_url
        async with FakeServer(exchange) as second:  # the failed start left nothing behind
            assert second.url_of("TESTNET") == second.testnet_base_url
            assert second.port_of(Network.MAINNET) == second.port


async def test_a_path_prefix_moves_every_route(exchange: FakeExchange) -> None:
    async with FakeServer(exchange, prefix="/gw/v2/") as server:
        assert server.base_url.endswith("/gw/v2")
        assert server.testnet_base_url.endswith("/gw/v2")
        async with client_for(server, max_retries=0) as client:
            assert len(await client.tokens()) == 40
            assert server.requests[-1].path == "/gw/v2/api/tokens"
        async with aiohttp.ClientSession() as session:
            url = server.base_url.removesuffix("/gw/v2") + "/api/tokens"
            assert (await get_json(session, url))[0] == 404


def test_bad_server_arguments_are_refused(exchange: FakeExchange) -> None:
    with pytest.raises(ValueError, match="port"):
        FakeServer(exchange, port=70000)
    with pytest.raises(ValueError, match="testnet_port"):
        FakeServer(exchange, testnet_port=-1)
    with pytest.raises(ValueError, match="seed"):
        FakeServer(exchange, seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix"):
        FakeServer(exchange, prefix="/a?b")
    with pytest.raises(TypeError, match="FakeExchange"):
        FakeServer({})  # type: ignore[arg-type]


async def test_port_of_and_url_of_refuse_what_is_not_a_network(exchange: FakeExchange) -> None:
    async with FakeServer(exchange) as server:
        for bad in ("bogus", "pool", "", "main net", 1, None):
            with pytest.raises(ValueError, match=r"unknown network .*'mainnet', 'testnet'"):
                server.port_of(bad)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match=r"unknown network .*'mainnet', 'testnet'"):
                server.url_of(bad)  # type: ignore[arg-type]
        assert server.url_of(" Testnet ") == server.testnet_base_url
