"""The fake's quota: at most ``limit`` answers per network and fixed window, 429 with
``Retry-After`` past it, advertised on every answer in the header style asked for, and
changeable while the server runs."""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import AsyncIterator, Mapping
from typing import Literal

import aiohttp
import pytest

from asyncapi_client.testing import FakeExchange, FakeServer, Fault, Quota, Reply

ALL_HEADERS = {
    "ietf": ("RateLimit-Policy", "RateLimit"),
    "split": ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"),
    "x": ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"),
}
POLICY = re.compile(r'"default";q=(\d+);w=(\d+)').fullmatch
STATE = re.compile(r'"default";r=(\d+);t=(\d+)').fullmatch


@pytest.fixture
def exchange() -> FakeExchange:
    return FakeExchange.generate(seed=4, users=2, orders_per_user=30, leaderboard_size=20)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as opened:
        yield opened


async def ask(
    session: aiohttp.ClientSession, url: str, headers: Mapping[str, str] | None = None
) -> tuple[int, Mapping[str, str]]:
    async with session.get(url, headers=headers or {}) as response:
        await response.read()
        return response.status, response.headers.copy()


def advertised(mode: str, headers: Mapping[str, str]) -> tuple[int, int, int]:
    """(limit, remaining, seconds to the reset) as ``mode`` writes them; no other style."""
    for other, names in ALL_HEADERS.items():
        if other != mode:
            assert not any(name in headers for name in names), (mode, dict(headers))
    if mode == "ietf":
        policy = POLICY(headers["RateLimit-Policy"])
        state = STATE(headers["RateLimit"])
        assert policy is not None, dict(headers)
        assert state is not None, dict(headers)
        return int(policy[1]), int(state[1]), int(state[2])
    prefix = "RateLimit-" if mode == "split" else "X-RateLimit-"
    values = [headers[prefix + name] for name in ("Limit", "Remaining", "Reset")]
    assert all(v.isdigit() for v in values), values
    limit, remaining, reset = map(int, values)
    if mode == "x":  # the Unix time of the reset, in whole seconds
        reset -= math.floor(time.time())
    return limit, remaining, reset


@pytest.mark.parametrize("mode", ["ietf", "split", "x"])
async def test_each_mode_advertises_the_quota_on_every_answer(
    exchange: FakeExchange, session: aiohttp.ClientSession, mode: Literal["ietf", "split", "x"]
) -> None:
    async with FakeServer(exchange, quota=Quota(3, 60.0), rate_limit_headers=mode) as server:
        url = f"{server.base_url}/api/tokens"
        seen = []
        for _ in range(5):
            status, headers = await ask(session, url)
            limit, remaining, reset = advertised(mode, headers)
            seen.append((status, limit, remaining))
            assert 0 <= reset <= 60 if mode != "x" else -1 <= reset <= 61
            if status == 429:
                retry = int(headers["Retry-After"])
                assert 1 <= retry <= 60
                assert abs(retry - reset) <= 1
        assert seen == [(200, 3, 2), (200, 3, 1), (200, 3, 0), (429, 3, 0), (429, 3, 0)]
        if mode == "ietf":
            assert POLICY(headers["RateLimit-Policy"])[2] == "60"  # type: ignore[index]


async def test_without_a_header_mode_the_quota_still_holds_unadvertised(
    exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    async with FakeServer(exchange, quota=Quota(1, 60.0)) as server:
        url = f"{server.base_url}/api/tokens"
        first, headers = await ask(session, url)
        second, refused = await ask(session, url)
    assert (first, second) == (200, 429)
    for names in ALL_HEADERS.values():
        assert not any(n in headers or n in refused for n in names)
    assert 59 <= int(refused["Retry-After"]) <= 60


async def test_the_quota_is_counted_per_network(
    exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    quota = Quota(2, 60.0)
    async with FakeServer(exchange, quota=quota, rate_limit_headers="split") as server:
        main = f"{server.base_url}/api/tokens"
        token = exchange.tokens[0]["address"]
        test = f"{server.testnet_base_url}/api/aggregated/tokens/{token}/markets"
        statuses = [(await ask(session, main))[0] for _ in range(3)]
        testnet = [(await ask(session, test))[0] for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert testnet == [200, 200, 429]
    assert server.quota == quota


async def test_each_window_starts_afresh_and_refusals_do_not_count(
    exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    window = 1.5
    async with FakeServer(exchange, quota=Quota(2, window), rate_limit_headers="split") as server:
        url = f"{server.base_url}/api/tokens"
        first = [(await ask(session, url))[0] for _ in range(4)]
        status, headers = await ask(session, url)
        assert headers["Retry-After"] in ("1", "2")  # what is left of 1.5 s, rounded up
        # any stretch of one window's length holds the start of the next window
        await asyncio.sleep(window)
        second = [(await ask(session, url))[0] for _ in range(3)]
    assert first == [200, 200, 429, 429]
    assert status == 429
    assert second[:2] == [200, 200]  # the refusals of the last window left nothing behind


async def test_a_quota_changed_while_running_applies_to_the_current_window(
    exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    async with FakeServer(exchange, quota=Quota(10, 60.0), rate_limit_headers="ietf") as server:
        url = f"{server.base_url}/api/tokens"

        async def one() -> tuple[int, int, int]:
            status, headers = await ask(session, url)
            limit, remaining, _ = advertised("ietf", headers)
            return status, limit, remaining

        assert [await one() for _ in range(3)] == [(200, 10, 9), (200, 10, 8), (200, 10, 7)]
        server.quota = Quota(4, 60.0)  # lowered: one answer left in this window
        assert [await one() for _ in range(3)] == [(200, 4, 0), (429, 4, 0), (429, 4, 0)]
        server.quota = Quota(6, 60.0)  # raised: the refusals did not count
        assert [await one() for _ in range(3)] == [(200, 6, 1), (200, 6, 0), (429, 6, 0)]
        server.quota = None
        status, headers = await ask(session, url)
        assert status == 200
        assert "RateLimit" not in headers
        server.quota = Quota(1, 60.0)  # from none: a fresh count
        assert [await one() for _ in range(2)] == [(200, 1, 0), (429, 1, 0)]


async def test_a_304_counts_against_the_quota(
    exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    async with FakeServer(exchange, quota=Quota(2, 60.0), rate_limit_headers="x") as server:
        url = f"{server.base_url}/api/tokens"
        status, headers = await ask(session, url)
        revalidated, confirmed = await ask(session, url, {"If-None-Match": headers["ETag"]})
        refused, _ = await ask(session, url, {"If-None-Match": headers["ETag"]})
    assert (status, revalidated, refused) == (200, 304, 429)
    assert advertised("x", confirmed)[:2] == (2, 0)


async def test_every_kind_of_answer_is_counted_and_advertised(
    exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    async with FakeServer(exchange, quota=Quota(5, 60.0), rate_limit_headers="split") as server:
        server.script("tokens", Reply(503), Reply(200, body=b"[]", headers={"X-Mine": "1"}))
        server.set_fault("leaderboard", Fault(error_rate=1.0, error_status=502))
        base = server.base_url
        answers = [
            await ask(session, f"{base}/api/tokens"),
            await ask(session, f"{base}/api/tokens"),
            await ask(session, f"{base}/api/nowhere"),
            await ask(session, f"{base}/api/dash/leaderboard"),
        ]
        async with session.post(f"{base}/api/tokens") as response:
            answers.append((response.status, response.headers.copy()))
        answers.append(await ask(session, f"{base}/api/tokens"))
    assert [status for status, _ in answers] == [503, 200, 404, 502, 405, 429]
    assert [advertised("split", h)[1] for _, h in answers] == [4, 3, 2, 1, 0, 0]
    assert answers[1][1]["X-Mine"] == "1"
    assert [r.status for r in server.requests] == [503, 200, 404, 502, 405, 429]


async def test_a_body_cut_short_still_carries_the_headers(
    exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    quota = Quota(5, 60.0)
    async with FakeServer(
        exchange, quota=quota, rate_limit_headers="ietf", poll_interval=1
    ) as server:
        server.script("tokens", Reply(200, truncate=True))
        async with session.get(f"{server.base_url}/api/tokens") as response:
            headers = response.headers.copy()
            with pytest.raises(aiohttp.ClientPayloadError):
                await response.read()
    assert advertised("ietf", headers)[:2] == (5, 4)
    assert headers["X-Poll-Interval"] == "1"


def test_the_quota_holds_in_the_threaded_mode(exchange: FakeExchange) -> None:
    import urllib.error
    import urllib.request

    quota = Quota(2, 60.0)
    with FakeServer(exchange, quota=quota, rate_limit_headers="x").in_thread() as server:
        statuses = []
        remaining = []
        for _ in range(3):
            try:
                with urllib.request.urlopen(f"{server.base_url}/api/tokens") as response:
                    statuses.append(response.status)
                    remaining.append(response.headers["X-RateLimit-Remaining"])
            except urllib.error.HTTPError as refused:
                statuses.append(refused.code)
                remaining.append(refused.headers["X-RateLimit-Remaining"])
                refused.close()
        assert remaining == ["1", "0", "0"]
        server.quota = Quota(3, 60.0)
        with urllib.request.urlopen(f"{server.base_url}/api/tokens") as response:
            statuses.append(response.status)
    assert statuses == [200, 200, 429, 200]


@pytest.mark.parametrize(
    ("limit", "window"),
    [(0, 1.0), (-1, 1.0), (1.5, 1.0), (True, 1.0), ("3", 1.0)],
)
def test_a_quota_limit_is_a_count(limit: object, window: float) -> None:
    with pytest.raises(ValueError, match="Quota limit must be an int >= 1"):
        Quota(limit, window)  # type: ignore[arg-type]


@pytest.mark.parametrize("window", [0, -1.0, float("nan"), float("inf"), True, "10", 10**6])
def test_a_quota_window_is_seconds(window: object) -> None:
    with pytest.raises(ValueError, match="Quota window must be seconds"):
        Quota(10, window)


def test_the_server_checks_its_quota_options(exchange: FakeExchange) -> None:
    with pytest.raises(TypeError, match=r"quota must be a Quota\(limit, window\)"):
        FakeServer(exchange, quota=(10, 1.0))  # type: ignore[arg-type]
    for mode in ("IETF", "draft", 1):
        with pytest.raises(ValueError, match="rate_limit_headers must be 'ietf', 'split', 'x'"):
            FakeServer(exchange, rate_limit_headers=mode)  # type: ignore[arg-type]
    server = FakeServer(exchange, quota=Quota(1, 1), rate_limit_headers="x")
    assert (server.quota, server.rate_limit_headers) == (Quota(1, 1.0), "x")
    with pytest.raises(TypeError, match="quota must be"):
        server.quota = 5  # type: ignore[assignment]


async def test_quota_window_numbers_where_each_recorded_request_landed(
    exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    before = time.monotonic()
    assert FakeServer(exchange, quota=Quota(2, 0.5)).started_at is None  # not started
    async with FakeServer(exchange, quota=Quota(2, 0.5)) as server:
        assert server.started_at is not None
        assert before <= server.started_at <= time.monotonic()
        for _ in range(3):  # two answered, the third refused: all in window 0
            await ask(session, f"{server.base_url}/api/tokens")
        # the scenario: into the next window (the loop's clock may wake a hair early)
        await asyncio.sleep(server.started_at + 0.5 - time.monotonic() + 0.01)
        await ask(session, f"{server.base_url}/api/tokens")
        landed = [(server.quota_window(r.time), r.status) for r in server.requests]
    assert landed == [(0, 200), (0, 200), (0, 429), (1, 200)]
    assert FakeServer(exchange).quota_window(time.monotonic()) is None  # no quota
