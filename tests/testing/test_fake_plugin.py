"""The pytest plugin, used the way a bot's own test suite uses it: public names only."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from asyncapi_client import Client, OrderStatus, ServerError, Side
from asyncapi_client.testing import FakeExchange, FakeServer, Fault, _plugin
from tests._inner_pytest import run_suite


async def test_a_bot_reads_the_fake_exchange(fake_server: FakeServer) -> None:
    async with Client(
        base_url=fake_server.base_url, testnet_base_url=fake_server.testnet_base_url
    ) as client:
        tokens = await client.tokens()
        markets = await client.token_markets(tokens[0].address)
        board = await client.leaderboard(limit=10)
        trader = board.leaderboard[0].address
        profile = await client.user(next(iter(fake_server.exchange.users)))
        open_buys = [
            order
            async for order in client.iter_orders(
                profile.address, status=OrderStatus.OPEN, side=Side.BUY, page_size=20
            )
        ]
    assert len(tokens) == 40
    assert markets
    assert trader.startswith("0x")
    assert open_buys
    assert all(o.status is OrderStatus.OPEN and o.side is Side.BUY for o in open_buys)
    assert {r.operation for r in fake_server.requests} >= {"tokens", "token_markets", "orders"}


@pytest.mark.fake_exchange(seed=11, users=2, orders_per_user=30, leaderboard_size=12)
async def test_the_marker_picks_seed_and_sizes(
    fake_server: FakeServer, fake_exchange: FakeExchange
) -> None:
    assert fake_server.exchange is fake_exchange
    assert fake_exchange == FakeExchange.generate(
        seed=11, users=2, orders_per_user=30, leaderboard_size=12
    )
    async with Client(base_url=fake_server.base_url) as client:
        entries = [e async for e in client.iter_leaderboard(page_size=5)]
    assert [e.rank for e in entries] == list(range(1, 13))


async def test_a_bot_survives_an_outage(fake_server: FakeServer) -> None:
    fake_server.set_fault("leaderboard", Fault(error_rate=0.5, error_status=503))
    async with Client(base_url=fake_server.base_url, max_retries=10) as client:
        client.set_testing(True)  # retries without sleeping
        entries = [e async for e in client.iter_leaderboard(page_size=25)]
        assert len(entries) == 250
        fake_server.set_fault("leaderboard", Fault(error_rate=1.0))
        client.set_testing(True, max_retries=1)
        with pytest.raises(ServerError):
            await client.leaderboard()
    assert any(r.status == 503 for r in fake_server.requests)


def test_each_test_gets_fresh_data_from_the_default_seed(fake_exchange: FakeExchange) -> None:
    assert fake_exchange == FakeExchange.generate(seed=0)


USER_SUITE = """
import pytest

from asyncapi_client import Client
from asyncapi_client.testing import Fault


@pytest.mark.asyncio
async def test_bot(fake_server):
    async with Client(base_url=fake_server.base_url,
                      testnet_base_url=fake_server.testnet_base_url) as client:
        assert await client.tokens(search="usd")
        fake_server.set_fault("pool", Fault(error_rate=1.0))


def test_that_does_not_use_the_fixture():
    assert True
"""


def test_the_plugin_works_in_a_strict_mode_suite_of_its_own(tmp_path: Path) -> None:
    ini = "asyncio_mode = strict\nasyncio_default_fixture_loop_scope = function\n"
    code, outcomes = run_suite(tmp_path, {"test_user_bot.py": USER_SUITE}, ini=ini)
    assert {name: o.outcome for name, o in outcomes.items()} == {
        "test_bot": "passed",
        "test_that_does_not_use_the_fixture": "passed",
    }
    assert code == pytest.ExitCode.OK


async def test_fake_client_is_a_testing_client_of_fake_server(
    fake_server: FakeServer, fake_client: Client
) -> None:
    fake_server.set_fault("tokens", Fault(rate_limit_burst=2, retry_after=30))
    tokens = await fake_client.tokens(network="testnet")  # two 429s, no waits
    assert len(tokens) == len(fake_server.exchange.tokens)
    assert [(r.network, r.status) for r in fake_server.requests] == [
        ("testnet", 429),
        ("testnet", 429),
        ("testnet", 200),
    ]
    assert not fake_client.closed


@pytest.fixture
def closed_afterwards() -> Iterator[list[Client]]:
    """Torn down after ``fake_client`` (requested before it): checks the client was closed."""
    clients: list[Client] = []
    yield clients
    assert clients
    assert all(client.closed for client in clients)


async def test_fake_client_is_closed_after_its_test(
    closed_afterwards: list[Client], fake_client: Client
) -> None:
    closed_afterwards.append(fake_client)
    assert not fake_client.closed


NO_ASYNCIO_SUITE = """
import pytest


def test_server(fake_server):
    pass


def test_client(fake_client):
    pass


def test_exchange_still_works(fake_exchange):
    assert fake_exchange.tokens
"""


def plugin_without_pytest_asyncio(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh copy of our plugin module, imported where ``import pytest_asyncio`` fails."""
    spec = importlib.util.spec_from_file_location(
        "asyncapi_client.testing._plugin_without_asyncio", _plugin.__file__
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "pytest_asyncio", None)  # None: the import raises
        spec.loader.exec_module(module)
    return module


def test_without_pytest_asyncio_the_error_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest-asyncio missing: the async fixtures fail with a line that names it and the extra."""
    plugin = plugin_without_pytest_asyncio(monkeypatch)
    code, outcomes = run_suite(
        tmp_path,
        {"test_user_bot.py": NO_ASYNCIO_SUITE},
        ini="",
        args=("-p", "no:asyncio", "-p", "no:asyncapi_client"),
        plugins=(plugin,),
    )
    assert code == pytest.ExitCode.TESTS_FAILED
    assert outcomes["test_exchange_still_works"].outcome == "passed"
    for test, name in (("test_server", "fake_server"), ("test_client", "fake_client")):
        assert (outcomes[test].outcome, outcomes[test].when) == ("failed", "setup")
        assert outcomes[test].text == (
            f"the {name} fixture of asyncapi_client.testing needs pytest-asyncio, which is not "
            "installed: pip install 'asyncapi-client[testing]' (or pytest-asyncio)"
        )


def test_the_testing_extra_installs_pytest_and_pytest_asyncio() -> None:
    requires = importlib.metadata.requires("asyncapi-client") or []
    testing = {
        re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower()
        for r in requires
        if re.search(r"extra\s*==\s*['\"]testing['\"]", r)
    }
    assert testing == {"pytest", "pytest-asyncio"}


@pytest.mark.fake_exchange(5, users=1)
def test_the_marker_takes_the_seed_positionally(fake_exchange: FakeExchange) -> None:
    assert fake_exchange == FakeExchange.generate(seed=5, users=1)
