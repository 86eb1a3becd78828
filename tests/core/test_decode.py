"""Malformed bodies: every one is a DecodeError whose .path names the bad field by its wire name."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from decimal import Decimal
from typing import Any

import orjson
import pytest

from asyncapi_client import ApiError, Client, DecodeError
from asyncapi_client._decode import (
    LEADERBOARD_PAGE,
    MARKETS,
    MAX_PATH,
    ORDERS_PAGE,
    POOL,
    TOKENS,
    USER,
)
from asyncapi_client._models import MAX_NESTING
from asyncapi_client.testing import FakeServer, Reply
from tests._oracle import (
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
async def client(server: FakeServer) -> AsyncIterator[Client]:
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
    server: FakeServer, client: Client, operation: str, body: bytes, path: str | None
) -> None:
    server.script(operation, Reply(body=body), repeat=True)
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
    assert error.url.startswith(server.url_of(network) + "/api/")
    assert network in str(error)
    assert error.url in str(error)
    assert len(server.requests) == 1, "a decode error must not be retried"


# --- bounded numbers: a 15-byte decimal must not become a billion digits -------------------

UINT256_MAX_18_DECIMALS = (
    "115792089237316195423570985008687907853269984665640564039457.584007913129639935"
)

ACCEPTED_AT_THE_BOUNDS = [
    "1" * 128,  # 128 significant digits
    "0." + "0" * 127 + "1",  # adjusted exponent -128
    "1" + "0" * 127,  # adjusted exponent 127, 128 digits
    "1e128",
    "1E-128",
    "-9.99e128",
    "0e128",
    "0e-128",
    UINT256_MAX_18_DECIMALS,  # a uint256 at 18 decimals: 78 digits
    "0." + "0" * 100 + "1" * 27,  # 128 characters past the point
]

REFUSED_PAST_THE_BOUNDS = [
    "1e-999999999",
    "1e999999999",
    "0e-999999999",  # a zero with a huge exponent still prints a billion zeros
    "0E+999999999",
    "1" * 129,  # 129 significant digits
    "1" + "0" * 128,  # 129 digits as written, though its value is 1e128
    "1e129",
    "1e-129",
    "0." + "0" * 128 + "1",  # adjusted exponent -129
    "-" + "9" * 129,
    "1" * 200 + "." + "1" * 200,
    "1." + "0" * 128,  # 128 zeros after the point: 129 digits
]


@pytest.mark.parametrize("text", ACCEPTED_AT_THE_BOUNDS, ids=lambda t: t[:24])
def test_decimals_at_the_bounds_are_accepted_exactly(text: str) -> None:
    body = mutated("tokens", ("tokens", 0, "totalSupply"), text)
    (token, *_) = TOKENS(body)
    assert token.total_supply == Decimal(text)
    assert str(token.total_supply) == str(Decimal(text))


@pytest.mark.parametrize("text", REFUSED_PAST_THE_BOUNDS, ids=lambda t: t[:24])
@pytest.mark.parametrize(
    ("name", "where", "path"),
    [
        ("tokens", ("tokens", 0, "totalSupply"), "tokens[0].totalSupply"),
        ("orders", ("orders", 3, "price"), "orders[3].price"),
        ("user", ("orders", 1, "filledSize"), "orders[1].filledSize"),
    ],
)
def test_decimals_past_the_bounds_are_refused_with_their_path(
    name: str, where: tuple[str | int, ...], path: str, text: str
) -> None:
    error = decode_error(name, mutated(name, where, text))
    assert error.path == path
    assert "128" in str(error)
    assert len(str(error)) < 400


def test_uint256_at_18_decimals_prints_exactly() -> None:
    (token, *_) = TOKENS(mutated("tokens", ("tokens", 0, "totalSupply"), UINT256_MAX_18_DECIMALS))
    assert format(token.total_supply, "f") == UINT256_MAX_18_DECIMALS
    digits = token.total_supply.as_tuple()
    assert (digits.exponent, int("".join(map(str, digits.digits)))) == (-18, 2**256 - 1)


# --- free-form records: bounded nesting ----------------------------------------------------


def nested(levels: int) -> dict[str, Any]:
    """A balance record that nests ``levels`` objects deep (the record itself is level 1)."""
    record: dict[str, Any] = {"amount": "1"}
    for _ in range(levels - 1):
        record = {"x": record}
    return record


def nested_json(levels: int) -> bytes:
    """:func:`nested` as JSON text, written by hand: orjson.dumps stops at 255 levels."""
    return b'{"x":' * (levels - 1) + b'{"amount":"1"}' + b"}" * (levels - 1)


def test_a_record_nesting_to_the_bound_is_accepted_and_safe_to_use() -> None:
    record = nested(MAX_NESTING)
    body = mutated("user", ("balances",), [record])
    profile = USER(body)
    assert profile.balances[0] == record
    assert hash(profile) == hash(USER(body))
    assert "amount" in repr(profile)


@pytest.mark.parametrize("levels", [MAX_NESTING + 1, 255, 1000])
@pytest.mark.parametrize("field", ["balances", "positions"])
def test_a_record_nesting_past_the_bound_is_refused_with_its_path(field: str, levels: int) -> None:
    body = mutated("user", (field,), [{"ok": 1}, "@@deep@@"])
    body = body.replace(b'"@@deep@@"', nested_json(levels))
    error = decode_error("user", body)
    assert error.path == f"{field}[1]" + ".x" * MAX_NESTING
    assert "deeper than 32" in str(error)


def test_a_path_through_hostile_keys_is_bounded_and_still_names_the_field() -> None:
    """40 nested 100 KB keys: each key is cut in the path, and the whole path is bounded."""
    record: Any = {"amount": "1"}
    for level in reversed(range(40)):
        record = {"k" * 100_000 + str(level): record}
    error = decode_error("user", mutated("user", ("balances",), [{"ok": 1}, record]))
    assert error.path is not None
    assert len(error.path) <= MAX_PATH
    assert len(str(error)) <= MAX_PATH + 200
    assert error.path.startswith("balances[1]." + "k" * 32 + "…(100,001 chars)")
    assert error.path.endswith("…(100,002 chars)")  # the deepest key it reached, cut too
    assert "deeper than 32" in str(error)


def test_a_long_key_in_a_path_keeps_its_head_and_says_its_length() -> None:
    too_deep: Any = 1
    for _ in range(MAX_NESTING):
        too_deep = [too_deep]
    for key, spelt in [("z" * 65, "z" * 32 + "…(65 chars)"), ("y" * 64, "y" * 64)]:
        body = mutated("user", ("positions",), [{key: {"a": too_deep}}])
        path = decode_error("user", body).path
        assert path is not None
        assert path.startswith(f"positions[0].{spelt}.a[0][0]"), path[:120]


def test_arrays_count_toward_the_nesting_bound() -> None:
    value: Any = 1
    for _ in range(MAX_NESTING):
        value = [value]
    error = decode_error("user", mutated("user", ("positions",), [{"a": value}]))
    assert error.path == "positions[0].a" + "[0]" * (MAX_NESTING - 1)


def test_an_integer_too_large_for_a_float_is_refused_not_rounded() -> None:
    token = {"address": "0xt", "name": "T", "symbol": "T", "decimals": 18.0, "totalSupply": "1"}
    assert TOKENS(orjson.dumps({"tokens": [token]}))[0].decimals == 18
    big = b'{"tokens": [{"address": "a", "name": "n", "symbol": "s", "decimals": 1' + b"0" * 30
    with pytest.raises(DecodeError) as caught:
        TOKENS(big + b', "totalSupply": "1"}]}')
    assert caught.value.path == "tokens[0].decimals"
