"""The exact request of every operation and argument combination: method, host, path, query.

aioresponses (which sees the URL after yarl has parsed it) checks method, host, decoded path
and decoded query; the loopback FakeServer checks what reaches a server byte for byte
(raw path segments, raw query), which yarl would otherwise normalise away.
"""

from __future__ import annotations

import re
import types
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

import aiohttp
import pytest
from aioresponses import CallbackResult, aioresponses
from yarl import URL

import asyncapi_client
from asyncapi_client import Client, Network, NetworkName, OrderStatus, Side
from asyncapi_client.testing import FakeServer, RecordedRequest
from asyncapi_client.testing._server import route
from tests._oracle import canned

MAIN = "https://main.example"
TEST = "https://test.example:8443"


class _Response(aiohttp.ClientResponse):
    """aioresponses 0.7.9 does not pass the ``stream_writer`` aiohttp 3.14 requires.

    See pnuckowski/aioresponses#289; drop this once a fixed release is out.
    """

    def __init__(self, method: str, url: URL, **kwargs: Any) -> None:
        kwargs.setdefault("stream_writer", types.SimpleNamespace(output_size=0))
        super().__init__(method, url, **kwargs)


def _answer(url: URL, **_: Any) -> CallbackResult:
    """Answer any request with the canned body of the operation its path names."""
    host_network = "testnet" if url.host == "test.example" else "mainnet"
    raw_path = url.raw_path
    for prefix in ("/gw/v1",):
        if raw_path.startswith(prefix):
            raw_path = raw_path[len(prefix) :]
    operation, param = route(raw_path)
    if operation is None:
        return CallbackResult(status=404, payload={"error": "no route"}, response_class=_Response)
    query = dict(url.query)
    return CallbackResult(
        payload=canned(operation, param, query, host_network), response_class=_Response
    )


@pytest.fixture
def mocked() -> Iterator[aioresponses]:
    with aioresponses() as mock:
        mock.get(re.compile(r".*"), callback=_answer, repeat=True)
        yield mock


@pytest.fixture(autouse=True)
def _no_env_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCAPI_BASE_URL", raising=False)
    monkeypatch.delenv("ASYNCAPI_TESTNET_BASE_URL", raising=False)


def sent(mock: aioresponses) -> list[tuple[str, URL, dict[str, Any]]]:
    """Every request aioresponses saw: (method, url, keyword arguments)."""
    return [
        (method, url, call.kwargs)
        for (method, url), calls in mock.requests.items()
        for call in calls
    ]


Call = Callable[[Client], Awaitable[object]]

# (id, client network, call, expected base, expected decoded path, expected decoded query)
# Mixed-case names are refused by the type checker but accepted at run time (the contract).
CASES: list[tuple[str, NetworkName, Call, str, str, dict[str, str]]] = [
    ("tokens", "mainnet", lambda c: c.tokens(), MAIN, "/api/tokens", {}),
    ("tokens-search-none", "mainnet", lambda c: c.tokens(search=None), MAIN, "/api/tokens", {}),
    (
        "tokens-search",
        "mainnet",
        lambda c: c.tokens(search="eth"),
        MAIN,
        "/api/tokens",
        {"search": "eth"},
    ),
    (
        "tokens-search-spaces-amp",
        "mainnet",
        lambda c: c.tokens(search="wrapped eth & co=1"),
        MAIN,
        "/api/tokens",
        {"search": "wrapped eth & co=1"},
    ),
    (
        "tokens-search-plus-percent",
        "mainnet",
        lambda c: c.tokens(search="a+b %20 c#d"),
        MAIN,
        "/api/tokens",
        {"search": "a+b %20 c#d"},
    ),
    (
        "tokens-search-unicode",
        "mainnet",
        lambda c: c.tokens(search="ünï 日本"),
        MAIN,
        "/api/tokens",
        {"search": "ünï 日本"},
    ),
    (
        "markets-default-testnet",
        "mainnet",
        lambda c: c.token_markets("0xabc"),
        TEST,
        "/api/aggregated/tokens/0xabc/markets",
        {},
    ),
    (
        "markets-on-testnet-client",
        "testnet",
        lambda c: c.token_markets("0xabc"),
        TEST,
        "/api/aggregated/tokens/0xabc/markets",
        {},
    ),
    (
        "markets-network-mainnet",
        "mainnet",
        lambda c: c.token_markets("0xabc", network="mainnet"),
        MAIN,
        "/api/aggregated/tokens/0xabc/markets",
        {},
    ),
    (
        "markets-network-enum",
        "testnet",
        lambda c: c.token_markets("0xabc", network=Network.MAINNET),
        MAIN,
        "/api/aggregated/tokens/0xabc/markets",
        {},
    ),
    ("pool", "mainnet", lambda c: c.pool("pool-1"), MAIN, "/api/clob/pools/pool-1", {}),
    ("user", "mainnet", lambda c: c.user("0xuser"), MAIN, "/api/clob/users/0xuser", {}),
    ("orders", "mainnet", lambda c: c.orders("0xuser"), MAIN, "/api/clob/users/0xuser/orders", {}),
    (
        "orders-all-filters-enums",
        "mainnet",
        lambda c: c.orders(
            "0xuser",
            market="m-1",
            status=OrderStatus.PARTIALLY_FILLED,
            side=Side.SELL,
            limit=50,
            cursor="abc==",
        ),
        MAIN,
        "/api/clob/users/0xuser/orders",
        {
            "market": "m-1",
            "status": "PARTIALLY_FILLED",
            "side": "SELL",
            "limit": "50",
            "cursor": "abc==",
        },
    ),
    (
        "orders-all-filters-strings",
        "mainnet",
        lambda c: c.orders(
            "0xuser", market="m/1 x", status="partially_filled", side="buy", limit=1, cursor="c&d=e"
        ),
        MAIN,
        "/api/clob/users/0xuser/orders",
        {
            "market": "m/1 x",
            "status": "PARTIALLY_FILLED",
            "side": "BUY",
            "limit": "1",
            "cursor": "c&d=e",
        },
    ),
    (
        "orders-market-only",
        "mainnet",
        lambda c: c.orders("0xu", market="m"),
        MAIN,
        "/api/clob/users/0xu/orders",
        {"market": "m"},
    ),
    (
        "orders-status-only",
        "mainnet",
        lambda c: c.orders("0xu", status="Open"),  # type: ignore[arg-type]
        MAIN,
        "/api/clob/users/0xu/orders",
        {"status": "OPEN"},
    ),
    (
        "orders-side-only",
        "mainnet",
        lambda c: c.orders("0xu", side="sElL"),  # type: ignore[arg-type]
        MAIN,
        "/api/clob/users/0xu/orders",
        {"side": "SELL"},
    ),
    (
        "orders-limit-only",
        "mainnet",
        lambda c: c.orders("0xu", limit=7),
        MAIN,
        "/api/clob/users/0xu/orders",
        {"limit": "7"},
    ),
    (
        "orders-cursor-only",
        "mainnet",
        lambda c: c.orders("0xu", cursor="next page"),
        MAIN,
        "/api/clob/users/0xu/orders",
        {"cursor": "next page"},
    ),
    (
        "orders-nones",
        "mainnet",
        lambda c: c.orders("0xu", market=None, status=None, side=None, limit=None, cursor=None),
        MAIN,
        "/api/clob/users/0xu/orders",
        {},
    ),
    ("leaderboard", "mainnet", lambda c: c.leaderboard(), MAIN, "/api/dash/leaderboard", {}),
    (
        "leaderboard-page",
        "mainnet",
        lambda c: c.leaderboard(page=2),
        MAIN,
        "/api/dash/leaderboard",
        {"page": "2"},
    ),
    (
        "leaderboard-limit",
        "mainnet",
        lambda c: c.leaderboard(limit=100),
        MAIN,
        "/api/dash/leaderboard",
        {"limit": "100"},
    ),
    (
        "leaderboard-page-limit",
        "mainnet",
        lambda c: c.leaderboard(page=3, limit=5),
        MAIN,
        "/api/dash/leaderboard",
        {"page": "3", "limit": "5"},
    ),
    (
        "leaderboard-nones",
        "mainnet",
        lambda c: c.leaderboard(page=None, limit=None),
        MAIN,
        "/api/dash/leaderboard",
        {},
    ),
    ("client-testnet", "testnet", lambda c: c.pool("p"), TEST, "/api/clob/pools/p", {}),
    ("client-TESTNET", "TESTNET", lambda c: c.user("u"), TEST, "/api/clob/users/u", {}),
    (
        "call-testnet-upper",
        "mainnet",
        lambda c: c.pool("p", network="TESTNET"),
        TEST,
        "/api/clob/pools/p",
        {},
    ),
    (
        "call-testnet-mixed",
        "mainnet",
        lambda c: c.tokens(network="TestNet"),  # type: ignore[arg-type]
        TEST,
        "/api/tokens",
        {},
    ),
    (
        "call-testnet-enum",
        "mainnet",
        lambda c: c.leaderboard(network=Network.TESTNET),
        TEST,
        "/api/dash/leaderboard",
        {},
    ),
    (
        "call-mainnet-on-testnet-client",
        "testnet",
        lambda c: c.orders("u", network="Mainnet"),  # type: ignore[arg-type]
        MAIN,
        "/api/clob/users/u/orders",
        {},
    ),
    (
        "call-network-none",
        "testnet",
        lambda c: c.pool("p", network=None),
        TEST,
        "/api/clob/pools/p",
        {},
    ),
]


@pytest.mark.parametrize(
    ("network", "call", "base", "path", "query"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
async def test_request_shape(
    mocked: aioresponses,
    network: NetworkName,
    call: Call,
    base: str,
    path: str,
    query: dict[str, str],
) -> None:
    async with Client(network, base_url=MAIN, testnet_base_url=TEST) as client:
        await call(client)
    ((method, url, _),) = sent(mocked)
    expected = URL(base)
    assert method == "GET"
    assert (url.scheme, url.host, url.port) == (expected.scheme, expected.host, expected.port)
    assert url.path == path
    assert sorted(url.query.items()) == sorted(query.items())


@pytest.mark.parametrize(
    ("base_url", "expected_path"),
    [
        ("https://main.example/gw/v1", "/gw/v1/api/clob/pools/p"),
        ("https://main.example/gw/v1/", "/gw/v1/api/clob/pools/p"),
        ("https://main.example/", "/api/clob/pools/p"),
        ("https://main.example", "/api/clob/pools/p"),
    ],
)
async def test_base_url_prefix_is_kept_and_trailing_slash_tolerated(
    mocked: aioresponses, base_url: str, expected_path: str
) -> None:
    async with Client(base_url=base_url) as client:
        await client.pool("p")
    ((_, url, _),) = sent(mocked)
    assert url.host == "main.example"
    assert url.raw_path == expected_path


async def test_user_agent_and_caller_headers_are_sent(server: FakeServer) -> None:
    async with Client(
        base_url=server.base_url, headers={"X-Bot": "bot-7", "Accept-Language": "en"}
    ) as client:
        await client.tokens()
        await client.pool("p")
    for seen in server.requests:
        assert seen.headers["User-Agent"].startswith(
            f"asyncapi-client/{asyncapi_client.__version__}"
        )
        assert seen.headers["Accept"] == "application/json"
        assert "gzip" in seen.headers["Accept-Encoding"]  # aiohttp's own default is kept
        assert seen.headers["X-Bot"] == "bot-7"
        assert seen.headers["Accept-Language"] == "en"
        assert len(_all(seen, "User-Agent")) == 1


async def test_caller_headers_replace_ours(server: FakeServer) -> None:
    headers = {"user-agent": "bot/7", "ACCEPT": "application/vnd.x+json"}
    async with Client(base_url=server.base_url, headers=headers) as client:
        await client.pool("p")
    (seen,) = server.requests
    assert _all(seen, "User-Agent") == ["bot/7"]
    assert _all(seen, "Accept") == ["application/vnd.x+json"]


def _all(seen: RecordedRequest, name: str) -> list[str]:
    """Every value of header ``name`` as sent (a repeated header shows up twice)."""
    return [value for key, value in seen.headers.items() if key.lower() == name.lower()]


async def test_every_operation_is_one_get_and_decodes(mocked: aioresponses) -> None:
    async with Client(base_url=MAIN, testnet_base_url=TEST) as client:
        tokens = await client.tokens(search="x")
        markets = await client.token_markets("0xt")
        pool = await client.pool("p-9")
        user = await client.user("0xu")
        page = await client.orders("0xu", status="filled")
        board = await client.leaderboard(page=2, limit=10)
    assert [m for m, _, _ in sent(mocked)] == ["GET"] * 6
    assert tokens[0].name == "x"
    assert markets[0].token0.address == "0xt"
    assert pool.pool_id == "p-9"
    assert user.address == "0xu"
    assert {o.status for o in page.orders} == {OrderStatus.FILLED}
    assert board.page == 2


# --- raw bytes on the wire: the loopback server sees request.raw_path -----------------------


HOSTILE = [
    "a/../b?x=1#f",
    "...",
    ".a",
    "%2F",
    "%",
    "/",
    "?",
    "#",
    "a b",
    "a+b",
    "ü/日本",
    "../../api/tokens",
    "x;y=z",
    "\\..\\",
    "0xAbC",
]


def target(record: RecordedRequest) -> tuple[str, str]:
    """(raw path, raw query) of a request target exactly as it reached the server."""
    raw_path, _, raw_query = record.raw_path.partition("?")
    return raw_path, raw_query


def one_segment(raw: str, head: str, tail: str) -> str:
    """The one raw segment between ``head`` and ``tail``; fails if there is not exactly one."""
    assert raw.startswith(head), raw
    assert raw.endswith(tail), raw
    segment = raw[len(head) : len(raw) - len(tail)]
    assert segment, raw
    assert not set("/?#") & set(segment), f"{segment!r} is more than one segment"
    assert segment not in (".", ".."), "a dot segment would be resolved away"
    return segment


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
@pytest.mark.parametrize(
    ("operation", "head", "tail"),
    [
        ("pool", "/api/clob/pools/", ""),
        ("user", "/api/clob/users/", ""),
        ("orders", "/api/clob/users/", "/orders"),
        ("token_markets", "/api/aggregated/tokens/", "/markets"),
    ],
)
async def test_path_parameter_is_one_percent_encoded_segment(
    server: FakeServer, client: Client, operation: str, head: str, tail: str, value: str
) -> None:
    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "pool": lambda: client.pool(value),
        "user": lambda: client.user(value),
        "orders": lambda: client.orders(value),
        "token_markets": lambda: client.token_markets(value),
    }
    result = await calls[operation]()
    (seen,) = server.requests
    raw_path, raw_query = target(seen)
    assert seen.operation == operation
    assert raw_query == ""
    segment = one_segment(raw_path, head, tail)
    assert unquote(segment, errors="strict") == value
    assert seen.param == value
    # The server echoed the decoded value back: the round trip is lossless.
    echoed = {
        "pool": lambda: result.pool_id,
        "user": lambda: result.address,
        "orders": lambda: result.orders[0].user,
        "token_markets": lambda: result[0].token0.address,
    }[operation]()
    assert echoed == value


DOT_SEGMENTS = [".", "..", "%2e", "%2E%2e", ".%2E", "%252e", "%25252E%25252E"]


@pytest.mark.parametrize("value", DOT_SEGMENTS)
async def test_ids_that_decode_to_a_dot_segment_are_refused_before_any_request(
    server: FakeServer, client: Client, value: str
) -> None:
    """A server or proxy resolves ``.``/``..`` (even sent as ``%2E``): another resource answers."""
    for call in (
        lambda: client.pool(value),
        lambda: client.user(value),
        lambda: client.orders(value),
        lambda: client.token_markets(value),
        lambda: client.iter_orders(value).__anext__(),
    ):
        with pytest.raises(ValueError, match="dot segment"):
            await call()
    assert server.requests == []


@pytest.mark.parametrize(
    "search", ["wrapped eth & co", "a=b", "a+b", "100%", "ünï 日本", "#tag", "x?y", "  "], ids=repr
)
async def test_search_is_percent_encoded_as_one_query_value(
    server: FakeServer, client: Client, search: str
) -> None:
    tokens = await client.tokens(search=search)
    (seen,) = server.requests
    raw_path, raw_query = target(seen)
    assert raw_path == "/api/tokens"
    assert parse_qsl(raw_query, keep_blank_values=True) == [("search", search)]
    assert raw_query == "search=" + quote(search, safe="")
    assert tokens[0].name == search


async def test_query_values_never_add_parameters(server: FakeServer, client: Client) -> None:
    await client.orders("0xu", market="m&status=FILLED", cursor="c&limit=1")
    (seen,) = server.requests
    assert parse_qsl(target(seen)[1], keep_blank_values=True) == [
        ("market", "m&status=FILLED"),
        ("cursor", "c&limit=1"),
    ]


async def test_none_parameters_are_not_sent_at_all(server: FakeServer, client: Client) -> None:
    await client.orders("0xu", market=None, status=None, side=None, limit=None, cursor=None)
    await client.leaderboard(page=None, limit=None)
    await client.tokens(search=None)
    assert [target(s) for s in server.requests] == [
        ("/api/clob/users/0xu/orders", ""),
        ("/api/dash/leaderboard", ""),
        ("/api/tokens", ""),
    ]


async def test_loopback_headers_and_method(server: FakeServer) -> None:
    async with Client(base_url=server.base_url, headers={"X-Bot": "bot-7"}) as client:
        await client.leaderboard()
    (seen,) = server.requests
    assert seen.method == "GET"
    assert seen.headers["User-Agent"].startswith(f"asyncapi-client/{asyncapi_client.__version__}")
    assert seen.headers["X-Bot"] == "bot-7"
