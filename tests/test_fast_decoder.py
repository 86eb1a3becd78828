"""The generated fast decoder agrees with cattrs' detailed converter on every input.

The fast path decodes every response; the detailed converter only explains failures. If
the two ever disagreed, a body would be accepted that the contract rejects, or a valid body
would fail with a path that names nothing. So: valid bodies give equal models, and a body
with one field replaced by any JSON value (or removed) is either accepted by both, or
refused with a DecodeError whose path is exactly that field.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncapi_client import DecodeError, Order, OrderStatus, Side
from asyncapi_client import _decode as dec
from tests import strategies as wire

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
        return True, dec._DETAILED.structure(data, decoder.cls)
    except Exception as exc:  # the detailed converter's verdict, whatever it is
        return False, exc


def _fast_accepts(decoder: dec.Decoder[Any], data: dict[str, Any]) -> bool:
    try:
        decoder._structure(data, None)
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
    fast = decoder._structure(sent, None)
    ok, detailed = _detailed(decoder, sent)
    assert ok, detailed
    assert fast == detailed
    assert dec.to_wire(fast) == expected


@pytest.mark.parametrize(("name", "decoder", "strategy"), CASES, ids=[c[0] for c in CASES])
@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
        parent[keys[-1]] = data.draw(wire.json_values)

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
