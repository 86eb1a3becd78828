"""``--verbose`` ends with the rate limit the server's answers advertised, as the client
learned it (``LocalLimiter.status``); a server that advertises none adds no line."""

from __future__ import annotations

import re

import pytest

from asyncapi_client.testing import FakeExchange, FakeServer, Quota
from tests._cli import cli, hosts

EXCHANGE = FakeExchange.generate(seed=5, users=1, orders_per_user=3)


@pytest.mark.parametrize("family", ["ietf", "split", "x"])
def test_verbose_shows_the_advertised_limit_at_the_end(family: str) -> None:
    quota = Quota(10, 60.0)
    with FakeServer(EXCHANGE, quota=quota, rate_limit_headers=family).in_thread() as server:  # type: ignore[arg-type]
        run = cli("--verbose", "tokens", env=hosts(server.base_url))
        quiet = cli("tokens", env=hosts(server.base_url))
    assert run.returncode == 0, run.stderr
    (line,) = run.stderr.splitlines()
    found = re.fullmatch(
        r"asyncapi-client: rate limit \[mainnet\]: (\d+) of 10 requests left, resets in "
        r"([\d.]+) s \(from the server's rate-limit headers\)",
        line,
    )
    assert found, line
    assert int(found[1]) == 9  # one request made: 9 of the 10 left
    assert 0 < float(found[2]) <= 61.0  # an X-RateLimit-Reset is a whole second
    quiet.ok()  # without --verbose: nothing on stderr


def test_verbose_adds_no_line_when_no_limit_is_advertised() -> None:
    with FakeServer(EXCHANGE).in_thread() as server:
        cli("--verbose", "tokens", env=hosts(server.base_url)).ok()
