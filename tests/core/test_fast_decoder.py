"""The two decoding paths agree on every input.

The accelerated path (msgspec) decodes the bodies it can; the general path (orjson and the
detailed cattrs converter) decodes the rest and explains every failure. If they ever
disagreed, a body would be accepted that the contract rejects, or a valid body would fail
with a path that names nothing. So: valid bodies give equal models on both paths; a body with
one field replaced by any JSON value (or removed) is either accepted by both, or refused with
a DecodeError whose path is exactly that field; and the accelerated path never accepts what
the general path refuses, nor gives a model that differs from it in any digit or type.
"""

from __future__ import annotations

import copy
import decimal
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import attrs
import msgspec
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncapi_client import (
    DecodeError,
    Order,
    OrdersPage,
    OrderStatus,
    Pool,
    Side,
    Token,
    UserProfile,
    _fastpaths,
)
from asyncapi_client import _decode as dec
from tests import strategies as wire
from tests._oracle import (
    leaderboard_wire,
    market_wire,
    order_wire,
    pool_wire,
    token_wire,
    user_wire,
)

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


def _general_accepts(decoder: dec.Decoder[Any], data: dict[str, Any]) -> bool:
    try:
        decoder.general(orjson.dumps(data))
    except DecodeError:
        return False
    return True


@pytest.mark.parametrize(("name", "decoder", "strategy"), CASES, ids=[c[0] for c in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_valid_bodies_decode_like_the_detailed_converter(
    name: str, decoder: dec.Decoder[Any], strategy: Any, data: st.DataObject
) -> None:
    sent, expected = data.draw(strategy)
    general = decoder.general(orjson.dumps(sent))
    ok, detailed = _detailed(decoder, sent)
    assert ok, detailed
    assert dec.to_wire(detailed) == expected
    assert general == (detailed if decoder.unwrap is None else decoder.unwrap(detailed))
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
    if ok:  # the replacement happens to be valid: both paths accept it
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
    assert _general_accepts(dec.ORDERS_PAGE, data) is accepted
    body = orjson.dumps(data)
    if accepted:
        page = dec.ORDERS_PAGE(body)
        assert page.orders[0].size == Decimal(text)
    else:
        with pytest.raises(DecodeError) as caught:
            dec.ORDERS_PAGE(body)
        assert caught.value.path == "orders[0].size"


def test_decoded_instances_are_the_models_users_construct() -> None:
    """msgspec.convert builds the models without their __init__: the result must be
    indistinguishable from the models users construct."""
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


# --- no model is built behind its own __init__'s back ---------------------------------------


def _instances(value: Any, counts: dict[type, int]) -> dict[type, int]:
    """How many instances of each model class ``value`` holds (itself included)."""
    if isinstance(value, tuple):
        for item in value:
            _instances(item, counts)
    elif attrs.has(type(value)):
        counts[type(value)] = counts.get(type(value), 0) + 1
        for field in attrs.fields(type(value)):
            _instances(getattr(value, field.name), counts)
    return counts


GOOD_BODIES: list[tuple[str, dec.Decoder[Any], bytes]] = [
    ("tokens", dec.TOKENS, orjson.dumps({"tokens": [token_wire("A"), token_wire("B")]})),
    ("markets", dec.MARKETS, orjson.dumps({"markets": [market_wire("t", "testnet")]})),
    ("pool", dec.POOL, orjson.dumps(pool_wire("p", "mainnet"))),
    (
        "user",
        dec.USER,
        orjson.dumps(dict(user_wire("0xu", "mainnet"), orders=[order_wire(0, "u")])),
    ),
    ("orders", dec.ORDERS_PAGE, orjson.dumps(_orders(3))),
    ("leaderboard", dec.LEADERBOARD_PAGE, orjson.dumps(leaderboard_wire({"page": "1"}))),
]


@pytest.mark.parametrize("fast", [True, False], ids=["fast-build", "public-build"])
@pytest.mark.parametrize(("name", "decoder", "body"), GOOD_BODIES, ids=[b[0] for b in GOOD_BODIES])
def test_a_model_built_without_its_init_is_known_and_has_nothing_there_to_skip(
    monkeypatch: pytest.MonkeyPatch, fast: bool, name: str, decoder: dec.Decoder[Any], body: bytes
) -> None:
    """Every decode path, with each model's __init__ counting its calls: a model with fewer
    calls than instances was built without it, and must be one the import check covers and
    has passed (no validator, converter, pre- or post-init that would have been skipped)."""
    calls: dict[type, int] = {}

    def counting(cls: type) -> Any:
        init = cls.__dict__["__init__"]

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            calls[cls] = calls.get(cls, 0) + 1
            init(self, *args, **kwargs)

        return __init__

    for cls in dec._MODELS:
        monkeypatch.setattr(cls, "__init__", counting(cls))
    # the general path: the converter builds every model by its __init__
    general = dec._converter().structure(orjson.loads(body), decoder.cls)
    assert calls == _instances(general, {})
    accelerated = dec._accelerated(decoder.cls, fast=fast)
    if accelerated is None:
        return
    calls.clear()
    built = _instances(accelerated(body), {})
    skipped = {cls for cls, count in built.items() if calls.get(cls, 0) < count}
    assert skipped <= dec._BUILT_WITHOUT_INIT
    for cls in skipped:
        dec._check_built_without_init(cls)  # raises if it has work in __init__


@pytest.mark.parametrize(
    ("extra", "what"),
    [
        ({"price": attrs.field(validator=attrs.validators.instance_of(Decimal))}, "a validator"),
        ({"price": attrs.field(converter=Decimal)}, "a converter"),
        ({"__attrs_post_init__": lambda self: None}, "__attrs_post_init__"),
        ({"__attrs_pre_init__": lambda self: None}, "__attrs_pre_init__"),
    ],
    ids=["validator", "converter", "post-init", "pre-init"],
)
def test_the_import_check_refuses_a_model_with_work_in_its_init(
    extra: dict[str, Any], what: str
) -> None:
    """What would happen at import if a model the accelerated path builds grew a validator."""
    namespace: dict[str, Any] = {"__annotations__": {"price": Decimal}, "price": attrs.field()}
    namespace.update(extra)
    model = attrs.frozen(slots=True)(type("Priced", (), namespace))
    with pytest.raises(TypeError, match=f"Priced.*{what}"):
        dec._check_built_without_init(model)
    with pytest.raises(TypeError, match="Priced"):  # and a decoder for it is never made
        dec._accelerated(model)


def test_every_model_the_accelerated_path_builds_passed_the_check() -> None:
    assert {Token, Order, OrdersPage, Pool} <= dec._BUILT_WITHOUT_INIT
    assert UserProfile not in dec._BUILT_WITHOUT_INIT  # its converters run (general path)
    for cls in dec._BUILT_WITHOUT_INIT:
        dec._check_built_without_init(cls)


# --- the fast build and the public build beside it --------------------------------------------


@pytest.mark.parametrize(("name", "decoder", "strategy"), CASES, ids=[c[0] for c in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_fast_and_the_public_build_give_the_same_models(
    name: str, decoder: dec.Decoder[Any], strategy: Any, data: st.DataObject
) -> None:
    fast, public = dec._accelerated(decoder.cls, fast=True), dec._accelerated(decoder.cls, False)
    if fast is None or public is None:
        assert fast is public
        return
    sent, _ = data.draw(strategy)
    body = orjson.dumps(sent)
    verdicts = []
    for accelerated in (fast, public):
        try:
            verdicts.append(repr(accelerated(body)))
        except Exception:  # passed on to the general path
            verdicts.append("passed on")
    assert verdicts[0] == verdicts[1]


def test_the_public_build_passes_on_what_a_callers_context_would_make_nan() -> None:
    """msgspec.convert makes decimals in the caller's context: with InvalidOperation not
    trapped, "1.2.3" would become NaN, so the public build leaves such bodies to the rules."""
    public = dec._accelerated(OrdersPage, fast=False)
    assert public is not None
    body = orjson.dumps(_orders(1, size="1.2.3"))
    with decimal.localcontext() as context:
        context.traps[decimal.InvalidOperation] = False
        with pytest.raises(dec._Refused):
            public(body)
        with pytest.raises(DecodeError) as caught:
            dec.ORDERS_PAGE(body)
    assert caught.value.path == "orders[0].size"
    good = orjson.dumps(_orders(1))
    assert public(good) == dec.ORDERS_PAGE.general(good)


_WHICH_BUILD = """
import sys
from asyncapi_client import _decode, _fastpaths
print(_fastpaths.FAST_BUILD)
print(_decode.POOL(sys.argv[1].encode()).base_token.total_supply)
"""


@pytest.mark.parametrize(("env", "fast"), [("", True), ("1", False)])
def test_the_fast_build_is_chosen_once_at_import_on_verified_pythons(env: str, fast: bool) -> None:
    import os
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", _WHICH_BUILD, orjson.dumps(pool_wire("p", "mainnet")).decode()],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, _fastpaths.PUBLIC_ONLY_ENV: env},
    )
    verified = sys.implementation.name == "cpython" and sys.version_info[:2] in (
        _fastpaths.FAST_BUILD_VERIFIED
    )
    assert run.stdout.split() == [str(fast and verified), token_wire("X")["totalSupply"]]


# --- nesting: one bound, whatever the interpreter -------------------------------------------


def _nested_body(depth: int, orders: int) -> bytes:
    """An orders page whose unknown field ``x`` makes the body nest ``depth`` levels deep."""
    inner = depth - 1  # the top object is level 1
    page = orjson.dumps(_orders(orders))
    return page[:-1] + b',"x":' + b"[" * inner + b"]" * inner + b"}"


@pytest.mark.parametrize("orders", [0, 40], ids=["short-page", "long-page"])
def test_a_body_nesting_past_max_depth_is_refused_on_every_path(orders: int) -> None:
    at_bound = _nested_body(dec.MAX_DEPTH, orders)
    past = _nested_body(dec.MAX_DEPTH + 1, orders)
    assert len(past) >= dec._SHORT  # no body this deep is short enough to skip unknown values
    for decode in (dec.ORDERS_PAGE, dec.ORDERS_PAGE.general):
        assert len(decode(at_bound).orders) == orders
        with pytest.raises(DecodeError) as caught:
            decode(past)
        assert caught.value.path is None  # not JSON we take: orjson's verdict


def test_long_bodies_take_the_accelerated_path_unless_they_carry_unknown_fields() -> None:
    accelerated = dec.ORDERS_PAGE._accelerated
    assert accelerated is not None
    long_page = orjson.dumps(_orders(40))
    assert len(long_page) >= dec._SHORT
    assert accelerated(long_page) == dec.ORDERS_PAGE.general(long_page)
    with_unknown = orjson.dumps(dict(_orders(40), total=40))
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        accelerated(with_unknown)  # the general path decodes it (ignoring "total")
    assert dec.ORDERS_PAGE(with_unknown) == dec.ORDERS_PAGE.general(long_page)
    short = orjson.dumps({"orders": [], "cursor": "c", "total": [[1]]})
    assert len(short) < dec._SHORT
    assert accelerated(short).cursor == "c"  # short: unknown values skipped by msgspec


def test_a_hostile_nesting_of_a_million_levels_is_a_decode_error() -> None:
    """2 MB of brackets: refused by both parsers within their bounds (orjson before 3.9.15
    had none and crashed the process), never a crash or a RecursionError."""
    levels = 10**6
    body = b'{"orders":[],"x":' + b"[" * levels + b"]" * levels + b"}"
    for decode in (dec.ORDERS_PAGE, dec.ORDERS_PAGE.general):
        with pytest.raises(DecodeError) as caught:
            decode(body)
        assert caught.value.path is None
