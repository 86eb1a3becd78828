"""Every invalid argument is a ValueError raised before any request (the server sees nothing)."""

from __future__ import annotations

import asyncio
import copy
import inspect
import math
import pickle
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, get_args

import aiohttp
import pytest

from asyncapi_client import (
    USE_CLIENT_DEFAULT,
    Client,
    LocalLimiter,
    Network,
    NetworkName,
    OrderStatus,
    OrderStatusName,
    RequestTimeoutError,
    Side,
    SideName,
    UseClientDefault,
)
from asyncapi_client.testing import FakeServer

NOT_POSITIVE_INTS: list[object] = [0, -1, -10, True, False, 1.5, 2.0, "3", "1"]
NOT_IDS: list[object] = ["", None, 5, b"id", ["a"]]

Call = Callable[[Client], Awaitable[object]]

BAD_NETWORKS: list[object] = ["mainet", "devnet", "", " main net", 1, Side.BUY]


def by_network(network: Any) -> list[tuple[str, Call]]:
    """Every operation, plain and with_response, called with ``network``."""
    return [
        ("tokens", lambda c: c.tokens(network=network)),
        ("token_markets", lambda c: c.token_markets("t", network=network)),
        ("pool", lambda c: c.pool("p", network=network)),
        ("user", lambda c: c.user("u", network=network)),
        ("orders", lambda c: c.orders("u", network=network)),
        ("leaderboard", lambda c: c.leaderboard(network=network)),
        ("with_response.tokens", lambda c: c.with_response.tokens(network=network)),
        (
            "with_response.token_markets",
            lambda c: c.with_response.token_markets("t", network=network),
        ),
        ("with_response.pool", lambda c: c.with_response.pool("p", network=network)),
        ("with_response.user", lambda c: c.with_response.user("u", network=network)),
        ("with_response.orders", lambda c: c.with_response.orders("u", network=network)),
        ("with_response.leaderboard", lambda c: c.with_response.leaderboard(network=network)),
    ]


INVALID_CALLS: list[tuple[str, Call]] = [
    *[(f"tokens search={v!r}", lambda c, v=v: c.tokens(search=v)) for v in (5, b"x", ["a"])],
    *[(f"token_markets({v!r})", lambda c, v=v: c.token_markets(v)) for v in NOT_IDS],
    *[(f"pool({v!r})", lambda c, v=v: c.pool(v)) for v in NOT_IDS],
    *[(f"user({v!r})", lambda c, v=v: c.user(v)) for v in NOT_IDS],
    *[(f"orders({v!r})", lambda c, v=v: c.orders(v)) for v in NOT_IDS],
    *[
        (f"orders status={v!r}", lambda c, v=v: c.orders("0xu", status=v))
        for v in ("bogus", "REJECTED", "", "open ish", 5, Side.BUY, OrderStatus("REJECTED"))
    ],
    *[
        (f"orders side={v!r}", lambda c, v=v: c.orders("0xu", side=v))
        for v in ("hold", "", "long", 1, OrderStatus.OPEN, Side("HOLD"))
    ],
    *[(f"orders limit={v!r}", lambda c, v=v: c.orders("0xu", limit=v)) for v in NOT_POSITIVE_INTS],
    *[(f"orders market={v!r}", lambda c, v=v: c.orders("0xu", market=v)) for v in (5, b"m")],
    *[(f"orders cursor={v!r}", lambda c, v=v: c.orders("0xu", cursor=v)) for v in (5, b"c")],
    *[(f"leaderboard page={v!r}", lambda c, v=v: c.leaderboard(page=v)) for v in NOT_POSITIVE_INTS],
    *[
        (f"leaderboard limit={v!r}", lambda c, v=v: c.leaderboard(limit=v))
        for v in NOT_POSITIVE_INTS
    ],
    *[
        (f"pool deadline={v!r}", lambda c, v=v: c.pool("p", deadline=v))
        for v in (0, -1, True, "1", float("inf"), float("nan"))
    ],
    *[(f"{name} network={v!r}", call) for v in BAD_NETWORKS for name, call in by_network(v)],
    *[
        (f"with_response.orders status={v!r}", lambda c, v=v: c.with_response.orders("u", status=v))
        for v in ("fillled", "REJECTED", Side.SELL)
    ],
    *[
        (f"with_response.orders side={v!r}", lambda c, v=v: c.with_response.orders("u", side=v))
        for v in ("buyy", "", OrderStatus.OPEN)
    ],
]


@pytest.mark.parametrize("call", [c for _, c in INVALID_CALLS], ids=[i for i, _ in INVALID_CALLS])
async def test_invalid_argument_is_a_value_error_before_any_request(
    server: FakeServer, client: Client, call: Call
) -> None:
    with pytest.raises(ValueError):
        await call(client)
    assert server.requests == []
    # ...and the client still works afterwards.
    await client.pool("after")
    assert [s.param for s in server.requests] == ["after"]


async def drain(iterator: AsyncIterator[Any]) -> None:
    async for _ in iterator:
        pass


INVALID_STREAMS: list[tuple[str, Callable[[Client], AsyncIterator[Any]]]] = [
    *[(f"iter_orders({v!r})", lambda c, v=v: c.iter_orders(v)) for v in NOT_IDS],
    *[
        (f"iter_orders page_size={v!r}", lambda c, v=v: c.iter_orders("0xu", page_size=v))
        for v in NOT_POSITIVE_INTS
    ],
    *[
        (f"iter_orders max_items={v!r}", lambda c, v=v: c.iter_orders("0xu", max_items=v))
        for v in NOT_POSITIVE_INTS
    ],
    ("iter_orders status", lambda c: c.iter_orders("0xu", status="bogus")),  # type: ignore[arg-type]
    ("iter_orders side", lambda c: c.iter_orders("0xu", side="bogus")),  # type: ignore[arg-type]
    ("iter_orders network", lambda c: c.iter_orders("0xu", network="devnet")),  # type: ignore[arg-type]
    ("iter_order_pages address", lambda c: c.iter_order_pages("")),
    *[
        (f"iter_order_pages page_size={v!r}", lambda c, v=v: c.iter_order_pages("u", page_size=v))
        for v in NOT_POSITIVE_INTS
    ],
    ("iter_order_pages side", lambda c: c.iter_order_pages("0xu", side="sideways")),  # type: ignore[arg-type]
    *[
        (f"iter_leaderboard page_size={v!r}", lambda c, v=v: c.iter_leaderboard(page_size=v))
        for v in NOT_POSITIVE_INTS
    ],
    *[
        (f"iter_leaderboard max_items={v!r}", lambda c, v=v: c.iter_leaderboard(max_items=v))
        for v in NOT_POSITIVE_INTS
    ],
    *[
        (f"iter_leaderboard concurrency={v!r}", lambda c, v=v: c.iter_leaderboard(concurrency=v))
        for v in [*NOT_POSITIVE_INTS, None]
    ],
    *[
        (
            f"iter_leaderboard_pages concurrency={v!r}",
            lambda c, v=v: c.iter_leaderboard_pages(concurrency=v),
        )
        for v in (0, -2, True)
    ],
    ("iter_leaderboard_pages page_size", lambda c: c.iter_leaderboard_pages(page_size=0)),
    ("iter_leaderboard_pages deadline", lambda c: c.iter_leaderboard_pages(deadline=-1)),
    ("iter_leaderboard network", lambda c: c.iter_leaderboard(network="devnet")),  # type: ignore[arg-type]
    *[
        (f"iter_order_pages network={v!r}", lambda c, v=v: c.iter_order_pages("u", network=v))
        for v in BAD_NETWORKS
    ],
    *[
        (
            f"iter_leaderboard_pages network={v!r}",
            lambda c, v=v: c.iter_leaderboard_pages(network=v),
        )
        for v in BAD_NETWORKS
    ],
    *[
        (f"iter_orders status={v!r}", lambda c, v=v: c.iter_orders("u", status=v))
        for v in ("fillled", "REJECTED", "", Side.BUY, 3)
    ],
]


@pytest.mark.parametrize(
    "make", [m for _, m in INVALID_STREAMS], ids=[i for i, _ in INVALID_STREAMS]
)
async def test_invalid_stream_argument_is_a_value_error_before_any_request(
    server: FakeServer, client: Client, make: Callable[[Client], AsyncIterator[Any]]
) -> None:
    with pytest.raises(ValueError):
        # Raised when the stream is made or on its first step: either way before a request.
        await drain(make(client))
    assert server.requests == []


@pytest.mark.parametrize(
    ("status", "side", "sent"),
    [
        (OrderStatus.OPEN, Side.BUY, ("OPEN", "BUY")),
        ("filled", "sell", ("FILLED", "SELL")),
        ("Partially_Filled", "Buy", ("PARTIALLY_FILLED", "BUY")),
        ("CANCELLED", "SELL", ("CANCELLED", "SELL")),
        ("expired", Side.SELL, ("EXPIRED", "SELL")),
        (" Open ", "Sell", ("OPEN", "SELL")),
        ("cAnCeLlEd", "bUY", ("CANCELLED", "BUY")),
    ],
)
async def test_status_and_side_accepted_in_any_case_and_sent_upper_case(
    server: FakeServer,
    client: Client,
    status: Any,  # the type checker takes upper or lower case; run time takes any case
    side: Any,
    sent: tuple[str, str],
) -> None:
    await client.orders("0xu", status=status, side=side)
    await client.with_response.orders("0xu", status=status, side=side)
    async with aclosing(client.iter_orders("0xu", status=status, side=side)) as walk:
        async for _ in walk:
            break
    async with aclosing(client.iter_order_pages("0xu", status=status, side=side)) as pages:
        async for _ in pages:
            break
    assert [(seen.query["status"], seen.query["side"]) for seen in server.requests] == [sent] * 4


@pytest.mark.parametrize(
    ("name", "network"),
    [
        ("TESTNET", "testnet"),
        ("Testnet", "testnet"),
        (" testnet", "testnet"),
        (Network.TESTNET, "testnet"),
        ("MainNet", "mainnet"),
        ("MAINNET", "mainnet"),
    ],
)
async def test_network_accepted_in_any_case_everywhere(
    server: FakeServer, name: Any, network: str
) -> None:
    other: NetworkName = "mainnet" if network == "testnet" else "testnet"
    async with Client(
        other, base_url=server.base_url, testnet_base_url=server.testnet_base_url
    ) as c:
        await c.pool("p", network=name)
        await c.with_response.user("u", network=name)
        await drain(c.iter_leaderboard_pages(network=name))
        async with aclosing(c.iter_orders("u", network=name)) as walk:
            async for _ in walk:
                break
    async with Client(
        name, base_url=server.base_url, testnet_base_url=server.testnet_base_url
    ) as c:
        assert c.network == network
        await c.leaderboard()
    assert server.requests
    assert {seen.network for seen in server.requests} == {network}


@pytest.mark.parametrize(
    ("argument", "alias", "enum"),
    [("status", OrderStatusName, OrderStatus), ("side", SideName, Side)],
    ids=["status", "side"],
)
async def test_every_name_the_type_checker_accepts_works_at_run_time(
    server: FakeServer, client: Client, argument: str, alias: Any, enum: type[Any]
) -> None:
    names = get_args(alias)
    # Every member, in upper and in lower case: nothing more, nothing less.
    assert set(names) == {m.value for m in enum} | {m.value.lower() for m in enum}
    for name in names:
        await client.orders("0xu", **{argument: name})
    assert [seen.query[argument] for seen in server.requests] == [n.upper() for n in names]


def test_every_network_name_the_type_checker_accepts_works_at_run_time() -> None:
    names = get_args(NetworkName)
    assert set(names) == {n.value for n in Network} | {n.value.upper() for n in Network}
    for name in names:
        assert Client(name, base_url="http://h").network.value == name.lower()


# --- deadline: not given, USE_CLIENT_DEFAULT, None or seconds ------------------------------


async def test_deadline_sentinel_is_the_clients_deadline_and_none_is_no_deadline(
    server: FakeServer,
) -> None:
    async with (
        Client(base_url=server.base_url, deadline=0.2) as client,
        server.gate() as gate,
    ):
        client.set_testing(True, max_retries=0)
        unbounded = asyncio.ensure_future(client.pool("none", deadline=None))
        await gate.arrived(1)
        # The client's 0.2 s deadline, passed as the sentinel or not passed at all.
        with pytest.raises(RequestTimeoutError):
            await client.pool("sentinel", deadline=USE_CLIENT_DEFAULT)
        with pytest.raises(RequestTimeoutError):
            await client.with_response.pool("default")
        with pytest.raises(RequestTimeoutError):
            await drain(client.iter_leaderboard(deadline=USE_CLIENT_DEFAULT))
        # The call without a deadline has waited through all three, and is still waiting.
        assert not unbounded.done()
        gate.release()
        pool = await unbounded
    assert pool.pool_id


def test_use_client_default_is_one_public_value() -> None:
    assert UseClientDefault() is USE_CLIENT_DEFAULT
    assert copy.copy(USE_CLIENT_DEFAULT) is USE_CLIENT_DEFAULT
    assert copy.deepcopy(USE_CLIENT_DEFAULT) is USE_CLIENT_DEFAULT
    assert pickle.loads(pickle.dumps(USE_CLIENT_DEFAULT)) is USE_CLIENT_DEFAULT
    assert repr(USE_CLIENT_DEFAULT) == "USE_CLIENT_DEFAULT"
    default = inspect.signature(Client.pool).parameters["deadline"].default
    assert default is USE_CLIENT_DEFAULT


async def test_valid_boundaries_are_accepted(server: FakeServer, client: Client) -> None:
    await client.orders("u", limit=1)
    await client.leaderboard(page=1, limit=1)
    await client.pool("p", deadline=None)
    await client.pool("q", deadline=5)
    assert len(server.requests) == 4


# --- the constructor -----------------------------------------------------------------------

INVALID_CONSTRUCTOR: list[tuple[str, dict[str, Any]]] = [
    *[(f"timeout={v!r}", {"timeout": v}) for v in (0, -1, 0.0, True, "10", None, float("inf"))],
    ("timeout=nan", {"timeout": float("nan")}),
    *[(f"max_retries={v!r}", {"max_retries": v}) for v in (-1, 1.5, True, "3", None)],
    *[(f"max_connections={v!r}", {"max_connections": v}) for v in (0, -1, 1.5, True, None)],
    *[(f"rate_limit={v!r}", {"rate_limit": v}) for v in (0, -1, True, "5", float("inf"))],
    *[(f"deadline={v!r}", {"deadline": v}) for v in (-1, 0, True, "2")],
    *[(f"max_response_bytes={v!r}", {"max_response_bytes": v}) for v in (0, -1, 1.5, True)],
    ("headers non-str value", {"headers": {"X-Count": 1}}),
    ("headers non-str name", {"headers": {1: "x"}}),
    ("headers bytes", {"headers": {"X-A": b"x"}}),
    ("headers not a mapping", {"headers": "X-A: x"}),
    ("headers list of pairs", {"headers": [("X-A", "x")]}),
    ("session not a session", {"session": "session"}),
    *[(f"retry_after_cap={v!r}", {"retry_after_cap": v}) for v in (0, -1, True, "60", None)],
    ("limiter and rate_limit", {"limiter": LocalLimiter(), "rate_limit": 5}),
    *[(f"network={v!r}", {"network": v}) for v in BAD_NETWORKS],
    ("deadline=USE_CLIENT_DEFAULT", {"deadline": USE_CLIENT_DEFAULT}),
    *[
        (f"timeout total={v!r}", {"timeout": aiohttp.ClientTimeout(total=v)})
        for v in (-1, math.inf, math.nan)
    ],
]


@pytest.mark.parametrize(
    "kwargs", [k for _, k in INVALID_CONSTRUCTOR], ids=[i for i, _ in INVALID_CONSTRUCTOR]
)
def test_invalid_constructor_argument_is_a_value_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Client(base_url="http://127.0.0.1:9", **kwargs)


def test_the_message_names_the_bad_argument() -> None:
    for name, value in [
        ("timeout", 0),
        ("max_retries", -1),
        ("max_connections", 0),
        ("rate_limit", 0),
        ("deadline", -1),
        ("max_response_bytes", 0),
        ("retry_after_cap", 0),
    ]:
        with pytest.raises(ValueError, match=name):
            Client(base_url="http://h", **{name: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout's total"):
        Client(base_url="http://h", timeout=aiohttp.ClientTimeout(total=math.inf))


async def test_valid_constructor_arguments(server: FakeServer) -> None:
    async with Client(
        "testnet",
        base_url=server.base_url,
        testnet_base_url=server.testnet_base_url,
        timeout=aiohttp.ClientTimeout(total=5),
        max_retries=0,
        max_connections=1,
        rate_limit=1000.0,
        deadline=30,
        max_response_bytes=1,
        coalesce=False,
        headers={},
        session=None,
    ) as client:
        assert client.network == "testnet"
    async with Client(base_url=server.base_url, timeout=2, rate_limit=None, deadline=None):
        pass


def test_set_testing_checks_max_retries() -> None:
    client = Client(base_url="http://h")
    with pytest.raises(ValueError, match="max_retries"):
        client.set_testing(True, max_retries=-1)
    client.set_testing(False)
    client.set_testing(True, max_retries=0)


@pytest.mark.parametrize(
    "url",
    [
        "http://h\\evil.com/",
        "http://exa mple.com",
        "http://h.example/a\tb",
        "http://user:secret@h.example",
        "http://user@h.example",
    ],
)
def test_base_urls_that_would_fail_later_are_refused_at_construction(url: str) -> None:
    with pytest.raises(ValueError, match="base_url"):
        Client(base_url=url)


@pytest.mark.parametrize(
    "headers",
    [{"Bad Name": "x"}, {"X-Ok": "a\r\nInjected: 1"}, {"X-Ok": "a\nb"}, {"": "x"}],
)
def test_headers_that_are_not_valid_http_are_refused(headers: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="header"):
        Client(base_url="http://h.example", headers=headers)


def test_trace_configs_must_be_trace_configs() -> None:
    with pytest.raises(ValueError, match="TraceConfig"):
        Client(base_url="http://h.example", trace_configs=[1])  # type: ignore[list-item]


async def test_text_without_a_utf8_form_is_a_clear_argument_error() -> None:
    async with Client(base_url="http://127.0.0.1:9") as client:
        with pytest.raises(ValueError, match=r"pool_id .* not valid text"):
            await client.pool("bad\ud800")
        with pytest.raises(ValueError, match="not valid text"):
            await client.tokens(search="bad\ud800")
