"""The retry decision (``asyncapi_client/_retry.py``): a pure function, tested as a table.

No clock and no server: the random source is pinned to either end of its range, and an
HTTP-date ``Retry-After`` is read against a given ``now``.
"""

from __future__ import annotations

import email.utils
import random

import attrs
import pytest

from asyncapi_client import (
    ApiError,
    DecodeError,
    NotFoundError,
    PaginationError,
    RateLimitError,
    RequestTimeoutError,
    ResponseTooLargeError,
    RetryEvent,
    ServerError,
    StatusError,
    TransportError,
)
from asyncapi_client._errors import status_error
from asyncapi_client._limiters import MAX_HOLD
from asyncapi_client._network import Network
from asyncapi_client._retry import Decision, RetryPolicy, decide, mark_final, retryable

NOW = 1_800_000_000.0
URL = "http://h.example/api/clob/pools/p"


class Low:
    """The bottom of every range."""

    def uniform(self, a: float, b: float) -> float:
        return a


class High:
    """The top of every range."""

    def uniform(self, a: float, b: float) -> float:
        return b


def answer(status: int, retry_after: str | None = None) -> StatusError:
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    return status_error(status, url=URL, body="", headers=headers)


def http_date(seconds_from_now: float) -> str:
    return email.utils.formatdate(NOW + seconds_from_now, usegmt=True)


POLICY = RetryPolicy()  # 3 retries, 0.5 s doubling to 8 s, Retry-After cap 60 s
DROPPED = TransportError("the server closed the connection", url=URL)

TABLE: list[tuple[str, ApiError, int, Decision, Decision]] = [
    # name, error, attempt (0-based), decision with the random source low, and high
    ("503, first back-off", answer(503), 0, Decision(True, 0.0), Decision(True, 0.5)),
    ("503, second back-off", answer(503), 1, Decision(True, 0.0), Decision(True, 1.0)),
    ("dropped, third back-off", DROPPED, 2, Decision(True, 0.0), Decision(True, 2.0)),
    (
        "timeout, back-off",
        RequestTimeoutError("t", url=URL),
        0,
        Decision(True, 0.0),
        Decision(True, 0.5),
    ),
    ("500", answer(500), 0, Decision(True, 0.0), Decision(True, 0.5)),
    ("502", answer(502), 0, Decision(True, 0.0), Decision(True, 0.5)),
    ("504", answer(504), 0, Decision(True, 0.0), Decision(True, 0.5)),
    # a 429 without Retry-After: at least half the step (the floor), and a hold as long
    ("429 floor", answer(429), 0, Decision(True, 0.25, 0.25), Decision(True, 0.5, 0.5)),
    ("429 floor, later", answer(429), 2, Decision(True, 1.0, 1.0), Decision(True, 2.0, 2.0)),
    # Retry-After, in seconds or as an HTTP date: no jitter
    ("503 Retry-After 2", answer(503, "2"), 0, Decision(True, 2.0), Decision(True, 2.0)),
    ("429 Retry-After 3", answer(429, "3"), 1, Decision(True, 3.0, 3.0), Decision(True, 3.0, 3.0)),
    (
        "503 Retry-After date",
        answer(503, http_date(7)),
        0,
        Decision(True, 7.0),
        Decision(True, 7.0),
    ),
    (
        "date in the past",
        answer(503, http_date(-30)),
        0,
        Decision(True, 0.0),
        Decision(True, 0.0),
    ),
    ("unreadable Retry-After", answer(503, "soon"), 0, Decision(True, 0.0), Decision(True, 0.5)),
    ("Retry-After at the cap", answer(503, "60"), 0, Decision(True, 60.0), Decision(True, 60.0)),
    # past the cap: not waited for; a 429 still holds the network that long
    (
        "503 Retry-After past the cap",
        answer(503, "61"),
        0,
        Decision(
            False,
            why="the server sent Retry-After: 61, longer than retry_after_cap=60s: not waited for",
        ),
        Decision(
            False,
            why="the server sent Retry-After: 61, longer than retry_after_cap=60s: not waited for",
        ),
    ),
    ("attempt past max_retries", answer(503), 10, Decision(False), Decision(False)),
    # retries spent: no retry, but a 429 still holds the network
    ("503, retries spent", answer(503), 3, Decision(False), Decision(False)),
    ("429, retries spent", answer(429), 3, Decision(False, 2.0, 2.0), Decision(False, 4.0, 4.0)),
    # never retried
    ("404", answer(404), 0, Decision(False), Decision(False)),
    ("400", answer(400), 0, Decision(False), Decision(False)),
    ("302", answer(302), 0, Decision(False), Decision(False)),
    ("decode", DecodeError("d", path="x"), 0, Decision(False), Decision(False)),
    ("pagination", PaginationError("p"), 0, Decision(False), Decision(False)),
    (
        "too large",
        ResponseTooLargeError("big", limit=1, url=URL),
        0,
        Decision(False),
        Decision(False),
    ),
    (
        "cannot heal",
        mark_final(TransportError("cert", url=URL)),
        0,
        Decision(False),
        Decision(False),
    ),
]


def _expected(decision: Decision) -> Decision:
    """A decision that does not retry waits nothing; its hold is kept."""
    return decision if decision.retry else attrs.evolve(decision, wait=0.0)


@pytest.mark.parametrize(
    ("error", "attempt", "low", "high"),
    [row[1:] for row in TABLE],
    ids=[row[0] for row in TABLE],
)
def test_the_decision_table(error: ApiError, attempt: int, low: Decision, high: Decision) -> None:
    assert decide(POLICY, error, attempt, Low(), now=NOW) == _expected(low)
    assert decide(POLICY, error, attempt, High(), now=NOW) == _expected(high)


def test_the_back_off_is_capped_at_eight_seconds() -> None:
    policy = RetryPolicy(max_retries=20)
    assert decide(policy, answer(503), 10, High(), now=NOW) == Decision(True, 8.0)
    assert decide(policy, answer(429), 10, Low(), now=NOW) == Decision(True, 4.0, 4.0)


@pytest.mark.parametrize("attempt", range(6))
def test_full_jitter_stays_within_its_bounds(attempt: int) -> None:
    source = random.Random(attempt)
    step = min(8.0, 0.5 * 2**attempt)
    policy = RetryPolicy(max_retries=10)
    plain = [decide(policy, answer(503), attempt, source).wait for _ in range(500)]
    limited = [decide(policy, answer(429), attempt, source).wait for _ in range(500)]
    assert all(0.0 <= w <= step for w in plain)
    assert min(plain) < step * 0.1  # the whole range is used
    assert max(plain) > step * 0.9
    assert all(step / 2 <= w <= step for w in limited)


def test_a_429_past_the_cap_holds_the_network_that_long() -> None:
    decision = decide(POLICY, answer(429, "120"), 0, Low(), now=NOW)
    assert decision.retry is False
    assert decision.hold == 120.0
    assert "retry_after_cap=60s" in decision.why


def test_the_429_reading_is_used_when_no_clock_is_given() -> None:
    error = answer(429, "5")
    assert isinstance(error, RateLimitError)
    assert decide(POLICY, error, 0, Low()) == Decision(True, 5.0, 5.0)


def test_testing_mode_keeps_the_attempts_and_drops_every_wait_and_hold() -> None:
    testing = RetryPolicy(wait=False)
    assert decide(testing, answer(429, "5"), 0, High(), now=NOW) == Decision(True, 0.0)
    assert decide(testing, answer(503), 2, High(), now=NOW) == Decision(True, 0.0)
    assert decide(testing, answer(503), 3, High(), now=NOW) == Decision(False)
    assert decide(testing, answer(429, "120"), 0, High(), now=NOW).hold is None


def test_retryable() -> None:
    assert retryable(answer(503))
    assert retryable(DROPPED)
    assert not retryable(answer(404))
    assert not retryable(NotFoundError("x", status=404, url=URL))
    assert not retryable(mark_final(answer(503)))
    assert retryable(ServerError("x", status=500, url=URL))


def test_a_retry_event_is_frozen() -> None:
    event = RetryEvent("pool", Network.MAINNET, URL, 1, 0.5, DROPPED)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.wait = 0.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("attempt", "error", "low", "high"),
    [
        (1024, DROPPED, Decision(True, 0.0), Decision(True, 8.0)),
        (4999, answer(503), Decision(True, 0.0), Decision(True, 8.0)),
        (1024, answer(429), Decision(True, 4.0, 4.0), Decision(True, 8.0, 8.0)),
        (5000, answer(503), Decision(False), Decision(False)),
        (5000, answer(429), Decision(False, hold=4.0), Decision(False, hold=8.0)),
    ],
    ids=["dropped 1024", "503 4999", "429 1024", "503 retries spent", "429 retries spent"],
)
def test_a_huge_attempt_number_is_capped_not_an_overflow(
    attempt: int, error: ApiError, low: Decision, high: Decision
) -> None:
    """``base * 2**attempt`` overflows a float past attempt ~1023: the step stays at the cap."""
    policy = RetryPolicy(max_retries=5000)
    assert decide(policy, error, attempt, Low(), now=NOW) == low
    assert decide(policy, error, attempt, High(), now=NOW) == high
    assert decide(policy, error, attempt, random.Random(attempt), now=NOW).wait <= 8.0


@pytest.mark.parametrize(
    ("retry_after", "said"),
    [("1e13", "1e13"), ("1e16", "1e16"), ("1e300", "1e300")],
)
def test_a_429_past_the_cap_holds_at_most_a_day(retry_after: str, said: str) -> None:
    """The hold asked of any limiter (the caller's own too) is bounded; the message says
    the wait as the server sent it."""
    decision = decide(POLICY, answer(429, retry_after), 0, Low(), now=NOW)
    assert decision.retry is False
    assert decision.hold == MAX_HOLD
    assert decision.why == (
        f"the server sent Retry-After: {said}, longer than retry_after_cap=60s: not waited for"
    )
