"""The CLI's value helpers: exact bounded decimals, any-depth JSON, visible escapes."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from asyncapi_client import OrdersPage, Side
from asyncapi_client._cli._text import (
    OutputError,
    _dumps_deep,
    decimal_text,
    dumps,
    plain,
    tty_safe_json,
    visible,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=30,
)


@given(json_values, st.booleans())
def test_the_deep_encoder_writes_what_orjson_writes(value: Any, indent: bool) -> None:
    option = orjson.OPT_INDENT_2 if indent else 0
    assert _dumps_deep(value, indent) == orjson.dumps(value, option=option)


@pytest.mark.parametrize("indent", [False, True])
def test_dumps_handles_any_depth_and_any_int(indent: bool) -> None:
    deep: Any = 1
    for _ in range(1500):  # indented, the text grows with the square of the depth
        deep = {"x": [deep]}
    text = dumps(deep, indent=indent)
    assert text.count(b'"x"') == 1500
    assert dumps([2**70], indent=indent).replace(b" ", b"").replace(b"\n", b"") == (
        b"[1180591620717411303424]"
    )


def test_plain_converts_models_and_deep_free_form_data_without_recursion() -> None:
    deep: Any = "leaf"
    for _ in range(5000):
        deep = {"k": (deep,)}
    got = plain({"page": OrdersPage(orders=[], cursor="c"), "deep": deep, "side": Side.BUY})
    assert got["page"] == {"orders": [], "cursor": "c"}
    assert got["side"] == "BUY"
    for _ in range(5000):
        got["deep"] = got["deep"]["k"][0]
    assert got["deep"] == "leaf"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("0.0000001", "0.0000001"),
        ("1E+2", "1E+2"),
        ("-12.50", "-12.50"),
        ("1e-128", "0." + "0" * 127 + "1"),
        ("1e-129", "1E-129"),
        ("1e-999999999", "1E-999999999"),
        ("9" * 128, "9" * 128),
    ],
)
def test_decimal_text_is_exact_and_bounded(text: str, shown: str) -> None:
    assert decimal_text(Decimal(text)) == shown
    assert Decimal(shown) == Decimal(text)
    assert len(shown) <= 300


@pytest.mark.parametrize("text", ["9" * 129, "NaN", "Infinity"])
def test_decimal_text_refuses_what_it_cannot_print_short(text: str) -> None:
    with pytest.raises(OutputError):
        decimal_text(Decimal(text), "orders[0].price")


def test_plain_names_the_path_of_a_refused_decimal() -> None:
    with pytest.raises(OutputError, match=r"^\[1\]\.size has 200 significant digits"):
        plain([{"size": Decimal(1)}, {"size": Decimal("1" * 200)}])


def test_visible_escapes_every_control_and_bidi_character() -> None:
    assert visible("a\x1b[2Jb\x07\r\n\t\x7f\x9b\u202e\u2066c") == (
        "a\\x1b[2Jb\\x07\\r\\n\\t\\x7f\\x9b\\u202e\\u2066c"
    )
    assert visible("plain text, ünïcode, 日本") == "plain text, ünïcode, 日本"


@given(st.text())
def test_tty_safe_json_is_the_same_json_with_nothing_a_terminal_acts_on(text: str) -> None:
    data = tty_safe_json(orjson.dumps({"t": text}))
    assert json.loads(data) == {"t": text}
    decoded = data.decode()
    assert not any(0x7F <= ord(c) <= 0x9F or c in "\u202e\u200e\u2066\x1b" for c in decoded)
