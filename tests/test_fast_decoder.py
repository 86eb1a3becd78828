"""The three decoding paths agree on every input.

The accelerated path (msgspec) and the generated fast path decode every response; the
detailed converter only explains failures. If they ever disagreed, a body would be accepted
that the contract rejects, or a valid body would fail with a path that names nothing. So:
valid bodies give equal models on every path; a body with one field replaced by any JSON
value (or removed) is either accepted by all, or refused with a DecodeError whose path is
exactly that field; and the accelerated path never accepts what the general path refuses,
nor gives a model that differs from it in any digit or type.
"""

from __future__ import annotations

import copy
import decimal
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import attrs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncapi_client import DecodeError, Order, OrdersPage, OrderStatus, Pool, Side, Token
from asyncapi_client import _decode as dec
from tests import strategies as wire
from tests._oracle import leaderboard_wire, market_wire, order_wire, pool_wire, token_wire

Key = str | int

CASES: list[tuple[str, dec.Decoder[Any], Any]] = [
    ("tokens", dec.TOKENS, wire.tokens_bodies()),
    ("markets", dec.MARKETS, wire.markets_bodies()),
    ("pool", dec.POOL, wire.pools()),
    ("user", dec.USER, wire.user_profiles()),
    ("orders", dec.ORDERS_PAGE, wire.orders_pages()),
    ("leaderboard", dec.LEADERBOARD_PAGE, wire.leaderboard_pages()),
]
OPAQUE = {"balances", "positions"}  # arrays of objects whose fields the contract leaves open
OPTIONAL = {"logoUri", "priceUsd", "cursor"}


def _fields(expected: Any, sent: Any, keys: tuple[Key, ...] = ()) -> Iterator[tuple[Key, ...]]:
    """Every known field present in ``sent``, as a key path; walks ``expected`` for the shape."""
    if isinstance(expected, dict):
        for name, value in expected.items():
            if name not in sent:
                continue
            path = (*keys, name)
            yield path
            if name in OPAQUE:
                yield from ((*path, i) for i in range(len(value)))
            else:
                yield from _fields(value, sent[name], path)
    elif isinstance(expected, list):
        for index, value in enumerate(expected):
            yield (*keys, index)
            yield from _fields(value, sent[index], (*keys, index))


def _text(keys: tuple[Key, ...]) -> str:
    out = ""
    for key in keys:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out


def _parent(body: Any, keys: tuple[Key, ...]) -> Any:
    for key in keys[:-1]:
        body = body[key]
    return body


def _detailed(decoder: dec.Decoder[Any], data: dict[str, Any]) -> tuple[bool, Any]:
    try:
        return True, dec._converter().structure(data, decoder.cls)
    except Exception as exc:  # the detailed converter's verdict, whatever it is
        return False, exc


_REFUSED = object()


def _agreement(decoder: dec.Decoder[Any], body: bytes) -> bool:
    """Whether the accelerated path took ``body``; if it did, the general path took it too and
    gave the same model (compared by repr as well: ``Decimal("1.0") == Decimal("1")``)."""
    try:
        general: Any = decoder.general(body)
    except DecodeError:
        general = _REFUSED
    accelerated = decoder._accelerated
    if accelerated is None:
        return False
    try:
        value = accelerated(body)
    except Exception:  # passed on: the general path's verdict stands
        return False
    assert general is not _REFUSED, "the accelerated path took a body the rules refuse"
    unwrapped = value if decoder.unwrap is None else decoder.unwrap(value)
    assert unwrapped == general
    assert repr(unwrapped) == repr(general)
    assert dec.to_wire(unwrapped) == dec.to_wire(general)
    return True


def _fast_accepts(decoder: dec.Decoder[Any], data: dict[str, Any]) -> bool:
    try:
        decoder._structure(data)
    except Exception:  # the fast path only says no; the detailed converter says why
        return False
    return True


@pytest.mark.parametrize(("name", "decoder", "strategy"), CASES, ids=[c[0] for c in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_valid_bodies_decode_like_the_detailed_converter(
    name: str, decoder: dec.Decoder[Any], strategy: Any, data: st.DataObject
) -> None:
    sent, expected = data.draw(strategy)
    fast = decoder._structure(sent)
    ok, detailed = _detailed(decoder, sent)
    assert ok, detailed
    assert fast == detailed
    assert dec.to_wire(fast) == expected
    _agreement(decoder, orjson.dumps(sent))


@pytest.mark.parametrize(("name", "decoder", "strategy"), CASES, ids=[c[0] for c in CASES])
@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_bad_field_is_refused_with_its_exact_path(
    name: str, decoder: dec.Decoder[Any], strategy: Any, data: st.DataObject
) -> None:
    sent, expected = data.draw(strategy)
    fields = list(_fields(expected, sent))
    if not fields:
        return
    keys = data.draw(st.sampled_from(fields))
    body = copy.deepcopy(sent)
    parent = _parent(body, keys)
    removed = data.draw(st.booleans()) and isinstance(keys[-1], str)
    if removed:
        del parent[keys[-1]]
    else:
        parent[keys[-1]] = data.draw(wire.json_values | wire.hostile_leaves)

    _agreement(decoder, orjson.dumps(body))
    ok, detailed = _detailed(decoder, body)
    if ok:  # the replacement happens to be valid: the fast path must accept it too
        result = decoder(orjson.dumps(body))
        unwrapped = detailed if decoder.unwrap is None else decoder.unwrap(detailed)
        assert result == unwrapped
        return
    with pytest.raises(DecodeError) as caught:
        decoder(orjson.dumps(body))
    path, field = caught.value.path, _text(keys)
    # the replaced field itself, or (for an object put in its place) a field inside it
    assert path == field or (path is not None and path.startswith((f"{field}.", f"{field}[")))
    if removed:
        assert path == field
        assert keys[-1] not in OPTIONAL
        assert "missing" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ("0", True),
        ("1.", True),
        (".5", True),
        ("-1.25", True),
        ("+7", True),
        ("1E+2", True),
        ("2.5e-10", True),
        ("123456789012345678901234567890.123456789012345678901234567890", True),
        ("", False),
        (".", False),
        ("1.2.3", False),
        ("NaN", False),
        ("sNaN", False),
        ("Infinity", False),
        ("-Inf", False),
        ("1e", False),
        (" 1", False),
        ("1 ", False),
        ("1_000", False),
        ("0x10", False),
        ("١٢٣", False),  # Arabic-Indic digits: Decimal() takes them, the wire must not
        ("1e1_0", False),
        ("1" * 128, True),  # the bounds: 128 significant digits, exponent within +-128
        ("1e128", True),
        ("1e-128", True),
        ("0." + "0" * 127 + "1", True),
        ("1" * 129, False),
        ("1e129", False),
        ("1e-129", False),
        ("0." + "0" * 128 + "1", False),
        ("1e-999999999", False),
        ("0E+999999999", False),
    ],
)
def test_decimal_text_rules_are_the_same_on_both_paths(text: str, accepted: bool) -> None:
    order = {
        "transactionId": "t",
        "poolId": "p",
        "user": "u",
        "side": "BUY",
        "price": "1",
        "size": text,
        "filledSize": "0",
        "status": "OPEN",
        "timestamp": 1,
    }
    data = {"orders": [order]}
    assert _detailed(dec.ORDERS_PAGE, data)[0] is accepted
    assert _fast_accepts(dec.ORDERS_PAGE, data) is accepted
    body = orjson.dumps(data)
    if accepted:
        page = dec.ORDERS_PAGE(body)
        assert page.orders[0].size == Decimal(text)
    else:
        with pytest.raises(DecodeError) as caught:
            dec.ORDERS_PAGE(body)
        assert caught.value.path == "orders[0].size"


def test_decoded_instances_are_the_models_users_construct() -> None:
    """The fast path fills slots directly; the result must be indistinguishable."""
    body = orjson.dumps(
        {
            "orders": [
                {
                    "transactionId": "t",
                    "poolId": "p",
                    "user": "u",
                    "side": "sell",
                    "price": "1.50",
                    "size": "2",
                    "filledSize": "0",
                    "status": "REJECTED",
                    "timestamp": 1.5,
                }
            ]
        }
    )
    (decoded,) = dec.ORDERS_PAGE(body).orders
    built = Order(
        "t",
        "p",
        "u",
        Side.SELL,
        Decimal("1.50"),
        Decimal(2),
        Decimal(0),
        OrderStatus("REJECTED"),
        1.5,
    )
    assert decoded == built
    assert hash(decoded) == hash(built)
    assert repr(decoded) == repr(built)
    assert type(decoded) is Order
    assert decoded.side is Side.SELL
    assert decoded.status == "REJECTED"
    assert not decoded.status.is_known
    with pytest.raises(AttributeError):
        decoded.price = Decimal(3)  # type: ignore[misc]


# --- the accelerated path: used for ordinary bodies, never a different verdict ---------------


def _orders(n: int, **changes: Any) -> dict[str, Any]:
    return {"orders": [dict(order_wire(i, "0xu"), **changes) for i in range(n)], "cursor": "c"}


def test_the_accelerated_path_takes_ordinary_bodies() -> None:
    bodies: list[tuple[dec.Decoder[Any], Any]] = [
        (dec.ORDERS_PAGE, _orders(50)),
        (dec.ORDERS_PAGE, _orders(3, status="REJECTED", side="sell")),  # open, any-case enums
        (dec.ORDERS_PAGE, {"orders": [], "cursor": ""}),
        (dec.ORDERS_PAGE, {"orders": []}),
        (dec.POOL, pool_wire("p", "mainnet")),
        (dec.TOKENS, {"tokens": [token_wire("A"), dict(token_wire("B"), logoUri=None)]}),
        (dec.MARKETS, {"markets": [market_wire("t", "testnet")]}),
        (dec.LEADERBOARD_PAGE, leaderboard_wire({"page": "2", "limit": "10"})),
    ]
    for decoder, body in bodies:
        assert _agreement(decoder, orjson.dumps(body)), (decoder, body)
    page = dec.ORDERS_PAGE(orjson.dumps({"orders": [], "cursor": ""}))
    assert page.cursor is None
    assert isinstance(page.orders, tuple)
    tokens = dec.TOKENS(orjson.dumps({"tokens": [token_wire("A")]}))
    assert isinstance(tokens, tuple)


def test_the_accelerated_path_builds_the_contract_models() -> None:
    body = orjson.dumps(_orders(2, status="REJECTED"))
    value = dec.ORDERS_PAGE._accelerated(body)  # type: ignore[misc]
    assert type(value) is OrdersPage
    assert type(value.orders) is tuple
    order = value.orders[0]
    assert type(order) is Order
    assert order == dec.ORDERS_PAGE.general(body).orders[0]
    assert hash(order) == hash(dec.ORDERS_PAGE.general(body).orders[0])
    assert order.side is Side.BUY
    assert type(order.price) is Decimal
    assert not order.status.is_known
    with pytest.raises(AttributeError):
        order.price = Decimal(3)  # type: ignore[misc]
    assert not hasattr(order, "__dict__")


def _deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


# Bodies on which two JSON parsers could disagree: each must get the general path's verdict.
EDGE_BODIES: list[bytes] = [
    b'{"orders":[],"cursor":"a","cursor":"b"}',  # duplicate keys: the last one wins
    b'{"orders":[],"cursor":"\\ud800"}',  # a lone surrogate
    b'{"orders":[],"cursor":"\\udc00x"}',
    b'{"orders":[],"cursor":"\\ud83d\\ude00"}',  # a valid pair
    b'{"orders":[],"cursor":"a\x01"}',  # a raw control character
    b'{"orders":[],"cursor":"\xff"}',  # not UTF-8
    b'{"orders":[],"cursor":"\xed\xa0\x80"}',  # an encoded surrogate
    b'\xef\xbb\xbf{"orders":[]}',  # a byte order mark
    b'{"orders":[]} x',  # trailing data
    b'{"orders":[]}\n',
    b' {"orders":[]} ',
    b'{"orders":[],"x":1e-400}',
    b'{"orders":[],"x":"\xff"}',  # not UTF-8, in a field the client does not read
    b'{"orders":[],"x":["\xed\xa0\x80"]}',
    b'{"orders":[],"x":"\xc3\xa9"}',  # UTF-8 that is not ASCII
    b'{"orders":[],"x":NaN}',
    b'{"orders":[],"x":01}',
    b'{"orders":[],"x":-}',
    b'{"orders":[],"x":18446744073709551616}',
    b'{"orders":[{"transactionId":"t","poolId":"p","user":"u","side":"BUY","price":"1",'
    b'"size":"1","filledSize":"0","status":"OPEN","timestamp":-9223372036854775809}]}',
    b'{"orders":[{"transactionId":"t","poolId":"p","user":"u","side":"BUY","price":"1",'
    b'"size":"1","filledSize":"0","status":"OPEN","timestamp":99999999999999999999999}]}',
    b'{"orders":[],"\\u0063ursor":"escaped key"}',
    b'{"orders":[],"x":' + _deep(1000) + b"}",
    b'{"orders":[],"x":' + _deep(1025) + b"}",
    b'{"orders":[],"x":' + _deep(5000) + b"}",
    b'{"orders":[],"cursor":null}',
    b'{"orders":null}',
    b"[]",
    b"",
]


def _verdict(call: Any, body: bytes) -> tuple[str, Any]:
    try:
        value = call(body)
    except DecodeError as exc:
        return "refused", exc.path
    return "accepted", repr(value)


@pytest.mark.parametrize("body", EDGE_BODIES, ids=lambda b: repr(b[:40]))
def test_bodies_parsers_may_disagree_on_get_the_general_verdict(body: bytes) -> None:
    assert _verdict(dec.ORDERS_PAGE, body) == _verdict(dec.ORDERS_PAGE.general, body)
    _agreement(dec.ORDERS_PAGE, body)


@pytest.mark.parametrize(
    "ignored",
    [b"1e400", b"-1e400", b"[1e999]", b'{"a":1e309}', b"1" * 400, b"1" * 400 + b".5"],
    ids=lambda b: repr(b[:12]),
)
def test_a_number_past_float_range_in_an_ignored_field_is_ignored(ignored: bytes) -> None:
    """The one documented difference: orjson refuses the whole body, msgspec skips the field."""
    body = b'{"orders":' + orjson.dumps([order_wire(0, "u")]) + b',"x":' + ignored + b"}"
    without = b'{"orders":' + orjson.dumps([order_wire(0, "u")]) + b"}"
    assert dec.ORDERS_PAGE(body) == dec.ORDERS_PAGE(without)
    with pytest.raises(DecodeError) as caught:
        dec.ORDERS_PAGE.general(body)
    assert caught.value.path is None
    with pytest.raises(DecodeError):  # a number past float range where a number belongs
        dec.ORDERS_PAGE(without.replace(b'"timestamp":', b'"timestamp":' + ignored + b',"t":'))


@pytest.mark.parametrize(
    "timestamp", [2**63 - 1, 2**63, 2**64 - 1, -(2**63), 1.5, 1e300, 2**53 + 1]
)
def test_numbers_at_the_edges_decode_as_the_general_path_does(timestamp: Any) -> None:
    body = orjson.dumps(_orders(1, timestamp=timestamp))
    assert _verdict(dec.ORDERS_PAGE, body) == _verdict(dec.ORDERS_PAGE.general, body)
    _agreement(dec.ORDERS_PAGE, body)
    for decimals in (2**63, 2**64 - 1, 18.0):
        token = orjson.dumps({"tokens": [dict(token_wire("A"), decimals=decimals)]})
        assert _verdict(dec.TOKENS, token) == _verdict(dec.TOKENS.general, token)


@pytest.mark.parametrize(
    "number",
    [
        b"1e400",
        b"-1e309",
        b"1" * 400,
        b"1" * 309 + b".0",
        b"1" * 308,
        b"1e-400",
        b"18446744073709551616",
    ],
    ids=lambda b: repr(b[:12]),
)
def test_numbers_past_float_range_in_float_fields_get_the_general_verdict(number: bytes) -> None:
    body = orjson.dumps(pool_wire("p", "mainnet")).replace(b'"tvl":', b'"tvl":' + number + b',"t":')
    assert _verdict(dec.POOL, body) == _verdict(dec.POOL.general, body)
    _agreement(dec.POOL, body)


def test_the_accelerated_pool_is_the_contract_model() -> None:
    """Built through a private subclass, a decoded pool and its tokens are exactly the
    contract's frozen, slotted classes."""
    body = orjson.dumps(pool_wire("p", "mainnet"))
    accelerated = dec.POOL._accelerated
    assert accelerated is not None
    pool = accelerated(body)
    assert type(pool) is Pool
    assert type(pool.base_token) is Token
    assert type(pool.quote_token) is Token
    assert attrs.has(type(pool))
    assert not hasattr(pool, "__dict__")
    assert pool == dec.POOL.general(body)
    assert hash(pool) == hash(dec.POOL.general(body))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        pool.price = 1.0  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        pool.base_token.total_supply = Decimal(1)  # type: ignore[misc]


def test_decimals_are_exact_whatever_the_callers_decimal_context() -> None:
    """The accelerated path builds decimals in its own context: a caller's precision changes
    nothing (127 digits stay 127 digits, on both paths)."""
    text = "9" * 99 + "." + "1" * 28  # 128 characters: the accelerated path takes it
    body = orjson.dumps(_orders(1, size=text))
    with decimal.localcontext(prec=5):
        page = dec.ORDERS_PAGE(body)
        general = dec.ORDERS_PAGE.general(body)
    assert page.orders[0].size == Decimal(text)
    assert repr(page) == repr(general)
    assert _agreement(dec.ORDERS_PAGE, body)
