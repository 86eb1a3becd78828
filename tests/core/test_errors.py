"""The error tree of the contract, the status -> class mapping, Retry-After parsing, messages."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime

import pytest
from multidict import CIMultiDict

import asyncapi_client
from asyncapi_client import (
    ApiError,
    BadRequestError,
    DecodeError,
    LimiterError,
    NotFoundError,
    PaginationError,
    RateLimitError,
    RequestTimeoutError,
    ResponseTooLargeError,
    ServerError,
    StatusError,
    TransportError,
    _errors,
)
from asyncapi_client._errors import parse_retry_after, status_error

# class -> its parents, exactly as the contract's Errors table draws them
TREE: dict[type[BaseException], tuple[type[BaseException], ...]] = {
    ApiError: (Exception,),
    TransportError: (ApiError,),
    RequestTimeoutError: (TransportError, TimeoutError),
    StatusError: (ApiError,),
    BadRequestError: (StatusError,),
    NotFoundError: (StatusError,),
    RateLimitError: (StatusError,),
    ServerError: (StatusError,),
    DecodeError: (ApiError,),
    ResponseTooLargeError: (TransportError,),
    LimiterError: (TransportError,),
    PaginationError: (ApiError,),
}


@pytest.mark.parametrize("cls", list(TREE), ids=lambda c: c.__name__)
def test_error_tree(cls: type[BaseException]) -> None:
    for parent in TREE[cls]:
        assert issubclass(cls, parent)
    # ...and no other error class of the tree is an ancestor it should not have.
    ancestors = {c for c in TREE if c is not cls and issubclass(cls, c)}
    expected: set[type[BaseException]] = set()
    todo = [p for p in TREE[cls] if p in TREE]
    while todo:
        parent = todo.pop()
        expected.add(parent)
        todo.extend(p for p in TREE[parent] if p in TREE)
    assert ancestors == expected


def test_every_public_error_is_in_the_tree() -> None:
    public = {
        getattr(asyncapi_client, name)
        for name in asyncapi_client.__all__
        if isinstance(getattr(asyncapi_client, name), type)
        and issubclass(getattr(asyncapi_client, name), BaseException)
    }
    assert public == set(TREE)


def test_the_tree_is_drawn_in_the_module_docstring() -> None:
    doc = _errors.__doc__ or ""
    for cls in TREE:
        assert cls.__name__ in doc


def test_a_timeout_is_also_a_builtin_timeout_error() -> None:
    error = RequestTimeoutError("slow", url="http://h/api/x", network="mainnet")
    with pytest.raises(TimeoutError):
        raise error


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, BadRequestError),
        (404, NotFoundError),
        (429, RateLimitError),
        (500, ServerError),
        (501, ServerError),
        (503, ServerError),
        (599, ServerError),
        (401, StatusError),
        (403, StatusError),
        (418, StatusError),
        (422, StatusError),
        (600, StatusError),
        (302, StatusError),
    ],
)
def test_status_error_class(status: int, cls: type[StatusError]) -> None:
    error = status_error(status, url="http://h/api/tokens", body="x", headers={"A": "b"})
    assert type(error) is cls
    assert error.status == status
    assert error.url == "http://h/api/tokens"
    assert error.body == "x"
    assert error.headers == {"A": "b"}


def test_status_error_message() -> None:
    error = status_error(
        503, url="http://h/api/x", body="  busy\n\n  try   later ", headers={}, network="testnet"
    )
    assert str(error) == "HTTP 503: busy try later ([testnet] http://h/api/x)"
    empty = status_error(418, url="http://h/api/x", body="", headers={})
    assert str(empty) == "HTTP 418 (http://h/api/x)"
    assert empty.network is None


def test_status_error_body_is_truncated() -> None:
    body = "x" * 100_000
    error = status_error(500, url="u", body=body, headers={})
    assert len(error.body) <= 4096
    assert body.startswith(error.body.rstrip("…"))
    assert len(str(error)) < 400
    short = status_error(500, url="u", body="y" * 2048, headers={})
    assert short.body == "y" * 2048


def test_status_error_headers_are_a_snapshot() -> None:
    headers = {"Retry-After": "1"}
    error = status_error(429, url="u", body="", headers=headers)
    headers["Retry-After"] = "999"
    assert error.headers["Retry-After"] == "1"


def test_rate_limit_error_carries_retry_after() -> None:
    error = status_error(429, url="u", body="", headers={"Retry-After": "4"})
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 4.0
    assert status_error(429, url="u", body="", headers={}).retry_after is None  # type: ignore[attr-defined]


NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("soon", None),
        ("nan", None),
        ("inf", None),
        ("-inf", 0.0),
        ("120", 120.0),
        ("0", 0.0),
        ("1.5", 1.5),
        ("-5", 0.0),
        ("  30  ", 30.0),
        ("Wed, 01 May 2024 12:00:30 GMT", 30.0),
        ("Wed, 01 May 2024 11:59:00 GMT", 0.0),
        ("Wed, 01 May 2024 12:01:00 -0000", 60.0),  # no zone given: taken as UTC
        ("Wed, 01 May 2024 14:00:00 +0200", 0.0),
        ("Wed, 99 Foo 2024 12:00:00 GMT", None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=NOW) == expected


def test_parse_retry_after_against_the_clock() -> None:
    import time

    header = email.utils.formatdate(time.time() + 40, usegmt=True)
    seconds = parse_retry_after(header)
    assert seconds is not None
    assert 30 <= seconds <= 41


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (ApiError("boom"), "boom"),
        (ApiError("boom", url="http://h/api/x"), "boom (http://h/api/x)"),
        (ApiError("boom", network="testnet"), "boom ([testnet])"),
        (
            TransportError("refused", url="http://h/api/x", network="mainnet"),
            "refused ([mainnet] http://h/api/x)",
        ),
        (DecodeError("bad", path="a.b", url="u", network="mainnet"), "bad ([mainnet] u)"),
    ],
)
def test_messages_name_network_and_url(error: ApiError, text: str) -> None:
    assert str(error) == text


def test_error_attributes() -> None:
    decode = DecodeError("bad", path="orders[3].price")
    assert (decode.path, decode.url, decode.network, decode.message) == (
        "orders[3].price",
        None,
        None,
        "bad",
    )
    too_large = ResponseTooLargeError("big", limit=10, url="u", network="mainnet")
    assert too_large.limit == 10
    assert isinstance(too_large, TransportError)
    assert PaginationError("again").message == "again"


def test_status_error_headers_are_case_insensitive_and_keep_repeats() -> None:
    headers = CIMultiDict([("X-Request-ID", "abc"), ("Link", "<a>"), ("Link", "<b>")])
    error = status_error(503, url="http://h/api/x", body="", headers=headers)
    assert error.headers["x-request-id"] == "abc"
    assert error.headers.getall("link") == ["<a>", "<b>"]  # type: ignore[attr-defined]


def test_attempts_are_told_only_when_there_were_several() -> None:
    error = ServerError("HTTP 503", status=503, url="http://h/api/x", network="mainnet")
    assert error.attempts == 0
    error.attempts = 1
    assert str(error) == "HTTP 503 ([mainnet] http://h/api/x)"
    error.attempts = 4
    assert str(error) == "HTTP 503 after 4 attempts ([mainnet] http://h/api/x)"
    assert str(ApiError("plain")) == "plain"
