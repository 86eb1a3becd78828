"""Hypothesis strategies for the wire: JSON-ready dicts in camelCase, as the server sends them.

Each strategy draws a pair ``(sent, expected)``: ``sent`` is what the server may put on the
wire (optional fields may be missing, unknown fields may be added), ``expected`` is what
``to_wire(decode(sent))`` must give back (every field present, unknown ones gone).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from asyncapi_client import MarketType, OrderStatus, Side

__all__ = [
    "Wire",
    "decimal_text",
    "hostile_leaves",
    "json_values",
    "leaderboard_entries",
    "leaderboard_pages",
    "markets",
    "markets_bodies",
    "orders",
    "orders_pages",
    "pools",
    "tokens",
    "tokens_bodies",
    "unknown_enum_value",
    "user_profiles",
]

Wire = tuple[dict[str, Any], dict[str, Any]]

#: Text orjson can carry (no lone surrogates).
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)

#: JSON integers orjson writes and reads back as integers.
json_ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)

#: Finite floats: JSON has no NaN or infinity.
json_floats = st.floats(allow_nan=False, allow_infinity=False)

#: Any JSON value (for the opaque balances and positions).
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | json_ints | json_floats | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)

#: Leaves where one JSON parser or validator might differ from another: text Decimal() reads
#: but the rules refuse, numbers at the edges of 64 bits and of float, integral floats.
hostile_leaves: st.SearchStrategy[Any] = st.sampled_from(
    [
        "NaN",
        "sNaN",
        "Infinity",
        "-inf",
        " 1",
        "1 ",
        "1\n",
        "1_000",
        "\u0661\u0662",
        "\uff11",
        "1e5",
        "1E+2",
        "-1.5",
        "+1",
        ".5",
        "5.",
        "",
        ".",
        "1.2.3",
        "0" * 129,
        "1" * 128,
        "1" * 129,
        "0." + "0" * 127 + "1",
        "1e-999999999",
        "BUY",
        "sell",
        "amm",
        "REJECTED",
        2**63 - 1,
        2**63,
        2**64 - 1,
        -(2**63),
        2**53,
        2**53 + 1,
        18.0,
        -0.0,
        1e308,
        5e-324,
        2.0**63,
        float(2**53),
        True,
        False,
    ]
)

#: Decimal numbers as text, in plain positional notation without superfluous leading zeros,
#: with up to 80 digits on each side of the point: far past float and the Decimal context.
decimal_text = st.builds(
    lambda negative, whole, fraction: (
        ("-" if negative else "") + str(whole) + ("" if fraction is None else "." + fraction)
    ),
    st.booleans(),
    st.integers(min_value=0, max_value=10**80 - 1),
    st.none() | st.text("0123456789", min_size=1, max_size=80),
)


def unknown_enum_value(known: type[Side] | type[OrderStatus] | type[MarketType]) -> Any:
    """A string the enum does not know in any case (so it must be kept as sent)."""
    names = {member.value.upper() for member in known}
    return text.filter(lambda s: s.upper() not in names and s.lower().upper() not in names)


def enum_values(known: type[Side] | type[OrderStatus] | type[MarketType]) -> Any:
    return st.sampled_from([member.value for member in known]) | unknown_enum_value(known)


def _with_extras(draw: st.DrawFn, sent: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    """Add fields the contract does not know: the decoder must ignore them."""
    extras = draw(
        st.dictionaries(text.filter(lambda k: k not in expected), json_values, max_size=3)
    )
    return {**sent, **extras}


def _optional_field(
    draw: st.DrawFn, sent: dict[str, Any], expected: dict[str, Any], name: str, values: Any
) -> None:
    """A nullable field: a value, null, or missing (missing comes back as None)."""
    choice = draw(st.sampled_from(["value", "null", "missing"]))
    if choice == "value":
        sent[name] = expected[name] = draw(values)
    else:
        expected[name] = None
        if choice == "null":
            sent[name] = None


@st.composite
def tokens(draw: st.DrawFn) -> Wire:
    expected: dict[str, Any] = {
        "address": draw(text),
        "name": draw(text),
        "symbol": draw(text),
        "decimals": draw(json_ints),
        "totalSupply": draw(decimal_text),
    }
    sent = dict(expected)
    _optional_field(draw, sent, expected, "logoUri", text)
    _optional_field(draw, sent, expected, "priceUsd", json_floats)
    return _with_extras(draw, sent, expected), expected


@st.composite
def markets(draw: st.DrawFn) -> Wire:
    (token0, token0_expected), (token1, token1_expected) = draw(tokens()), draw(tokens())
    fields = {
        "address": draw(text),
        "type": draw(enum_values(MarketType)),
        "tvl": draw(json_floats),
        "volume24h": draw(json_floats),
        "fee": draw(json_floats),
    }
    expected = {**fields, "token0": token0_expected, "token1": token1_expected}
    sent = {**fields, "token0": token0, "token1": token1}
    return _with_extras(draw, sent, expected), expected


@st.composite
def pools(draw: st.DrawFn) -> Wire:
    (base, base_expected), (quote, quote_expected) = draw(tokens()), draw(tokens())
    fields = {
        "poolId": draw(text),
        "price": draw(json_floats),
        "priceChange24h": draw(json_floats),
        "volume24h": draw(json_floats),
        "tvl": draw(json_floats),
    }
    expected = {**fields, "baseToken": base_expected, "quoteToken": quote_expected}
    sent = {**fields, "baseToken": base, "quoteToken": quote}
    return _with_extras(draw, sent, expected), expected


@st.composite
def orders(draw: st.DrawFn) -> Wire:
    expected: dict[str, Any] = {
        "transactionId": draw(text),
        "poolId": draw(text),
        "user": draw(text),
        "side": draw(enum_values(Side)),
        "price": draw(decimal_text),
        "size": draw(decimal_text),
        "filledSize": draw(decimal_text),
        "status": draw(enum_values(OrderStatus)),
        "timestamp": draw(json_ints | json_floats),
    }
    return _with_extras(draw, dict(expected), expected), expected


def _pairs(strategy: st.SearchStrategy[Wire], max_size: int = 4) -> Any:
    return st.lists(strategy, max_size=max_size).map(
        lambda pairs: ([sent for sent, _ in pairs], [exp for _, exp in pairs])
    )


@st.composite
def user_profiles(draw: st.DrawFn) -> Wire:
    order_list, order_expected = draw(_pairs(orders()))
    fields = {
        "address": draw(text),
        "balances": draw(st.lists(st.dictionaries(text, json_values, max_size=3), max_size=3)),
        "positions": draw(st.lists(st.dictionaries(text, json_values, max_size=3), max_size=3)),
    }
    expected = {**fields, "orders": order_expected}
    sent = {**fields, "orders": order_list}
    return _with_extras(draw, sent, expected), expected


@st.composite
def leaderboard_entries(draw: st.DrawFn) -> Wire:
    expected: dict[str, Any] = {
        "rank": draw(json_ints),
        "address": draw(text),
        "score": draw(json_floats),
    }
    return _with_extras(draw, dict(expected), expected), expected


@st.composite
def orders_pages(draw: st.DrawFn) -> Wire:
    order_list, order_expected = draw(_pairs(orders()))
    expected: dict[str, Any] = {"orders": order_expected}
    sent: dict[str, Any] = {"orders": order_list}
    # A non-empty cursor is kept; null or missing both mean "no further page".
    _optional_field(draw, sent, expected, "cursor", text.filter(bool))
    return _with_extras(draw, sent, expected), expected


@st.composite
def leaderboard_pages(draw: st.DrawFn) -> Wire:
    entries, entries_expected = draw(_pairs(leaderboard_entries()))
    fields = {
        "page": draw(json_ints),
        "limit": draw(json_ints),
        "total": draw(json_ints),
        "totalPages": draw(json_ints),
    }
    expected = {**fields, "leaderboard": entries_expected}
    sent = {**fields, "leaderboard": entries}
    return _with_extras(draw, sent, expected), expected


@st.composite
def tokens_bodies(draw: st.DrawFn) -> Wire:
    token_list, expected = draw(_pairs(tokens()))
    return {"tokens": token_list}, {"tokens": expected}


@st.composite
def markets_bodies(draw: st.DrawFn) -> Wire:
    market_list, expected = draw(_pairs(markets(), max_size=3))
    return {"markets": market_list}, {"markets": expected}
