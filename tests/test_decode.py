"""Malformed bodies: every one is a DecodeError whose .path names the bad field by its wire name."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest

from asyncapi_client import ApiError, Client, DecodeError
from asyncapi_client._decode import (
    LEADERBOARD_PAGE,
    MARKETS,
    ORDERS_PAGE,
    POOL,
    TOKENS,
    USER,
)
from tests._contract_server import (
    ContractServer,
    Reply,
    leaderboard_wire,
    market_wire,
    order_wire,
    pool_wire,
    token_wire,
    user_wire,
)

Decode = Callable[[bytes], Any]

MISSING = object()


def good_body(name: str) -> dict[str, Any]:
    """A valid body of each operation, with enough elements to address index 3."""
    if name == "tokens":
        return {"tokens": [token_wire(s) for s in ("A", "B", "C")]}
    if name == "markets":
        return {"markets": [market_wire("t0", "testnet"), market_wire("t1", "testnet")]}
    if name == "pool":
        return pool_wire("p", "mainnet")
    if name == "user":
        data = user_wire("0xu", "mainnet")
        data["orders"] = [order_wire(i, "0xu") for i in range(5)]
        return data
    if name == "orders":
        return {"orders": [order_wire(i, "0xu") for i in range(5)], "cursor": "c"}
    assert name == "leaderboard"
    return leaderboard_wire({"page": "1", "limit": "5"})


DECODERS: dict[str, Decode] = {
    "tokens": TOKENS,
    "markets": MARKETS,
    "pool": POOL,
    "user": USER,
    "orders": ORDERS_PAGE,
    "leaderboard": LEADERBOARD_PAGE,
}


def mutated(name: str, path: tuple[str | int, ...], value: object) -> bytes:
    """The good body of ``name`` with the field at ``path`` set to ``value`` (or removed)."""
    data = copy.deepcopy(good_body(name))
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    if value is MISSING:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return orjson.dumps(data)


def decode_error(name: str, body: bytes) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        DECODERS[name](body)
    return info.value


def test_the_good_bodies_decode() -> None:
    """The baseline every mutation below starts from is valid."""
    for name, decode in DECODERS.items():
        decode(orjson.dumps(good_body(name)))


# (operation, path into the body, value or MISSING, expected DecodeError.path)
CASES: list[tuple[str, tuple[str | int, ...], object, str]] = [
    # a required field missing, at every depth
    ("pool", ("poolId",), MISSING, "poolId"),
    ("pool", ("baseToken",), MISSING, "baseToken"),
    ("pool", ("baseToken", "symbol"), MISSING, "baseToken.symbol"),
    ("pool", ("quoteToken", "totalSupply"), MISSING, "quoteToken.totalSupply"),
    ("pool", ("priceChange24h",), MISSING, "priceChange24h"),
    ("tokens", ("tokens",), MISSING, "tokens"),
    ("tokens", ("tokens", 1, "decimals"), MISSING, "tokens[1].decimals"),
    ("markets", ("markets",), MISSING, "markets"),
    ("markets", ("markets", 0, "volume24h"), MISSING, "markets[0].volume24h"),
    ("markets", ("markets", 1, "token0"), MISSING, "markets[1].token0"),
    ("user", ("positions",), MISSING, "positions"),
    ("user", ("orders", 2, "transactionId"), MISSING, "orders[2].transactionId"),
    ("orders", ("orders",), MISSING, "orders"),
    ("orders", ("orders", 1, "filledSize"), MISSING, "orders[1].filledSize"),
    ("orders", ("orders", 4, "timestamp"), MISSING, "orders[4].timestamp"),
    ("leaderboard", ("totalPages",), MISSING, "totalPages"),
    ("leaderboard", ("leaderboard", 2, "rank"), MISSING, "leaderboard[2].rank"),
    # a string where a number belongs
    ("pool", ("price",), "2.5", "price"),
    ("markets", ("markets", 0, "token1", "decimals"), "18", "markets[0].token1.decimals"),
    ("leaderboard", ("leaderboard", 2, "rank"), "3", "leaderboard[2].rank"),
    ("leaderboard", ("totalPages",), "3", "totalPages"),
    ("orders", ("orders", 0, "timestamp"), "1700000000", "orders[0].timestamp"),
    ("tokens", ("tokens", 0, "priceUsd"), "1.25", "tokens[0].priceUsd"),
    # a number where a string belongs
    ("pool", ("baseToken", "symbol"), 5, "baseToken.symbol"),
    ("tokens", ("tokens", 1, "totalSupply"), 1000, "tokens[1].totalSupply"),
    ("orders", ("orders", 3, "price"), 1.5, "orders[3].price"),
    ("orders", ("cursor",), 7, "cursor"),
    ("tokens", ("tokens", 2, "logoUri"), 0, "tokens[2].logoUri"),
    ("user", ("address",), 1, "address"),
    # null where a value is required
    ("pool", ("price",), None, "price"),
    ("pool", ("baseToken", "name"), None, "baseToken.name"),
    ("pool", ("quoteToken",), None, "quoteToken"),
    ("orders", ("orders", 0, "side"), None, "orders[0].side"),
    ("orders", ("orders", 1, "status"), None, "orders[1].status"),
    ("orders", ("orders",), None, "orders"),
    ("tokens", ("tokens", 0, "decimals"), None, "tokens[0].decimals"),
    ("leaderboard", ("leaderboard", 0, "score"), None, "leaderboard[0].score"),
    ("orders", ("orders", 2), None, "orders[2]"),
    # a bool where an int or a number belongs
    ("leaderboard", ("leaderboard", 2, "rank"), True, "leaderboard[2].rank"),
    ("leaderboard", ("page",), False, "page"),
    ("tokens", ("tokens", 0, "decimals"), True, "tokens[0].decimals"),
    ("pool", ("tvl",), True, "tvl"),
    ("orders", ("orders", 0, "timestamp"), True, "orders[0].timestamp"),
    # a non-integral number where an int belongs
    ("leaderboard", ("limit",), 2.5, "limit"),
    ("markets", ("markets", 0, "token1", "decimals"), 18.5, "markets[0].token1.decimals"),
    # an object where an array belongs, and the other way round
    ("tokens", ("tokens",), {}, "tokens"),
    ("user", ("balances",), {"a": 1}, "balances"),
    ("orders", ("orders",), {"0": order_wire(0, "u")}, "orders"),
    ("leaderboard", ("leaderboard",), {}, "leaderboard"),
    ("pool", ("baseToken",), [], "baseToken"),
    ("user", ("balances", 0), [], "balances[0]"),
    # a scalar where an object belongs, inside an array
    ("tokens", ("tokens", 1), "0xabc", "tokens[1]"),
    ("markets", ("markets", 0, "token1"), 5, "markets[0].token1"),
    ("user", ("positions",), "none", "positions"),
    # wrong types for the enums
    ("markets", ("markets", 1, "type"), 1, "markets[1].type"),
    ("markets", ("markets", 0, "type"), ["amm"], "markets[0].type"),
    ("orders", ("orders", 2, "status"), 3, "orders[2].status"),
    ("orders", ("orders", 0, "side"), {"v": "BUY"}, "orders[0].side"),
]


@pytest.mark.parametrize(
    ("name", "where", "value", "path"),
    CASES,
    ids=[f"{c[0]}:{c[3]}={'missing' if c[2] is MISSING else repr(c[2])[:20]}" for c in CASES],
)
def test_malformed_field_names_its_wire_path(
    name: str, where: tuple[str | int, ...], value: object, path: str
) -> None:
    error = decode_error(name, mutated(name, where, value))
    assert error.path == path
    assert path in str(error)
    assert isinstance(error, ApiError)


NOT_NUMBERS = [
    "NaN",
    "nan",
    "sNaN",
    "Infinity",
    "-Infinity",
    "inf",
    "+inf",
    "",
    " ",
    "1e",
    "1e+",
    "e5",
    " 1",
    "1 ",
    "1\n",
    "1_000",
    "0x10",
    "0b1",
    "1,5",
    "1.2.3",
    "--1",
    "+-1",
    "-",
    ".",
    "١٢٣",  # Arabic-Indic digits
    "\uff11\uff12",  # fullwidth digits
    "½",
    "1e5e5",
]


@pytest.mark.parametrize("text", NOT_NUMBERS, ids=repr)
def test_numeric_string_that_is_not_a_finite_decimal(text: str) -> None:
    error = decode_error("orders", mutated("orders", ("orders", 3, "price"), text))
    assert error.path == "orders[3].price"


@pytest.mark.parametrize(
    ("name", "where", "path"),
    [
        ("tokens", ("tokens", 1, "totalSupply"), "tokens[1].totalSupply"),
        ("user", ("orders", 4, "size"), "orders[4].size"),
        ("orders", ("orders", 0, "filledSize"), "orders[0].filledSize"),
    ],
)
@pytest.mark.parametrize("text", ["NaN", "Infinity", "", "1e"])
def test_every_decimal_field_refuses_non_numbers(
    name: str, where: tuple[str | int, ...], path: str, text: str
) -> None:
    assert decode_error(name, mutated(name, where, text)).path == path


@pytest.mark.parametrize("text", ["0", "-1", "1.50", "0.000000000000000001", "123456789" * 8])
def test_plain_decimal_strings_are_accepted(text: str) -> None:
    page = ORDERS_PAGE(mutated("orders", ("orders", 3, "price"), text))
    assert format(page.orders[3].price, "f") == text


def test_the_first_bad_field_is_named_when_there_are_several() -> None:
    data = good_body("orders")
    data["orders"][1]["price"] = "bad"
    data["orders"][3]["size"] = "worse"
    assert decode_error("orders", orjson.dumps(data)).path == "orders[1].price"


@pytest.mark.parametrize(
    "body",
    [b"", b"   ", b"<html>502 Bad Gateway</html>", b"{", b"{'a': 1}", b'{"a": NaN}', b"\xff\xfe"],
    ids=repr,
)
@pytest.mark.parametrize("name", sorted(DECODERS))
def test_a_body_that_is_not_json_has_no_path(name: str, body: bytes) -> None:
    assert decode_error(name, body).path is None


@pytest.mark.parametrize("body", [b"[]", b"[{}]", b"null", b"1", b'"pool"', b"true"], ids=repr)
@pytest.mark.parametrize("name", sorted(DECODERS))
def test_a_top_level_that_is_not_an_object_has_the_empty_path(name: str, body: bytes) -> None:
    error = decode_error(name, body)
    assert error.path == ""
    assert "top level" in str(error)


def test_an_empty_object_names_the_first_required_field() -> None:
    assert decode_error("pool", b"{}").path == "poolId"
    assert decode_error("leaderboard", b"{}").path == "leaderboard"


def test_long_bad_values_are_shortened_in_the_message() -> None:
    error = decode_error("orders", mutated("orders", ("orders", 0, "price"), "9x" * 500))
    assert error.path == "orders[0].price"
    assert len(str(error)) < 300


# --- through the client: url and network set, never retried --------------------------------


@pytest.fixture
async def client(server: ContractServer) -> AsyncIterator[Client]:
    async with Client(
        base_url=server.base_url, testnet_base_url=server.testnet_base_url, max_retries=3
    ) as client:
        client.set_testing(True)
        yield client


@pytest.mark.parametrize(
    ("operation", "body", "path"),
    [
        ("pool", mutated("pool", ("baseToken", "decimals"), "18"), "baseToken.decimals"),
        ("user", mutated("user", ("orders", 3, "price"), "NaN"), "orders[3].price"),
        ("orders", mutated("orders", ("cursor",), 1), "cursor"),
        ("tokens", mutated("tokens", ("tokens", 1, "totalSupply"), 1), "tokens[1].totalSupply"),
        ("token_markets", mutated("markets", ("markets", 0, "fee"), None), "markets[0].fee"),
        ("leaderboard", mutated("leaderboard", ("totalPages",), MISSING), "totalPages"),
        ("pool", b"<html>oops</html>", None),
        ("leaderboard", b"[]", ""),
    ],
)
async def test_decode_error_reaches_the_caller_with_url_and_network_unretried(
    server: ContractServer, client: Client, operation: str, body: bytes, path: str | None
) -> None:
    server.always = Reply(body=body)
    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "tokens": lambda: client.tokens(),
        "token_markets": lambda: client.token_markets("0xt"),
        "pool": lambda: client.pool("p"),
        "user": lambda: client.user("0xu"),
        "orders": lambda: client.orders("0xu"),
        "leaderboard": lambda: client.leaderboard(),
    }
    with pytest.raises(DecodeError) as info:
        await calls[operation]()
    error = info.value
    assert error.path == path
    network = "testnet" if operation == "token_markets" else "mainnet"
    assert error.network == network
    assert error.url is not None
    assert error.url.startswith(server.url(network) + "/api/")
    assert network in str(error)
    assert error.url in str(error)
    assert len(server.seen) == 1, "a decode error must not be retried"


def test_an_integer_too_large_for_a_float_is_refused_not_rounded() -> None:
    token = {"address": "0xt", "name": "T", "symbol": "T", "decimals": 18.0, "totalSupply": "1"}
    assert TOKENS(orjson.dumps({"tokens": [token]}))[0].decimals == 18
    big = b'{"tokens": [{"address": "a", "name": "n", "symbol": "s", "decimals": 1' + b"0" * 30
    with pytest.raises(DecodeError) as caught:
        TOKENS(big + b', "totalSupply": "1"}]}')
    assert caught.value.path == "tokens[0].decimals"
