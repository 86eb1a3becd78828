"""to_wire and to_json: the wire's own shape back out, and decode(to_json(x)) == x."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from asyncapi_client import (
    LeaderboardEntry,
    Market,
    Order,
    OrderStatus,
    Side,
    Token,
    UserProfile,
    to_json,
    to_wire,
)
from asyncapi_client._decode import (
    LEADERBOARD_PAGE,
    MARKETS,
    ORDERS_PAGE,
    POOL,
    TOKENS,
    USER,
    decoder,
)
from tests import strategies as wire
from tests._oracle import order_wire, user_wire

ROUND_TRIP = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Decode = Callable[[bytes], Any]


def canonical(value: Any) -> bytes:
    """JSON bytes with sorted keys: equal by content AND by JSON type."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


# every public model and page class, and the two list bodies (a sequence of models)
CASES: list[tuple[str, Decode, Any]] = [
    ("Token", decoder(Token), wire.tokens()),
    ("Market", decoder(Market), wire.markets()),
    ("Pool", POOL, wire.pools()),
    ("Order", decoder(Order), wire.orders()),
    ("UserProfile", USER, wire.user_profiles()),
    ("LeaderboardEntry", decoder(LeaderboardEntry), wire.leaderboard_entries()),
    ("OrdersPage", ORDERS_PAGE, wire.orders_pages()),
    ("LeaderboardPage", LEADERBOARD_PAGE, wire.leaderboard_pages()),
]


@pytest.mark.parametrize(("decode", "strategy"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decode_of_to_json_gives_the_model_back(decode: Decode, strategy: Any) -> None:
    @ROUND_TRIP
    @given(strategy)
    def check(pair: wire.Wire) -> None:
        sent, expected = pair
        model = decode(orjson.dumps(sent))
        assert decode(to_json(model)) == model
        # the wire's names, exact decimal text and JSON types (1 and 1.0 differ as JSON)
        assert canonical(to_wire(model)) == canonical(expected)
        assert canonical(orjson.loads(to_json(model))) == canonical(expected)

    check()


@ROUND_TRIP
@given(wire.tokens_bodies(), wire.markets_bodies())
def test_sequences_of_models_round_trip_as_lists(tokens: wire.Wire, markets: wire.Wire) -> None:
    decoded_tokens = TOKENS(orjson.dumps(tokens[0]))
    decoded_markets = MARKETS(orjson.dumps(markets[0]))
    assert canonical(to_wire(decoded_tokens)) == canonical(tokens[1]["tokens"])
    assert canonical(to_wire(decoded_markets)) == canonical(markets[1]["markets"])
    assert TOKENS(b'{"tokens":' + to_json(decoded_tokens) + b"}") == decoded_tokens
    assert MARKETS(b'{"markets":' + to_json(decoded_markets) + b"}") == decoded_markets


def test_to_wire_gives_plain_json_types() -> None:
    data = user_wire("0xu", "mainnet")
    data["balances"] = [{"token": "0xa", "amount": "1.50", "lots": [1, {"x": [2.5, None]}]}]
    data["orders"][0]["status"] = "REJECTED"
    data["orders"][0]["price"] = "0.000000000000000001"
    profile = USER(orjson.dumps(data))
    out = to_wire(profile)
    assert out == data
    assert type(out["balances"]) is list
    assert type(out["balances"][0]) is dict
    assert type(out["balances"][0]["lots"]) is list
    assert type(out["balances"][0]["lots"][1]) is dict
    assert out["orders"][0]["status"] == "REJECTED"
    assert type(out["orders"][0]["status"]) is str
    assert type(out["orders"][0]["side"]) is str
    assert out["orders"][0]["price"] == "0.000000000000000001"
    assert type(out["orders"]) is list


def test_decimals_keep_the_exponent_form_only_exponents_can_write() -> None:
    order = decoder(Order)(orjson.dumps(dict(order_wire(0, "u"), price="1E+2", size="0.0000001")))
    out = to_wire(order)
    assert (out["price"], out["size"]) == ("1E+2", "0.0000001")
    assert b'"price":"1E+2"' in to_json(order)


def test_models_built_by_hand_serialise_too() -> None:
    order = Order(
        "t", "p", "u", Side.BUY, Decimal("2.5"), Decimal(1), Decimal(0), OrderStatus.OPEN, 7
    )
    profile = UserProfile("0xu", [{"token": "x", "levels": [1, 2]}], (order,), [])
    assert to_wire(profile)["balances"] == [{"token": "x", "levels": [1, 2]}]
    assert USER(to_json(profile)) == profile


@pytest.mark.parametrize("value", [5, "text", {"a": 1}, None, [1, 2], [{"a": 1}], b"x"], ids=repr)
def test_anything_but_models_is_a_type_error(value: Any) -> None:
    with pytest.raises(TypeError, match="model"):
        to_wire(value)
    with pytest.raises(TypeError, match="model"):
        to_json(value)
