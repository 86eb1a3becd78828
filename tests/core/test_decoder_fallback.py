"""The decoder's accelerated path hands a body it does not take to the general path, and
nothing else: a bug of the accelerated path (an exception it does not expect) is raised, so
it fails a test instead of only making decoding slower."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from asyncapi_client import DecodeError
from asyncapi_client import _decode as dec
from tests._oracle import pool_wire


def _raising(exc: BaseException) -> Any:
    def accelerated(body: bytes) -> Any:
        raise exc

    return accelerated


def test_a_bug_of_the_accelerated_path_is_raised_not_hidden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if dec.POOL._accelerated is None:
        pytest.skip("no accelerated path for this model here")
    monkeypatch.setattr(dec.POOL, "_accelerated", _raising(AttributeError("a bug")))
    with pytest.raises(AttributeError, match="a bug"):
        dec.POOL(orjson.dumps(pool_wire("p", "mainnet")))


@pytest.mark.parametrize(
    "body",
    [
        b'{"poolId": 5}',  # a type msgspec refuses
        b'{"poolId": "p"',  # not JSON
        b'{"poolId": "\xff"}',  # not UTF-8
    ],
    ids=["wrong-type", "not-json", "not-utf8"],
)
def test_a_body_the_accelerated_path_refuses_gets_the_general_paths_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        dec.POOL(body)


def test_a_bad_cursor_is_refused_by_the_general_path_with_its_field() -> None:
    page = {"orders": [], "cursor": 7}
    with pytest.raises(DecodeError, match="cursor"):
        dec.ORDERS_PAGE(orjson.dumps(page))
