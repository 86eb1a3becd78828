"""The plugin's ``fake_server`` marker: a bot's test asks for activity, a quota and its
headers, and a poll interval, the way it asks the ``fake_exchange`` marker for data."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncapi_client import Client
from asyncapi_client.testing import FakeServer, Quota
from tests._inner_pytest import run_suite


@pytest.mark.fake_exchange(seed=3, users=2, orders_per_user=20)
@pytest.mark.fake_server(
    activity=300.0, quota=Quota(50, 60.0), rate_limit_headers="split", poll_interval=2
)
async def test_the_marker_sets_activity_quota_and_headers(
    fake_server: FakeServer, fake_client: Client
) -> None:
    assert (fake_server.activity, fake_server.quota) == (300.0, Quota(50, 60.0))
    assert fake_server.seed == 3  # the exchange's seed still drives the faults
    await fake_server.wait_until(lambda: len(fake_server.journal) >= 20)
    answer = await fake_client.with_response.tokens()
    assert answer.headers["RateLimit-Limit"] == "50"
    assert answer.headers["RateLimit-Remaining"] == "49"
    assert answer.headers["X-Poll-Interval"] == "2"


async def test_without_the_marker_the_fake_stands_still(fake_server: FakeServer) -> None:
    assert (fake_server.activity, fake_server.quota, fake_server.poll_interval) == (
        None,
        None,
        None,
    )
    assert fake_server.journal == []


USER_SUITE = """
import pytest

from asyncapi_client import RateLimitError
from asyncapi_client.testing import Quota


@pytest.mark.fake_server(quota=Quota(2, 60.0), rate_limit_headers="ietf")
async def test_a_bot_meets_the_quota(fake_server, fake_client):
    fake_client.set_testing(True, max_retries=0)
    await fake_client.tokens()
    await fake_client.tokens()
    with pytest.raises(RateLimitError):
        await fake_client.tokens()


@pytest.mark.fake_exchange(seed=2, users=1, orders_per_user=10)
@pytest.mark.fake_server(activity=200.0)
async def test_a_bot_sees_the_data_move(fake_server, fake_exchange):
    await fake_server.wait_until(lambda: len(fake_server.journal) >= 10)
    assert fake_exchange.journal is fake_server.journal


@pytest.mark.fake_server(activty=5.0)
async def test_a_misspelt_option(fake_server):
    pass


@pytest.mark.fake_server(5.0)
async def test_a_positional_option(fake_server):
    pass
"""


def test_a_bot_suite_uses_the_marker(tmp_path: Path) -> None:
    code, outcomes = run_suite(tmp_path, {"test_user_bot.py": USER_SUITE})
    assert {name: o.outcome for name, o in outcomes.items()} == {
        "test_a_bot_meets_the_quota": "passed",
        "test_a_bot_sees_the_data_move": "passed",
        "test_a_misspelt_option": "failed",
        "test_a_positional_option": "failed",
    }
    misspelt = outcomes["test_a_misspelt_option"]
    assert misspelt.when == "setup"
    assert "unknown fake_server marker option(s) activty" in misspelt.text
    assert "keywords only" in outcomes["test_a_positional_option"].text
    assert code == pytest.ExitCode.TESTS_FAILED
